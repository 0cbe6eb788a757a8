//! Redeeming a grant token at an operator-mode open, and collecting
//! expired grants.

use std::collections::BTreeSet;

use serde_json::json;

use super::{GrantError, KEEP_EXPIRED_MS, PENDING_FOR_MS, audit, domains_of};
use crate::audit::{Actor, NewEvent};
use crate::ids::token_hash;
use crate::store::Store;
use crate::store::api_keys::ApiKeyOwner;
use crate::store::grants::GrantTokenRow;
use crate::time::now_ms;
use crate::vault::Domain;

/// Checks a presented token for an operator session of `owner` on
/// `domains` and, if single-use, consumes it (one caller wins, atomically).
/// Every refusal is audited with its reason, never the token.
pub async fn redeem(
    store: &Store,
    owner: &ApiKeyOwner,
    session_id: &str,
    token: &str,
    domains: &[Domain],
) -> Result<GrantTokenRow, GrantError> {
    let hash = token_hash(token);
    let checked = check(store, owner, &hash, domains).await;
    let event = NewEvent::new(Actor::Agent(owner.key_id.clone()), "grant.redeem")
        .tenant(&owner.tenant)
        .session(session_id);
    match checked {
        Ok(tok) => {
            audit(
                store,
                event
                    .params(json!({
                        "jti": tok.jti,
                        "request": tok.request_id,
                        "domains": domains.len(),
                        "single_use": tok.single_use,
                    }))
                    .outcome(if tok.single_use { "consumed" } else { "ok" }),
            )
            .await?;
            Ok(tok)
        }
        Err(e) => {
            if !matches!(e, GrantError::Internal(_)) {
                audit(
                    store,
                    event
                        .params(json!({ "domains": domains.len() }))
                        .outcome(format!("denied: {}", e.code())),
                )
                .await?;
            }
            Err(e)
        }
    }
}

fn classify(tok: &GrantTokenRow, owner: &ApiKeyOwner, now: i64) -> Option<GrantError> {
    if tok.tenant_id != owner.tenant.as_str() {
        Some(GrantError::WrongTenant)
    } else if tok.revoked_at.is_some() {
        Some(GrantError::Revoked)
    } else if tok.consumed_at.is_some() {
        Some(GrantError::Consumed)
    } else if tok.expires_at <= now {
        Some(GrantError::Expired)
    } else {
        None
    }
}

async fn check(
    store: &Store,
    owner: &ApiKeyOwner,
    hash: &str,
    domains: &[Domain],
) -> Result<GrantTokenRow, GrantError> {
    let tok = store
        .grant_token_by_hash(hash)
        .await?
        .ok_or(GrantError::Unknown)?;
    let now = now_ms();
    if let Some(e) = classify(&tok, owner, now) {
        return Err(e);
    }
    let allowed: BTreeSet<String> = domains_of(&tok.allowed_domains).into_iter().collect();
    if domains.is_empty() || !domains.iter().all(|d| allowed.contains(d.as_str())) {
        return Err(GrantError::TooNarrow);
    }
    if tok.single_use && !store.grant_token_consume(hash, now).await? {
        // Someone else won, or it changed under us: say what it is now.
        let now = now_ms();
        let again = store
            .grant_token_by_hash(hash)
            .await?
            .ok_or(GrantError::Unknown)?;
        return Err(classify(&again, owner, now).unwrap_or(GrantError::Consumed));
    }
    Ok(tok)
}

/// Deletes long-expired tokens and expires undecided requests.
pub async fn gc(store: &Store) -> anyhow::Result<(u64, u64)> {
    let now = now_ms();
    store
        .grant_gc(now - KEEP_EXPIRED_MS, now - PENDING_FOR_MS)
        .await
}
