//! The guard and its per-sandbox listeners: accept, bound, serve, log.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, watch};
use tokio::task::JoinHandle;

use super::forward;
use super::io::{LOG_QUEUE, LogSender, Meter, Metered, idle, stopped};
use super::policy::AddressPolicy;
use super::refusals::Refusals;
use super::resolve::{Resolve, SystemResolver};
pub use super::shared::Limits;
use super::shared::{Inner, Session};
use crate::store::Store;
use crate::store::egress::NewEgressEntry;

/// The egress guard: hands out one forward proxy per sandbox, all applying
/// the same [`AddressPolicy`] and writing to the same log. Cheap to clone.
#[derive(Clone)]
pub struct EgressGuard {
    inner: Arc<Inner>,
    /// Where listeners bind: loopback, unless browsers run elsewhere (kube).
    bind_host: IpAddr,
}

impl EgressGuard {
    /// A guard that resolves names with the system resolver, with default limits.
    pub fn new(policy: AddressPolicy, store: Store) -> Self {
        Self::with_resolver(policy, store, Arc::new(SystemResolver), Limits::default())
    }

    /// A guard with its own resolver and limits (tests use a
    /// [`StaticResolver`](super::StaticResolver), which sends no packets).
    pub fn with_resolver(
        policy: AddressPolicy,
        store: Store,
        resolver: Arc<dyn Resolve>,
        limits: Limits,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                policy,
                own: super::own::OwnAddresses::default(),
                store,
                resolver,
                limits,
            }),
            bind_host: IpAddr::V4(Ipv4Addr::LOCALHOST),
        }
    }

    /// The same guard with its listeners bound on `host` (the
    /// `egress_bind_host` setting, non-loopback only for the kube driver,
    /// whose browser pods connect over the pod network).
    pub fn bind_on(self, host: IpAddr) -> Self {
        Self {
            bind_host: host,
            ..self
        }
    }

    /// The policy it applies.
    pub fn policy(&self) -> &AddressPolicy {
        &self.inner.policy
    }

    /// Binds a proxy on `127.0.0.1:0` (or `egress_bind_host`) for one sandbox and serves it until the
    /// returned listener is dropped or closed. Every request it refuses or
    /// forwards is logged under `sandbox_id`.
    pub async fn listen(&self, sandbox_id: String) -> anyhow::Result<EgressListener> {
        self.listen_for(sandbox_id, false, false).await
    }

    /// Like [`EgressGuard::listen`], but the listener takes connections only
    /// from this process ([`crate::loopback::opened_by_this_process`]): for a
    /// sandbox whose browser reaches it through the control plane's own
    /// forwarder (bwrap), so no other local process can use it.
    pub async fn listen_private(&self, sandbox_id: String) -> anyhow::Result<EgressListener> {
        self.listen_for(sandbox_id, true, false).await
    }

    /// Like [`EgressGuard::listen`], for a browser in a pod (kube driver,
    /// where every pod can reach the listener's address): it serves no one
    /// until [`EgressListener::admit_only`] names the pod's address, then
    /// only that address, so one session's pod cannot use another's
    /// listener (and its policy, log and identity).
    pub async fn listen_for_pod(&self, sandbox_id: String) -> anyhow::Result<EgressListener> {
        self.listen_for(sandbox_id, false, true).await
    }

    #[tracing::instrument(skip_all, fields(sandbox.id = %sandbox_id))]
    async fn listen_for(
        &self,
        sandbox_id: String,
        this_process_only: bool,
        pod_only: bool,
    ) -> anyhow::Result<EgressListener> {
        let listener = TcpListener::bind((self.bind_host, 0))
            .await
            .context("failed to bind the egress proxy")?;
        let addr = listener
            .local_addr()
            .context("failed to read the egress proxy's address")?;
        let (log, rows) = mpsc::channel(LOG_QUEUE);
        let log = LogSender(log);
        let (stop_tx, stop) = watch::channel(false);
        let writer = tokio::spawn(write_log(self.inner.store.clone(), rows));
        let session = Arc::new(Session {
            guard: self.inner.clone(),
            sandbox_id: sandbox_id.into(),
            log,
            stop,
            this_process_only,
            pod: pod_only.then(Arc::default),
            permits: Arc::new(Semaphore::new(self.inner.limits.max_connections)),
            waiters: Arc::new(Semaphore::new(MAX_WAITING)),
            refusals: Refusals::default(),
            refused_rows: std::sync::Mutex::new(super::io::RefusalBudget::new(
                std::time::Instant::now(),
            )),
        });
        let refusals = session.refusals.clone();
        // Only the pod's address is shared: the listener must not keep the
        // session (its log sender) alive, or closing it would wait forever
        // for the log writer.
        let pod = session.pod.clone();
        let port = EgressPort(session.clone());
        let accept = tokio::spawn(accept_loop(listener, session));
        tracing::debug!(egress.addr = %addr, "egress proxy listening");
        Ok(EgressListener {
            addr,
            port: Some(port),
            refusals,
            stop: stop_tx,
            tasks: Some((accept, writer)),
            pod,
        })
    }
}

/// One sandbox's proxy. Dropping it stops the proxy and cuts its connections.
pub struct EgressListener {
    /// Where the sandbox's browser must send everything (`--proxy-server`).
    pub addr: SocketAddr,
    port: Option<EgressPort>,
    refusals: Refusals,
    stop: watch::Sender<bool>,
    tasks: Option<(JoinHandle<()>, JoinHandle<()>)>,
    /// A pod's listener: the one address it serves, once known.
    pod: Option<Arc<std::sync::OnceLock<std::net::IpAddr>>>,
}

