//! The Kubernetes manifests in `infra/k8s`: they parse, `kustomization.yaml`
//! lists every one, only known kinds appear, and the security properties
//! the deployment relies on hold (least-privilege Role, hardened pods,
//! NetworkPolicies around the browser pods, placeholder-only Secret).
//! No cluster is needed: this reads the YAML.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Deserialize;
use serde_yaml::Value;

/// The kinds the manifests may hold. Anything else (a ClusterRole above
/// all) fails the test until it is reviewed and added here.
const KNOWN_KINDS: &[&str] = &[
    "Namespace",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ConfigMap",
    "Secret",
    "Deployment",
    "Service",
    "PodDisruptionBudget",
    "NetworkPolicy",
];

const NAMESPACE: &str = "cordon";
const BROWSER_LABELS: &[(&str, &str)] = &[
    ("app.kubernetes.io/managed-by", "cordon"),
    ("cordon.dev/deployment", "cordon"),
];

fn k8s_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra/k8s")
}

/// One parsed document and the file it came from.
struct Doc {
    file: String,
    value: Value,
}

impl Doc {
    fn kind(&self) -> &str {
        self.value["kind"].as_str().unwrap_or_default()
    }
    fn name(&self) -> &str {
        self.value["metadata"]["name"].as_str().unwrap_or_default()
    }
    fn what(&self) -> String {
        format!("{} {} ({})", self.kind(), self.name(), self.file)
    }
}

/// Every `*.yaml` of infra/k8s but the kustomization, by file name.
fn manifest_files() -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(k8s_dir()).expect("infra/k8s exists") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".yml") {
            panic!("{name}: use the .yaml extension (the kustomization and this test read *.yaml)");
        }
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            files.insert(name, std::fs::read_to_string(&path).unwrap());
        }
    }
    assert!(!files.is_empty(), "no manifests found in {:?}", k8s_dir());
    files
}

fn parse_all(file: &str, text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{file}: not valid YAML: {e}")))
        .filter(|v| !v.is_null())
        .collect()
}

fn docs() -> Vec<Doc> {
    manifest_files()
        .iter()
        .flat_map(|(file, text)| {
            parse_all(file, text).into_iter().map(|value| Doc {
                file: file.clone(),
                value,
            })
        })
        .collect()
}

fn of_kind<'a>(docs: &'a [Doc], kind: &str) -> Vec<&'a Doc> {
    docs.iter().filter(|d| d.kind() == kind).collect()
}

fn one<'a>(docs: &'a [Doc], kind: &str, name: &str) -> &'a Doc {
    let found: Vec<_> = of_kind(docs, kind)
        .into_iter()
        .filter(|d| d.name() == name)
        .collect();
    assert_eq!(
        found.len(),
        1,
        "expected one {kind} named {name:?}, found {}: {:?}",
        found.len(),
        found.iter().map(|d| d.what()).collect::<Vec<_>>()
    );
    found[0]
}

