//! Live links: a short-lived capability URL to one session's live view,
//! which an agent asks for (`POST /api/sessions/{id}/live_link`) and hands
//! to its own user, who watches (and, in `control` mode, drives) the
//! session in an `<iframe>` of the agent's application. Not a door into
//! the dashboard: the link's page and socket know nothing of operators, and
//! what arrives through it runs as the agent that asked, through the same
//! tool pipeline, risk gate and take-over rules.
//!
//! - Off unless the tenant's settings allow it ([`LinkPolicy`],
//!   `[tenant_live_links.<tenant>]`), which also names the origins that may
//!   frame the page and whether `control` links may be made.
//! - A link's token (`llk_`, 256 random bits) is kept only as its SHA-256.
//!   The link works, for any number of page loads, until it expires
//!   (`ttl_s`, at most the policy's `max_ttl_s`), is revoked (by any key of
//!   the tenant), its key is revoked, its tenant's settings stop allowing
//!   it, or its session ends. An open view re-checks this every second.
//! - Issuing and revoking are audited as the agent; what the link's user
//!   does is audited as `agent:<key>` with `via: live_link`.

use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::audit::{Actor, NewEvent};
use crate::domain::{LiveLinkId, SessionId, TenantId};
use crate::ids::{secret_token, token_hash};
use crate::store::Store;
use crate::store::api_keys::ApiKeyOwner;
use crate::store::live_links::{LiveLinkRow, NewLiveLink};
use crate::time::now_ms;

/// A link's token starts with this.
pub const TOKEN_PREFIX: &str = "llk_";
/// A link's id starts with this.
pub const ID_PREFIX: &str = crate::ids::LIVE_LINK;
/// A link's lifetime when the request names none, in seconds.
pub const DEFAULT_TTL_S: u64 = 600;
/// The shortest lifetime a link may ask for, in seconds.
pub const MIN_TTL_S: u64 = 30;
/// The longest `max_ttl_s` a tenant may allow (a day).
pub const LONGEST_TTL_S: u64 = 86_400;
/// A tenant's `max_ttl_s` when its settings name none (an hour).
pub const DEFAULT_MAX_TTL_S: u64 = 3_600;
/// Open views of one link on one replica; more are refused (a link posted
/// somewhere public would otherwise start a screencast per reader).
pub const MAX_VIEWS_PER_LINK: usize = 3;

/// One tenant's live-link settings (`[tenant_live_links.acme]`). A tenant
/// without them may not make links.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LinkPolicy {
    /// Origins whose pages may show the link in an `<iframe>` (the page's
    /// `Content-Security-Policy: frame-ancestors`): `https://app.example.com`,
    /// `https://*.example.com`, `http://localhost:3000`. Empty: the link
    /// opens only as a page of its own, never framed.
    #[serde(default)]
    pub frame_ancestors: Vec<String>,
    /// Whether links may be `control` (the link's user drives the browser
    /// as the agent). Off: only `view` links.
    #[serde(default)]
    pub control: bool,
    /// The longest `ttl_s` a link may ask for, 30–86400 s (default 3600).
    pub max_ttl_s: Option<u64>,
}

impl LinkPolicy {
    /// Whether the settings are usable; the reason when not.
    pub fn check(&self) -> Result<(), String> {
        if let Some(t) = self.max_ttl_s
            && !(MIN_TTL_S..=LONGEST_TTL_S).contains(&t)
        {
            return Err(format!(
                "max_ttl_s must be between {MIN_TTL_S} and {LONGEST_TTL_S}"
            ));
        }
        if self.frame_ancestors.len() > 32 {
            return Err("frame_ancestors: at most 32 origins".into());
        }
        for o in &self.frame_ancestors {
            checked_origin(o)?;
        }
        Ok(())
    }

    /// The longest lifetime a link may have, in seconds.
    pub fn max_ttl(&self) -> u64 {
        self.max_ttl_s.unwrap_or(DEFAULT_MAX_TTL_S)
    }

    /// The `frame-ancestors` directive's sources: the allowed origins, or
    /// `'none'`.
    pub fn frame_ancestors_csp(&self) -> String {
        let origins: Vec<String> = self
            .frame_ancestors
            .iter()
            .filter_map(|o| checked_origin(o).ok())
            .collect();
        if origins.is_empty() {
            "'none'".into()
        } else {
            origins.join(" ")
        }
    }
}

