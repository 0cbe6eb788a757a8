//! The `cordon` command line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::audit::{self, Actor, NewEvent, Verification};
use crate::config::Settings;
use crate::crypto::{KeySource, Keyring, MasterKey, read_key_file};
use crate::domain::{GrantRequestId, GrantTokenId, TenantId};
use crate::startup::{Application, shutdown_signal};
use crate::store::Store;
use crate::telemetry;
use crate::vault::{self, Domain, ImportOptions, Vault, VaultError};

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
    /// Manage stored site credentials (cookies, encrypted at rest).
    Creds {
        #[command(subcommand)]
        command: CredsCommand,
    },
    /// Decide agents' requests for operator grants; revoke grant tokens.
    Grants {
        #[command(subcommand)]
        command: GrantsCommand,
    },
    /// Manage the master key that encrypts stored credentials.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
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
    List {
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
    },
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

/// `cordon creds …`
#[derive(Debug, Subcommand)]
pub enum CredsCommand {
    /// Store a site's cookies from a Playwright storageState JSON, a CDP
    /// cookie array or a Netscape cookies.txt (at most 5 MiB), replacing
    /// what the tenant had for that domain.
    Import {
        /// The tenant the credential belongs to.
        #[arg(long)]
        tenant: String,
        /// The site (`example.com`); cookies of its subdomains are included.
        #[arg(long)]
        domain: String,
        /// Skip cookies of other sites (they are listed) instead of refusing the file.
        #[arg(long)]
        drop_foreign: bool,
        /// The cookie file.
        file: PathBuf,
    },
    /// List stored credentials: metadata only, never cookie values.
    List {
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Write a credential's cookies to a new storageState file (mode 0600).
    /// Audited; the file holds live credentials.
    Export {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// The site.
        #[arg(long)]
        domain: String,
        /// The file to create (it must not exist).
        #[arg(long)]
        out: PathBuf,
    },
    /// Delete a stored credential.
    Delete {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// The site.
        #[arg(long)]
        domain: String,
    },
}

/// `cordon grants …`
#[derive(Debug, Subcommand)]
pub enum GrantsCommand {
    /// List grant requests, newest first (never a token).
    List {
        /// Only those still pending.
        #[arg(long)]
        pending: bool,
    },
    /// Approve a pending request; the agent collects the token once.
    Approve {
        /// The request's id (`gr_…`).
        id: GrantRequestId,
        /// Minutes until the token expires (default: the tenant's
        /// `grant_expiry_min` setting, else 15).
        #[arg(long)]
        expires_min: Option<u64>,
        /// Let the token open any number of sessions until it expires
        /// (default: one session).
        #[arg(long)]
        multi_use: bool,
    },
    /// Deny a pending request.
    Deny {
        /// The request's id (`gr_…`).
        id: GrantRequestId,
    },
    /// Revoke a token by its id (`gt_…`).
    Revoke {
        /// The token's id.
        jti: GrantTokenId,
    },
}

/// `cordon keys …`
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Re-encrypt every stored credential under a new master key, in one
    /// transaction. With a key file, the old one is kept as
    /// `master.key.<old key id>`. Stop the server first.
    Rotate {
        /// Take the new key from this file (mode 0600, 64 hex digits or
        /// base64) instead of generating one; required when the key comes
        /// from CORDON_MASTER_KEY.
        #[arg(long, value_name = "FILE")]
        new_key_file: Option<PathBuf>,
    },
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
        Command::Creds { command } => return creds(&settings, command).await,
        Command::Grants { command } => {
            let store = open(&settings).await?;
            let res = grants(&store, &settings, command).await;
            store.close().await;
            return res;
        }
        Command::Keys { command } => return keys(&settings, command).await,
        Command::Relay(args) => return crate::sandbox::relay::run(args).await,
    }
    Ok(ExitCode::SUCCESS)
}