fn strs(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| {
            s.iter()
                .map(|x| x.as_str().unwrap_or("<not a string>").to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn labels(v: &Value) -> BTreeMap<String, String> {
    v.as_mapping()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    (
                        k.as_str().unwrap_or_default().to_owned(),
                        v.as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Whether the `matchLabels` of `selector` all hold in `labels`.
fn selects(selector: &Value, labels: &BTreeMap<String, String>) -> bool {
    let want = self::labels(&selector["matchLabels"]);
    !want.is_empty()
        && want
            .iter()
            .all(|(k, v)| labels.get(k).is_some_and(|l| l == v))
}

fn browser_labels() -> BTreeMap<String, String> {
    BROWSER_LABELS
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The browser pod template inside its ConfigMap, parsed.
fn browser_pod(docs: &[Doc]) -> Value {
    let cm = one(docs, "ConfigMap", "cordon-browser-pod");
    let text = cm.value["data"]["browser-pod.yaml"]
        .as_str()
        .unwrap_or_else(|| panic!("{}: no data.browser-pod.yaml", cm.what()));
    let mut pods = parse_all("browser-pod.yaml", text);
    assert_eq!(
        pods.len(),
        1,
        "the browser pod template holds {} documents",
        pods.len()
    );
    pods.remove(0)
}

fn env_of(container: &Value) -> BTreeMap<String, Value> {
    container["env"]
        .as_sequence()
        .map(|s| {
            s.iter()
                .map(|e| (e["name"].as_str().unwrap_or_default().to_owned(), e.clone()))
                .collect()
        })
        .unwrap_or_default()
}

/// The hardened container context: non-root, read-only root, no
/// escalation, no capabilities, the runtime's seccomp profile (from the
/// container or its pod).
fn assert_hardened(what: &str, pod_spec: &Value, container: &Value, uid: u64) {
    let pod = &pod_spec["securityContext"];
    let c = &container["securityContext"];
    let either = |key: &str| {
        if c[key].is_null() {
            pod[key].clone()
        } else {
            c[key].clone()
        }
    };
    assert_eq!(
        either("runAsNonRoot").as_bool(),
        Some(true),
        "{what}: runAsNonRoot is {:?}",
        either("runAsNonRoot")
    );
    assert_eq!(
        either("runAsUser").as_u64(),
        Some(uid),
        "{what}: runAsUser is {:?}",
        either("runAsUser")
    );
    assert_eq!(
        c["readOnlyRootFilesystem"].as_bool(),
        Some(true),
        "{what}: readOnlyRootFilesystem is {:?}",
        c["readOnlyRootFilesystem"]
    );
    assert_eq!(
        c["allowPrivilegeEscalation"].as_bool(),
        Some(false),
        "{what}: allowPrivilegeEscalation is {:?}",
        c["allowPrivilegeEscalation"]
    );
    assert_ne!(c["privileged"].as_bool(), Some(true), "{what}: privileged");
    assert_eq!(
        strs(&c["capabilities"]["drop"]),
        ["ALL"],
        "{what}: capabilities.drop is {:?}",
        c["capabilities"]["drop"]
    );
    assert!(
        c["capabilities"]["add"].is_null(),
        "{what}: adds capabilities {:?}",
        c["capabilities"]["add"]
    );
    assert_eq!(
        either("seccompProfile")["type"].as_str(),
        Some("RuntimeDefault"),
        "{what}: seccompProfile is {:?}",
        either("seccompProfile")
    );
    for key in ["hostNetwork", "hostPID", "hostIPC"] {
        assert_ne!(pod_spec[key].as_bool(), Some(true), "{what}: {key}");
    }
}

#[test]
fn every_manifest_parses_has_a_known_kind_and_a_name() {
    let docs = docs();
    for d in &docs {
        assert!(
            d.value["apiVersion"]
                .as_str()
                .is_some_and(|s| !s.is_empty()),
            "{}: a document without apiVersion: {:?}",
            d.file,
            d.value
        );
        assert!(
            KNOWN_KINDS.contains(&d.kind()),
            "{}: kind {:?} is not one of {KNOWN_KINDS:?}",
            d.file,
            d.value["kind"]
        );
        assert!(
            !d.name().is_empty(),
            "{}: {} without metadata.name",
            d.file,
            d.kind()
        );
        if d.kind() != "Namespace" {
            assert_eq!(
                d.value["metadata"]["namespace"].as_str(),
                Some(NAMESPACE),
                "{}: namespace is {:?}",
                d.what(),
                d.value["metadata"]["namespace"]
            );
        }
    }
    let mut seen = BTreeSet::new();
    for d in &docs {
        assert!(
            seen.insert((d.kind().to_owned(), d.name().to_owned())),
            "{} is defined twice",
            d.what()
        );
    }
    one(&docs, "Namespace", NAMESPACE);
    one(&docs, "ServiceAccount", "cordon");
}

#[test]
fn the_kustomization_lists_every_manifest_and_nothing_else() {
    let path = k8s_dir().join("kustomization.yaml");
    let text = std::fs::read_to_string(&path).expect("infra/k8s/kustomization.yaml exists");
    let k: Value = serde_yaml::from_str(&text).expect("kustomization.yaml parses");
    assert_eq!(
        k["kind"].as_str(),
        Some("Kustomization"),
        "kustomization.yaml kind is {:?}",
        k["kind"]
    );
    let listed: BTreeSet<String> = strs(&k["resources"]).into_iter().collect();
    let files: BTreeSet<String> = manifest_files().into_keys().collect();
    assert_eq!(
        listed, files,
        "kustomization.yaml lists {listed:?}, the directory holds {files:?}"
    );
}

#[test]
fn rbac_is_a_role_on_pods_in_the_namespace_only() {
    let docs = docs();
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        assert!(
            of_kind(&docs, kind).is_empty(),
            "found a {kind}: {:?}",
            of_kind(&docs, kind)
                .iter()
                .map(|d| d.what())
                .collect::<Vec<_>>()
        );
    }
    let roles = of_kind(&docs, "Role");
    assert_eq!(roles.len(), 1, "expected one Role, found {}", roles.len());
    let role = roles[0];
    let rules = role.value["rules"]
        .as_sequence()
        .unwrap_or_else(|| panic!("{}: no rules", role.what()));
    let allowed: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("pods", &["get", "list", "watch", "create", "delete"][..]),
        ("pods/status", &["get"][..]),
    ]);
    let mut granted = BTreeSet::new();
    for rule in rules {
        assert_eq!(
            strs(&rule["apiGroups"]),
            [""],
            "{}: a rule on API groups {:?} (only the core group)",
            role.what(),
            rule["apiGroups"]
        );
        assert!(
            rule["resourceNames"].is_null() || rule["resourceNames"].is_sequence(),
            "{}: resourceNames {:?}",
            role.what(),
            rule["resourceNames"]
        );
        assert!(
            rule["nonResourceURLs"].is_null(),
            "{}: nonResourceURLs {:?}",
            role.what(),
            rule["nonResourceURLs"]
        );
        let verbs = strs(&rule["verbs"]);
        for resource in strs(&rule["resources"]) {
            let ok = allowed.get(resource.as_str()).unwrap_or_else(|| {
                panic!(
                    "{}: a rule on {resource:?} (only pods and pods/status)",
                    role.what()
                )
            });
            for verb in &verbs {
                assert!(
                    ok.contains(&verb.as_str()),
                    "{}: verb {verb:?} on {resource} (allowed: {ok:?})",
                    role.what()
                );
                granted.insert((resource.clone(), verb.clone()));
            }
        }
    }
    for (resource, verbs) in &allowed {
        for verb in *verbs {
            assert!(
                granted.contains(&((*resource).to_owned(), (*verb).to_owned())),
                "{}: the driver needs {verb} on {resource}; granted {granted:?}",
                role.what()
            );
        }
    }
    let binding = one(&docs, "RoleBinding", "cordon-browser-pods");
    assert_eq!(
        (
            binding.value["roleRef"]["kind"].as_str(),
            binding.value["roleRef"]["name"].as_str()
        ),
        (Some("Role"), Some(role.name())),
        "{}: roleRef is {:?}",
        binding.what(),
        binding.value["roleRef"]
    );
    let subjects = binding.value["subjects"].as_sequence().unwrap();
    assert!(
        subjects.len() == 1
            && subjects[0]["kind"].as_str() == Some("ServiceAccount")
            && subjects[0]["name"].as_str() == Some("cordon")
            && subjects[0]["namespace"].as_str() == Some(NAMESPACE),
        "{}: subjects are {subjects:?}",
        binding.what()
    );
}

#[test]
fn the_deployment_is_replicated_hardened_and_configured_for_the_kube_driver() {
    let docs = docs();
    let dep = one(&docs, "Deployment", "cordon");
    let what = dep.what();
    let replicas = dep.value["spec"]["replicas"].as_u64();
    assert!(
        replicas.is_some_and(|r| r >= 2),
        "{what}: replicas is {replicas:?} (at least 2)"
    );
    let tpl = &dep.value["spec"]["template"];
    let pod_labels = labels(&tpl["metadata"]["labels"]);
    assert!(
        selects(&dep.value["spec"]["selector"], &pod_labels),
        "{what}: the selector {:?} does not match the pod labels {pod_labels:?}",
        dep.value["spec"]["selector"]
    );
    assert!(
        !selects(&dep.value["spec"]["selector"], &browser_labels())
            && pod_labels
                .get("app.kubernetes.io/managed-by")
                .map(String::as_str)
                != Some("cordon"),
        "{what}: Cordon's own pods and the browser pods must not share a selector"
    );
    let spec = &tpl["spec"];
    assert_eq!(
        spec["serviceAccountName"].as_str(),
        Some("cordon"),
        "{what}: serviceAccountName is {:?}",
        spec["serviceAccountName"]
    );
    let anti =
        &spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"];
    assert!(
        anti.as_sequence().is_some_and(|s| s.iter().any(|t| {
            t["podAffinityTerm"]["topologyKey"].as_str() == Some("kubernetes.io/hostname")
                && selects(&t["podAffinityTerm"]["labelSelector"], &pod_labels)
        })),
        "{what}: no preferred anti-affinity across nodes: {anti:?}"
    );
    let containers = spec["containers"].as_sequence().unwrap();
    assert_eq!(
        containers.len(),
        1,
        "{what}: {} containers",
        containers.len()
    );
    let c = &containers[0];
    assert_hardened(&what, spec, c, 10001);
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        assert_eq!(
            (
                c[probe]["httpGet"]["path"].as_str(),
                c[probe]["httpGet"]["scheme"].as_str()
            ),
            (Some(path), Some("HTTPS")),
            "{what}: {probe} is {:?}",
            c[probe]
        );
    }
    assert!(
        c["resources"]["requests"].is_mapping() && c["resources"]["limits"]["memory"].is_string(),
        "{what}: resources are {:?}",
        c["resources"]
    );

    let env = env_of(c);
    let value = |k: &str| {
        env.get(k)
            .and_then(|e| e["value"].as_str())
            .map(str::to_owned)
    };
    let field = |k: &str| {
        env.get(k)
            .and_then(|e| e["valueFrom"]["fieldRef"]["fieldPath"].as_str())
            .map(str::to_owned)
    };
    assert_eq!(
        field("CORDON_POD_IP").as_deref(),
        Some("status.podIP"),
        "{what}: env {env:?}"
    );
    assert_eq!(
        field("CORDON_REPLICA_NAME").as_deref(),
        Some("metadata.name"),
        "{what}: CORDON_REPLICA_NAME is {:?}",
        env.get("CORDON_REPLICA_NAME")
    );
    assert_eq!(
        value("CORDON_ADVERTISE_URL").as_deref(),
        Some("https://$(CORDON_POD_IP):8080"),
        "{what}: CORDON_ADVERTISE_URL"
    );
    // The pods serve HTTPS with the deployment's certificate from a
    // mounted TLS Secret, so the hop between replicas is TLS.
    let tls_mount = c["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "tls")
        .unwrap_or_else(|| panic!("{what}: no `tls` volume mounted"));
    let dir = tls_mount["mountPath"].as_str().unwrap();
    assert_eq!(
        (value("CORDON_TLS_CERT"), value("CORDON_TLS_KEY")),
        (
            Some(format!("{dir}/tls.crt")),
            Some(format!("{dir}/tls.key"))
        ),
        "{what}: CORDON_TLS_CERT/KEY"
    );
    let tls_volume = spec["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "tls")
        .unwrap();
    assert_eq!(
        tls_volume["secret"]["secretName"].as_str(),
        Some("cordon-tls"),
        "{what}: {tls_volume:?}"
    );
    assert_eq!(
        value("CORDON_SANDBOX_DRIVER").as_deref(),
        Some("kube"),
        "{what}"
    );
    assert_eq!(
        value("CORDON_KUBE_EGRESS_HOST").as_deref(),
        Some("$(CORDON_POD_IP)"),
        "{what}: CORDON_KUBE_EGRESS_HOST"
    );
    // Dependent variables expand only from variables defined before them.
    let order: Vec<&str> = c["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    let pos = |k: &str| order.iter().position(|n| *n == k).unwrap();
    assert!(
        pos("CORDON_POD_IP") < pos("CORDON_ADVERTISE_URL")
            && pos("CORDON_POD_IP") < pos("CORDON_KUBE_EGRESS_HOST"),
        "{what}: CORDON_POD_IP must come before the variables using it: {order:?}"
    );
    // A non-loopback bind needs TLS or a trusted proxy, and an https public_url.
    assert!(
        value("CORDON_TRUSTED_PROXY").as_deref() == Some("true")
            && value("CORDON_PUBLIC_URL").is_some_and(|u| u.starts_with("https://")),
        "{what}: bind {:?} needs trusted_proxy and an https public_url",
        value("CORDON_BIND")
    );
    // Secrets come from the Secret, never inline.
    for secret in [
        "CORDON_MASTER_KEY",
        "CORDON_CLUSTER_SECRET",
        "CORDON_DATABASE_URL",
    ] {
        assert!(
            !env.contains_key(secret),
            "{what}: {secret} is inline in env, not from the Secret"
        );
    }
    let from_secret: Vec<_> = c["envFrom"]
        .as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|e| e["secretRef"]["name"].as_str())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        from_secret,
        ["cordon"],
        "{what}: envFrom is {:?}",
        c["envFrom"]
    );

    // The pod template file is mounted where CORDON_KUBE_POD_TEMPLATE says.
    let template_path = value("CORDON_KUBE_POD_TEMPLATE").expect("CORDON_KUBE_POD_TEMPLATE");
    let volume = spec["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["configMap"]["name"].as_str() == Some("cordon-browser-pod"))
        .unwrap_or_else(|| panic!("{what}: no volume from ConfigMap cordon-browser-pod"));
    let mount = c["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["name"] == volume["name"])
        .unwrap_or_else(|| panic!("{what}: the browser pod template volume is not mounted"));
    let mount_path = mount["mountPath"].as_str().unwrap();
    let mounted_file = match mount["subPath"].as_str() {
        Some(sub) => (mount_path == template_path).then(|| sub.to_owned()),
        None => template_path
            .strip_prefix(&format!("{mount_path}/"))
            .map(str::to_owned),
    };
    assert_eq!(
        mounted_file.as_deref(),
        Some("browser-pod.yaml"),
        "{what}: CORDON_KUBE_POD_TEMPLATE={template_path} but the ConfigMap is mounted at {mount_path}"
    );

    // Persistent-looking paths the read-only root needs are volumes.
    let mounts: Vec<&str> = c["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|m| m["mountPath"].as_str())
        .collect();
    for dir in ["/var/lib/cordon", "/tmp"] {
        assert!(
            mounts.contains(&dir),
            "{what}: nothing mounted at {dir}: {mounts:?}"
        );
    }
    let data_dir = value("CORDON_DATA_DIR").unwrap_or_default();
    assert!(
        data_dir.starts_with("/var/lib/cordon"),
        "{what}: CORDON_DATA_DIR is {data_dir:?}, not on the /var/lib/cordon volume"
    );
}

#[test]
fn the_browser_pod_template_is_locked_down() {
    let docs = docs();
    let pod = browser_pod(&docs);
    let what = "browser pod template";
    assert_eq!(
        pod["kind"].as_str(),
        Some("Pod"),
        "{what}: kind {:?}",
        pod["kind"]
    );
    let pod_labels = labels(&pod["metadata"]["labels"]);
    for (k, v) in BROWSER_LABELS {
        assert_eq!(
            pod_labels.get(*k).map(String::as_str),
            Some(*v),
            "{what}: label {k} is {:?}",
            pod_labels.get(*k)
        );
    }
    assert_ne!(
        pod_labels.get("app.kubernetes.io/name").map(String::as_str),
        Some("cordon"),
        "{what}: carries Cordon's own name label, so Cordon's Service, PDB and policies would select it"
    );
    let spec = &pod["spec"];
    assert_eq!(
        spec["automountServiceAccountToken"].as_bool(),
        Some(false),
        "{what}: automountServiceAccountToken is {:?}",
        spec["automountServiceAccountToken"]
    );
    let containers = spec["containers"].as_sequence().unwrap();
    let browser = containers
        .iter()
        .find(|c| c["name"].as_str() == Some("browser"))
        .unwrap_or_else(|| {
            panic!(
                "{what}: no container named browser: {:?}",
                containers.iter().map(|c| &c["name"]).collect::<Vec<_>>()
            )
        });
    assert_hardened(what, spec, browser, 10002);
    for side in ["requests", "limits"] {
        for res in ["cpu", "memory"] {
            assert!(
                !browser["resources"][side][res].is_null(),
                "{what}: resources.{side}.{res} unset: {:?}",
                browser["resources"]
            );
        }
    }
    let tmp = browser["volumeMounts"]
        .as_sequence()
        .and_then(|s| s.iter().find(|m| m["mountPath"].as_str() == Some("/tmp")))
        .unwrap_or_else(|| panic!("{what}: nothing mounted at /tmp"));
    let volume = spec["volumes"]
        .as_sequence()
        .and_then(|s| s.iter().find(|v| v["name"] == tmp["name"]))
        .unwrap_or_else(|| panic!("{what}: volume {:?} missing", tmp["name"]));
    assert!(
        volume["emptyDir"].is_mapping(),
        "{what}: /tmp is {volume:?}, not an emptyDir"
    );
    assert!(
        browser["ports"]
            .as_sequence()
            .is_some_and(|p| p.iter().any(|p| p["containerPort"].as_u64() == Some(9222))),
        "{what}: no CDP port 9222: {:?}",
        browser["ports"]
    );
    // Ready when Chromium answers through the relay, not when the relay
    // listens: a tcpSocket probe passed before Chromium was up (seen running
    // the template under podman, infra/tests/pod-container.sh).
    let probe = &browser["readinessProbe"]["httpGet"];
    assert_eq!(
        probe["path"].as_str(),
        Some("/json/version"),
        "{what}: readinessProbe is {:?}, not httpGet /json/version",
        browser["readinessProbe"]
    );
    let probe_port = match &probe["port"] {
        Value::Number(n) => n.as_u64(),
        Value::String(name) => browser["ports"].as_sequence().and_then(|p| {
            p.iter()
                .find(|p| p["name"].as_str() == Some(name.as_str()))
                .and_then(|p| p["containerPort"].as_u64())
        }),
        _ => None,
    };
    assert_eq!(
        probe_port,
        Some(9222),
        "{what}: the readiness probe's port {:?} is not the CDP port",
        probe["port"]
    );
}

#[test]
fn network_policies_fence_the_browser_pods() {
    let docs = docs();
    let dep = one(&docs, "Deployment", "cordon");
    let cordon_labels = labels(&dep.value["spec"]["template"]["metadata"]["labels"]);
    let policies = of_kind(&docs, "NetworkPolicy");
    let browsers = browser_labels();
    let for_browsers: Vec<_> = policies
        .iter()
        .filter(|p| selects(&p.value["spec"]["podSelector"], &browsers))
        .collect();
    assert_eq!(
        for_browsers.len(),
        1,
        "expected one NetworkPolicy selecting the browser pods, found {:?}",
        for_browsers.iter().map(|d| d.what()).collect::<Vec<_>>()
    );
    let p = for_browsers[0];
    let what = p.what();
    let types = strs(&p.value["spec"]["policyTypes"]);
    assert!(
        types.contains(&"Ingress".to_owned()) && types.contains(&"Egress".to_owned()),
        "{what}: policyTypes {types:?}"
    );
    // Every peer of every rule is a Cordon pod; no ipBlock, no namespace.
    let peers_are_cordon = |rules: &Value, dir: &str, peer_key: &str| {
        let rules = rules
            .as_sequence()
            .unwrap_or_else(|| panic!("{what}: no {dir} rules"));
        for rule in rules {
            let peers = rule[peer_key].as_sequence().unwrap_or_else(|| {
                panic!("{what}: an {dir} rule without `{peer_key}` allows every peer: {rule:?}")
            });
            for peer in peers {
                assert!(
                    peer["ipBlock"].is_null() && peer["namespaceSelector"].is_null(),
                    "{what}: {dir} peer {peer:?} is not a pod of this namespace"
                );
                assert!(
                    selects(&peer["podSelector"], &cordon_labels),
                    "{what}: {dir} peer {peer:?} does not select Cordon's pods {cordon_labels:?}"
                );
            }
            assert!(
                rule["ports"].as_sequence().is_some_and(|p| !p.is_empty()),
                "{what}: an {dir} rule on every port: {rule:?}"
            );
        }
        rules.clone()
    };
    let ingress = peers_are_cordon(&p.value["spec"]["ingress"], "ingress", "from");
    for rule in &ingress {
        for port in rule["ports"].as_sequence().unwrap() {
            assert!(
                port["port"].as_u64() == Some(9222) && port["endPort"].is_null(),
                "{what}: ingress on {port:?} (only CDP, 9222)"
            );
        }
    }
    // Egress: the egress guard's listeners, i.e. the ephemeral range the
    // Deployment pins with its sysctl, and never Cordon's HTTP port.
    let sysctl = dep.value["spec"]["template"]["spec"]["securityContext"]["sysctls"]
        .as_sequence()
        .and_then(|s| {
            s.iter()
                .find(|x| x["name"].as_str() == Some("net.ipv4.ip_local_port_range"))
        })
        .and_then(|x| x["value"].as_str())
        .unwrap_or_else(|| panic!("{}: no net.ipv4.ip_local_port_range sysctl", dep.what()));
    let range: Vec<u64> = sysctl
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let egress = peers_are_cordon(&p.value["spec"]["egress"], "egress", "to");
    for rule in &egress {
        for port in rule["ports"].as_sequence().unwrap() {
            let from = port["port"].as_u64();
            let to = port["endPort"].as_u64().or(from);
            assert_eq!(
                (port["protocol"].as_str(), from, to),
                (Some("TCP"), Some(range[0]), Some(range[1])),
                "{what}: egress on {port:?}, the guard's listeners are on {sysctl}"
            );
            assert!(
                !(range[0]..=range[1]).contains(&8080),
                "{what}: the range {sysctl} takes in Cordon's HTTP port"
            );
        }
    }
    // A default deny for the namespace, and a policy for Cordon's pods.
    assert!(
        policies.iter().any(|p| p.value["spec"]["podSelector"]
            .as_mapping()
            .is_some_and(|m| m.is_empty())
            && strs(&p.value["spec"]["policyTypes"]).len() == 2
            && p.value["spec"]["ingress"].is_null()
            && p.value["spec"]["egress"].is_null()),
        "no default-deny NetworkPolicy (empty podSelector, both policyTypes, no rules)"
    );
    let for_cordon: Vec<_> = policies
        .iter()
        .filter(|p| selects(&p.value["spec"]["podSelector"], &cordon_labels))
        .collect();
    assert_eq!(
        for_cordon.len(),
        1,
        "expected one NetworkPolicy for Cordon's pods, found {:?}",
        for_cordon.iter().map(|d| d.what()).collect::<Vec<_>>()
    );
    let egress = for_cordon[0].value["spec"]["egress"].as_sequence().unwrap();
    let to_browsers_cdp = egress.iter().any(|r| {
        r["to"].as_sequence().is_some_and(|to| {
            to.iter()
                .any(|peer| selects(&peer["podSelector"], &browsers))
        }) && r["ports"]
            .as_sequence()
            .is_some_and(|p| p.iter().any(|p| p["port"].as_u64() == Some(9222)))
    });
    assert!(
        to_browsers_cdp,
        "{}: no egress to the browsers' CDP port",
        for_cordon[0].what()
    );
    // DNS, PostgreSQL, the Kubernetes API.
    for port in [53, 5432, 443] {
        assert!(
            egress.iter().any(|r| r["ports"]
                .as_sequence()
                .is_some_and(|p| { p.iter().any(|p| p["port"].as_u64() == Some(port)) })),
            "{}: no egress on port {port}",
            for_cordon[0].what()
        );
    }
}

#[test]
fn the_service_and_the_disruption_budget_select_cordons_pods() {
    let docs = docs();
    let dep = one(&docs, "Deployment", "cordon");
    let pod_labels = labels(&dep.value["spec"]["template"]["metadata"]["labels"]);
    let svc = one(&docs, "Service", "cordon");
    let selector = labels(&svc.value["spec"]["selector"]);
    assert!(
        !selector.is_empty() && selector.iter().all(|(k, v)| pod_labels.get(k) == Some(v)),
        "{}: selector {selector:?} vs pod labels {pod_labels:?}",
        svc.what()
    );
    assert!(
        !selector
            .iter()
            .all(|(k, v)| browser_labels().get(k) == Some(v)),
        "{}: selects browser pods",
        svc.what()
    );
    let ports = svc.value["spec"]["ports"].as_sequence().unwrap();
    assert!(
        svc.value["spec"]["type"].as_str().unwrap_or("ClusterIP") == "ClusterIP"
            && ports.len() == 1
            && ports[0]["port"].as_u64() == Some(80)
            && (ports[0]["targetPort"].as_u64() == Some(8080)
                || ports[0]["targetPort"].as_str() == Some("http")),
        "{}: type {:?}, ports {ports:?} (ClusterIP 80 -> 8080)",
        svc.what(),
        svc.value["spec"]["type"]
    );
    let pdbs = of_kind(&docs, "PodDisruptionBudget");
    assert_eq!(
        pdbs.len(),
        1,
        "expected one PodDisruptionBudget, found {}",
        pdbs.len()
    );
    let pdb = pdbs[0];
    assert_eq!(
        pdb.value["spec"]["minAvailable"].as_u64(),
        Some(1),
        "{}: minAvailable {:?}",
        pdb.what(),
        pdb.value["spec"]["minAvailable"]
    );
    assert!(
        selects(&pdb.value["spec"]["selector"], &pod_labels),
        "{}: selector {:?} vs pod labels {pod_labels:?}",
        pdb.what(),
        pdb.value["spec"]["selector"]
    );
}

#[test]
fn the_secret_is_a_template_of_placeholders() {
    let docs = docs();
    let secrets = of_kind(&docs, "Secret");
    assert_eq!(
        secrets.len(),
        1,
        "expected one Secret, found {}",
        secrets.len()
    );
    let s = secrets[0];
    assert!(
        s.value["data"].is_null(),
        "{}: has `data` (base64 values); a template uses stringData placeholders",
        s.what()
    );
    let data = s.value["stringData"]
        .as_mapping()
        .unwrap_or_else(|| panic!("{}: no stringData", s.what()));
    let keys: BTreeSet<&str> = data.keys().filter_map(|k| k.as_str()).collect();
    assert_eq!(
        keys,
        BTreeSet::from([
            "CORDON_MASTER_KEY",
            "CORDON_CLUSTER_SECRET",
            "CORDON_DATABASE_URL"
        ]),
        "{}: keys",
        s.what()
    );
    for (k, v) in data {
        let v = v.as_str().unwrap_or_default();
        assert!(
            v.starts_with("REPLACE_ME"),
            "{}: {:?} is not a REPLACE_ME placeholder (it is {} characters long)",
            s.what(),
            k.as_str().unwrap_or_default(),
            v.len()
        );
    }
}

/// `cordon config show` checks the pod template the way `serve` does: the
/// shipped one passes, and one that asks for privileges is refused with one
/// line naming the field, before any rollout.
#[test]
fn config_show_checks_the_kube_pod_template() {
    let docs = docs();
    let cm = one(&docs, "ConfigMap", "cordon-browser-pod");
    let shipped = cm.value["data"]["browser-pod.yaml"]
        .as_str()
        .expect("data.browser-pod.yaml")
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let show = |template: &str| {
        let path = dir.path().join("browser-pod.yaml");
        std::fs::write(&path, template).unwrap();
        let path = path.to_str().unwrap().to_owned();
        crate::helpers::cordon_cli(
            dir.path(),
            &[
                ("CORDON_SANDBOX_DRIVER", "kube"),
                ("CORDON_KUBE_POD_TEMPLATE", &path),
                // Only a setting: nothing is sent anywhere by `config show`.
                ("CORDON_KUBE_EGRESS_HOST", "10.1.2.3"),
            ],
            &["config", "show"],
        )
    };
    let out = show(&shipped);
    let text = String::from_utf8_lossy(&out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the shipped template: {err}");
    assert!(text.contains("sandbox_driver = \"kube\""), "{text}");

    for (edit, field) in [
        (
            shipped.replace("privileged: false", "privileged: true"),
            "spec.containers[0].securityContext.privileged must not be true",
        ),
        (
            shipped.replacen("spec:\n", "spec:\n  hostNetwork: true\n", 1),
            "spec.hostNetwork must not be true",
        ),
        ("kind: Pod\nspec: [".to_owned(), "not a Pod manifest"),
    ] {
        assert_ne!(edit, shipped, "the edit for {field:?} changed nothing");
        let out = show(&edit);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{field}: {err}");
        assert!(
            err.contains("kube_pod_template: ") && err.contains(field),
            "expected {field:?} in {err:?}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
        assert!(out.stdout.is_empty(), "nothing shown on refusal");
    }
}