/// `o` as a `frame-ancestors` source: `http(s)://host[:port]`, the host
/// optionally starting with `*.`; nothing else (no path, no keyword, no
/// bare `*`, no character a CSP header would read as a separator).
pub fn checked_origin(o: &str) -> Result<String, String> {
    let bad = || {
        format!(
            "frame_ancestors: {o:?} is not an origin (https://host[:port], the host may start \
             with *.)"
        )
    };
    let (scheme, rest) = o.split_once("://").ok_or_else(bad)?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "https" && scheme != "http" {
        return Err(bad());
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    let (host, port) = match rest.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || rest.starts_with('[') => {
            if p.is_empty() || p.len() > 5 || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            (h, Some(p))
        }
        _ => (rest, None),
    };
    let plain = host.strip_prefix("*.").unwrap_or(host);
    let ok_host = !plain.is_empty()
        && plain.len() <= 253
        && plain
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-')
        && !plain.starts_with('.')
        && !plain.ends_with('.');
    if !ok_host {
        return Err(bad());
    }
    let host = host.to_ascii_lowercase();
    Ok(match port {
        Some(p) => format!("{scheme}://{host}:{p}"),
        None => format!("{scheme}://{host}"),
    })
}

/// What a link lets its user do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LinkMode {
    /// Watch only.
    View,
    /// Watch and drive (pointer, wheel, keys, text) as the agent.
    Control,
}

impl LinkMode {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::View => "view",
            Self::Control => "control",
        }
    }
}

/// A live link that is in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// `ll_…`.
    pub id: LiveLinkId,
    /// Its tenant.
    pub tenant: TenantId,
    /// The session it shows.
    pub session_id: String,
    /// The key that asked for it: what its user does runs as this agent.
    pub key_id: String,
    /// What it allows.
    pub mode: LinkMode,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub expires_at: i64,
}

/// A link as listed to its tenant's agents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkInfo {
    /// The link.
    pub link: Link,
    /// Unix ms, once revoked.
    pub revoked_at: Option<i64>,
    /// `active`, `expired` or `revoked`.
    pub state: &'static str,
}

/// Why a link cannot be made or used.
#[derive(Debug, thiserror::Error)]
pub enum LinkError {
    /// The tenant's settings do not allow live links.
    #[error(
        "live links are off for this tenant; an administrator allows them with \
         [tenant_live_links.<tenant>] in Cordon's settings"
    )]
    Disabled,
    /// A `control` link, where the tenant allows only `view`.
    #[error(
        "this tenant allows only view links (set control = true in [tenant_live_links.<tenant>])"
    )]
    ControlDisabled,
    /// A lifetime out of range.
    #[error("{0}")]
    BadTtl(String),
    /// The session already has [`MAX_ACTIVE_PER_SESSION`] links that work.
    #[error(
        "this session already has {MAX_ACTIVE_PER_SESSION} live links that work; revoke one \
         (DELETE /api/sessions/{{id}}/live_link/{{link}}) or wait for one to expire"
    )]
    TooMany,
    /// No such link (or not for this session).
    #[error("the live link is unknown")]
    Unknown,
    /// Past its lifetime.
    #[error("the live link has expired; ask for a new one")]
    Expired,
    /// Revoked, or its API key was.
    #[error("the live link was revoked")]
    Revoked,
    /// The database failed.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl LinkError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Disabled => "live_links_disabled",
            Self::ControlDisabled => "live_link_control_disabled",
            Self::BadTtl(_) => "bad_request",
            Self::TooMany => "too_many_requests",
            Self::Unknown => "link_unknown",
            Self::Expired => "link_expired",
            Self::Revoked => "link_revoked",
            Self::Internal(_) => "internal",
        }
    }
}

/// Links that work (not expired, not revoked) one session may have at
/// once: bounds what a key gone rogue can write for a running session.
pub const MAX_ACTIVE_PER_SESSION: i64 = 20;

/// The longest token looked at; anything longer is unknown.
const MAX_TOKEN_LEN: usize = 128;

