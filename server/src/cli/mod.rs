//! The `cordon` command line: its shape in `args.rs` (clap), `run`
//! here dispatching each command, the larger groups in a file each.

mod admin;
mod args;
mod creds;
mod grants;
mod operators;

use std::process::ExitCode;

use anyhow::Context;

use crate::audit::{self, Actor, Verification};
use crate::config::Settings;
use crate::crypto::{KeySource, Keyring, MasterKey, read_key_file};
use crate::domain::{GrantRequestId, TenantId};
use crate::startup::{Application, shutdown_signal};
use crate::store::Store;
use crate::telemetry;
use crate::tenants;
use crate::vault::{self, Domain, ImportOptions, Vault, VaultError};

pub use args::{
    ApikeyCommand, AuditCommand, Cli, Command, ConfigCommand, CredsCommand, GrantsCommand,
    KeysCommand, OperatorCommand, TenantCommand, TotpCommand,
};

/// `--since`/`--until` of `audit export`, its error naming the flag.
fn bound(flag: &str, text: Option<&str>) -> anyhow::Result<Option<audit::Bound>> {
    text.map(|t| audit::Bound::parse(t).map_err(|e| anyhow::anyhow!("{flag}: {e}")))
        .transpose()
}

/// Runs the parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The relay runs inside a sandbox with an empty environment and no
    // config: it reads no settings and starts no logging.
    if let Some(Command::Relay(args)) = cli.command {
        return crate::sandbox::relay::run(args).await;
    }
    // The reference is the declaration's, whatever the settings in force.
    if let Some(Command::Config {
        command: ConfigCommand::Docs,
    }) = &cli.command
    {
        print!("{}", crate::config::reference());
        return Ok(ExitCode::SUCCESS);
    }
    let settings = Settings::load(cli.config.as_deref())?;
    telemetry::init_tracing(settings.server.log_format, &settings.server.log_level);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let shutdown = shutdown_signal()?;
            let app = Application::build(settings).await?;
            match app.first_start() {
                crate::auth::FirstStart::AdminExists => {}
                crate::auth::FirstStart::Link(inv) => println!(
                    "No admin can log in yet. Enroll {:?} with a passkey within an hour at:\n  {}",
                    inv.operator.name, inv.link
                ),
                crate::auth::FirstStart::Outstanding {
                    operator,
                    expires_at,
                } => println!(
                    "No admin can log in yet. The enrollment link for {:?} printed at an earlier \
                     start (or by another replica) is still valid (until {}). Lost it? \
                     `cordon operator enroll-link` prints a fresh one and retires the others.",
                    operator.name,
                    crate::time::rfc3339_ms(*expires_at)
                ),
            }
            app.run_until(shutdown).await?;
        }
        Command::Migrate => {
            let store = open(&settings).await?;
            println!("migrations applied to {}", settings.database_url_display());
            store.close().await;
        }
        Command::Audit {
            command: AuditCommand::Verify { file: Some(path) },
        } => {
            let result = if path.as_os_str() == "-" {
                audit::verify_file(std::io::stdin().lock())
            } else {
                let f = std::fs::File::open(&path)
                    .with_context(|| format!("cannot open {}", path.display()))?;
                audit::verify_file(std::io::BufReader::new(f))
            };
            match result.map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))? {
                audit::FileVerification::Intact {
                    events,
                    range,
                    gaps,
                } => {
                    let range = range.map_or(String::new(), |(a, b)| format!(" (seq {a}..{b})"));
                    let gaps = if gaps == 0 {
                        String::new()
                    } else {
                        format!(
                            "; {gaps} gaps where seqs skip (a filtered or partial export: the \
                             links there are not checked)"
                        )
                    };
                    println!("export intact: {events} events{range}{gaps}");
                }
                audit::FileVerification::Broken { seq, reason } => {
                    println!("export BROKEN at seq {seq}: {reason}");
                    return Ok(ExitCode::from(1));
                }
            }
        }
        Command::Audit {
            command:
                AuditCommand::Export {
                    since,
                    until,
                    tenant,
                    output,
                },
        } => {
            let (since, until) = (
                bound("--since", since.as_deref())?,
                bound("--until", until.as_deref())?,
            );
            let store = open(&settings).await?;
            let filter = audit::ExportFilter {
                since,
                until,
                tenant: tenant.as_ref().map(|t| t.as_str().to_owned()),
            };
            let written = match &output {
                Some(path) => {
                    let f = crate::nofollow::create_private(path)
                        .with_context(|| format!("cannot create {}", path.display()))?;
                    let mut w = std::io::BufWriter::new(f);
                    audit::export(&store, &filter, &mut w).await?
                }
                None => {
                    let mut w = std::io::BufWriter::new(std::io::stdout().lock());
                    audit::export(&store, &filter, &mut w).await?
                }
            };
            let shown = |b: Option<audit::Bound>| match b {
                Some(audit::Bound::Seq(s)) => serde_json::json!(s),
                Some(audit::Bound::Time(t)) => serde_json::json!(crate::time::rfc3339_ms(t)),
                None => serde_json::Value::Null,
            };
            store
                .audit_append(audit::NewEvent::new(Actor::Cli, "audit.export").params(
                    serde_json::json!({
                        "since": shown(since),
                        "until": shown(until),
                        "tenant": tenant.as_ref().map(|t| t.as_str()),
                        "events": written,
                    }),
                ))
                .await?;
            store.close().await;
            if output.is_some() {
                eprintln!("exported {written} events");
            }
        }
        Command::Audit {
            command: AuditCommand::Verify { file: None },
        } => {
            let store = open(&settings).await?;
            let result = audit::verify(&store).await?;
            store.close().await;
            match result {
                Verification::Intact { events } => println!("audit chain intact: {events} events"),
                Verification::Broken { seq, reason } => {
                    println!("audit chain BROKEN at seq {seq}: {reason}");
                    return Ok(ExitCode::from(1));
                }
            }
        }
        Command::Config {
            command: ConfigCommand::Docs,
        } => unreachable!("answered before the settings load"),
        Command::Config {
            command: ConfigCommand::Show,
        } => {
            // The pod template is a file of its own: check it here too, so a
            // refused template shows before a rollout, not at `serve`.
            if settings.sandbox.sandbox_driver == crate::config::SandboxDriverSetting::Kube
                && let Some(path) = &settings.kube.pod_template
            {
                crate::sandbox::kube::PodTemplate::load(path)?;
            }
            print!("{}", settings.show())
        }
        Command::Tenant { command } => {
            let store = open(&settings).await?;
            admin::tenant(&store, command).await?;
            store.close().await;
        }
        Command::Operator { command } => {
            let store = open(&settings).await?;
            let res = operators::operator(&store, &settings, command).await;
            store.close().await;
            res?;
        }
        Command::Apikey { command } => {
            let store = open(&settings).await?;
            let res = admin::apikey(&store, command).await;
            store.close().await;
            return res;
        }
        Command::Creds { command } => return creds::creds(&settings, command).await,
        Command::Grants { command } => {
            let store = open(&settings).await?;
            let res = grants::grants(&store, &settings, command).await;
            store.close().await;
            return res;
        }
        Command::Keys { command } => return creds::keys(&settings, command).await,
        Command::Relay(args) => return crate::sandbox::relay::run(args).await,
    }
    Ok(ExitCode::SUCCESS)
}

async fn open(settings: &Settings) -> anyhow::Result<Store> {
    crate::startup::prepare_data_dir(&settings.server.data_dir)?;
    let store = Store::connect(&settings.database_url()).await?;
    store.migrate().await?;
    Ok(store)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use clap::Parser;

    use super::Cli;

    #[test]
    fn the_relay_command_line_the_bwrap_driver_builds_parses() {
        let cmd = crate::sandbox::bwrap::sandbox_command(
            Path::new("/usr/lib/chromium/chromium"),
            (1280, 720),
            true,
        );
        let parsed = Cli::try_parse_from(&cmd);
        assert!(parsed.is_ok(), "{parsed:?}");
    }
}
