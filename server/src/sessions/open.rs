//! Opening a session: limits, the pool or a cold start, the viewport,
//! operator-mode injection, and the hand-out.

use std::sync::Arc;

use anyhow::Context;
use serde_json::json;

use super::files::Downloads;
use super::{
    CredentialMode, DownloadPolicy, OpenRequest, OpenRequestError, RunningSession, SessionError,
    SessionInfo, SessionManager, injection, pool,
};
use crate::audit::{Actor, NewEvent};
use crate::domain::{CloseReason, SessionId, SessionState, TenantId};
use crate::store::api_keys::ApiKeyOwner;
use crate::store::sessions::SessionRow;
use crate::time::now_ms;

/// Who opens a session: an agent (by its key) or an operator (refresh).
struct Opener<'a> {
    tenant: &'a TenantId,
    actor: Actor,
    /// The agent's key, when an agent opens it.
    agent: Option<&'a ApiKeyOwner>,
}

impl SessionManager {
    fn reserve(&self, tenant: &TenantId) -> Result<(), SessionError> {
        let mut slots = self.0.slots.lock().expect("slots lock");
        if slots.total >= self.0.cfg.max_total {
            return Err(SessionError::Limit {
                message: format!(
                    "this host runs its maximum of {} sessions",
                    self.0.cfg.max_total
                ),
                retry_after_s: 5,
            });
        }
        let mine = slots.per_tenant.get(tenant).copied().unwrap_or(0);
        if mine >= self.0.cfg.max_per_tenant {
            return Err(SessionError::Limit {
                message: format!(
                    "tenant {tenant} has its maximum of {} open sessions",
                    self.0.cfg.max_per_tenant
                ),
                retry_after_s: 5,
            });
        }
        slots.total += 1;
        *slots.per_tenant.entry(tenant.clone()).or_default() += 1;
        Ok(())
    }