/// Makes a link to `session_id` for agent `owner` (the caller has checked
/// that the session is theirs and running): `(link, token)`. The token is
/// shown once; only its hash is kept.
pub async fn issue(
    store: &Store,
    owner: &ApiKeyOwner,
    session_id: &SessionId,
    mode: LinkMode,
    ttl_s: Option<u64>,
    policy: Option<&LinkPolicy>,
) -> Result<(Link, String), LinkError> {
    let policy = policy.ok_or(LinkError::Disabled)?;
    if mode == LinkMode::Control && !policy.control {
        return Err(LinkError::ControlDisabled);
    }
    let max = policy.max_ttl();
    let ttl = ttl_s.unwrap_or(DEFAULT_TTL_S.min(max));
    if !(MIN_TTL_S..=max).contains(&ttl) {
        return Err(LinkError::BadTtl(format!(
            "ttl_s must be between {MIN_TTL_S} and {max} (this tenant's max_ttl_s)"
        )));
    }
    let now = now_ms();
    let token = secret_token(TOKEN_PREFIX);
    let link = Link {
        id: LiveLinkId::generate(),
        tenant: owner.tenant.clone(),
        session_id: session_id.to_string(),
        key_id: owner.key_id.clone(),
        mode,
        created_at: now,
        expires_at: now + i64::try_from(ttl).unwrap_or(i64::MAX / 4) * 1000,
    };
    let recorded = store
        .live_link_insert_within(
            &NewLiveLink {
                id: link.id.as_str(),
                token_hash: &token_hash(&token),
                tenant_id: link.tenant.as_str(),
                session_id: session_id.as_str(),
                key_id: &link.key_id,
                mode: mode.as_str(),
                created_at: link.created_at,
                expires_at: link.expires_at,
            },
            MAX_ACTIVE_PER_SESSION,
        )
        .await?;
    if !recorded {
        return Err(LinkError::TooMany);
    }
    let audited = store
        .audit_append(
            NewEvent::new(Actor::Agent(owner.key_id.clone()), "live_link.create")
                .tenant(&link.tenant)
                .session(session_id.as_str())
                .params(json!({ "link": link.id, "mode": mode.as_str(), "ttl_s": ttl })),
        )
        .await;
    if let Err(e) = audited {
        // Unaudited, it must not work.
        let _ = store
            .live_link_revoke(link.tenant.as_str(), session_id, &link.id, now)
            .await;
        return Err(e.into());
    }
    Ok((link, token))
}

/// The link `row` if it is in force under `policy`.
fn in_force(row: LiveLinkRow, policy: Option<&LinkPolicy>) -> Result<Link, LinkError> {
    if row.revoked_at.is_some() || row.key_revoked {
        return Err(LinkError::Revoked);
    }
    if row.expires_at <= now_ms() {
        return Err(LinkError::Expired);
    }
    let mode = match row.mode.as_str() {
        "view" => LinkMode::View,
        "control" => LinkMode::Control,
        _ => return Err(LinkError::Unknown),
    };
    match policy {
        None => return Err(LinkError::Disabled),
        Some(p) if mode == LinkMode::Control && !p.control => {
            return Err(LinkError::ControlDisabled);
        }
        Some(_) => {}
    }
    Ok(Link {
        id: row.id.parse().map_err(|_| LinkError::Unknown)?,
        tenant: row.tenant_id.parse().map_err(|_| LinkError::Unknown)?,
        session_id: row.session_id,
        key_id: row.key_id,
        mode,
        created_at: row.created_at,
        expires_at: row.expires_at,
    })
}

/// The link whose token is `token`, for `session_id`, if it is in force
/// (`policy`: its tenant's settings, looked up by the caller).
pub async fn check(
    store: &Store,
    token: &str,
    session_id: &str,
    policy: impl FnOnce(&str) -> Option<LinkPolicy>,
) -> Result<Link, LinkError> {
    if !token.starts_with(TOKEN_PREFIX) || token.len() > MAX_TOKEN_LEN {
        return Err(LinkError::Unknown);
    }
    let row = store
        .live_link_by_hash(&token_hash(token))
        .await?
        .filter(|r| r.session_id == session_id)
        .ok_or(LinkError::Unknown)?;
    let policy = policy(&row.tenant_id);
    in_force(row, policy.as_ref())
}

/// The tenant of the link whose token is `token`, for `session_id`, even
/// if it is no longer in force (so its refusal can still be framed).
pub async fn tenant_of(store: &Store, token: &str, session_id: &str) -> Option<String> {
    if !token.starts_with(TOKEN_PREFIX) || token.len() > MAX_TOKEN_LEN {
        return None;
    }
    store
        .live_link_by_hash(&token_hash(token))
        .await
        .ok()
        .flatten()
        .filter(|r| r.session_id == session_id)
        .map(|r| r.tenant_id)
}

