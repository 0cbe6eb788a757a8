//! The life of a grant request: an agent asks and polls, an operator
//! approves, denies or later revokes. Every step is audited.

use std::collections::BTreeSet;

use anyhow::Context;
use serde_json::json;

use super::{
    GrantError, GrantState, GrantStatus, MAX_EXPIRY_MIN, MAX_REASON, NewGrantRequest, TOKEN_PREFIX,
    audit, domains_of, parse_domains,
};
use crate::audit::{Actor, NewEvent};
use crate::domain::{GrantRequestId, GrantTokenId, TenantId, random_id};
use crate::ids::token_hash;
use crate::store::Store;
use crate::store::api_keys::ApiKeyOwner;
use crate::store::grants::{GrantRequestRow, GrantTokenRow};
use crate::time::now_ms;

/// Requests of one key waiting for an operator at once.
pub const MAX_PENDING_PER_KEY: i64 = 20;
/// Requests of one tenant waiting for an operator at once.
pub const MAX_PENDING_PER_TENANT: i64 = 100;

/// An agent asks for credentials of `domains`.
pub async fn request(
    store: &Store,
    owner: &ApiKeyOwner,
    req: &NewGrantRequest,
) -> Result<GrantStatus, GrantError> {
    let domains = parse_domains(&req.domains)?;
    // The schema's rule (`maxLength`, the `NOT_BLANK` pattern), on the text as sent.
    if !crate::domain::pattern::is_not_blank(&req.reason) || req.reason.chars().count() > MAX_REASON
    {
        return Err(GrantError::Invalid(format!(
            "reason: 1 to {MAX_REASON} characters, not blank"
        )));
    }
    let reason = req.reason.trim();
    // A key (or a tenant) that asks without end does not bury the others'
    // requests under its own, nor grow the audit log with them.
    let (tenant_pending, key_pending) = store
        .grant_requests_pending(owner.tenant.as_str(), &owner.key_id)
        .await?;
    if key_pending >= MAX_PENDING_PER_KEY || tenant_pending >= MAX_PENDING_PER_TENANT {
        return Err(GrantError::TooManyPending);
    }
    let names: Vec<String> = domains.iter().map(|d| d.as_str().to_owned()).collect();
    let row = GrantRequestRow {
        id: random_id(crate::ids::GRANT_REQUEST),
        tenant_id: owner.tenant.to_string(),
        api_key_id: Some(owner.key_id.clone()),
        domains: serde_json::to_string(&names).map_err(anyhow::Error::from)?,
        reason: reason.to_owned(),
        state: GrantState::Pending,
        created_at: now_ms(),
        decided_at: None,
        decided_by: None,
        cdp: req.cdp,
        totp: req.totp,
    };
    audit(
        store,
        NewEvent::new(Actor::Agent(owner.key_id.clone()), "grant.request")
            .tenant(&owner.tenant)
            .params(json!({ "request": row.id, "domains": names, "reason_chars": reason.chars().count(), "cdp": row.cdp, "totp": row.totp }))
            .outcome("requested"),
    )
    .await?;
    // Counted again with the insert: requests racing past the check above
    // cannot pass the caps together. One that loses is refused, and its
    // audited ask is answered.
    if !store
        .grant_request_insert_within(&row, MAX_PENDING_PER_KEY, MAX_PENDING_PER_TENANT)
        .await?
    {
        audit(
            store,
            NewEvent::new(Actor::Agent(owner.key_id.clone()), "grant.request")
                .tenant(&owner.tenant)
                .params(json!({ "request": row.id }))
                .outcome("refused: too_many_requests"),
        )
        .await?;
        return Err(GrantError::TooManyPending);
    }
    Ok(GrantStatus {
        request_id: row.id,
        state: row.state,
        domains: names,
        grant_token: None,
        jti: None,
        expires_at: None,
        single_use: None,
        cdp: row.cdp,
        totp: row.totp,
    })
}

/// The requester polls its request; the first poll after approval carries
/// the token, which is made (and its hash stored) right then.
pub async fn poll(
    store: &Store,
    owner: &ApiKeyOwner,
    id: &GrantRequestId,
) -> Result<GrantStatus, GrantError> {
    let row = store
        .grant_request_get(id)
        .await?
        .filter(|r| r.tenant_id == owner.tenant.as_str())
        .ok_or(GrantError::NotFound)?;
    let mut status = GrantStatus {
        request_id: row.id.clone(),
        state: row.state,
        domains: domains_of(&row.domains),
        grant_token: None,
        jti: None,
        expires_at: None,
        single_use: None,
        cdp: row.cdp,
        totp: row.totp,
    };
    // The token goes to the key that asked for it, not to another key of
    // the tenant that learned the request's id: that key sees the state
    // (the tenant's requests are its to read) and no token.
    let requester = row.api_key_id.as_deref().is_none_or(|k| k == owner.key_id);
    if row.state != GrantState::Approved || !requester {
        return Ok(status);
    }
    let Some(tok) = store.grant_token_of_request(id).await? else {
        return Ok(status);
    };
    status.jti = Some(tok.jti.clone());
    status.expires_at = Some(tok.expires_at);
    status.single_use = Some(tok.single_use);
    let now = now_ms();
    if tok.delivered_at.is_none() && tok.revoked_at.is_none() && tok.expires_at > now {
        let token = crate::ids::secret_token(TOKEN_PREFIX);
        let jti: GrantTokenId = tok.jti.parse().context("malformed grant token row")?;
        if store
            .grant_token_deliver(&jti, &token_hash(&token), now)
            .await?
        {
            audit(
                store,
                NewEvent::new(Actor::Agent(owner.key_id.clone()), "grant.deliver")
                    .tenant(&owner.tenant)
                    .params(json!({ "request": row.id, "jti": tok.jti }))
                    .outcome("ok"),
            )
            .await?;
            status.grant_token = Some(token);
        }
    }
    Ok(status)
}

