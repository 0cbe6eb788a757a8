//! `SessionManager::run_tool`, the pipeline itself: the call's bound,
//! control, the risk gate, the audit row, the tab lock, the CDP calls
//! (`exec.rs`), a dead browser failing the session, recording, the result.

use std::sync::Arc;
use std::time::Duration;

use super::{LiveInput, Tool, ToolCall, ToolError, ToolOutput, exec, gate, input};
use crate::audit::{Actor, NewEvent};
use crate::recording::RecordError;
use crate::sessions::{RunningSession, SessionError, SessionManager};

/// Time a call may take past its bound for the steps around the bounded
/// one (reading the title, resetting a tab) before it is cut off.
const OVERRUN: Duration = Duration::from_secs(5);

impl SessionManager {
    /// Runs one tool call on `session` as `actor`: the only way a tool
    /// reaches a browser. The audit row is written before anything is sent
    /// to the browser; tool calls on one session run one at a time.
    ///
    /// Every answer, and every error's message, has the codes typed lately
    /// blanked out (a site that takes its code by GET shows it in the
    /// tab's address).
    #[tracing::instrument(skip_all, fields(session.id = %session.id, tool = call.tool.action()))]
    pub async fn run_tool(
        &self,
        session: &Arc<RunningSession>,
        actor: Actor,
        via: crate::audit::Surface,
        call: ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        let mut answer = self.run_tool_unscrubbed(session, actor, via, call).await;
        session.scrub_answer(&mut answer);
        answer
    }

    /// [`run_tool`](Self::run_tool) before its answer is scrubbed. An
    /// agent's call that acts holds the session's `acting` lock from the
    /// gate to the end of the action (let go while an approval waits:
    /// [`gate::ACTING`]); reads and an operator's calls do not take it.
    async fn run_tool_unscrubbed(
        &self,
        session: &Arc<RunningSession>,
        actor: Actor,
        via: crate::audit::Surface,
        call: ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        // Boxed: the pipeline's future is large, and a task's step runs it
        // deep in its own (a debug build's stack overflowed).
        let acts = !matches!(actor, Actor::Operator(_)) && call.tool.acts();
        let held = Box::pin(self.run_tool_held(session, actor, via, call));
        if !acts {
            return held.await;
        }
        let acting = session.acting.clone().lock_owned().await;
        gate::ACTING
            .scope(std::cell::RefCell::new(Some(acting)), held)
            .await
    }

