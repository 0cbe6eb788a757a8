//! The `cordon` binary: parse the command line and hand over to [`cordon::cli`].

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cordon::cli::Cli::parse();
    // The relay inside each sandbox only copies bytes for one browser: one
    // thread does (a worker per core saved about 70 KiB a sandbox on 2
    // cores, more on bigger hosts: BENCHMARKS.md 12:24).
    let runtime = match &cli.command {
        Some(cordon::cli::Command::Relay(_)) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        // `runtime_workers`; settings that do not load are reported by
        // `run`, on a default runtime.
        None | Some(cordon::cli::Command::Serve) => {
            match cordon::config::Settings::load(cli.config.as_deref()) {
                Ok(settings) => settings.server.runtime(),
                Err(_) => tokio::runtime::Runtime::new(),
            }
        }
        Some(_) => tokio::runtime::Runtime::new(),
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(cordon::cli::run(cli)) {
        Ok(code) => code,
        Err(e) => {
            // One line, the whole cause chain, no backtrace; then what to
            // do about it, when the error says.
            eprintln!("error: {}", cordon::fix::render(&e));
            ExitCode::from(2)
        }
    }
}
