//! Byte counting, idle detection and the log row written when a connection ends.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{mpsc, watch};

use crate::store::egress::NewEgressEntry;

/// Counters of one socket: bytes each way and the time of the last I/O.
#[derive(Debug)]
pub(super) struct Meter {
    written: AtomicU64,
    read: AtomicU64,
    /// Milliseconds after `start`.
    last: AtomicU64,
    start: Instant,
}

impl Meter {
    pub(super) fn new() -> Arc<Self> {
        Arc::new(Self {
            written: AtomicU64::new(0),
            read: AtomicU64::new(0),
            last: AtomicU64::new(0),
            start: Instant::now(),
        })
    }

    fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn touch(&self) {
        self.last.store(self.elapsed_ms(), Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        Duration::from_millis(
            self.elapsed_ms()
                .saturating_sub(self.last.load(Ordering::Relaxed)),
        )
    }

    /// `(written, read)` so far.
    fn totals(&self) -> (u64, u64) {
        (
            self.written.load(Ordering::Relaxed),
            self.read.load(Ordering::Relaxed),
        )
    }
}

/// Resolves once `meter` has seen no I/O for `limit`.
pub(super) async fn idle(meter: &Meter, limit: Duration) {
    loop {
        let quiet = meter.idle_for();
        if quiet >= limit {
            return;
        }
        tokio::time::sleep(limit - quiet).await;
    }
}

/// Resolves once the listener is told to stop (or is gone).
pub(super) async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// Rows one listener may have waiting for the database; past this, rows
/// are dropped and counted, so a page flooding the guard with requests
/// cannot grow the control plane's memory without bound.
pub(super) const LOG_QUEUE: usize = 4096;

/// Refusal rows one listener writes a second (and at once, twice that):
/// a page refused in a loop (`for (;;) fetch('http://10.0.0.1/')`, each
/// answered at once) writes no more; the rest are counted, and the next
/// row written is preceded by one saying how many were not.
pub(super) const REFUSED_ROWS_PER_S: f64 = 20.0;

/// What a listener may still log of its refusals (see
/// [`REFUSED_ROWS_PER_S`]).
pub(super) struct RefusalBudget {
    tokens: f64,
    at: std::time::Instant,
    unlogged: u64,
}

impl RefusalBudget {
    pub(super) fn new(now: std::time::Instant) -> Self {
        Self {
            tokens: REFUSED_ROWS_PER_S * 2.0,
            at: now,
            unlogged: 0,
        }
    }

    /// `None`: this refusal is not logged (counted instead). `Some(n)`:
    /// it is, and `n` before it were not.
    pub(super) fn take(&mut self, now: std::time::Instant) -> Option<u64> {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.at = now;
        self.tokens = (self.tokens + elapsed * REFUSED_ROWS_PER_S).min(REFUSED_ROWS_PER_S * 2.0);
        if self.tokens < 1.0 {
            self.unlogged += 1;
            return None;
        }
        self.tokens -= 1.0;
        Some(std::mem::take(&mut self.unlogged))
    }

