//! The `kube` driver: one Kubernetes pod per browser, made from a checked
//! pod template (`template.rs`), reached on the pod's IP.
//!
//! Start creates the pod (labelled with the deployment and sandbox), watches
//! it until it is running and ready with an IP, asks its DevTools endpoint
//! for the browser's WebSocket URL and rewrites that URL's host to the pod's
//! IP. Stop deletes the pod; [`Driver::sweep`] deletes this deployment's
//! pods of sandboxes nobody knows. The API server's transient failures
//! (5xx, 429, broken connections) are retried a bounded number of times;
//! a watch that ends with 410 Gone resumes from a fresh list.
//!
//! No API server runs where Cordon is developed: the tests replay recorded
//! API exchanges through kube's mock service (`tests.rs`).

mod settings;
mod template;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use tokio::time::Instant;

pub use settings::KubeSettings;
pub use template::{DEPLOYMENT, MANAGED_BY, PodParams, PodTemplate, SANDBOX};

use super::{Driver, DriverKind, Sandbox, SandboxSpec};

/// How the driver is set up (from the `kube_*` settings).
#[derive(Debug, Clone)]
pub struct KubeOptions {
    /// `kube_deployment`: the value of every pod's `cordon.dev/deployment` label.
    pub deployment: String,
    /// `kube_cdp_port`: where the browser container serves DevTools.
    pub cdp_port: u16,
    /// `kube_egress_host`: where browser pods reach the egress guard.
    pub egress_host: IpAddr,
    /// `kube_ready_timeout_s`: bound on a pod becoming ready.
    pub ready_timeout: Duration,
    /// Tries of one API call that fails transiently (5xx, 429, connection).
    pub attempts: u32,
    /// The first pause between tries; it doubles each time.
    pub backoff: Duration,
}

impl KubeOptions {
    /// The options `settings` ask for.
    pub fn from_settings(s: &KubeSettings) -> anyhow::Result<Self> {
        Ok(Self {
            deployment: s.deployment.clone(),
            cdp_port: s.cdp_port,
            egress_host: s
                .egress_host
                .context("kube_egress_host: required when sandbox_driver is \"kube\"")?,
            ready_timeout: Duration::from_secs(s.ready_timeout_s),
            attempts: 4,
            backoff: Duration::from_millis(250),
        })
    }
}

/// Runs each browser in a pod of its own.
pub struct KubeDriver {
    pods: Api<Pod>,
    template: PodTemplate,
    opts: KubeOptions,
    /// For the pods' DevTools endpoints: never through a proxy.
    http: reqwest::Client,
}

/// Why a pod did not become ready.
enum Outcome {
    Ready(IpAddr),
    Failed(String),
}

impl KubeDriver {
    /// The driver `settings` ask for: the template is read and checked
    /// first (a bad one stops the start naming the field), then the client
    /// is configured from the cluster (in-cluster service account) or a
    /// kubeconfig.
    pub async fn from_settings(s: &KubeSettings) -> anyhow::Result<Self> {
        let path = s
            .pod_template
            .as_deref()
            .context("kube_pod_template: required when sandbox_driver is \"kube\"")?;
        let template = PodTemplate::load(path)?;
        let opts = KubeOptions::from_settings(s)?;
        // kube's error already names each way it tried, once: no chain.
        let client = kube::Client::try_default().await.map_err(|e| {
            anyhow::anyhow!(
                "sandbox_driver = \"kube\": no Kubernetes client configuration \
                 (not in a cluster, and no usable kubeconfig): {e}"
            )
        })?;
        Ok(Self::new(client, s.namespace.as_deref(), template, opts))
    }

