//! The `cordon` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::audit::{self, Actor, NewEvent, Verification};
use crate::config::Settings;
use crate::domain::TenantId;
use crate::startup::{Application, shutdown_signal};
use crate::store::Store;
use crate::telemetry;

/// Cordon: a control plane for sandboxed browsers that AI agents drive and
/// operators oversee.
///
/// Settings come from defaults, then `cordon.toml` in the working directory
/// (or --config FILE), then CORDON_* environment variables. Run
/// `cordon config show` to see what is in force.
#[derive(Debug, Parser)]
#[command(name = "cordon", version, about, long_about)]
pub struct Cli {
    /// Read settings from this TOML file instead of ./cordon.toml.
    #[arg(long, short, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What to do (default: `serve`).
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the control plane and dashboard (the default).
    Serve,
    /// Apply pending database migrations and exit.
    Migrate,
    /// Inspect the audit log.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// Show settings.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Manage tenants.
    Tenant {
        #[command(subcommand)]
        command: TenantCommand,
    },
    /// Manage agent API keys.
    Apikey {
        #[command(subcommand)]
        command: ApikeyCommand,
    },
    /// Internal: the relay the bwrap driver runs inside each sandbox.
    #[command(hide = true)]
    Relay(crate::sandbox::relay::RelayArgs),
}

/// `cordon apikey …`
#[derive(Debug, Subcommand)]
pub enum ApikeyCommand {
    /// Create a key for a tenant and print it once (only its hash is stored).
    Create {
        /// The tenant the key acts for.
        #[arg(long)]
        tenant: String,
        /// A note saying who uses it.
        #[arg(long, default_value = "")]
        label: String,
    },
    /// List keys (ids and labels, never the keys).
    List,
    /// Revoke a key by id.
    Revoke {
        /// The key's id (`k_…`).
        id: String,
    },
}

/// `cordon audit …`
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Recompute the hash chain; exit 1 and name the first broken seq if it fails.
    Verify,
}

/// `cordon config …`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the settings in force as TOML (secrets shown as ***).
    Show,
}

/// `cordon tenant …`
#[derive(Debug, Subcommand)]
pub enum TenantCommand {
    /// Create a tenant.
    Create {
        /// Id: a-z, 0-9 and '-', 1 to 63 characters.
        id: String,
        /// Display name (defaults to the id).
        #[arg(long)]
        name: Option<String>,
    },
    /// List tenants.
    List,
}

/// Runs the parsed command.
pub async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    // The relay runs inside a sandbox with an empty environment and no
    // config: it reads no settings and starts no logging.
    if let Some(Command::Relay(args)) = cli.command {
        return crate::sandbox::relay::run(args).await;
    }
    let settings = Settings::load(cli.config.as_deref())?;
    telemetry::init_tracing(settings.log_format, &settings.log_level);
    match cli.command.unwrap_or(Command::Serve) {
        Command::Serve => {
            let shutdown = shutdown_signal()?;
            let app = Application::build(settings).await?;
            app.run_until(shutdown).await?;
        }
        Command::Migrate => {
            let store = open(&settings).await?;
            println!("migrations applied to {}", settings.database_url_display());
            store.close().await;
        }
        Command::Audit {
            command: AuditCommand::Verify,
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
            command: ConfigCommand::Show,
        } => print!("{}", settings.show()),
        Command::Tenant { command } => {
            let store = open(&settings).await?;
            tenant(&store, command).await?;
            store.close().await;
        }
        Command::Apikey { command } => {
            let store = open(&settings).await?;
            let res = apikey(&store, command).await;
            store.close().await;
            return res;
        }
        Command::Relay(args) => return crate::sandbox::relay::run(args).await,
    }
    Ok(ExitCode::SUCCESS)
}

async fn open(settings: &Settings) -> anyhow::Result<Store> {
    std::fs::create_dir_all(&settings.data_dir).map_err(|e| {
        anyhow::anyhow!(
            "data_dir: cannot create {}: {e}",
            settings.data_dir.display()
        )
    })?;
    let store = Store::connect(&settings.database_url()).await?;
    store.migrate().await?;
    Ok(store)
}

async fn tenant(store: &Store, command: TenantCommand) -> anyhow::Result<()> {
    match command {
        TenantCommand::Create { id, name } => {
            let id: TenantId = id.parse().map_err(|e| anyhow::anyhow!("tenant id: {e}"))?;
            let name = name.unwrap_or_else(|| id.to_string());
            store
                .audit_append(
                    NewEvent::new(Actor::Cli, "tenant.create")
                        .tenant(&id)
                        .params(serde_json::json!({ "name": name }))
                        .outcome("requested"),
                )
                .await?;
            store.tenant_create(&id, &name).await?;
            println!("tenant {id} created");
        }
        TenantCommand::List => {
            for t in store.tenant_list().await? {
                println!("{}\t{}", t.id, t.name);
            }
        }
    }
    Ok(())
}

async fn apikey(store: &Store, command: ApikeyCommand) -> anyhow::Result<ExitCode> {
    match command {
        ApikeyCommand::Create { tenant, label } => {
            let tenant: TenantId = tenant
                .parse()
                .map_err(|e| anyhow::anyhow!("tenant id: {e}"))?;
            if !store.tenant_list().await?.iter().any(|t| t.id == tenant) {
                anyhow::bail!(
                    "tenant {tenant} does not exist (create it with `cordon tenant create {tenant}`)"
                );
            }
            store
                .audit_append(
                    NewEvent::new(Actor::Cli, "apikey.create")
                        .tenant(&tenant)
                        .params(serde_json::json!({ "label": label }))
                        .outcome("requested"),
                )
                .await?;
            let (id, key) = store.api_key_create(&tenant, &label).await?;
            eprintln!("API key {id} created for tenant {tenant}. It is shown once; store it now:");
            println!("{key}");
        }
        ApikeyCommand::List => {
            for k in store.api_key_list().await? {
                let state = if k.revoked_at.is_some() {
                    "revoked"
                } else {
                    "active"
                };
                println!("{}\t{}\t{}\t{}", k.id, k.tenant, state, k.label);
            }
        }
        ApikeyCommand::Revoke { id } => {
            store
                .audit_append(
                    NewEvent::new(Actor::Cli, "apikey.revoke")
                        .params(serde_json::json!({ "id": id }))
                        .outcome("requested"),
                )
                .await?;
            if !store.api_key_revoke(&id).await? {
                eprintln!("no active key {id}");
                return Ok(ExitCode::from(1));
            }
            println!("API key {id} revoked");
        }
    }
    Ok(ExitCode::SUCCESS)
}