async fn open(settings: &Settings) -> anyhow::Result<Store> {
    crate::startup::prepare_data_dir(&settings.data_dir)?;
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
        ApikeyCommand::List { tenant } => {
            let tenant: Option<TenantId> = tenant
                .map(|t| t.parse())
                .transpose()
                .map_err(|e| anyhow::anyhow!("tenant id: {e}"))?;
            for k in store.api_key_list(tenant.as_ref()).await? {
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

/// `cordon grants …`, audited as the CLI.
async fn grants(
    store: &Store,
    settings: &Settings,
    command: GrantsCommand,
) -> anyhow::Result<ExitCode> {
    use crate::grants::{self, GrantError};
    let outcome = match command {
        GrantsCommand::List { pending } => {
            for r in store.grant_request_list(pending).await? {
                let token = store.grant_token_of_request(&r.id).await?;
                let tok = token.map_or_else(String::new, |t| {
                    let state = if t.revoked_at.is_some() {
                        "revoked"
                    } else if t.consumed_at.is_some() {
                        "consumed"
                    } else if t.expires_at <= crate::time::now_ms() {
                        "expired"
                    } else if t.delivered_at.is_some() {
                        "delivered"
                    } else {
                        "awaiting pickup"
                    };
                    format!("\t{}\t{state}", t.jti)
                });
                println!(
                    "{}\t{}\t{}\t{}\t{}{tok}",
                    r.id, r.tenant_id, r.state, r.domains, r.reason
                );
            }
            Ok(())
        }
        GrantsCommand::Approve {
            id,
            expires_min,
            multi_use,
        } => {
            let expires_min = match expires_min {
                Some(m) => m,
                None => default_expiry(store, settings, id.as_str()).await?,
            };
            match grants::approve(store, &Actor::Cli, &id, expires_min, !multi_use).await {
                Ok(t) => {
                    println!(
                        "grant request {id} approved: token {} expires in {expires_min} min ({})",
                        t.jti,
                        if multi_use { "multi-use" } else { "single use" }
                    );
                    // The approval stands (the credential may be imported
                    // before the session opens), but the operator should know
                    // that, as of now, it lets nothing in for these.
                    let missing = grants::domains_without_credentials(store, &t).await?;
                    if !missing.is_empty() {
                        eprintln!(
                            "warning: tenant {} has no stored credential for {}: a session opened \
                             with this grant gets no cookies for them (store them with `cordon creds import`)",
                            t.tenant_id,
                            missing.join(", ")
                        );
                    }
                    Ok(())
                }
                Err(e) => Err(e),
            }
        }
        GrantsCommand::Deny { id } => grants::deny(store, &Actor::Cli, &id)
            .await
            .map(|()| println!("grant request {id} denied")),
        GrantsCommand::Revoke { jti } => grants::revoke(store, &Actor::Cli, &jti)
            .await
            .map(|()| println!("grant token {jti} revoked")),
    };
    // A refused step (not found, already decided) is an error like any
    // other: one line on stderr and exit code 2, as the README promises.
    match outcome {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(GrantError::Internal(e)) => Err(e),
        Err(e) => Err(e.into()),
    }
}

/// `cordon creds …`: the vault from the host, audited as the CLI.
async fn creds(settings: &Settings, command: CredsCommand) -> anyhow::Result<ExitCode> {
    let store = open(settings).await?;
    let res = match Keyring::load(settings) {
        Ok(keys) => creds_with(&Vault::new(store.clone(), keys.key().clone()), command).await,
        Err(e) => Err(e.into()),
    };
    store.close().await;
    res
}

async fn creds_with(vault: &Vault, command: CredsCommand) -> anyhow::Result<ExitCode> {
    let tenant_arg = |t: &str| -> anyhow::Result<TenantId> {
        t.parse().map_err(|e| anyhow::anyhow!("tenant id: {e}"))
    };
    let domain_arg = |d: &str| -> anyhow::Result<Domain> {
        d.parse().map_err(|e| anyhow::anyhow!("domain: {e}"))
    };
    match command {
        CredsCommand::Import {
            tenant,
            domain,
            drop_foreign,
            file,
        } => {
            let (tenant, domain) = (tenant_arg(&tenant)?, domain_arg(&domain)?);
            vault.check_keys().await?;
            let bytes = crate::vault::import::read_file(&file)?;
            let opts = ImportOptions { drop_foreign };
            let report = vault
                .import(&Actor::Cli, &tenant, &domain, &bytes, opts)
                .await?;
            if !report.rejected.is_empty() {
                let names: Vec<String> = report.rejected.iter().map(ToString::to_string).collect();
                eprintln!(
                    "skipped {} cookie(s) of other sites: {}",
                    names.len(),
                    names.join(", ")
                );
            }
            if report.ignored_origins > 0 {
                eprintln!(
                    "localStorage of {} origin(s) was not imported (the vault holds cookies only)",
                    report.ignored_origins
                );
            }
            let c = &report.credential;
            println!(
                "imported {} cookie(s) for {domain} (tenant {tenant}) as credential {}",
                c.cookie_count, c.id
            );
        }
        CredsCommand::List { tenant } => {
            let tenant = tenant.as_deref().map(tenant_arg).transpose()?;
            let when = |ms: Option<i64>, none: &str| {
                ms.map_or_else(|| none.to_owned(), crate::time::rfc3339_ms)
            };
            for c in vault.list(tenant.as_ref()).await? {
                println!(
                    "{}\t{}\t{}\t{} cookies\t{}\tkey {}\texpires {}\trefreshed {}\tinjected {}",
                    c.id,
                    c.tenant_id,
                    c.domain,
                    c.cookie_count,
                    c.source,
                    c.key_id,
                    when(c.earliest_expiry, "session"),
                    when(Some(c.last_refreshed_at), "?"),
                    when(c.last_injected_at, "never"),
                );
            }
        }
        CredsCommand::Export {
            tenant,
            domain,
            out,
        } => {
            let (tenant, domain) = (tenant_arg(&tenant)?, domain_arg(&domain)?);
            vault.check_keys().await?;
            let n =
                crate::vault::export::export_to_file(vault, &Actor::Cli, &tenant, &domain, &out)
                    .await?;
            println!(
                "exported {n} cookie(s) for {domain} (tenant {tenant}) to {}",
                out.display()
            );
        }
        CredsCommand::Delete { tenant, domain } => {
            let (tenant, domain) = (tenant_arg(&tenant)?, domain_arg(&domain)?);
            match vault.delete(&Actor::Cli, &tenant, &domain).await {
                Ok(id) => println!("credential {id} for {domain} (tenant {tenant}) deleted"),
                Err(e @ VaultError::NotFound { .. }) => {
                    eprintln!("{e}");
                    return Ok(ExitCode::from(1));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `cordon keys …`
async fn keys(settings: &Settings, command: KeysCommand) -> anyhow::Result<ExitCode> {
    let KeysCommand::Rotate { new_key_file } = command;
    let keyring = Keyring::load(settings)?;
    let new = match &new_key_file {
        Some(path) => read_key_file(path)?,
        None if *keyring.source() == KeySource::Setting => anyhow::bail!(
            "the master key comes from CORDON_MASTER_KEY: write the new key to a file with mode 0600 \
             and pass it with --new-key-file, then set CORDON_MASTER_KEY to it"
        ),
        None => MasterKey::generate(),
    };
    let store = open(settings).await?;
    let res = vault::rotate(&store, &keyring, new, &Actor::Cli).await;
    store.close().await;
    let done = res?;
    println!(
        "re-encrypted {} credential(s) from key id {} to key id {}",
        done.credentials, done.from, done.to
    );
    match done.old_key_kept_at {
        Some(path) => println!(
            "the old key is kept in {}; remove it once no backup needs it",
            path.display()
        ),
        None => println!(
            "now set CORDON_MASTER_KEY to the new key (key id {})",
            done.to
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// The tenant's `grant_expiry_min`, else the default, for request `id`.
async fn default_expiry(store: &Store, settings: &Settings, id: &str) -> anyhow::Result<u64> {
    let tenant = store.grant_request_get(id).await?.map(|r| r.tenant_id);
    Ok(tenant
        .and_then(|t| settings.grant_expiry_min.get(&t).copied())
        .unwrap_or(crate::grants::DEFAULT_EXPIRY_MIN))
}