    /// The refusals not logged so far (none after this).
    pub(super) fn take_unlogged(&mut self) -> u64 {
        std::mem::take(&mut self.unlogged)
    }
}

/// The row that counts `n` refusals of sandbox `sandbox_id` not logged.
pub(super) fn unlogged_row(sandbox_id: &str, ts: i64, n: u64) -> NewEgressEntry {
    NewEgressEntry {
        sandbox_id: sandbox_id.to_owned(),
        ts,
        host: "*".to_owned(),
        port: 0,
        decision: crate::store::egress::Decision::Denied,
        reason: Some(format!(
            "{n} more refusals not logged (over {REFUSED_ROWS_PER_S} a second)"
        )),
        bytes_up: 0,
        bytes_down: 0,
    }
}

/// The sending end of one listener's log queue (bounded: [`LOG_QUEUE`]).
#[derive(Clone)]
pub(super) struct LogSender(pub(super) mpsc::Sender<NewEgressEntry>);

impl LogSender {
    /// Queues a row; when the queue is full the row is dropped and counted
    /// (`cordon_egress_log_dropped_total`), never waited for.
    pub(super) fn push(&self, entry: NewEgressEntry) {
        if let Err(mpsc::error::TrySendError::Full(entry)) = self.0.try_send(entry) {
            metrics::counter!("cordon_egress_log_dropped_total", "why" => "queue").increment(1);
            tracing::debug!(sandbox.id = %entry.sandbox_id, "egress log queue full, row dropped");
        }
    }
}

/// The egress log row of one upstream connection. It is sent to the log
/// writer when dropped, that is when the socket that owns it closes, so the
/// byte counts are final whichever way the connection ended.
pub(super) struct Flow {
    entry: Option<NewEgressEntry>,
    meter: Arc<Meter>,
    log: LogSender,
}

impl Flow {
    pub(super) fn new(entry: NewEgressEntry, meter: Arc<Meter>, log: LogSender) -> Self {
        Self {
            entry: Some(entry),
            meter,
            log,
        }
    }
}

impl Drop for Flow {
    fn drop(&mut self) {
        if let Some(mut entry) = self.entry.take() {
            (entry.bytes_up, entry.bytes_down) = self.meter.totals();
            // The writer is gone only once the listener is closed and drained.
            self.log.push(entry);
        }
    }
}

/// A socket that counts its bytes into a [`Meter`] and, for an upstream
/// connection, owns that connection's [`Flow`].
pub(super) struct Metered<T> {
    io: T,
    meter: Arc<Meter>,
    _flow: Option<Flow>,
}

impl<T> Metered<T> {
    pub(super) fn new(io: T, meter: Arc<Meter>, flow: Option<Flow>) -> Self {
        meter.touch();
        Self {
            io,
            meter,
            _flow: flow,
        }
    }

    fn wrote(&self, res: &Poll<io::Result<usize>>) {
        if let Poll::Ready(Ok(n)) = res {
            self.meter.written.fetch_add(*n as u64, Ordering::Relaxed);
            self.meter.touch();
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Metered<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.io).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = res {
            let n = (buf.filled().len() - before) as u64;
            self.meter.read.fetch_add(n, Ordering::Relaxed);
            self.meter.touch();
        }
        res
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Metered<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.io).poll_write(cx, buf);
        self.wrote(&res);
        res
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let res = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.wrote(&res);
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// Copies both ways until either side closes, nothing moves for `limit`
/// (judged on the upstream's meter), or the listener stops.
pub(super) async fn tunnel<A, B>(
    mut client: A,
    mut upstream: B,
    meter: Arc<Meter>,
    limit: Duration,
    stop: watch::Receiver<bool>,
) where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    tokio::select! {
        res = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
            if let Err(err) = res {
                tracing::debug!(error = %err, "egress tunnel ended with an error");
            }
        }
        () = idle(&meter, limit) => tracing::debug!("egress tunnel idle, closing"),
        () = stopped(stop) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_rows_pass_at_the_rate_and_the_next_says_how_many_did_not() {
        let t0 = std::time::Instant::now();
        let mut b = RefusalBudget::new(t0);
        let passed = (0..1000).filter(|_| b.take(t0).is_some()).count();
        assert_eq!(passed, 40);
        // A second later: 20 more, the first saying 960 were not logged.
        let t1 = t0 + std::time::Duration::from_secs(1);
        assert_eq!(b.take(t1), Some(960));
        assert_eq!(b.take(t1), Some(0));
        let passed = (0..100).filter(|_| b.take(t1).is_some()).count();
        assert_eq!(passed, 18);
    }
    use crate::store::egress::Decision;

    fn row(host: &str) -> NewEgressEntry {
        NewEgressEntry {
            sandbox_id: "b_q".into(),
            ts: 1,
            host: host.into(),
            port: 80,
            decision: Decision::Denied,
            reason: Some("loopback".into()),
            bytes_up: 0,
            bytes_down: 0,
        }
    }

    #[tokio::test]
    async fn a_full_log_queue_drops_rows_instead_of_growing() {
        let (tx, mut rx) = mpsc::channel(2);
        let log = LogSender(tx);
        for h in ["a", "b", "c", "d"] {
            log.push(row(h));
        }
        drop(log);
        let mut got = Vec::new();
        while let Some(r) = rx.recv().await {
            got.push(r.host);
        }
        assert_eq!(got, ["a", "b"], "the first rows kept, the rest dropped");
    }
}
