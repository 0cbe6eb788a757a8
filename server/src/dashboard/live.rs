//! The live view's tickets, refresh sessions and handing control back.

use app::api::auth::{Operator, Role};
use app::api::backend::{LiveBackend, UiResult};
use app::api::credentials::TotpView;
use app::api::live::{CookieRow, DomainPreviewView, LiveAccess, OriginRow, SavedView};
use app::error::UiError;

use super::sessions::session_error;
use super::{actor, internal};
use crate::domain::{SessionId, TargetUrl, TenantId};
use crate::live::TICKET_TTL_S;
use crate::sessions::{CredentialMode, HarvestError, RunningSession, Tool, ToolCall};
use crate::state::AppState;
use crate::vault::Domain;

#[async_trait::async_trait]
impl LiveBackend for AppState {
    async fn live_ticket(&self, op: &Operator, session: String) -> UiResult<LiveAccess> {
        self.session_in_scope(op, &session, "watch a session")
            .await?;
        let result = async {
            let found = match crate::sessions::session_id(&session) {
                Ok(sid) => self.sessions.find_live(&sid).await,
                Err(e) => Err(e),
            };
            let id: SessionId = match found {
                // Another operator's refresh session does not exist for them.
                Ok(live) if !live.open_to(&op.id) => {
                    return Err(session_error(
                        &session,
                        "finding the session",
                        crate::sessions::SessionError::NotFound,
                    ));
                }
                Ok(live) => live.id.clone(),
                // Running on another replica: the view is carried there.
                Err(e) => match (
                    self.cluster.session_elsewhere(&session).await,
                    session.parse::<SessionId>(),
                ) {
                    (Ok(Some(_)), Ok(sid)) => sid,
                    _ => return Err(session_error(&session, "finding the session", e)),
                },
            };
            let ticket = self
                .live
                .tickets
                .issue(&self.store, &op.id, &id)
                .await
                .map_err(|e| internal("issuing a live view ticket", e))?;
            Ok(LiveAccess {
                path: format!("/live/{id}?ticket={ticket}"),
                expires_in_s: TICKET_TTL_S,
                may_control: op.role.allows(Role::Operator),
            })
        }
        .await;
        super::audited(self, op, "session.watch", result).await
    }

    async fn start_refresh(
        &self,
        op: &Operator,
        tenant: String,
        domains: String,
        start_url: Option<String>,
    ) -> UiResult<String> {
        let result = async {
            let tenant: TenantId =
                tenant
                    .trim()
                    .parse()
                    .map_err(|e: crate::domain::TenantIdError| {
                        UiError::invalid("tenant", e.to_string())
                    })?;
            if !self
                .store
                .vault_tenant_exists(&tenant)
                .await
                .map_err(|e| internal("reading the tenant", e))?
            {
                return Err(UiError::invalid("tenant", format!("no tenant {tenant}")));
            }
            if !op.sees(tenant.as_str()) {
                self.auth
                    .out_of_scope(&op.id, "start a refresh session", tenant.as_str())
                    .await;
                return Err(UiError::invalid("tenant", format!("no tenant {tenant}")));
            }
            let domains: Vec<String> = domains
                .split([',', ' ', '\n', '\t'])
                .map(|d| d.trim().to_ascii_lowercase())
                .filter(|d| !d.is_empty())
                .collect();
            let first = domains
                .first()
                .cloned()
                .ok_or_else(|| UiError::invalid("domains", "name at least one domain"))?;
            let start: TargetUrl = match start_url.as_deref().map(str::trim) {
                Some(u) if !u.is_empty() => TargetUrl::parse(u)
                    .map_err(|e| UiError::invalid("start_url", format!("{e}")))?,
                _ => TargetUrl::parse(&format!("https://{first}/"))
                    .map_err(|e| UiError::invalid("domains", format!("{e}")))?,
            };
            let info = self
                .sessions
                .open_refresh(
                    &op.id,
                    &tenant,
                    domains,
                    self.settings.sessions.refresh_deadline_s,
                )
                .await
                .map_err(|e| session_error("new", "starting a refresh session", e))?;
            // The first page loads while the operator's browser opens the
            // live view; a refused address shows there as an error.
            let live = self
                .running(op, &info.session_id, "starting a refresh session")
                .await?;
            // The operator's from the first moment: nobody else drives a
            // refresh browser, before the live view connects or after it
            // closes (agents do not even see it).
            self.sessions
                .take_control(&live, &op.id, &op.name)
                .await
                .map_err(|e| session_error(&info.session_id, "starting a refresh session", e))?;
            let sessions = self.sessions.clone();
            let who = actor(op);
            tokio::spawn(async move {
                let call = ToolCall::new(Tool::Navigate {
                    url: start,
                    wait: crate::cdp::WaitUntil::Load,
                });
                if let Err(e) = sessions
                    .run_tool(&live, who, crate::audit::Surface::Live, call)
                    .await
                {
                    tracing::info!(error = %e, "refresh session: the start page did not load");
                }
            });
            // Submitted before the page hydrated, the form is a plain
            // post that would land back on /credentials while the browser
            // runs unseen: it lands on the live page instead.
            if plain_form_post() {
                leptos_axum::redirect(&format!("/sessions/{}/live", info.session_id));
            }
            Ok(info.session_id)
        }
        .await;
        super::audited(self, op, "session.refresh", result).await
    }

