//! Operator grants: an agent asks for the credentials of some domains, an
//! operator approves (or denies), and the agent collects an opaque token
//! once. An operator-mode session presents the token; [`redeem`] checks it
//! and, for a single-use token, consumes it atomically in SQL.
//!
//! Tokens are `cgt_` + 256 random bits (base64url); only their SHA-256 is
//! stored, written when the requester collects the token: before that the
//! token does not exist, after it only the requester holds it. Every step
//! is audited with ids and counts, never a token.

use std::collections::BTreeSet;

use base64::Engine;
use serde_json::json;

use crate::audit::{Actor, NewEvent};
use crate::domain::{TenantId, random_id};
use crate::store::Store;
use crate::store::api_keys::{ApiKeyOwner, hash_key};
use crate::store::grants::{GrantRequestRow, GrantTokenRow};
use crate::time::now_ms;
use crate::vault::Domain;

/// The prefix of every grant token, so a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = "cgt_";
/// Default lifetime of an approved grant.
pub const DEFAULT_EXPIRY_MIN: u64 = 15;
/// Longest lifetime an operator may give.
pub const MAX_EXPIRY_MIN: u64 = 24 * 60;
/// Most domains one request may name.
pub const MAX_DOMAINS: usize = 32;
/// Longest reason.
pub const MAX_REASON: usize = 500;
/// Expired tokens are kept this long (so a late use is told `grant_expired`),
/// then deleted.
const KEEP_EXPIRED_MS: i64 = 3600 * 1000;
/// Requests nobody decided expire after this long.
const PENDING_FOR_MS: i64 = 24 * 3600 * 1000;

/// Why a grant token is refused, or a grant step fails.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// No token with this value.
    #[error("unknown grant token")]
    Unknown,
    /// Past its expiry.
    #[error("the grant token has expired")]
    Expired,
    /// Revoked by an operator.
    #[error("the grant token was revoked")]
    Revoked,
    /// Single-use and already used.
    #[error("the grant token was already used")]
    Consumed,
    /// Issued to another tenant.
    #[error("the grant token belongs to another tenant")]
    WrongTenant,
    /// Does not cover every requested domain.
    #[error("the grant token does not cover every requested domain")]
    TooNarrow,
    /// Malformed input.
    #[error("{0}")]
    Invalid(String),
    /// No such grant request (for this tenant).
    #[error("grant request not found")]
    NotFound,
    /// The request is not pending.
    #[error("grant request is {0}, not pending")]
    NotPending(String),
    /// Anything else.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl GrantError {
    /// The machine-readable code of a refused token.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Unknown => "grant_unknown",
            Self::Expired => "grant_expired",
            Self::Revoked => "grant_revoked",
            Self::Consumed => "grant_consumed",
            Self::WrongTenant => "grant_wrong_tenant",
            Self::TooNarrow => "grant_too_narrow",
            Self::Invalid(_) => "bad_request",
            Self::NotFound => "not_found",
            Self::NotPending(_) => "conflict",
            Self::Internal(_) => "internal",
        }
    }
}

/// A request as its requester sees it.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct GrantStatus {
    /// `gr_…`.
    pub request_id: String,
    /// `pending`, `approved`, `denied`, `expired`.
    pub state: String,
    /// The domains asked for.
    pub domains: Vec<String>,
    /// The token, on the first poll after approval only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant_token: Option<String>,
    /// The token's id (`gt_…`), once approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    /// Unix ms, once approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    /// Whether one session use consumes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub single_use: Option<bool>,
}

/// The body of `POST /api/grants/requests`.
#[derive(Debug, Clone, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NewGrantRequest {
    /// Exact hosts whose credentials are wanted.
    pub domains: Vec<String>,
    /// Why, for the operator.
    pub reason: String,
}

/// Parses a list of exact hosts: 1 to [`MAX_DOMAINS`], each a [`Domain`].
pub fn parse_domains(domains: &[String]) -> Result<Vec<Domain>, GrantError> {
    if domains.is_empty() || domains.len() > MAX_DOMAINS {
        return Err(GrantError::Invalid(format!(
            "domains: 1 to {MAX_DOMAINS} host names"
        )));
    }
    let mut out: Vec<Domain> = domains
        .iter()
        .map(|d| {
            d.parse::<Domain>()
                .map_err(|e| GrantError::Invalid(format!("domains: {e}")))
        })
        .collect::<Result<_, _>>()?;
    out.sort();
    out.dedup();
    Ok(out)
}

fn domains_of(json: &str) -> Vec<String> {
    serde_json::from_str(json).unwrap_or_default()
}