/// Link `id` again, if still in force (an open view asks every second).
pub async fn recheck(
    store: &Store,
    id: &LiveLinkId,
    policy: impl FnOnce(&str) -> Option<LinkPolicy>,
) -> Result<Link, LinkError> {
    let row = store.live_link_get(id).await?.ok_or(LinkError::Unknown)?;
    let policy = policy(&row.tenant_id);
    in_force(row, policy.as_ref())
}

/// A session's links, newest first (at most 500).
pub async fn list(
    store: &Store,
    tenant: &TenantId,
    session_id: &SessionId,
) -> Result<Vec<LinkInfo>, LinkError> {
    let now = now_ms();
    let rows = store.live_links_of(tenant.as_str(), session_id).await?;
    Ok(rows
        .into_iter()
        .filter_map(|r| {
            let state = if r.revoked_at.is_some() || r.key_revoked {
                "revoked"
            } else if r.expires_at <= now {
                "expired"
            } else {
                "active"
            };
            let revoked_at = r.revoked_at;
            let mode = if r.mode == "control" {
                LinkMode::Control
            } else {
                LinkMode::View
            };
            Some(LinkInfo {
                link: Link {
                    id: r.id.parse().ok()?,
                    tenant: r.tenant_id.parse().ok()?,
                    session_id: r.session_id,
                    key_id: r.key_id,
                    mode,
                    created_at: r.created_at,
                    expires_at: r.expires_at,
                },
                revoked_at,
                state,
            })
        })
        .collect())
}

