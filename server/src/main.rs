//! The `cordon` binary: parse the command line and hand over to [`cordon::cli`].

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cordon::cli::Cli::parse();
    let runtime = match tokio::runtime::Runtime::new() {
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