async fn audit(store: &Store, event: NewEvent) -> Result<(), GrantError> {
    store.audit_append(event).await?;
    Ok(())
}

/// An agent asks for credentials of `domains`.
pub async fn request(
    store: &Store,
    owner: &ApiKeyOwner,
    req: &NewGrantRequest,
) -> Result<GrantStatus, GrantError> {
    let domains = parse_domains(&req.domains)?;
    let reason = req.reason.trim();
    if reason.is_empty() || reason.chars().count() > MAX_REASON {
        return Err(GrantError::Invalid(format!(
            "reason: 1 to {MAX_REASON} characters"
        )));
    }
    let names: Vec<String> = domains.iter().map(|d| d.as_str().to_owned()).collect();
    let row = GrantRequestRow {
        id: random_id("gr_"),
        tenant_id: owner.tenant.to_string(),
        api_key_id: Some(owner.key_id.clone()),
        domains: serde_json::to_string(&names).map_err(anyhow::Error::from)?,
        reason: reason.to_owned(),
        state: "pending".into(),
        created_at: now_ms(),
        decided_at: None,
        decided_by: None,
    };
    audit(
        store,
        NewEvent::new(Actor::Agent(owner.key_id.clone()), "grant.request")
            .tenant(&owner.tenant)
            .params(json!({ "request": row.id, "domains": names, "reason_chars": reason.chars().count() }))
            .outcome("requested"),
    )
    .await?;
    store.grant_request_insert(&row).await?;
    Ok(GrantStatus {
        request_id: row.id,
        state: row.state,
        domains: names,
        grant_token: None,
        jti: None,
        expires_at: None,
        single_use: None,
    })
}

/// The requester polls its request; the first poll after approval carries
/// the token, which is made (and its hash stored) right then.
pub async fn poll(store: &Store, owner: &ApiKeyOwner, id: &str) -> Result<GrantStatus, GrantError> {
    let row = store
        .grant_request_get(id)
        .await?
        .filter(|r| r.tenant_id == owner.tenant.as_str())
        .ok_or(GrantError::NotFound)?;
    let mut status = GrantStatus {
        request_id: row.id.clone(),
        state: row.state.clone(),
        domains: domains_of(&row.domains),
        grant_token: None,
        jti: None,
        expires_at: None,
        single_use: None,
    };
    if row.state != "approved" {
        return Ok(status);
    }
    let Some(tok) = store.grant_token_of_request(&row.id).await? else {
        return Ok(status);
    };
    status.jti = Some(tok.jti.clone());
    status.expires_at = Some(tok.expires_at);
    status.single_use = Some(tok.single_use);
    let now = now_ms();
    if tok.delivered_at.is_none() && tok.revoked_at.is_none() && tok.expires_at > now {
        let token = format!(
            "{TOKEN_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>())
        );
        if store
            .grant_token_deliver(&tok.jti, &hash_key(&token), now)
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
    request_id: &str,
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
    if req.state != "pending" {
        return Err(GrantError::NotPending(req.state));
    }
    let now = now_ms();
    let expires_ms = i64::try_from(expires_min).unwrap_or(0) * 60_000;
    let token = GrantTokenRow {
        jti: random_id("gt_"),
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
        .grant_approve(&req.id, &actor.as_stored(), &token)
        .await?
    {
        return Err(GrantError::NotPending("decided".into()));
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
pub async fn deny(store: &Store, actor: &Actor, request_id: &str) -> Result<(), GrantError> {
    let req = store
        .grant_request_get(request_id)
        .await?
        .ok_or(GrantError::NotFound)?;
    let tenant: TenantId = req
        .tenant_id
        .parse()
        .map_err(|e| anyhow::anyhow!("bad tenant id on grant request: {e}"))?;
    if !store
        .grant_deny(&req.id, &actor.as_stored(), now_ms())
        .await?
    {
        return Err(GrantError::NotPending(req.state));
    }
    audit(
        store,
        NewEvent::new(actor.clone(), "grant.deny")
            .tenant(&tenant)
            .params(json!({ "request": req.id }))
            .outcome("ok"),
    )
    .await
}

/// An operator revokes a token by its id.
pub async fn revoke(store: &Store, actor: &Actor, jti: &str) -> Result<(), GrantError> {
    if !store.grant_token_revoke(jti, now_ms()).await? {
        return Err(GrantError::NotFound);
    }
    audit(
        store,
        NewEvent::new(actor.clone(), "grant.revoke")
            .params(json!({ "jti": jti }))
            .outcome("ok"),
    )
    .await
}

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
    let hash = hash_key(token);
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
