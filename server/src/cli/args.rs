//! The command line's shape: [`Cli`] and one clap enum per subcommand
//! group, each variant's doc its `--help` text.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::domain::{ApiKeyId, GrantRequestId, GrantTokenId};

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
    /// Manage dashboard operators (passkey login; no passwords).
    Operator {
        #[command(subcommand)]
        command: OperatorCommand,
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
        id: ApiKeyId,
    },
}

/// `cordon operator …`
#[derive(Debug, Subcommand)]
pub enum OperatorCommand {
    /// Create an operator and print a one-time enrollment link (valid one
    /// hour) where they register a passkey.
    Invite {
        /// Login name (letters, digits, `.`, `_`, `-`, `@`).
        name: String,
        /// `admin`, `operator` or `viewer`.
        #[arg(long, default_value = "operator")]
        role: app::api::auth::Role,
    },
    /// Print a fresh one-time enrollment link (valid one hour) for the
    /// first admin (the one `serve` prints a link for while no admin can
    /// log in), or for operator NAME; their links not yet used stop
    /// working.
    EnrollLink {
        /// Login name (default: the first admin, created if none exists).
        name: Option<String>,
    },
    /// List operators, their roles, whether they are enrolled, and their
    /// tenants.
    List,
    /// Disable an operator: they cannot log in, and their dashboard
    /// sessions end at once.
    Disable {
        /// Login name.
        name: String,
    },
    /// Enable a disabled operator again.
    Enable {
        /// Login name.
        name: String,
    },
    /// Limit an operator or viewer to some tenants (admins see every tenant).
    ///
    /// Every page, list, action, stream and audit query of theirs then
    /// covers only those tenants; other tenants' objects answer "not found"
    /// and the attempt is audited. Applies to their next request (no new
    /// login); `--all` lifts the limit.
    #[command(group(clap::ArgGroup::new("scope").required(true).args(["tenants", "all"])))]
    Scope {
        /// Login name.
        name: String,
        /// Comma-separated tenant ids (each must exist).
        #[arg(long, value_delimiter = ',')]
        tenants: Vec<crate::domain::TenantId>,
        /// Every tenant (removes the scope).
        #[arg(long)]
        all: bool,
    },
}

/// `cordon audit …`
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Recompute the hash chain; exit 1 and name the first broken seq if it fails.
    Verify {
        /// Check an exported file (`cordon audit export`; `-` for standard
        /// input) instead of the database: every event's hash, and the
        /// link between consecutive seqs (a filtered export has gaps).
        #[arg(long, value_name = "FILE")]
        file: Option<std::path::PathBuf>,
    },
    /// Write the log as JSON Lines (one event per line, with its chain
    /// hashes and an RFC 3339 `time`), oldest first, for a SIEM or `jq`;
    /// `cordon audit verify --file` checks the result offline. Audited.
    Export {
        /// From this seq or RFC 3339 time on (inclusive).
        #[arg(long)]
        since: Option<String>,
        /// Up to this seq or RFC 3339 time (inclusive).
        #[arg(long)]
        until: Option<String>,
        /// Only this tenant's events.
        #[arg(long)]
        tenant: Option<crate::domain::TenantId>,
        /// Write to this new file (created 0600, never overwritten)
        /// instead of standard output.
        #[arg(long, value_name = "FILE")]
        output: Option<std::path::PathBuf>,
    },
}

/// `cordon config …`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Print the settings in force as TOML (secrets shown as ***), after
    /// checking them as `serve` would (with the `kube` driver, its pod template too).
    Show,
    /// Print the reference table of every setting (key, environment
    /// variable, default, what it does) as Markdown, from the settings'
    /// own doc comments: docs/configuration.md holds it.
    Docs,
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
    /// Second-factor (TOTP) seeds: typed as codes into the site's pages,
    /// never shown.
    Totp {
        /// What to do.
        #[command(subcommand)]
        command: TotpCommand,
    },
}

/// `cordon creds totp …`
#[derive(Debug, Subcommand)]
pub enum TotpCommand {
    /// Store a seed, read from stdin: an otpauth://totp/… URI, or a base32
    /// secret with --algorithm/--digits/--period. Nothing is echoed.
    Add {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// The site whose pages (and subdomains) may receive its codes.
        #[arg(long)]
        domain: String,
        /// Which account it is ("admin account"): unique per domain.
        #[arg(long)]
        label: String,
        /// For a base32 secret: SHA1, SHA256 or SHA512.
        #[arg(long, default_value = "SHA1")]
        algorithm: String,
        /// For a base32 secret: 6, 7 or 8.
        #[arg(long, default_value_t = 6)]
        digits: u8,
        /// For a base32 secret: seconds a code lasts (10–300).
        #[arg(long, default_value_t = 30)]
        period: u32,
    },
    /// List seeds: label, parameters, when made and last used; never a secret.
    List {
        /// Only this tenant's.
        #[arg(long)]
        tenant: Option<String>,
    },
    /// Delete a seed.
    Delete {
        /// The tenant.
        #[arg(long)]
        tenant: String,
        /// The seed's id (`tp_…`, from `list`).
        id: String,
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
    /// `master.key.<old key id>`. Stop the server (every replica) first: it
    /// is refused while any replica has beaten within the last minute.
    Rotate {
        /// Take the new key from this file (mode 0600, 64 hex digits or
        /// base64) instead of generating one; required when the key comes
        /// from CORDON_MASTER_KEY.
        #[arg(long, value_name = "FILE")]
        new_key_file: Option<PathBuf>,
    },
}
