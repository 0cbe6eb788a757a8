//! `cordon creds …` and `cordon keys …`: the vault from the host.

use std::process::ExitCode;

use super::*;

/// `cordon creds …`: the vault from the host, audited as the CLI.
pub(super) async fn creds(settings: &Settings, command: CredsCommand) -> anyhow::Result<ExitCode> {
    let store = open(settings).await?;
    let res = match Keyring::load(&settings.key_settings()) {
        Ok(keys) => creds_with(&Vault::new(store.clone(), keys.key().clone()), command).await,
        Err(e) => Err(e.into()),
    };
    store.close().await;
    res
}

pub(super) async fn creds_with(vault: &Vault, command: CredsCommand) -> anyhow::Result<ExitCode> {
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
                    "localStorage of {} origin(s) of other sites was not imported",
                    report.ignored_origins
                );
            }
            let c = &report.credential;
            println!(
                "imported {} cookie(s) for {domain} (tenant {tenant}) as credential {}",
                c.cookie_count, c.id
            );
            if c.storage_count > 0 {
                println!(
                    "imported {} localStorage item(s) of {domain}'s origins",
                    c.storage_count
                );
            }
        }
        CredsCommand::List { tenant } => {
            let tenant = tenant.as_deref().map(tenant_arg).transpose()?;
            let when = |ms: Option<i64>, none: &str| {
                ms.map_or_else(|| none.to_owned(), crate::time::rfc3339_ms)
            };
            for c in vault.list(tenant.as_ref()).await? {
                println!(
                    "{}\t{}\t{}\t{} cookies\t{} storage items\t{}\tkey {}\texpires {}\trefreshed {}\tinjected {}",
                    c.id,
                    c.tenant_id,
                    c.domain,
                    c.cookie_count,
                    c.storage_count,
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
        CredsCommand::Totp { command } => return totp(vault, command).await,
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

/// `cordon creds totp …`
async fn totp(vault: &Vault, command: TotpCommand) -> anyhow::Result<ExitCode> {
    use crate::vault::totp::{Params, SeedSource};
    use std::io::Read;
    let tenant_arg = |t: &str| -> anyhow::Result<TenantId> {
        t.parse().map_err(|e| anyhow::anyhow!("tenant id: {e}"))
    };
    match command {
        TotpCommand::Add {
            tenant,
            domain,
            label,
            algorithm,
            digits,
            period,
        } => {
            let tenant = tenant_arg(&tenant)?;
            let domain: Domain = domain.parse().map_err(|e| anyhow::anyhow!("domain: {e}"))?;
            vault.check_keys().await?;
            // Bounded: a URI is at most 4 KiB.
            let mut input = zeroize::Zeroizing::new(String::new());
            std::io::stdin()
                .take(64 * 1024)
                .read_to_string(&mut input)
                .map_err(|_| {
                    anyhow::anyhow!("stdin: expected an otpauth:// URI or a base32 secret as text")
                })?;
            let text = input.trim();
            let source = if text.to_ascii_lowercase().starts_with("otpauth:") {
                SeedSource::Uri(text)
            } else {
                let params = Params {
                    algorithm: algorithm.parse()?,
                    digits,
                    period,
                };
                SeedSource::Base32(text, params)
            };
            let info = vault
                .totp_add(&Actor::Cli, &tenant, &domain, &label, source)
                .await?;
            println!(
                "stored TOTP seed {} for {domain} (tenant {tenant}) labelled {:?}: {}, {} digits, {} s",
                info.id, info.label, info.algorithm, info.digits, info.period
            );
        }
        TotpCommand::List { tenant } => {
            let tenant = tenant.as_deref().map(tenant_arg).transpose()?;
            let rows = match &tenant {
                Some(t) => vault.totp_list(t).await?,
                None => vault.totp_list_all().await?,
            };
            for t in rows {
                println!(
                    "{}\t{}\t{}\t{}\t{}\t{} digits\t{} s\tcreated {}\tused {}",
                    t.id,
                    t.tenant_id,
                    t.domain,
                    t.label,
                    t.algorithm,
                    t.digits,
                    t.period,
                    crate::time::rfc3339_ms(t.created_at),
                    t.last_used_at
                        .map_or_else(|| "never".to_owned(), crate::time::rfc3339_ms),
                );
            }
        }
        TotpCommand::Delete { tenant, id } => {
            let tenant = tenant_arg(&tenant)?;
            let deleted = match vault.totp_id(&tenant, &id).await {
                Ok(id) => vault.totp_delete(&Actor::Cli, &tenant, &id).await,
                Err(e) => Err(e),
            };
            match deleted {
                Ok(t) => println!(
                    "TOTP seed {} ({:?} for {}, tenant {tenant}) deleted",
                    t.id, t.label, t.domain
                ),
                Err(e @ VaultError::TotpNotFound(_)) => {
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
pub(super) async fn keys(settings: &Settings, command: KeysCommand) -> anyhow::Result<ExitCode> {
    let KeysCommand::Rotate { new_key_file } = command;
    let keyring = Keyring::load(&settings.key_settings())?;
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
