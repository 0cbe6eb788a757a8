//! Tracing set-up and the Prometheus recorder.

use std::io::IsTerminal;
use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

use crate::config::LogFormat;

/// Installs the global tracing subscriber (once; later calls do nothing).
/// `RUST_LOG`, when set, overrides `level`.
pub fn init_tracing(format: LogFormat, level: &str) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"))
        // chromiumoxide logs raw CDP messages it cannot parse (cookie values,
        // typed text) at debug level, and reports every killed browser as an
        // error: its own logs are never shown. Cordon logs what matters.
        .add_directive("chromiumoxide=off".parse().expect("static directive"));
    // Colour codes help a person at a terminal and litter a log file or a
    // journal: only a terminal gets them.
    let ansi = std::io::stderr().is_terminal();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(std::io::stderr)
        .with_span_events(FmtSpan::NONE);
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// The process-wide Prometheus recorder's handle (installed on first use).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets(&[
                    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                ])
                .expect("static buckets are valid")
                .build_recorder();
            let handle = recorder.handle();
            // Fails only if another recorder is installed; then ours stays local.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}