/// An operator approves a pending request; returns its token's row (the
/// token itself is made when the requester collects it).
pub async fn approve(
    store: &Store,
    actor: &Actor,
    request_id: &GrantRequestId,
    expires_min: u64,
    single_use: bool,
) -> Result<GrantTokenRow, GrantError> {
    if expires_min == 0 || expires_min > MAX_EXPIRY_MIN {
        return Err(GrantError::Invalid(format!(
            "expiry: 1 to {MAX_EXPIRY_MIN} minutes"
        )));
    }
    let req = store
        .grant_request_get(request_id)
        .await?
        .ok_or(GrantError::NotFound)?;
    if req.state != GrantState::Pending {
        return Err(GrantError::NotPending(req.state));
    }
    let now = now_ms();
    let expires_ms = i64::try_from(expires_min).unwrap_or(0) * 60_000;
    let token = GrantTokenRow {
        jti: GrantTokenId::generate().to_string(),
        tenant_id: req.tenant_id.clone(),
        request_id: req.id.clone(),
        allowed_domains: req.domains.clone(),
        issued_at: now,
        expires_at: now + expires_ms,
        single_use,
        delivered_at: None,
        consumed_at: None,
        revoked_at: None,
    };
    let tenant: TenantId = req
        .tenant_id
        .parse()
        .map_err(|e| anyhow::anyhow!("bad tenant id on grant request: {e}"))?;
    audit(
        store,
        NewEvent::new(actor.clone(), "grant.approve")
            .tenant(&tenant)
            .params(json!({
                "request": req.id,
                "jti": token.jti,
                "domains": domains_of(&req.domains),
                "expires_min": expires_min,
                "single_use": single_use,
            }))
            .outcome("requested"),
    )
    .await?;
    if !store
        .grant_approve(request_id, &actor.as_stored(), &token)
        .await?
    {
        // Decided meanwhile by someone else: say how.
        let now = store
            .grant_request_get(request_id)
            .await?
            .map_or(GrantState::Approved, |r| r.state);
        return Err(GrantError::NotPending(now));
    }
    Ok(token)
}

/// The domains of an approved grant for which its tenant has no stored
/// credential: a session opened with the grant gets no cookies for them,
/// which the operator approving it should hear about.
pub async fn domains_without_credentials(
    store: &Store,
    token: &GrantTokenRow,
) -> Result<Vec<String>, GrantError> {
    let tenant: TenantId = token
        .tenant_id
        .parse()
        .map_err(|e| anyhow::anyhow!("bad tenant id on grant token: {e}"))?;
    let stored: BTreeSet<String> = store
        .vault_list(Some(&tenant))
        .await?
        .into_iter()
        .map(|c| c.domain)
        .collect();
    Ok(domains_of(&token.allowed_domains)
        .into_iter()
        .filter(|d| !stored.contains(d))
        .collect())
}

/// An operator denies a pending request.
pub async fn deny(
    store: &Store,
    actor: &Actor,
    request_id: &GrantRequestId,
) -> Result<(), GrantError> {
    let req = store
        .grant_request_get(request_id)
        .await?
        .ok_or(GrantError::NotFound)?;
    let tenant: TenantId = req
        .tenant_id
        .parse()
        .map_err(|e| anyhow::anyhow!("bad tenant id on grant request: {e}"))?;
    if req.state != GrantState::Pending {
        return Err(GrantError::NotPending(req.state));
    }
    audit(
        store,
        NewEvent::new(actor.clone(), "grant.deny")
            .tenant(&tenant)
            .params(json!({ "request": req.id }))
            .outcome("requested"),
    )
    .await?;
    if !store
        .grant_deny(request_id, &actor.as_stored(), now_ms())
        .await?
    {
        let now = store
            .grant_request_get(request_id)
            .await?
            .map_or(GrantState::Denied, |r| r.state);
        return Err(GrantError::NotPending(now));
    }
    Ok(())
}

/// An operator revokes a token by its id.
pub async fn revoke(store: &Store, actor: &Actor, jti: &GrantTokenId) -> Result<(), GrantError> {
    audit(
        store,
        NewEvent::new(actor.clone(), "grant.revoke")
            .params(json!({ "jti": jti.as_str() }))
            .outcome("requested"),
    )
    .await?;
    if !store.grant_token_revoke(jti, now_ms()).await? {
        audit(
            store,
            NewEvent::new(actor.clone(), "grant.revoke")
                .params(json!({ "jti": jti.as_str() }))
                .outcome("refused: no active token"),
        )
        .await?;
        return Err(GrantError::TokenNotFound);
    }
    Ok(())
}
