//! `cordon grants …`: operators decide agents' grant requests from the host.

use std::process::ExitCode;

use super::*;

/// `cordon grants …`, audited as the CLI.
pub(super) async fn grants(
    store: &Store,
    settings: &Settings,
    command: GrantsCommand,
) -> anyhow::Result<ExitCode> {
    use crate::grants::{self, GrantError};
    let outcome = match command {
        GrantsCommand::List { pending } => {
            let which = if pending {
                crate::store::grants::RequestsWhich::Pending
            } else {
                crate::store::grants::RequestsWhich::All
            };
            for r in store.grant_request_list(None, which, 500).await? {
                let token = match r.id.parse::<GrantRequestId>() {
                    Ok(id) => store.grant_token_of_request(&id).await?,
                    Err(_) => None,
                };
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
                let cdp = if r.cdp { "\tcdp" } else { "" };
                let totp = if r.totp { "\ttotp" } else { "" };
                println!(
                    "{}\t{}\t{}\t{}\t{}{cdp}{totp}{tok}",
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
                None => default_expiry(store, settings, &id).await?,
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
    // other: one line on stderr and exit code 2, as docs/cli.md promises.
    match outcome {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(GrantError::Internal(e)) => Err(e),
        Err(e) => Err(e.into()),
    }
}

/// The tenant's `grant_expiry_min`, else the default, for request `id`.
pub(super) async fn default_expiry(
    store: &Store,
    settings: &Settings,
    id: &GrantRequestId,
) -> anyhow::Result<u64> {
    let tenant = store.grant_request_get(id).await?.map(|r| r.tenant_id);
    Ok(tenant
        .and_then(|t| settings.grants.grant_expiry_min.get(&t).copied())
        .unwrap_or(crate::grants::DEFAULT_EXPIRY_MIN))
}