    /// [`run_tool_unscrubbed`](Self::run_tool_unscrubbed) once the call
    /// holds what it must.
    async fn run_tool_held(
        &self,
        session: &Arc<RunningSession>,
        actor: Actor,
        via: crate::audit::Surface,
        call: ToolCall,
    ) -> Result<ToolOutput, ToolError> {
        // A refresh session is its operator's alone, whatever path an
        // agent's call took to get here.
        if session.mode == crate::sessions::CredentialMode::Refresh
            && !matches!(actor, Actor::Operator(_))
        {
            return Err(ToolError::Session(SessionError::NotFound));
        }
        let timeout = self.bound(call.timeout_ms)?;
        let tool = call.tool;
        // Over the cap, nothing is audited as requested or written.
        if let Tool::Upload { files, .. } = &tool {
            let total: u64 = files.iter().map(|f| f.bytes.len() as u64).sum();
            let max = self.0.cfg.upload_max_bytes;
            if total > max {
                return Err(ToolError::TooLarge(format!(
                    "the files hold {total} bytes; an upload may hold at most {max} (upload_max_mb)"
                )));
            }
        }
        let mut params = exec::audit_params(&tool);
        params["via"] = serde_json::json!(via.as_str());
        let event = NewEvent::new(actor.clone(), tool.action())
            .tenant(&session.tenant)
            .session(session.id.as_str())
            .params(params);
        // Whoever does not hold control while an operator does is refused,
        // and the refusal is audited.
        if let Some(holder) = session.control()
            && !matches!(&actor, Actor::Operator(id) if *id == holder.operator_id)
        {
            self.0
                .store
                .audit_append(event.outcome("refused: operator_has_control"))
                .await?;
            return Err(ToolError::OperatorHasControl(holder.name));
        }
        // The risk gate: may wait for an operator's decision, which is not
        // part of the call's own bound. A click is checked at its target,
        // inside the click, and a key where it acts, inside the key (below).
        let gated = self.gate(session, &actor, &tool, &event, timeout).await?;
        // Pointer moves and wheel turns are audited one a second at most
        // (each); every other input is.
        let sampled_out = match tool {
            Tool::Input(LiveInput::Mouse {
                kind: crate::cdp::MouseKind::Move,
                ..
            }) => !session.sample(&session.last_move_audited),
            Tool::Input(LiveInput::Wheel { .. }) => !session.sample(&session.last_wheel_audited),
            _ => false,
        };
        if !sampled_out {
            self.0
                .store
                .audit_append(event.clone().outcome("requested"))
                .await?;
        }
        let refusals = session.refusals.mark();
        // The whole call, waiting for the tab lock included, is bounded: a
        // step without a bound of its own (a title read on a page whose
        // script never yields, say) cannot hold the session past it.
        let budget = timeout + OVERRUN;
        // Held at the target, the decision, then the click again, looked
        // up and judged anew: if the page changed what is under the pointer
        // while the approval waited, it waits again (a dry run only
        // records, and clicks). A key held where it acts runs again the
        // same way, its focus judged before the key goes down and after.
        let mut checking = gate::Checking::new(gated);
        let res = loop {
            session.touch();
            let check = checking.check(self, session, &tool);
            let res = match tokio::time::timeout(budget, async {
                let mut tabs = session.tabs.lock().await;
                match &tool {
                    Tool::TypeTotp { target, label } => {
                        self.type_totp(
                            session,
                            &mut tabs,
                            target.as_ref(),
                            label.as_deref(),
                            timeout,
                        )
                        .await
                    }
                    _ => {
                        let cfg = &self.0.cfg;
                        exec::run(session, &mut tabs, &tool, timeout, check.as_ref(), cfg).await
                    }
                }
            })
            .await
            {
                Ok(res) => res,
                Err(_) => Err(ToolError::Timeout(format!(
                    "{} did not finish within {} ms",
                    tool.action(),
                    budget.as_millis()
                ))),
            };
            drop(check);
            let settled = checking.settle(self, session, &actor, &tool, &event, res);
            if let Some(res) = settled.await {
                break res;
            }
        };
        session.touch();
        let out = match res {
            Ok(out) => out,
            Err(e) => return Err(self.map_failure(session, e).await),
        };
        let out = match out {
            ToolOutput::Navigated(mut nav) => {
                nav.note_refusals(session.refusals.since(refusals));
                if let Some(failure) = &nav.failure {
                    // Chromium's net error (no URL): which one the guard's
                    // refusal turned into, for whoever reads a flaky run.
                    tracing::debug!(session.id = %session.id, error = %failure, refused = nav.egress_refused.is_some(), "navigation failed");
                }
                if let Some(failure) = nav.failure.take()
                    && nav.egress_refused.is_none()
                {
                    return Err(ToolError::ActionFailed(failure));
                }
                ToolOutput::Navigated(nav)
            }
            ToolOutput::Screenshot(mut shot) => {
                let seq = session.next_screenshot_seq();
                let saved = self
                    .recorder()
                    .save(
                        session.record,
                        session.tenant.as_str(),
                        session.id.as_str(),
                        seq,
                        shot.format.extension(),
                        &shot.bytes,
                    )
                    .await;
                let kept = match saved {
                    // Named relative to the data folder, and by its archive
                    // id: the host's own paths are not the agent's business.
                    Ok(path) => path.map(|p| {
                        let file = p
                            .file_name()
                            .map(|f| f.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        let id = crate::recording::ScreenshotId::new(
                            session.tenant.clone(),
                            session.id.clone(),
                            seq,
                        );
                        (
                            format!("sessions/{}/{}/{file}", session.tenant, session.id),
                            id.to_string(),
                        )
                    }),
                    Err(RecordError::QuotaFull { used_mb, quota_mb }) => {
                        self.0
                            .store
                            .audit_append(
                                NewEvent::new(Actor::System, "recording.refused")
                                    .tenant(&session.tenant)
                                    .session(session.id.as_str())
                                    .params(serde_json::json!({
                                        "used_mb": used_mb,
                                        "quota_mb": quota_mb,
                                    }))
                                    .outcome("quota_full"),
                            )
                            .await?;
                        return Err(ToolError::RecordingQuotaFull(
                            RecordError::QuotaFull { used_mb, quota_mb }.to_string(),
                        ));
                    }
                    Err(RecordError::Io(e)) => return Err(ToolError::Internal(e)),
                };
                (shot.persisted_path, shot.screenshot_id) = kept.unzip();
                ToolOutput::Screenshot(shot)
            }
            // Typed: the row says how many digits, never which.
            ToolOutput::TypedCode(typed) => {
                let mut done = event.outcome("typed");
                done.params["typed_digits"] = serde_json::json!(typed.typed_digits);
                self.0.store.audit_append(done).await?;
                ToolOutput::TypedCode(typed)
            }
            other => other,
        };
        Ok(out)
    }

    /// A tool call's bound: the caller's `timeout_ms` or the server's, whichever is smaller.
    fn bound(&self, timeout_ms: Option<u64>) -> Result<Duration, ToolError> {
        let max = self.tool_timeout();
        match timeout_ms {
            None => Ok(max),
            Some(ms) if ms == 0 || ms > input::MAX_TIMEOUT_MS => Err(ToolError::Invalid(format!(
                "timeout_ms must be between 1 and {}",
                input::MAX_TIMEOUT_MS
            ))),
            Some(ms) => Ok(Duration::from_millis(ms).min(max)),
        }
    }

    /// A dead browser fails the session, whatever the call reported.
    async fn map_failure(&self, session: &RunningSession, e: ToolError) -> ToolError {
        // A page that ran into its limits crashed its tab (or the browser):
        // the session ends now, and the agent hears why.
        if let Some(limits) = &session.sandbox.limits
            && let Some(breach) = limits.breach()
        {
            let why = breach.describe(&limits.limits());
            tracing::warn!(reason = %why, "tool failed: a resource limit was hit");
            self.fail(&session.id, crate::domain::CloseReason::ResourceLimit, &why)
                .await;
            return ToolError::Session(SessionError::Gone {
                state: crate::domain::SessionState::Failed,
                reason: Some(crate::domain::CloseReason::ResourceLimit),
            });
        }
        if matches!(e, ToolError::BrowserFailed) || session.browser_gone() {
            // The kind only: a dialog's error quotes the page's text.
            tracing::warn!(error = e.code(), "tool failed: the browser is gone");
            self.fail(
                &session.id,
                crate::domain::CloseReason::BrowserExited,
                "the browser exited unexpectedly",
            )
            .await;
            return ToolError::BrowserFailed;
        }
        e
    }
}