    pub(super) fn release(&self, tenant: &TenantId) {
        let mut slots = self.0.slots.lock().expect("slots lock");
        slots.total = slots.total.saturating_sub(1);
        if let Some(n) = slots.per_tenant.get_mut(tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                slots.per_tenant.remove(tenant);
            }
        }
    }

    /// Opens a session for the key's tenant.
    #[tracing::instrument(skip_all, fields(tenant.id = %owner.tenant))]
    pub async fn open(
        &self,
        owner: &ApiKeyOwner,
        req: OpenRequest,
    ) -> Result<SessionInfo, SessionError> {
        let who = Opener {
            tenant: &owner.tenant,
            actor: Actor::Agent(owner.key_id.clone()),
            agent: Some(owner),
        };
        self.open_as(who, req).await
    }

    /// Opens a refresh session for an operator: `tenant`'s, clean, for
    /// `domains`, with the refresh deadline unless `deadline_s` is given.
    /// Nothing is injected; what the operator logs in to is saved later
    /// from the live view.
    #[tracing::instrument(skip_all, fields(tenant.id = %tenant))]
    pub async fn open_refresh(
        &self,
        operator_id: &str,
        tenant: &TenantId,
        domains: Vec<String>,
        deadline_s: u64,
    ) -> Result<SessionInfo, SessionError> {
        let req = OpenRequest {
            credential_mode: CredentialMode::Refresh,
            domains,
            // A login page shows what is typed: nothing is recorded.
            record: crate::recording::RecordMode::Off,
            deadline_s: Some(deadline_s),
            refresh_operator: Some(operator_id.to_owned()),
            ..OpenRequest::default()
        };
        let who = Opener {
            tenant,
            actor: Actor::Operator(operator_id.to_owned()),
            agent: None,
        };
        self.open_as(who, req).await
    }

    async fn open_as(
        &self,
        who: Opener<'_>,
        mut req: OpenRequest,
    ) -> Result<SessionInfo, SessionError> {
        let checked = async {
            let deadline_s =
                req.validate(self.0.cfg.deadline_default_s, self.0.cfg.deadline_max_s)?;
            if req.downloads == super::DownloadPolicy::Allow
                && !self.0.cfg.download_over_cdp
                && !self.0.driver.caps().downloads
            {
                return Err(OpenRequestError::DownloadsUnsupported.into());
            }
            if self.0.shutting_down() {
                return Err(SessionError::Limit {
                    message: "the server is shutting down".into(),
                    retry_after_s: 5,
                });
            }
            self.reserve(who.tenant)?;
            Ok(deadline_s)
        }
        .await;
        let deadline_s = match checked {
            Ok(d) => d,
            Err(e) => {
                // Refused before anything started: audited all the same,
                // as a refusal after the grant check is.
                let outcome = match &e {
                    SessionError::Invalid(OpenRequestError::GrantRequired) => {
                        "refused: grant_required"
                    }
                    SessionError::Invalid(_) => "refused: invalid request",
                    _ => "refused: limit",
                };
                self.0
                    .store
                    .audit_append(
                        NewEvent::new(who.actor.clone(), "session.open")
                            .tenant(who.tenant)
                            .params(json!({
                                "credential_mode": req.credential_mode.as_str(),
                                "domains": req.domains.len(),
                            }))
                            .outcome(outcome),
                    )
                    .await?;
                return Err(e);
            }
        };
        let id = SessionId::generate();
        self.0
            .opening
            .lock()
            .expect("opening lock")
            .insert(id.to_string());
        let result = async {
            // The grant is checked (and a single-use one consumed) before
            // any browser starts, so losers of a race are refused at once.
            if req.credential_mode == CredentialMode::Operator {
                let owner = who.agent.ok_or(OpenRequestError::GrantRequired)?;
                let domains = req.vault_domains()?;
                let token = req.grant_token.as_deref().unwrap_or_default();
                let tok = crate::grants::redeem(&self.0.store, owner, id.as_str(), token, &domains)
                    .await?;
                let asked = match tok.request_id.parse::<crate::domain::GrantRequestId>() {
                    Ok(rid) => self.0.store.grant_request_get(&rid).await?,
                    Err(_) => None,
                };
                req.cdp_granted = asked.as_ref().is_some_and(|r| r.cdp);
                req.totp_granted = asked.as_ref().is_some_and(|r| r.totp);
                req.grant = tok
                    .jti
                    .parse::<crate::domain::GrantTokenId>()
                    .ok()
                    .map(|jti| (jti, tok.expires_at));
            }
            self.open_reserved(&who, &req, &id, deadline_s).await
        }
        .await;
        self.0
            .opening
            .lock()
            .expect("opening lock")
            .remove(id.as_str());
        if result.is_err() {
            self.release(who.tenant);
        }
        result
    }

    async fn open_reserved(
        &self,
        who: &Opener<'_>,
        req: &OpenRequest,
        id: &SessionId,
        deadline_s: u64,
    ) -> Result<SessionInfo, SessionError> {
        let inner = &self.0;
        let now = now_ms();
        let domains = serde_json::to_string(&req.domains).unwrap_or_else(|_| "[]".into());
        inner
            .store
            .audit_append(
                NewEvent::new(who.actor.clone(), "session.open")
                    .tenant(who.tenant)
                    .session(id.as_str())
                    .params(json!({
                        "credential_mode": req.credential_mode.as_str(),
                        "domains": req.domains,
                        "record": req.record.as_str(),
                        "deadline_s": deadline_s,
                        "viewport": req.viewport,
                        "downloads": req.downloads.as_str(),
                    }))
                    .outcome("requested"),
            )
            .await?;
        let mut row = SessionRow {
            id: id.to_string(),
            tenant_id: who.tenant.to_string(),
            api_key_id: who.agent.map(|o| o.key_id.clone()),
            state: SessionState::Starting,
            close_reason: None,
            error: None,
            credential_mode: req.credential_mode.as_str().into(),
            domains,
            record: req.record.as_str().into(),
            viewport_w: i64::from(req.viewport.width),
            viewport_h: i64::from(req.viewport.height),
            sandbox_id: None,
            host: inner.host.clone(),
            created_at: now,
            ready_at: None,
            closed_at: None,
            deadline_at: now + i64::try_from(deadline_s).unwrap_or(i64::MAX / 2) * 1000,
            last_activity_at: now,
        };
        // The tenant's limit over every replica (the check above counted
        // this one's only).
        if !inner
            .store
            .session_insert_limited(&row, inner.cfg.max_per_tenant)
            .await?
        {
            inner
                .store
                .audit_append(
                    NewEvent::new(who.actor.clone(), "session.open")
                        .tenant(who.tenant)
                        .session(id.as_str())
                        .outcome("refused: limit"),
                )
                .await?;
            return Err(SessionError::Limit {
                message: format!(
                    "tenant {} has its maximum of {} open sessions",
                    who.tenant, inner.cfg.max_per_tenant
                ),
                retry_after_s: 5,
            });
        }
        let (warm, from_pool) = match inner.pool.take() {
            Some(w) if !w.conn.is_closed() => (w, true),
            stale => {
                if let Some(w) = stale {
                    inner.dispose(w).await;
                }
                match pool::start_browser(inner, "assigned").await {
                    Ok(w) => (w, false),
                    Err(e) => {
                        tracing::error!(error = %format!("{e:#}"), "session open: browser start failed");
                        let msg = "the browser could not be started";
                        if let Err(e) = inner
                            .store
                            .session_end(id, true, CloseReason::StartFailed, Some(msg), now)
                            .await
                        {
                            tracing::error!(error = %format!("{e:#}"), "failed to record a failed start");
                        }
                        if let Err(e) = inner
                            .store
                            .audit_append(
                                NewEvent::new(Actor::System, "session.open")
                                    .tenant(who.tenant)
                                    .session(id.as_str())
                                    .outcome("failed: browser start"),
                            )
                            .await
                        {
                            tracing::error!(error = %format!("{e:#}"), "failed to audit a failed start");
                        }
                        return Err(SessionError::StartFailed(e));
                    }
                }
            }
        };
        // A tenant's own limits replace the defaults the browser started
        // with (on this host's cgroups: an `exec` engine got the defaults at
        // create time, see `start`'s warning).
        if let (Some(own), Some(limits)) = (
            inner.cfg.tenant_limits.get(who.tenant.as_str()),
            &warm.sandbox.limits,
        ) {
            let want = own.over(inner.limits.limits().to_owned());
            if let Err(e) = limits.retune(want) {
                tracing::error!(error = %e, "session open: cannot apply the tenant's limits");
                inner.dispose(warm).await;
                if let Err(e) = inner
                    .store
                    .session_end(
                        id,
                        true,
                        CloseReason::StartFailed,
                        Some("the browser could not be prepared"),
                        now,
                    )
                    .await
                {
                    tracing::error!(error = %format!("{e:#}"), "failed to record a failed start");
                }
                return Err(SessionError::StartFailed(
                    anyhow::Error::from(e).context("cannot apply the tenant's limits"),
                ));
            }
        }
        let mut allowed = None;
        let mut setup = async {
            let assign = async { inner.store.sandbox_assign(&warm.sandbox_id, id).await };
            let viewport = async {
                if req.viewport == warm.viewport {
                    return Ok(());
                }
                let v = req.viewport;
                crate::cdp::size_viewport(&warm.page, v.width, v.height)
                    .await
                    .context("failed to set the viewport")
            };
            tokio::try_join!(assign, viewport)?;
            if req.downloads == DownloadPolicy::Allow {
                let over_cdp = inner.cfg.download_over_cdp;
                let shared = warm.sandbox.downloads();
                let downloads = Downloads::create(
                    &inner.downloads_root,
                    who.tenant,
                    id,
                    (!over_cdp).then_some(shared.host),
                    (
                        inner.cfg.download_max_bytes,
                        inner.cfg.download_session_max_bytes,
                    ),
                )
                .await?;
                // Set up before the browser is told, so a failure leaves
                // the folder to be removed with the session.
                allowed = Some((downloads, None));
                let feed = if over_cdp {
                    // The browser still refuses them; its own connection
                    // takes them (and its events say what it refused).
                    let (capture, held) = crate::cdp::Capture::start(&warm.sandbox.cdp_url)
                        .await
                        .context("failed to take downloads over CDP")?;
                    DownloadFeed::Taken(capture, held, warm.conn.download_events())
                } else {
                    DownloadFeed::Saved(
                        warm.conn
                            .allow_downloads(&shared.inside)
                            .await
                            .context("failed to allow downloads")?,
                    )
                };
                if let Some((_, slot)) = &mut allowed {
                    *slot = Some(feed);
                }
            }
            let injected = match (req.credential_mode, who.agent) {
                (CredentialMode::Operator, Some(owner)) => {
                    Some(injection::inject(inner, owner, id, req, &warm.page).await?)
                }
                _ => None,
            };
            inner.store.session_ready(id, &warm.sandbox_id).await?;
            anyhow::Ok(injected)
        }
        .await;
        let (downloads, events) = allowed.unzip();
        let live = Arc::new(RunningSession::new(
            id.clone(),
            who.tenant.clone(),
            req,
            row.deadline_at,
            warm,
            downloads,
        ));
        match (&live.downloads, events) {
            (Some(downloads), Some(Some(DownloadFeed::Saved(events)))) => {
                downloads.watch(Arc::downgrade(&live), inner.store.clone(), events);
            }
            (Some(downloads), Some(Some(DownloadFeed::Taken(capture, held, refused)))) => {
                downloads.capture(
                    Arc::downgrade(&live),
                    inner.store.clone(),
                    capture,
                    held,
                    refused,
                );
            }
            _ => {}
        }
        inner
            .live
            .lock()
            .expect("live lock")
            .insert(id.clone(), live.clone());
        if let Ok(Some(injected)) = &mut setup {
            live.set_init_scripts(std::mem::take(&mut injected.scripts));
        }
        if setup.is_ok()
            && let Err(e) = self.guard_navigation(&live).await
        {
            setup = Err(e.context("failed to hold navigations to the session's domains"));
        }
        if let Ok(Some(injected)) = &setup
            && !injected.smoke.is_empty()
        {
            // Off the open's critical path, but ahead of every tool call.
            let (locked, is_locked) = tokio::sync::oneshot::channel();
            tokio::spawn(injection::reset_to_blank(live, locked));
            let _ = is_locked.await;
        }
        let injected = match setup {
            Ok(injected) => injected,
            Err(e) => {
                // `open` releases the slot for every failed open.
                self.end_keeping_slot(
                    id,
                    CloseReason::StartFailed,
                    Some("the browser could not be prepared".into()),
                    Actor::System,
                )
                .await;
                return Err(SessionError::StartFailed(e));
            }
        };
        row.state = SessionState::Ready;
        let mut info = SessionInfo::from_row(&row);
        info.from_pool = Some(from_pool);
        info.downloads = Some(req.downloads);
        if let Some(injected) = injected {
            info.injected = Some(injected.counts);
            info.injected_storage = Some(injected.storage);
            info.smoke = (!injected.smoke.is_empty()).then_some(injected.smoke);
            info.missing_credentials = injected.missing_credentials;
        }
        Ok(info)
    }
}

/// Where a session's downloads come from.
enum DownloadFeed {
    /// The browser's events for files it saves in the shared folder.
    Saved(tokio::sync::mpsc::UnboundedReceiver<crate::cdp::DownloadEvent>),
    /// Responses held for taking over CDP, and the browser's refusals.
    Taken(
        crate::cdp::Capture,
        tokio::sync::mpsc::UnboundedReceiver<crate::cdp::HeldResponse>,
        tokio::sync::mpsc::UnboundedReceiver<crate::cdp::DownloadEvent>,
    ),
}
