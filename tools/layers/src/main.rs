//! `cargo run -p layers`: fails when a module of the server crate names a
//! module of a higher layer (see ARCHITECTURE.md, "Layers").
//!
//! It reads every `.rs` under `server/src`, collects the paths each file
//! names (`use` trees, inline `crate::…`/`super::…`/`self::…` and child
//! module paths, and paths in string attributes), maps both ends to a layer
//! through `tools/layers/layers.toml`, and compares the upward edges with
//! `tools/layers/allowlist.txt`: a new upward edge fails with its
//! `file:line`, and so does an allowed edge that no longer occurs.
//!
//! Options: `--root <dir>` (the repository; default: the one this tool is
//! in), `--print-allowlist` (print the allowlist the sources hold now, to
//! review what a fix removed).

mod check;
mod lex;
mod paths;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;

use check::{ALLOWLIST, Allowlist, TABLE};
use table::Table;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("layers: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let mut root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut print = false;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--root" => root = args.next().ok_or("--root needs a directory")?.into(),
            "--print-allowlist" => print = true,
            "-h" | "--help" => {
                println!("usage: layers [--root <repository>] [--print-allowlist]");
                return Ok(ExitCode::SUCCESS);
            }
            other => return Err(format!("unknown argument `{other}` (try --help)")),
        }
    }
    let read = |rel: &str| {
        std::fs::read_to_string(root.join(rel)).map_err(|e| format!("cannot read {rel}: {e}"))
    };
    let table = Table::parse(&read(TABLE)?).map_err(|e| format!("{TABLE}: {e}"))?;
    let sources = check::read_sources(&root)?;
    let scan = check::scan(&sources, &table);
    if print {
        print!("{}", Allowlist::render(&scan.upward));
        return Ok(ExitCode::SUCCESS);
    }
    let allow = Allowlist::parse(&read(ALLOWLIST)?);
    let problems = check::compare(&scan, &allow);
    for p in &problems {
        println!("{p}");
    }
    let occurrences = scan.upward.len();
    println!(
        "layers: {} files, {} paths; allowlist: {} upward edges left ({occurrences} places), to shrink to zero",
        scan.files,
        scan.paths,
        allow.edges.len()
    );
    if problems.is_empty() {
        Ok(ExitCode::SUCCESS)
    } else {
        println!(
            "layers: {} problem(s); see {TABLE} and {ALLOWLIST}",
            problems.len()
        );
        Ok(ExitCode::FAILURE)
    }
}
