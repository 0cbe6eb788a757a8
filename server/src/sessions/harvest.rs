//! Reading a session's login back into the vault ("harvest"): after an
//! operator logged in to a site in a refresh session, the cookies the
//! browser holds and the localStorage of the open tabs' origins are read
//! over CDP for the chosen domains, shown as metadata (names, flags, keys),
//! and stored on request. Values stay in memory between the browser and
//! the vault; they are never logged, audited or put in a preview.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{RunningSession, SessionManager};
use crate::audit::{Actor, NewEvent};
use crate::cdp::{self, CdpError, vault_cookie};
use crate::vault::{self, Cookie, Domain, Origin, Source, VaultError};

pub use crate::vault::CredentialDiff;

/// What saving would store, metadata only.
#[derive(Debug, Clone, serde::Serialize)]
pub struct HarvestPreview {
    /// One entry per chosen domain, in the order asked.
    pub domains: Vec<DomainPreview>,
}

/// What the browser holds for one domain: cookie names and flags, and the
/// localStorage keys of its origins, never a value.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DomainPreview {
    /// The chosen domain.
    pub domain: String,
    /// Its cookies (those of the domain and its subdomains).
    pub cookies: Vec<CookieMeta>,
    /// The open tabs' origins it covers that hold localStorage.
    pub origins: Vec<OriginKeys>,
}

/// A cookie without its value.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CookieMeta {
    /// Name.
    pub name: String,
    /// `example.com` (host-only) or `.example.com`.
    pub domain: String,
    /// Path.
    pub path: String,
    /// Expiry in Unix ms; `None` for a session cookie.
    pub expires: Option<i64>,
    /// `HttpOnly`.
    pub http_only: bool,
    /// `Secure`.
    pub secure: bool,
    /// `Strict`, `Lax` or `None`, if set.
    pub same_site: Option<String>,
}

/// One origin's localStorage keys.
#[derive(Debug, Clone, serde::Serialize)]
pub struct OriginKeys {
    /// `scheme://host[:port]`.
    pub origin: String,
    /// Its keys, in the browser's order.
    pub keys: Vec<String>,
}

/// What a save stored.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SaveReport {
    /// One entry per chosen domain, in the order asked.
    pub domains: Vec<DomainSaved>,
}

/// What a save did for one domain.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DomainSaved {
    /// The chosen domain.
    pub domain: String,
    /// Whether it was stored: a domain the browser holds no cookie for is
    /// not, and its previous credential (if any) is kept as it was.
    pub stored: bool,
    /// Cookies stored (0 when not stored).
    pub cookies: usize,
    /// localStorage items stored (0 when not stored).
    pub storage: usize,
    /// How the stored cookies differ from the credential they replaced
    /// (empty when not stored).
    pub diff: CredentialDiff,
}

/// Why reading or saving a session's login failed.
#[derive(Debug, thiserror::Error)]
pub enum HarvestError {
    /// None of the chosen domains has a cookie in the browser: nothing was
    /// stored.
    #[error("nothing to save: the browser holds no cookies for {}", .domains.join(", "))]
    NothingToSave {
        /// The chosen domains.
        domains: Vec<String>,
    },
    /// The session's browser is gone.
    #[error("the session's browser is gone")]
    BrowserGone,
    /// The browser refused or failed a read.
    #[error("cannot read the browser's storage: {0}")]
    Cdp(CdpError),
    /// The vault refused or failed.
    #[error(transparent)]
    Vault(#[from] VaultError),
    /// Anything else (the audit log could not be written, say).
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

impl HarvestError {
    /// A stable code for callers: `nothing_to_save`, `browser_gone`,
    /// `browser_error`, the vault's own codes (`unknown_tenant`,
    /// `wrong_key`, `decrypt_failed`, `foreign_cookies`, …) or `internal`.
    pub fn code(&self) -> &'static str {
        match self {
            Self::NothingToSave { .. } => "nothing_to_save",
            Self::BrowserGone => "browser_gone",
            Self::Cdp(_) => "browser_error",
            Self::Vault(e) => e.code(),
            Self::Internal(_) => "internal",
        }
    }
}

impl From<CdpError> for HarvestError {
    fn from(e: CdpError) -> Self {
        match e {
            CdpError::BrowserGone => Self::BrowserGone,
            other => Self::Cdp(other),
        }
    }
}

impl From<chromiumoxide::error::CdpError> for HarvestError {
    fn from(e: chromiumoxide::error::CdpError) -> Self {
        CdpError::from(e).into()
    }
}

/// What the browser holds for one chosen domain, values included: in
/// memory only, on its way to the vault.
struct Held {
    domain: Domain,
    cookies: Vec<Cookie>,
    origins: Vec<Origin>,
}

impl SessionManager {
    /// What [`Self::harvest_save`] would store for `domains`: cookie names
    /// and flags, localStorage keys, never a value. Reads under the
    /// session's tab lock; changes nothing and is not audited.
    #[tracing::instrument(skip_all, fields(session.id = %live.id))]
    pub async fn harvest_preview(
        &self,
        live: &Arc<RunningSession>,
        domains: &[Domain],
    ) -> Result<HarvestPreview, HarvestError> {
        let held = self.harvest_read(live, domains).await?;
        Ok(HarvestPreview {
            domains: held.iter().map(preview).collect(),
        })
    }