    /// A driver over `client`, making pods in `namespace` (default: the
    /// client's own namespace).
    pub fn new(
        client: kube::Client,
        namespace: Option<&str>,
        template: PodTemplate,
        opts: KubeOptions,
    ) -> Self {
        let namespace = namespace.unwrap_or(client.default_namespace()).to_owned();
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(5))
            .build()
            .expect("a plain HTTP client builds");
        Self {
            pods: Api::namespaced(client, &namespace),
            template,
            opts,
            http,
        }
    }

    /// Calls `f` until it succeeds, fails for good, or has been tried
    /// `attempts` times; the pause doubles after each transient failure.
    async fn retry<T, F, Fut>(&self, what: &str, mut f: F) -> Result<T, kube::Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, kube::Error>>,
    {
        let mut pause = self.opts.backoff;
        let mut tries = 0;
        loop {
            tries += 1;
            match f().await {
                Err(e) if transient(&e) && tries < self.opts.attempts => {
                    tracing::debug!(error = %e, tries, "{what}: transient API failure, retrying");
                    tokio::time::sleep(pause).await;
                    pause *= 2;
                }
                other => return other,
            }
        }
    }

    /// Deletes a pod; one that is already gone is fine.
    async fn delete(&self, name: &str) -> anyhow::Result<()> {
        let dp = DeleteParams::default().grace_period(1);
        match self
            .retry("delete pod", || self.pods.delete(name, &dp))
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e).with_context(|| format!("cannot delete pod {name}")),
        }
    }

    /// Waits until pod `name` runs, is ready and has an IP, or fails, or
    /// `deadline` passes. Watches from `version`; a watch that ends (the
    /// server's timeout) resumes where it was, one that answers 410 Gone
    /// resumes from a fresh list.
    async fn wait_ready(
        &self,
        name: &str,
        mut version: String,
        deadline: Instant,
    ) -> anyhow::Result<Outcome> {
        let by_name = format!("metadata.name={name}");
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("timed out");
            }
            let wp = WatchParams::default()
                .fields(&by_name)
                .timeout(left.as_secs().clamp(1, 290) as u32);
            let watch = tokio::time::timeout_at(
                deadline,
                self.retry("watch pod", || self.pods.watch(&wp, &version)),
            )
            .await
            .map_err(|_| anyhow::anyhow!("timed out"))?;
            let mut gone = false;
            match watch {
                Ok(stream) => {
                    let mut stream = stream.boxed();
                    loop {
                        let next = tokio::time::timeout_at(deadline, stream.try_next())
                            .await
                            .map_err(|_| anyhow::anyhow!("timed out"))?;
                        match next {
                            Ok(Some(WatchEvent::Added(pod) | WatchEvent::Modified(pod))) => {
                                if let Some(v) = &pod.metadata.resource_version {
                                    version.clone_from(v);
                                }
                                if let Some(out) = state(&pod) {
                                    return Ok(out);
                                }
                            }
                            Ok(Some(WatchEvent::Deleted(_))) => {
                                return Ok(Outcome::Failed("deleted".into()));
                            }
                            Ok(Some(WatchEvent::Bookmark(b))) => {
                                version = b.metadata.resource_version;
                            }
                            Ok(Some(WatchEvent::Error(s))) if s.code == 410 => {
                                gone = true;
                                break;
                            }
                            Ok(Some(WatchEvent::Error(s))) => {
                                tracing::debug!(code = s.code, "watch error event, watching again");
                                break;
                            }
                            // The server ended the watch (its timeout) or
                            // the connection broke: watch again from here.
                            Ok(None) => break,
                            Err(e) => {
                                tracing::debug!(error = %e, "watch broke, watching again");
                                break;
                            }
                        }
                    }
                }
                Err(kube::Error::Api(s)) if s.code == 410 => gone = true,
                Err(e) => return Err(e).context("cannot watch the pod"),
            }
            if gone {
                // The version is too old to resume from: list afresh (the
                // pod may have become ready meanwhile) and watch from there.
                let lp = ListParams::default().fields(&by_name);
                let list = tokio::time::timeout_at(
                    deadline,
                    self.retry("list pod", || self.pods.list(&lp)),
                )
                .await
                .map_err(|_| anyhow::anyhow!("timed out"))?
                .context("cannot list the pod after its watch expired")?;
                match list.items.first() {
                    None => return Ok(Outcome::Failed("gone".into())),
                    Some(pod) => {
                        if let Some(out) = state(pod) {
                            return Ok(out);
                        }
                    }
                }
                version = list.metadata.resource_version.unwrap_or_default();
            } else {
                tokio::time::sleep(self.opts.backoff.min(left)).await;
            }
        }
    }

    /// Asks the browser for its WebSocket URL until it answers or
    /// `deadline` passes (a template without a readiness probe is ready
    /// before Chromium listens), and points that URL at `cdp`.
    async fn devtools_url(&self, cdp: SocketAddr, deadline: Instant) -> anyhow::Result<String> {
        let url = format!("http://{cdp}/json/version");
        let mut last;
        loop {
            last = match self.version(&url).await {
                Ok(ws) => return rewrite(&ws, cdp),
                Err(e) => e,
            };
            if Instant::now() + self.opts.backoff >= deadline {
                return Err(last.context(format!("no DevTools answer at {url}")));
            }
            tokio::time::sleep(self.opts.backoff).await;
        }
    }

    async fn version(&self, url: &str) -> anyhow::Result<String> {
        #[derive(serde::Deserialize)]
        struct Version {
            #[serde(rename = "webSocketDebuggerUrl")]
            ws: String,
        }
        let answer = self.http.get(url).send().await?.error_for_status()?;
        Ok(answer.json::<Version>().await?.ws)
    }

    /// Creates the sandbox's pod; gives back its resource version. A
    /// create that fails is not followed by a delete: a 409 names a pod
    /// this start did not make (sandbox ids are random), and a pod made by
    /// a create whose answer was lost is removed by `sweep`.
    async fn create(&self, spec: &SandboxSpec, name: &str) -> anyhow::Result<String> {
        let pod = self.template.pod_for(&PodParams {
            name,
            sandbox_id: &spec.id,
            deployment: &self.opts.deployment,
            env: self.env(spec),
            memory_bytes: spec.limits.as_ref().map(|l| l.limits().memory_bytes),
        });
        let pp = PostParams::default();
        match self
            .retry("create pod", || self.pods.create(&pp, &pod))
            .await
        {
            Ok(p) => Ok(p.metadata.resource_version.unwrap_or_default()),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                bail!("pod {name} already exists (409 AlreadyExists); not touching it")
            }
            Err(e) => Err(e).with_context(|| format!("cannot create pod {name}")),
        }
    }

    /// Waits for the created pod and its browser; gives back the CDP URL.
    async fn connectable(
        &self,
        name: &str,
        version: String,
        deadline: Instant,
    ) -> anyhow::Result<String> {
        let ip = match self.wait_ready(name, version, deadline).await {
            Ok(Outcome::Ready(ip)) => ip,
            Ok(Outcome::Failed(why)) => bail!("pod {name} failed to start: {why}"),
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "pod {name} was not ready within {:?}",
                        self.opts.ready_timeout
                    )
                });
            }
        };
        self.devtools_url(SocketAddr::new(ip, self.opts.cdp_port), deadline)
            .await
            .with_context(|| format!("pod {name} is ready but its browser does not answer"))
    }

    /// The `browser` container's environment: the pod contract.
    fn env(&self, spec: &SandboxSpec) -> Vec<(String, String)> {
        let proxy = SocketAddr::new(self.opts.egress_host, spec.proxy.port());
        let mut args: Vec<String> = super::chromium::BASE_FLAGS
            .iter()
            .filter(|f| !f.starts_with("--remote-debugging-"))
            .map(|f| (*f).to_owned())
            .collect();
        args.extend(crate::egress::chromium_proxy_args(proxy));
        args.push(format!("--window-size={},{}", spec.window.0, spec.window.1));
        let mut env = vec![
            ("CORDON_SANDBOX_ID".to_owned(), spec.id.clone()),
            ("CORDON_PROXY".to_owned(), proxy.to_string()),
            ("CORDON_CDP_PORT".to_owned(), self.opts.cdp_port.to_string()),
            (
                "CORDON_WINDOW".to_owned(),
                format!("{},{}", spec.window.0, spec.window.1),
            ),
            ("CORDON_CHROMIUM_ARGS".to_owned(), args.join(" ")),
        ];
        if let Some(l) = spec.limits.as_ref().map(|l| l.limits()) {
            env.extend([
                (
                    "CORDON_LIMIT_MEMORY_BYTES".to_owned(),
                    l.memory_bytes.to_string(),
                ),
                ("CORDON_LIMIT_PIDS".to_owned(), l.pids.to_string()),
                (
                    "CORDON_LIMIT_OPEN_FILES".to_owned(),
                    l.open_files.to_string(),
                ),
                (
                    "CORDON_LIMIT_TMPFS_BYTES".to_owned(),
                    l.tmpfs_bytes.to_string(),
                ),
                (
                    "CORDON_LIMIT_CPU_WEIGHT".to_owned(),
                    l.cpu_weight.to_string(),
                ),
            ]);
        }
        env
    }
}