    async fn release_control(&self, op: &Operator, session: String) -> UiResult<()> {
        self.session_in_scope(op, &session, "hand a session back")
            .await?;
        let result = async {
            let live = self.running(op, &session, "finding the session").await?;
            if live.mode == crate::sessions::CredentialMode::Refresh {
                return Err(UiError::conflict(
                    "a refresh session stays with its operator: there is no agent to hand it to",
                ));
            }
            let released = self
                .sessions
                .release_control(&live, actor(op))
                .await
                .map_err(|e| session_error(&session, "handing control back", e))?;
            if released {
                Ok(())
            } else {
                Err(UiError::conflict(
                    "no operator holds control of this session",
                ))
            }
        }
        .await;
        super::audited(self, op, "session.control", result).await
    }

    async fn refresh_preview(
        &self,
        op: &Operator,
        session: String,
        domains: String,
    ) -> UiResult<Vec<DomainPreviewView>> {
        self.session_in_scope(op, &session, "save a refresh session's login")
            .await?;
        let result = async {
            let (live, domains) = self.refresh_of(op, &session, &domains).await?;
            let preview = self
                .sessions
                .harvest_preview(&live, &domains)
                .await
                .map_err(harvest_error)?;
            Ok(preview
                .domains
                .into_iter()
                .map(|d| DomainPreviewView {
                    domain: d.domain,
                    cookies: d
                        .cookies
                        .into_iter()
                        .map(|c| CookieRow {
                            name: c.name,
                            domain: c.domain,
                            path: c.path,
                            expires: c.expires,
                            http_only: c.http_only,
                            secure: c.secure,
                            same_site: c.same_site,
                        })
                        .collect(),
                    origins: d
                        .origins
                        .into_iter()
                        .map(|o| OriginRow {
                            origin: o.origin,
                            keys: o.keys,
                        })
                        .collect(),
                })
                .collect())
        }
        .await;
        super::audited(self, op, "session.save", result).await
    }

    async fn save_refresh(
        &self,
        op: &Operator,
        session: String,
        domains: String,
    ) -> UiResult<Vec<SavedView>> {
        self.session_in_scope(op, &session, "save a refresh session's login")
            .await?;
        let result = async {
            let (live, domains) = self.refresh_of(op, &session, &domains).await?;
            let report = self
                .sessions
                .harvest_save(&live, &actor(op), &domains)
                .await
                .map_err(harvest_error)?;
            // Saved: the browser that held the login goes.
            self.sessions.end_saved(&live, &op.id).await;
            Ok(report
                .domains
                .into_iter()
                .map(|d| SavedView {
                    domain: d.domain,
                    stored: d.stored,
                    cookies: d.cookies,
                    storage: d.storage,
                    replaced: d.diff.replaced,
                    added: d.diff.added,
                    removed: d.diff.removed,
                    changed: d.diff.changed,
                    expiry_changed: d.diff.expiry_changed,
                })
                .collect())
        }
        .await;
        super::audited(self, op, "session.save", result).await
    }

    async fn session_totp(&self, op: &Operator, session: String) -> UiResult<Vec<TotpView>> {
        self.session_in_scope(op, &session, "list a refresh session's TOTP seeds")
            .await?;
        let live = self.running(op, &session, "finding the session").await?;
        if live.mode != CredentialMode::Refresh {
            return Ok(Vec::new());
        }
        Ok(self
            .vault
            .totp_list(&live.tenant)
            .await
            .map_err(|e| internal("listing TOTP seeds", e))?
            .into_iter()
            .filter(|t| {
                live.domains
                    .iter()
                    .any(|d| d.eq_ignore_ascii_case(&t.domain))
            })
            .map(super::totp::view)
            .collect())
    }

