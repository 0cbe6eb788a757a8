//! The pod template of the `kube` driver: read once at start, refused if it
//! asks for privileges, then copied into one pod per sandbox.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context;
use k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

/// The container the browser runs in; the template must have one.
pub const BROWSER: &str = "browser";
/// Label every pod Cordon makes carries.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Label naming the Cordon deployment (`kube_deployment`) a pod belongs to.
pub const DEPLOYMENT: &str = "cordon.dev/deployment";
/// Label naming the sandbox id a pod runs.
pub const SANDBOX: &str = "cordon.dev/sandbox";

/// A checked Pod manifest with a `browser` container.
#[derive(Debug, Clone)]
pub struct PodTemplate {
    pod: Pod,
}

/// What varies from one sandbox's pod to the next.
#[derive(Debug, Clone)]
pub struct PodParams<'a> {
    /// The pod's name.
    pub name: &'a str,
    /// The sandbox id (label value).
    pub sandbox_id: &'a str,
    /// `kube_deployment`.
    pub deployment: &'a str,
    /// Environment of the `browser` container (set over the template's).
    pub env: Vec<(String, String)>,
    /// Memory limit of the `browser` container, used if the template sets none.
    pub memory_bytes: Option<u64>,
}

impl PodTemplate {
    /// Reads and checks the file named by `kube_pod_template`.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("kube_pod_template: cannot read {}", path.display()))?;
        Self::parse(&text)
    }

    /// Parses a Pod manifest (YAML, or JSON, which is YAML too) and refuses
    /// one that is not a Pod with a `browser` container or that asks for
    /// privileges, with a one-line error naming the field.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        let pod: Pod = serde_saphyr::from_str(text).map_err(|e| {
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or_default();
            anyhow::anyhow!("kube_pod_template: not a Pod manifest: {first}")
        })?;
        check(&pod).map_err(|e| anyhow::anyhow!("kube_pod_template: {e}"))?;
        Ok(Self { pod })
    }

    /// The pod for one sandbox: the template with its name, Cordon's
    /// labels, the `browser` container's environment and memory limit, and
    /// `restartPolicy: Never` (a restarted container would reuse the pod's
    /// volumes, so a browser's profile could outlive the browser).
    pub fn pod_for(&self, p: &PodParams<'_>) -> Pod {
        let mut pod = self.pod.clone();
        let meta = &mut pod.metadata;
        meta.name = Some(p.name.to_owned());
        meta.generate_name = None;
        meta.namespace = None;
        meta.resource_version = None;
        meta.uid = None;
        let labels = meta.labels.get_or_insert_with(BTreeMap::new);
        labels.insert(MANAGED_BY.into(), "cordon".into());
        labels.insert(DEPLOYMENT.into(), p.deployment.to_owned());
        labels.insert(SANDBOX.into(), p.sandbox_id.to_owned());
        let spec = pod.spec.get_or_insert_with(PodSpec::default);
        spec.restart_policy = Some("Never".into());
        let browser = spec
            .containers
            .iter_mut()
            .find(|c| c.name == BROWSER)
            .expect("checked at parse");
        let env = browser.env.get_or_insert_with(Vec::new);
        env.retain(|e| !p.env.iter().any(|(k, _)| *k == e.name));
        env.extend(p.env.iter().map(|(k, v)| EnvVar {
            name: k.clone(),
            value: Some(v.clone()),
            value_from: None,
        }));
        if let Some(bytes) = p.memory_bytes {
            let limits = browser
                .resources
                .get_or_insert_with(Default::default)
                .limits
                .get_or_insert_with(BTreeMap::new);
            limits
                .entry("memory".into())
                .or_insert_with(|| Quantity(bytes.to_string()));
        }
        pod
    }
}

/// The first thing wrong with `pod`, as `<field path> <problem>`.
fn check(pod: &Pod) -> Result<(), String> {
    let spec = pod.spec.as_ref().ok_or("spec is missing")?;
    if !spec.containers.iter().any(|c| c.name == BROWSER) {
        return Err(format!(
            "spec.containers needs a container named \"{BROWSER}\""
        ));
    }
    for (field, on) in [
        ("hostNetwork", spec.host_network),
        ("hostPID", spec.host_pid),
        ("hostIPC", spec.host_ipc),
    ] {
        if on == Some(true) {
            return Err(format!("spec.{field} must not be true"));
        }
    }
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        if v.host_path.is_some() {
            return Err(format!("spec.volumes[{i}].hostPath is not allowed"));
        }
    }
    if spec.automount_service_account_token != Some(false) {
        return Err("spec.automountServiceAccountToken must be false".into());
    }
    let pod_sc = spec.security_context.as_ref();
    if pod_sc.and_then(|s| s.run_as_user) == Some(0) {
        return Err("spec.securityContext.runAsUser must not be 0".into());
    }
    let lists: [(&str, &[Container]); 2] = [
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        ("containers", &spec.containers),
    ];
    for (list, containers) in lists {
        for (i, c) in containers.iter().enumerate() {
            check_container(&format!("spec.{list}[{i}]"), c, pod_sc)?;
        }
    }
    Ok(())
}