/// The pod's name for a sandbox id (`b_x…` → `b-x…`: DNS-safe).
pub fn pod_name(sandbox_id: &str) -> String {
    sandbox_id.to_ascii_lowercase().replace('_', "-")
}

/// Whether an API failure may pass if tried again.
fn transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code == 429 || (500..=599).contains(&s.code),
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Ready (running, the Ready condition true, an IP), failed, or neither yet.
fn state(pod: &Pod) -> Option<Outcome> {
    let status = pod.status.as_ref()?;
    match status.phase.as_deref() {
        Some("Failed" | "Succeeded") => {
            let terminated = status
                .container_statuses
                .iter()
                .flatten()
                .filter_map(|c| c.state.as_ref()?.terminated.as_ref())
                .map(|t| {
                    format!(
                        "exit {} {}",
                        t.exit_code,
                        t.reason.as_deref().unwrap_or_default()
                    )
                })
                .next();
            let why = [
                status.phase.clone(),
                status.reason.clone(),
                terminated,
                status.message.clone(),
            ]
            .into_iter()
            .flatten()
            .map(|s| s.trim().to_owned())
            .collect::<Vec<_>>()
            .join(": ");
            Some(Outcome::Failed(why.chars().take(300).collect()))
        }
        Some("Running") => {
            let ready = status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            let ip = status.pod_ip.as_deref()?.parse().ok()?;
            ready.then_some(Outcome::Ready(ip))
        }
        _ => None,
    }
}