    /// Stores what the browser holds for `domains` as the session tenant's
    /// credentials (source `refresh`), each replacing the previous one in
    /// its row. A domain without cookies is not stored (its previous
    /// credential is kept); if no domain has any, nothing is stored and the
    /// answer is [`HarvestError::NothingToSave`]. Audited as `session.save`
    /// (counts only) before anything is stored; each credential then as
    /// `vault.store`. A vault failure on a later domain leaves the earlier
    /// ones stored. The session goes on: ending it is the caller's call.
    #[tracing::instrument(skip_all, fields(session.id = %live.id, tenant.id = %live.tenant))]
    pub async fn harvest_save(
        &self,
        live: &Arc<RunningSession>,
        actor: &Actor,
        domains: &[Domain],
    ) -> Result<SaveReport, HarvestError> {
        let held = self.harvest_read(live, domains).await?;
        let counts: serde_json::Map<String, serde_json::Value> = held
            .iter()
            .map(|h| {
                (
                    h.domain.as_str().to_owned(),
                    json!({
                        "cookies": h.cookies.len(),
                        "local_storage": vault::storage_items(&h.origins),
                    }),
                )
            })
            .collect();
        let event = NewEvent::new(actor.clone(), "session.save")
            .tenant(&live.tenant)
            .session(live.id.as_str())
            .params(json!({ "domains": counts }));
        if held.iter().all(|h| h.cookies.is_empty()) {
            self.0
                .store
                .audit_append(event.outcome("denied: nothing_to_save"))
                .await?;
            return Err(HarvestError::NothingToSave {
                domains: domains.iter().map(|d| d.as_str().to_owned()).collect(),
            });
        }
        self.0
            .store
            .audit_append(event.outcome("requested"))
            .await?;
        let vault = &self.0.vault;
        let mut saved = Vec::with_capacity(held.len());
        for h in held {
            if h.cookies.is_empty() {
                saved.push(DomainSaved {
                    domain: h.domain.as_str().to_owned(),
                    stored: false,
                    cookies: 0,
                    storage: 0,
                    diff: CredentialDiff::default(),
                });
                continue;
            }
            let diff = {
                let previous = vault.current(&live.tenant, &h.domain).await?;
                vault::diff(
                    previous.as_ref().map(|(_, state)| state.cookies.as_slice()),
                    &h.cookies,
                )
            };
            let info = vault
                .save(
                    actor,
                    &live.tenant,
                    &h.domain,
                    &h.cookies,
                    &h.origins,
                    Source::Refresh,
                )
                .await?;
            saved.push(DomainSaved {
                domain: h.domain.as_str().to_owned(),
                stored: true,
                cookies: usize::try_from(info.cookie_count).unwrap_or_default(),
                storage: usize::try_from(info.storage_count).unwrap_or_default(),
                diff,
            });
        }
        Ok(SaveReport { domains: saved })
    }

    /// Reads the browser's cookies and the open tabs' localStorage for
    /// `domains`, holding the tab lock so no tool runs meanwhile, within the
    /// tool-call bound.
    async fn harvest_read(
        &self,
        live: &Arc<RunningSession>,
        domains: &[Domain],
    ) -> Result<Vec<Held>, HarvestError> {
        let bound = self.0.cfg.tool_timeout;
        let _tabs = live.tabs.lock().await;
        if live.browser_gone() {
            return Err(HarvestError::BrowserGone);
        }
        let read = async {
            let cookies: Vec<Cookie> = live
                .conn
                .browser()
                .get_cookies()
                .await?
                .into_iter()
                .map(vault_cookie)
                .collect();
            let origins = read_local_storage(live, domains).await?;
            Ok::<_, HarvestError>((cookies, origins))
        };
        let (cookies, origins) = tokio::time::timeout(bound, read)
            .await
            .map_err(|_| CdpError::Timeout("reading the browser's storage", millis(bound)))??;
        live.touch();
        Ok(domains
            .iter()
            .map(|d| Held {
                domain: d.clone(),
                cookies: vault::import::partition(cookies.clone(), d).0,
                origins: origins.iter().filter(|o| covers(d, o)).cloned().collect(),
            })
            .collect())
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn covers(domain: &Domain, origin: &Origin) -> bool {
    origin.host().is_some_and(|h| domain.covers(&h))
}

/// The localStorage of every origin shown in an open tab (main frame or
/// child frame) that one of `domains` covers; origins without items are
/// left out.
async fn read_local_storage(
    live: &RunningSession,
    domains: &[Domain],
) -> Result<Vec<Origin>, HarvestError> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for page in live.pages().await? {
        let origins = match cdp::frame_origins(&page).await {
            Ok(origins) => origins,
            // A tab that closed meanwhile holds nothing to read.
            Err(_) if !live.browser_gone() => continue,
            Err(e) => return Err(e.into()),
        };
        for origin in origins {
            let candidate = Origin {
                origin,
                local_storage: Vec::new(),
            };
            if seen.contains(&candidate.origin) || !domains.iter().any(|d| covers(d, &candidate)) {
                continue;
            }
            seen.push(candidate.origin.clone());
            let items = cdp::local_storage(&page, &candidate.origin).await?;
            if !items.is_empty() {
                out.push(Origin {
                    local_storage: items,
                    ..candidate
                });
            }
        }
    }
    Ok(out)
}

fn preview(h: &Held) -> DomainPreview {
    DomainPreview {
        domain: h.domain.as_str().to_owned(),
        cookies: h
            .cookies
            .iter()
            .map(|c| CookieMeta {
                name: c.name.clone(),
                domain: c.domain.clone(),
                path: c.path.clone(),
                expires: c.expires_ms(),
                http_only: c.http_only,
                secure: c.secure,
                same_site: c.same_site.map(|s| format!("{s:?}")),
            })
            .collect(),
        origins: h
            .origins
            .iter()
            .map(|o| OriginKeys {
                origin: o.origin.clone(),
                keys: o.local_storage.iter().map(|i| i.name.clone()).collect(),
            })
            .collect(),
    }
}