fn check_container(
    at: &str,
    c: &Container,
    pod_sc: Option<&k8s_openapi::api::core::v1::PodSecurityContext>,
) -> Result<(), String> {
    let sc = c.security_context.clone().unwrap_or_default();
    let field = |name: &str| format!("{at}.securityContext.{name}");
    if sc.privileged == Some(true) {
        return Err(format!("{} must not be true", field("privileged")));
    }
    if sc.allow_privilege_escalation != Some(false) {
        return Err(format!(
            "{} must be false",
            field("allowPrivilegeEscalation")
        ));
    }
    if sc
        .capabilities
        .as_ref()
        .and_then(|c| c.add.as_ref())
        .is_some_and(|add| !add.is_empty())
    {
        return Err(format!("{} must be empty", field("capabilities.add")));
    }
    if sc.read_only_root_filesystem != Some(true) {
        return Err(format!("{} must be true", field("readOnlyRootFilesystem")));
    }
    if sc.run_as_user == Some(0) {
        return Err(format!("{} must not be 0", field("runAsUser")));
    }
    let non_root = sc
        .run_as_non_root
        .or_else(|| pod_sc.and_then(|s| s.run_as_non_root));
    if non_root != Some(true) {
        return Err(format!(
            "{} must be true (here or in spec.securityContext)",
            field("runAsNonRoot")
        ));
    }
    for (j, p) in c.ports.iter().flatten().enumerate() {
        if p.host_port.is_some_and(|h| h != 0) {
            return Err(format!("{at}.ports[{j}].hostPort is not allowed"));
        }
    }
    Ok(())
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// A template that passes every check (the one in the manifests is
    /// built the same way).
    pub const GOOD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  labels:
    team: browsers
spec:
  automountServiceAccountToken: false
  securityContext:
    runAsNonRoot: true
    runAsUser: 1000
  containers:
    - name: browser
      image: registry.example/cordon-browser:1
      env:
        - name: CORDON_PROXY
          value: overwritten
        - name: KEEP
          value: me
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: true
        capabilities:
          drop: ["ALL"]
      volumeMounts:
        - name: tmp
          mountPath: /tmp
  volumes:
    - name: tmp
      emptyDir:
        sizeLimit: 512Mi
"#;

    fn refused(edit: impl FnOnce(&mut serde_json::Value)) -> String {
        let mut v: serde_json::Value = serde_saphyr::from_str(GOOD).unwrap();
        edit(&mut v);
        let err = PodTemplate::parse(&v.to_string()).unwrap_err().to_string();
        assert!(!err.contains('\n'), "one line: {err}");
        err
    }

    #[test]
    fn the_good_template_parses_from_yaml_and_json() {
        PodTemplate::parse(GOOD).unwrap();
        let v: serde_json::Value = serde_saphyr::from_str(GOOD).unwrap();
        PodTemplate::parse(&serde_json::to_string_pretty(&v).unwrap()).unwrap();
    }

    #[test]
    fn each_privilege_is_refused_naming_its_field() {
        let c = "/spec/containers/0/securityContext";
        type Edit = Box<dyn FnOnce(&mut serde_json::Value)>;
        let cases: Vec<(Edit, &str)> = vec![
            (
                Box::new(move |v| v.pointer_mut(c).unwrap()["privileged"] = true.into()),
                "kube_pod_template: spec.containers[0].securityContext.privileged must not be true",
            ),
            (
                Box::new(move |v| {
                    v.pointer_mut(c).unwrap()["allowPrivilegeEscalation"] = true.into()
                }),
                "kube_pod_template: spec.containers[0].securityContext.allowPrivilegeEscalation must be false",
            ),
            (
                Box::new(move |v| {
                    v.pointer_mut(c).unwrap()["capabilities"]["add"] =
                        serde_json::json!(["NET_ADMIN"])
                }),
                "kube_pod_template: spec.containers[0].securityContext.capabilities.add must be empty",
            ),
            (
                Box::new(move |v| {
                    v.pointer_mut(c).unwrap()["readOnlyRootFilesystem"] = false.into()
                }),
                "kube_pod_template: spec.containers[0].securityContext.readOnlyRootFilesystem must be true",
            ),
            (
                Box::new(move |v| {
                    v.pointer_mut(c)
                        .unwrap()
                        .as_object_mut()
                        .unwrap()
                        .remove("readOnlyRootFilesystem");
                }),
                "kube_pod_template: spec.containers[0].securityContext.readOnlyRootFilesystem must be true",
            ),
            (
                Box::new(move |v| v.pointer_mut(c).unwrap()["runAsUser"] = 0.into()),
                "kube_pod_template: spec.containers[0].securityContext.runAsUser must not be 0",
            ),
            (
                Box::new(|v| v["spec"]["securityContext"]["runAsUser"] = 0.into()),
                "kube_pod_template: spec.securityContext.runAsUser must not be 0",
            ),
            (
                Box::new(|v| v["spec"]["securityContext"]["runAsNonRoot"] = false.into()),
                "kube_pod_template: spec.containers[0].securityContext.runAsNonRoot must be true",
            ),
            (
                Box::new(|v| v["spec"]["hostNetwork"] = true.into()),
                "kube_pod_template: spec.hostNetwork must not be true",
            ),
            (
                Box::new(|v| v["spec"]["hostPID"] = true.into()),
                "kube_pod_template: spec.hostPID must not be true",
            ),
            (
                Box::new(|v| v["spec"]["hostIPC"] = true.into()),
                "kube_pod_template: spec.hostIPC must not be true",
            ),
            (
                Box::new(|v| {
                    v["spec"]["volumes"]
                        .as_array_mut()
                        .unwrap()
                        .push(serde_json::json!({"name": "h", "hostPath": {"path": "/"}}))
                }),
                "kube_pod_template: spec.volumes[1].hostPath is not allowed",
            ),
            (
                Box::new(|v| v["spec"]["automountServiceAccountToken"] = true.into()),
                "kube_pod_template: spec.automountServiceAccountToken must be false",
            ),
            (
                Box::new(|v| {
                    v["spec"]
                        .as_object_mut()
                        .unwrap()
                        .remove("automountServiceAccountToken");
                }),
                "kube_pod_template: spec.automountServiceAccountToken must be false",
            ),
            (
                Box::new(|v| v["spec"]["containers"][0]["name"] = "chrome".into()),
                "kube_pod_template: spec.containers needs a container named \"browser\"",
            ),
            (
                Box::new(|v| {
                    v["spec"]["containers"][0]["ports"] =
                        serde_json::json!([{"containerPort": 9222, "hostPort": 9222}])
                }),
                "kube_pod_template: spec.containers[0].ports[0].hostPort is not allowed",
            ),
            (
                Box::new(
                    |v| v["spec"]["initContainers"] = serde_json::json!([{"name": "init", "image": "x", "securityContext": {"privileged": true}}]),
                ),
                "kube_pod_template: spec.initContainers[0].securityContext.privileged must not be true",
            ),
        ];
        for (edit, want) in cases {
            let err = refused(edit);
            assert!(err.starts_with(want), "want {want:?}, got {err:?}");
        }
    }

    #[test]
    fn a_file_that_is_not_a_pod_is_refused_in_one_line() {
        for text in [
            "",
            "just text",
            "spec: [1, 2]",
            "{\"spec\": {\"containers\": 5}}",
        ] {
            let err = PodTemplate::parse(text).unwrap_err().to_string();
            assert!(err.starts_with("kube_pod_template:"), "{text:?}: {err}");
            assert!(!err.contains('\n'), "{text:?}: {err}");
        }
    }

    #[test]
    fn a_pod_gets_its_name_labels_env_and_memory_limit() {
        let t = PodTemplate::parse(GOOD).unwrap();
        let pod = t.pod_for(&PodParams {
            name: "b-abc",
            sandbox_id: "b_abc",
            deployment: "prod",
            env: vec![("CORDON_PROXY".into(), "10.0.0.5:4000".into())],
            memory_bytes: Some(256 << 20),
        });
        let v = serde_json::to_value(&pod).unwrap();
        assert_eq!(v["metadata"]["name"], "b-abc", "{v}");
        let labels = &v["metadata"]["labels"];
        assert_eq!(labels[MANAGED_BY], "cordon", "{v}");
        assert_eq!(labels[DEPLOYMENT], "prod", "{v}");
        assert_eq!(labels[SANDBOX], "b_abc", "{v}");
        assert_eq!(
            labels["team"], "browsers",
            "the template's labels stay: {v}"
        );
        assert_eq!(v["spec"]["restartPolicy"], "Never", "{v}");
        let env = &v["spec"]["containers"][0]["env"];
        assert_eq!(
            env,
            &serde_json::json!([
                {"name": "KEEP", "value": "me"},
                {"name": "CORDON_PROXY", "value": "10.0.0.5:4000"}
            ]),
            "{v}"
        );
        assert_eq!(
            v["spec"]["containers"][0]["resources"]["limits"]["memory"],
            (256u64 << 20).to_string(),
            "{v}"
        );
    }
}