/// `ws` (as Chromium names itself: `ws://127.0.0.1:9222/devtools/browser/…`
/// or `ws://localhost/…`) with its host and port replaced by `cdp`.
fn rewrite(ws: &str, cdp: SocketAddr) -> anyhow::Result<String> {
    let url = url::Url::parse(ws).with_context(|| format!("not a DevTools URL: {ws:?}"))?;
    if url.scheme() != "ws" || !url.path().starts_with("/devtools/") {
        bail!("not a DevTools WebSocket URL: {ws:?}");
    }
    let query = url.query().map(|q| format!("?{q}")).unwrap_or_default();
    Ok(format!("ws://{cdp}{}{query}", url.path()))
}

#[async_trait::async_trait]
impl Driver for KubeDriver {
    fn kind(&self) -> DriverKind {
        DriverKind::Kube
    }

    fn caps(&self) -> super::Caps {
        super::Caps {
            remote: true,
            egress: super::EgressReach::Pod,
            downloads: false,
            devtools_open_locally: false,
        }
    }

    #[tracing::instrument(skip_all, fields(sandbox.id = %spec.id))]
    async fn start(&self, spec: SandboxSpec) -> anyhow::Result<Sandbox> {
        // Nothing of the browser lives here; the directory only keeps the
        // layout the other drivers have (uploads and downloads cannot reach
        // a pod: see docs/internals/kubernetes.md).
        tokio::fs::create_dir_all(&spec.runtime_dir)
            .await
            .with_context(|| format!("cannot create {}", spec.runtime_dir.display()))?;
        let name = pod_name(&spec.id);
        let sandbox = Sandbox {
            id: spec.id.clone(),
            driver: DriverKind::Kube,
            cdp_url: String::new(),
            pid: None,
            marker: name.clone(),
            runtime_dir: spec.runtime_dir.clone(),
            limits: spec.limits.clone(),
        };
        let deadline = Instant::now() + self.opts.ready_timeout;
        let version = match self.create(&spec, &name).await {
            Ok(v) => v,
            Err(e) => {
                let _ = tokio::fs::remove_dir_all(&spec.runtime_dir).await;
                return Err(e);
            }
        };
        match self.connectable(&name, version, deadline).await {
            Ok(cdp_url) => Ok(Sandbox { cdp_url, ..sandbox }),
            Err(e) => {
                if let Err(stop) = self.stop(&sandbox).await {
                    tracing::warn!(error = %format!("{stop:#}"), pod = %name, "cannot delete a pod that did not start");
                }
                Err(e)
            }
        }
    }

    #[tracing::instrument(skip_all, fields(sandbox.id = %sandbox.id))]
    async fn stop(&self, sandbox: &Sandbox) -> anyhow::Result<()> {
        let res = self.delete(&pod_name(&sandbox.id)).await;
        let _ = tokio::fs::remove_dir_all(&sandbox.runtime_dir).await;
        res
    }

    #[tracing::instrument(skip_all, fields(kube.deployment = %self.opts.deployment))]
    async fn sweep(&self, keep: &HashSet<String>) -> anyhow::Result<usize> {
        let lp = ListParams::default().labels(&format!(
            "{MANAGED_BY}=cordon,{DEPLOYMENT}={}",
            self.opts.deployment
        ));
        let pods = self
            .retry("list pods", || self.pods.list(&lp))
            .await
            .context("cannot list this deployment's pods")?;
        let mut deleted = 0;
        for pod in &pods.items {
            let Some(name) = pod.metadata.name.as_deref() else {
                continue;
            };
            let id = pod
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SANDBOX))
                .map(String::as_str)
                .unwrap_or_default();
            if keep.contains(id) {
                continue;
            }
            // A pod still starting has no sandbox row yet (it is recorded
            // once its browser answers), on this replica or another: only
            // pods older than the longest start are orphans.
            let age_ms = pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| crate::time::now_ms() - t.0.as_millisecond());
            let grace_ms = i64::try_from(self.opts.ready_timeout.as_millis())
                .unwrap_or(i64::MAX / 2)
                .saturating_add(60_000);
            if age_ms.is_none_or(|a| a < grace_ms) {
                continue;
            }
            self.delete(name).await?;
            tracing::warn!(pod = %name, sandbox.id = %id, "reaper: deleted an orphaned browser pod");
            deleted += 1;
        }
        Ok(deleted)
    }
}