    async fn type_totp(&self, op: &Operator, session: String, label: String) -> UiResult<usize> {
        self.session_in_scope(op, &session, "type a second-factor code")
            .await?;
        let result = async {
            let live = self.running(op, &session, "finding the session").await?;
            if live.mode != CredentialMode::Refresh {
                return Err(UiError::conflict(
                    "codes are typed from the live view only into refresh sessions",
                ));
            }
            let call = ToolCall::new(Tool::TypeTotp {
                target: None,
                label: Some(label),
            });
            match self
                .sessions
                .run_tool(&live, actor(op), crate::audit::Surface::Live, call)
                .await
            {
                Ok(crate::sessions::ToolOutput::TypedCode(t)) => Ok(t.typed_digits),
                Ok(_) => Err(internal(
                    "typing the code",
                    anyhow::anyhow!("unexpected answer"),
                )),
                Err(e) => Err(match e.code() {
                    "internal" => internal("typing the code", e),
                    "element_not_found" => UiError::conflict(
                        "click into the code field of the page first, then type the code",
                    ),
                    "bad_request" => UiError::invalid("label", e.public_message()),
                    _ => UiError::conflict(e.public_message()),
                }),
            }
        }
        .await;
        super::audited(self, op, "tool.type_totp", result).await
    }
}

impl AppState {
    /// The running session `session` names, any tenant's (a malformed id
    /// is an unknown session); a refusal as [`session_error`] words it.
    async fn running(
        &self,
        op: &Operator,
        session: &str,
        what: &str,
    ) -> UiResult<std::sync::Arc<RunningSession>> {
        let sid =
            crate::sessions::session_id(session).map_err(|e| session_error(session, what, e))?;
        let live = self
            .sessions
            .find_live(&sid)
            .await
            .map_err(|e| session_error(session, what, e))?;
        // Another operator's refresh session does not exist for them.
        if !live.open_to(&op.id) {
            return Err(session_error(
                session,
                what,
                crate::sessions::SessionError::NotFound,
            ));
        }
        Ok(live)
    }

    /// `NotFound` (audited) when `session` is a session of a tenant outside
    /// `op`'s scope; nothing otherwise (an unknown session is left to the
    /// caller, which answers it as before).
    async fn session_in_scope(&self, op: &Operator, session: &str, what: &str) -> UiResult<()> {
        // A malformed id is an unknown session: the caller answers it.
        let (false, Ok(sid)) = (op.global(), session.parse::<SessionId>()) else {
            return Ok(());
        };
        let tenant = self
            .store
            .session_find(&sid)
            .await
            .map_err(|e| internal("reading the session", e))?
            .map(|r| r.tenant_id);
        match tenant {
            Some(t) => {
                super::in_scope(self, op, what, &t, || {
                    UiError::not_found(format!("session {session:?}"))
                })
                .await
            }
            None => Err(UiError::not_found(format!("session {session:?}"))),
        }
    }

    /// A running refresh session and the chosen domains, each one it was
    /// started for.
    async fn refresh_of(
        &self,
        op: &Operator,
        session: &str,
        domains: &str,
    ) -> UiResult<(std::sync::Arc<RunningSession>, Vec<Domain>)> {
        let live = self.running(op, session, "finding the session").await?;
        if live.mode != CredentialMode::Refresh {
            return Err(UiError::conflict(
                "only a refresh session's logins can be saved; start one from the credentials page",
            ));
        }
        let mut chosen = Vec::new();
        for d in domains
            .split([',', ' ', '\n', '\t'])
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            let d = d.to_ascii_lowercase();
            if !live.domains.iter().any(|s| s.eq_ignore_ascii_case(&d)) {
                return Err(UiError::invalid(
                    "domains",
                    format!("{d} is not one of this session's domains"),
                ));
            }
            let parsed: Domain = d.parse().map_err(|e: crate::vault::DomainError| {
                UiError::invalid("domains", e.to_string())
            })?;
            if !chosen.contains(&parsed) {
                chosen.push(parsed);
            }
        }
        if chosen.is_empty() {
            return Err(UiError::invalid("domains", "choose at least one domain"));
        }
        Ok((live, chosen))
    }
}

/// A harvest's failure as the dashboard shows it.
fn harvest_error(e: HarvestError) -> UiError {
    match e {
        HarvestError::NothingToSave { domains } => UiError::conflict(format!(
            "the browser holds no cookie for {}: nothing was stored, the previous login is kept",
            domains.join(", ")
        )),
        HarvestError::BrowserGone => UiError::Unavailable {
            message: "the session's browser is gone; start a new refresh".into(),
        },
        e => internal("saving the login", e),
    }
}

/// Whether the server function was called by a plain HTML form (a page not
/// hydrated yet): the browser asks for HTML, a hydrated page for data.
fn plain_form_post() -> bool {
    leptos::prelude::use_context::<axum::http::request::Parts>().is_some_and(|p| {
        p.headers
            .get(axum::http::header::ACCEPT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.contains("text/html"))
    })
}