/// Revokes link `id` of `tenant`'s session `session_id`: open views of it
/// end within a second. Unknown (or another tenant's, or another
/// session's): [`LinkError::Unknown`]. Already revoked: done.
pub async fn revoke(
    store: &Store,
    actor: &Actor,
    tenant: &TenantId,
    session_id: &SessionId,
    id: &LiveLinkId,
) -> Result<(), LinkError> {
    let found = store
        .live_link_get(id)
        .await?
        .filter(|r| r.tenant_id == tenant.as_str() && r.session_id == session_id.as_str())
        .ok_or(LinkError::Unknown)?;
    if store
        .live_link_revoke(tenant.as_str(), session_id, id, now_ms())
        .await?
    {
        store
            .audit_append(
                NewEvent::new(actor.clone(), "live_link.revoke")
                    .tenant(tenant)
                    .session(session_id.as_str())
                    .params(json!({ "link": found.id })),
            )
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const S1: &str = "s_aaaaaaaaaaaaaaaaaaaaaaaaaa";

    fn s1() -> SessionId {
        S1.parse().unwrap()
    }

    async fn store() -> (Store, ApiKeyOwner) {
        let store = Store::connect(&secrecy::SecretString::from("sqlite::memory:".to_owned()))
            .await
            .unwrap();
        store.migrate().await.unwrap();
        let tenant: TenantId = "acme".parse().unwrap();
        crate::tenants::create(&store, &Actor::Cli, &tenant, None)
            .await
            .unwrap();
        let (key_id, _) = crate::tenants::create_key(&store, &Actor::Cli, &tenant, "agent")
            .await
            .unwrap();
        (store, ApiKeyOwner { key_id, tenant })
    }

    fn allowed(control: bool) -> LinkPolicy {
        LinkPolicy {
            frame_ancestors: vec!["https://app.acme.example".into()],
            control,
            max_ttl_s: Some(600),
        }
    }

    #[test]
    fn origins_are_checked_and_written_as_csp_sources() {
        for (given, want) in [
            ("https://app.example.com", "https://app.example.com"),
            ("HTTPS://App.Example.com/", "https://app.example.com"),
            ("https://*.example.com", "https://*.example.com"),
            ("http://localhost:3000", "http://localhost:3000"),
        ] {
            assert_eq!(checked_origin(given).as_deref(), Ok(want), "{given}");
        }
        for bad in [
            "*",
            "'self'",
            "https://",
            "example.com",
            "javascript://x",
            "https://a.example/path",
            "https://a.example; script-src *",
            "https://a.example https://b.example",
            "https://a.example:99999x",
            "https://a.example:",
            "https://*.",
            "https://a.example?x",
        ] {
            assert!(checked_origin(bad).is_err(), "{bad} accepted");
        }
        assert_eq!(LinkPolicy::default().frame_ancestors_csp(), "'none'");
        assert_eq!(
            allowed(false).frame_ancestors_csp(),
            "https://app.acme.example"
        );
        assert!(
            LinkPolicy {
                max_ttl_s: Some(5),
                ..allowed(false)
            }
            .check()
            .is_err()
        );
    }

    #[tokio::test]
    async fn a_link_needs_the_tenants_settings_and_stays_within_them() {
        let (store, owner) = store().await;
        let e = issue(&store, &owner, &s1(), LinkMode::View, None, None)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "live_links_disabled");
        let e = issue(
            &store,
            &owner,
            &s1(),
            LinkMode::Control,
            None,
            Some(&allowed(false)),
        )
        .await
        .unwrap_err();
        assert_eq!(e.code(), "live_link_control_disabled");
        for ttl in [0, 29, 601] {
            let e = issue(
                &store,
                &owner,
                &s1(),
                LinkMode::View,
                Some(ttl),
                Some(&allowed(true)),
            )
            .await
            .unwrap_err();
            assert_eq!(e.code(), "bad_request", "ttl {ttl}");
        }
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM live_links")
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!(rows, 0, "a refused link is not stored");
    }

    #[tokio::test]
    async fn a_link_works_for_its_session_until_revoked_and_keeps_only_a_hash() {
        let (store, owner) = store().await;
        let p = allowed(true);
        let (link, token) = issue(&store, &owner, &s1(), LinkMode::Control, None, Some(&p))
            .await
            .unwrap();
        assert!(token.starts_with(TOKEN_PREFIX) && link.id.as_str().starts_with(ID_PREFIX));
        let stored: Vec<String> = sqlx::query_scalar("SELECT token_hash FROM live_links")
            .fetch_all(store.pool())
            .await
            .unwrap();
        assert_eq!(stored, vec![token_hash(&token)]);
        // Any number of uses, for its own session only.
        for _ in 0..3 {
            let got = check(&store, &token, S1, |_| Some(p.clone()))
                .await
                .unwrap();
            assert_eq!(got, link);
        }
        for (tok, session) in [
            (token.as_str(), "s_2"),
            ("llk_nope", S1),
            ("lvt_x", S1),
            ("", S1),
        ] {
            let e = check(&store, tok, session, |_| Some(p.clone()))
                .await
                .unwrap_err();
            assert_eq!(e.code(), "link_unknown", "{session}");
        }
        // Settings that no longer allow it stop it.
        let e = check(&store, &token, S1, |_| None).await.unwrap_err();
        assert_eq!(e.code(), "live_links_disabled");
        let e = check(&store, &token, S1, |_| Some(allowed(false)))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "live_link_control_disabled");
        // Another tenant cannot revoke it; its own can.
        let other: TenantId = "globex".parse().unwrap();
        let e = revoke(&store, &Actor::Cli, &other, &s1(), &link.id)
            .await
            .unwrap_err();
        assert_eq!(e.code(), "link_unknown");
        assert!(recheck(&store, &link.id, |_| Some(p.clone())).await.is_ok());
        revoke(&store, &Actor::Cli, &owner.tenant, &s1(), &link.id)
            .await
            .unwrap();
        let e = check(&store, &token, S1, |_| Some(p.clone()))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "link_revoked");
        let listed = list(&store, &owner.tenant, &s1()).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].state, "revoked");
    }

    #[tokio::test]
    async fn an_expired_link_or_one_whose_key_was_revoked_stops() {
        let (store, owner) = store().await;
        let p = allowed(false);
        let (link, token) = issue(&store, &owner, &s1(), LinkMode::View, Some(30), Some(&p))
            .await
            .unwrap();
        sqlx::query("UPDATE live_links SET expires_at = expires_at - 31000")
            .execute(store.pool())
            .await
            .unwrap();
        let e = check(&store, &token, S1, |_| Some(p.clone()))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "link_expired");
        let (_, token2) = issue(&store, &owner, &s1(), LinkMode::View, None, Some(&p))
            .await
            .unwrap();
        assert!(
            check(&store, &token2, S1, |_| Some(p.clone()))
                .await
                .is_ok()
        );
        crate::tenants::revoke_key(&store, &Actor::Cli, &owner.key_id.parse().unwrap())
            .await
            .unwrap();
        let e = check(&store, &token2, S1, |_| Some(p.clone()))
            .await
            .unwrap_err();
        assert_eq!(e.code(), "link_revoked");
        assert_ne!(link.id.as_str(), "");
    }
}