impl EgressListener {
    /// A pod's listener ([`EgressGuard::listen_for_pod`]) serves `ip`
    /// from now on, and only it; set once (later calls change nothing and
    /// answer false). A listener not made for a pod answers false.
    pub fn admit_only(&self, ip: std::net::IpAddr) -> bool {
        self.pod
            .as_ref()
            .is_some_and(|pod| pod.set(ip.to_canonical()).is_ok())
    }

    /// A handle that serves connections to this listener from inside this
    /// process, with no TCP hop (the bwrap driver's forwarder uses it).
    pub fn port(&self) -> Option<EgressPort> {
        self.port.clone()
    }

    /// What this listener refused lately (for tool results).
    pub fn refusals(&self) -> Refusals {
        self.refusals.clone()
    }

    /// Stops accepting, cuts open connections, and returns once every
    /// connection's log row is written.
    pub async fn close(mut self) {
        self.stop.send_replace(true);
        self.port = None;
        if let Some((accept, mut writer)) = self.tasks.take() {
            let _ = accept.await;
            // The writer ends once every connection has let go of the log;
            // a connection that never does must not hold a session's end.
            if tokio::time::timeout(Duration::from_secs(10), &mut writer)
                .await
                .is_err()
            {
                tracing::warn!("egress log writer still busy after close; rows may be lost");
                writer.abort();
            }
        }
    }
}

/// How long a connection handed over in process waits for a place.
const WAIT_FOR_PLACE: Duration = Duration::from_secs(10);
/// Connections handed over in process that may wait for a place at once.
const MAX_WAITING: usize = 64;

/// Serves proxy connections of one listener that arrive inside this
/// process (from a unix socket, say). Same policy, log and limits as the
/// listener's TCP port.
#[derive(Clone)]
pub struct EgressPort(Arc<Session>);

impl std::fmt::Debug for EgressPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("EgressPort")
            .field(&self.0.sandbox_id)
            .finish()
    }
}

impl EgressPort {
    /// Serves one client connection until it ends or the listener stops.
    pub fn serve<S>(&self, stream: S)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let session = self.0.clone();
        // A connection waits for a place only so long, and only so many
        // wait: a browser that hands over sockets without end (while its
        // places are held) piles up neither tasks nor descriptors here.
        let Ok(waiting) = session.waiters.clone().try_acquire_owned() else {
            metrics::counter!("cordon_egress_connections_refused_total").increment(1);
            return;
        };
        tokio::spawn(async move {
            let permit = tokio::select! {
                p = tokio::time::timeout(WAIT_FOR_PLACE, session.permits.clone().acquire_owned()) => p,
                () = stopped(session.stop.clone()) => return,
            };
            drop(waiting);
            match permit {
                Ok(Ok(permit)) => serve_client(session, stream, permit).await,
                Ok(Err(_closed)) => {}
                Err(_late) => {
                    metrics::counter!("cordon_egress_connections_refused_total").increment(1);
                }
            }
        });
    }
}

impl Drop for EgressListener {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

async fn accept_loop(listener: TcpListener, session: Arc<Session>) {
    let local = listener.local_addr().ok();
    let permits = session.permits.clone();
    loop {
        let accepted = tokio::select! {
            () = stopped(session.stop.clone()) => break,
            accepted = async {
                let permit = permits.clone().acquire_owned().await;
                (permit, listener.accept().await)
            } => accepted,
        };
        match accepted {
            (Ok(_), Ok((_, peer)))
                if session.this_process_only
                    && !local.is_some_and(|l| crate::loopback::opened_by_this_process(l, peer)) =>
            {
                tracing::warn!(sandbox.id = %session.sandbox_id, "egress proxy refused a connection from another process");
            }
            (Ok(_), Ok((_, peer)))
                if session
                    .pod
                    .as_ref()
                    .is_some_and(|pod| pod.get() != Some(&peer.ip().to_canonical())) =>
            {
                tracing::warn!(sandbox.id = %session.sandbox_id, client = %peer.ip(), "egress proxy refused a connection from another address than its pod's");
            }
            (Ok(permit), Ok((socket, _peer))) => {
                let _ = socket.set_nodelay(true);
                let session = session.clone();
                tokio::spawn(serve_client(session, socket, permit));
            }
            (_, Err(err)) => {
                // Out of file descriptors and the like: back off, don't spin.
                tracing::warn!(error = %err, "egress proxy failed to accept");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (Err(_closed), _) => break,
        }
    }
}

/// Serves one client connection, which holds `place` (handed on to a
/// tunnel it becomes) until it ends.
async fn serve_client<S>(session: Arc<Session>, socket: S, place: tokio::sync::OwnedSemaphorePermit)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = session.guard.limits;
    let meter = Meter::new();
    let io = TokioIo::new(Metered::new(socket, meter.clone(), None));
    let for_service = session.clone();
    let place: forward::Place = Arc::new(std::sync::Mutex::new(Some(place)));
    let service = service_fn(move |req| forward::handle(for_service.clone(), place.clone(), req));
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_header_size(limits.max_header_bytes)
        .serve_connection(io, service)
        .with_upgrades();
    tokio::select! {
        res = conn => if let Err(err) = res {
            tracing::debug!(error = %err, "egress client connection ended with an error");
        },
        () = idle(&meter, limits.idle_timeout) => {}
        () = stopped(session.stop.clone()) => {}
    }
}

async fn write_log(store: Store, mut rows: mpsc::Receiver<NewEgressEntry>) {
    while let Some(row) = rows.recv().await {
        if let Err(err) = store.egress_record(&row).await {
            tracing::warn!(error = format!("{err:#}"), sandbox.id = %row.sandbox_id, "failed to write an egress log row");
        }
    }
}
