//! One task's step loop, `Runner`: the start page, then per step the
//! picture (`picture.rs`), the model exchange (the messages, the answer
//! parsed by `uitars`), the action (`act.rs`) and its trace row
//! (`trace.rs`), until the model finishes, calls for an operator, or the
//! task runs out of steps or time or is aborted; `Outcome`, how it ended.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use super::act::StepError;
use super::frames::Frames;
use super::model::{Answer, Message, ModelClient, ModelError};
use super::run::Tasks;
use super::trace::describe;
use super::uitars::{self, Action};
use crate::audit::Actor;
use crate::domain::TaskId;
use crate::sessions::{RunningSession, Tool};
use crate::store::api_keys::ApiKeyOwner;
use crate::time::now_ms;

/// How the loop ended.
pub(super) struct Outcome {
    pub(super) status: &'static str,
    pub(super) summary: Option<String>,
    pub(super) result_data: Option<String>,
    pub(super) error: Option<String>,
}

impl Outcome {
    pub(super) fn new(status: &'static str, summary: impl Into<String>) -> Self {
        Self {
            status,
            summary: Some(summary.into()),
            result_data: None,
            error: None,
        }
    }

    pub(super) fn failed(status: &'static str, code: &str, summary: impl Into<String>) -> Self {
        Self {
            error: Some(code.to_owned()),
            ..Self::new(status, summary)
        }
    }
}

/// One task's loop.
pub(super) struct Runner {
    pub(super) tasks: Tasks,
    pub(super) model: ModelClient,
    pub(super) owner: ApiKeyOwner,
    pub(super) live: Arc<RunningSession>,
    pub(super) task_id: TaskId,
    pub(super) instruction: String,
    pub(super) max_steps: u32,
    pub(super) aborted: watch::Receiver<bool>,
    /// The screencast the steps' pictures come from.
    pub(super) frames: Option<Frames>,
    /// When the last action ended.
    pub(super) acted: tokio::time::Instant,
    /// Trace rows being written.
    pub(super) rows: Vec<tokio::task::JoinHandle<()>>,
    /// The kind of the JavaScript dialog the last action opened and the
    /// runner cancelled (the model cannot see or answer dialogs).
    pub(super) cancelled: std::sync::Mutex<Option<crate::cdp::DialogKind>>,
}

impl Runner {
    pub(super) async fn drive(mut self, start: crate::domain::TargetUrl) {
        let mut steps = 0i64;
        let mut last_shot: Option<String> = None;
        let outcome = self.run(start, &mut steps, &mut last_shot).await;
        if let Some(frames) = self.frames.take() {
            frames.stop();
        }
        for row in std::mem::take(&mut self.rows) {
            let _ = row.await;
        }
        let sessions = &self.tasks.0.sessions;
        // The task owns its session: it goes with it.
        let _ = sessions.close(&self.owner, &self.live.id).await;
        if let Err(e) = self
            .tasks
            .end(
                &self.task_id,
                outcome.status,
                outcome.summary,
                outcome.result_data,
                outcome.error,
                steps,
                last_shot,
            )
            .await
        {
            tracing::error!(error = %format!("{e:#}"), task.id = %self.task_id, "failed to record a task's end");
        }
    }

    pub(super) fn actor(&self) -> Actor {
        Actor::Agent(self.owner.key_id.clone())
    }

    /// Waits until no operator holds control; false if the session ended or
    /// the task was aborted first.
    pub(super) async fn wait_for_operator(&self) -> bool {
        let mut control = self.live.watch_control();
        let mut aborted = self.aborted.clone();
        loop {
            if control.borrow().is_none() {
                return true;
            }
            tokio::select! {
                changed = control.changed() => if changed.is_err() { return false },
                _ = aborted.changed() => return false,
                () = tokio::time::sleep(Duration::from_secs(1)) => {
                    if self.live.browser_gone() || now_ms() > self.live.deadline_at {
                        return false;
                    }
                }
            }
        }
    }

    async fn run(
        &mut self,
        start: crate::domain::TargetUrl,
        steps: &mut i64,
        last_shot: &mut Option<String>,
    ) -> Outcome {
        if let Err(e) = self
            .tool(Tool::Navigate {
                url: start,
                wait: crate::cdp::WaitUntil::Load,
            })
            .await
        {
            return Outcome::failed(
                "error",
                e.code(),
                format!("the start page did not load: {e}"),
            );
        }
        self.acted = tokio::time::Instant::now();
        let system = super::prompt::system(&self.instruction, self.live.totp_granted);
        // (answer text, screenshot) of earlier steps.
        let mut history: Vec<(String, Vec<u8>)> = Vec::new();
        for n in 1..=i64::from(self.max_steps) {
            if *self.aborted.borrow() {
                return Outcome::failed("aborted", "aborted", "aborted by the agent");
            }
            // A key revoked while its task runs: the task acts no more
            // (as its CDP connections and live links end).
            match self.tasks.0.store.api_key_active(&self.owner.key_id).await {
                Ok(true) => {}
                Ok(false) => {
                    return Outcome::failed(
                        "denied",
                        "key_revoked",
                        "the API key was revoked while the task ran; it acts no more",
                    );
                }
                Err(e) => {
                    tracing::error!(error = %format!("{e:#}"), "a task cannot check its API key");
                    return Outcome::failed(
                        "error",
                        "internal",
                        "the API key could not be checked",
                    );
                }
            }
            if now_ms() > self.live.deadline_at {
                return Outcome::failed("deadline", "deadline", "the task ran out of time");
            }
            let looked = std::time::Instant::now();
            let shot = self.screenshot().await;
            metrics::histogram!("cordon_task_step_picture_seconds")
                .record(looked.elapsed().as_secs_f64());
            let shot = match shot {
                Ok(s) => s,
                Err(e) => return self.tool_failure(e),
            };
            *last_shot = shot.id.clone();
            let messages = self.messages(&system, &history, &shot.jpeg);
            let mut aborted = self.aborted.clone();
            let left =
                Duration::from_millis(u64::try_from(self.live.deadline_at - now_ms()).unwrap_or(0));
            let answer = tokio::select! {
                a = self.model.complete(&messages) => a,
                _ = aborted.changed() => {
                    return Outcome::failed("aborted", "aborted", "aborted by the agent");
                }
                () = tokio::time::sleep(left) => {
                    return Outcome::failed("deadline", "deadline", "the task ran out of time while the model thought");
                }
            };
            let answer: Answer = match answer {
                Ok(a) => a,
                Err(e) => {
                    self.record(n, None, None, &format!("{}: {e}", e.code()), &shot, None);
                    *steps = n;
                    return model_failure(&e);
                }
            };
            *steps = n;
            let parsed = match uitars::parse(&answer.text) {
                Ok(p) => p,
                Err(e) => {
                    self.record(
                        n,
                        None,
                        None,
                        &format!("bad_model_answer: {}", e.code()),
                        &shot,
                        Some(&answer),
                    );
                    return Outcome::failed(
                        "error",
                        "bad_model_answer",
                        format!("the model's answer could not be parsed: {e}"),
                    );
                }
            };
            let shown = describe(&parsed.action);
            let thought = parsed.thought.clone();
            match parsed.action {
                Action::Finished { content } => {
                    self.record(n, thought, Some(shown), "finished", &shot, Some(&answer));
                    let data = serde_json::from_str::<Value>(&content)
                        .ok()
                        .filter(Value::is_object)
                        .map(|v| v.to_string());
                    return Outcome {
                        status: "finished",
                        summary: Some(content),
                        result_data: data,
                        error: None,
                    };
                }
                Action::CallUser => {
                    self.record(
                        n,
                        thought,
                        Some(shown),
                        "waiting for an operator",
                        &shot,
                        Some(&answer),
                    );
                    if !self.wait_for_call_user().await {
                        return Outcome::failed(
                            "deadline",
                            "call_user",
                            "the model asked for an operator and none took over in time",
                        );
                    }
                    self.acted = tokio::time::Instant::now();
                }
                action => {
                    let acting = std::time::Instant::now();
                    let result = self.execute(&action, &shot.space).await;
                    metrics::histogram!("cordon_task_step_action_seconds")
                        .record(acting.elapsed().as_secs_f64());
                    self.acted = tokio::time::Instant::now();
                    let cancelled = self.cancelled.lock().expect("cancelled lock").take();
                    let outcome = match (&result, cancelled) {
                        (Ok(()), None) => "ok".to_owned(),
                        (Ok(()), Some(kind)) => format!(
                            "ok; the page opened a {} dialog, which run_task cancels",
                            kind.as_str()
                        ),
                        (Err(e), _) => format!("{}: {e}", e.code()),
                    };
                    self.record(n, thought, Some(shown), &outcome, &shot, Some(&answer));
                    // Aborted while the action waited for an operator: it
                    // ran nothing, and the task ends as aborted.
                    if result.is_err() && *self.aborted.borrow() {
                        return Outcome::failed("aborted", "aborted", "aborted by the agent");
                    }
                    if let Err(e) = result {
                        match e.code() {
                            "denied_by_operator" | "approval_timed_out" | "denied_by_policy" => {
                                return Outcome::failed("denied", e.code(), e.to_string());
                            }
                            "browser_failed" | "gone" | "not_found" => {
                                return Outcome::failed("error", e.code(), e.to_string());
                            }
                            // The page refused: the model sees the next screenshot.
                            _ => {}
                        }
                    }
                }
            }
            history.push((answer.text, shot.jpeg));
            // Only the newest `history_images` pictures are sent again:
            // older ones are not kept (500 steps of pictures would be
            // tens of MiB a task).
            let keep_from = history
                .len()
                .saturating_sub(self.tasks.0.settings.history_images);
            if let Some(old) = keep_from.checked_sub(1).and_then(|i| history.get_mut(i)) {
                old.1 = Vec::new();
            }
        }
        Outcome::new(
            "max_steps",
            format!(
                "the task took its {} steps without finishing",
                self.max_steps
            ),
        )
    }

    fn tool_failure(&self, e: StepError) -> Outcome {
        Outcome::failed("error", e.code(), e.to_string())
    }

    /// After `call_user()`: waits for an operator to take control and hand
    /// it back (the live view), until the deadline.
    async fn wait_for_call_user(&self) -> bool {
        self.tasks.set_waiting(self.task_id.as_str(), true);
        let done = self.call_user_answered().await;
        self.tasks.set_waiting(self.task_id.as_str(), false);
        done
    }

    async fn call_user_answered(&self) -> bool {
        let mut control = self.live.watch_control();
        let mut aborted = self.aborted.clone();
        let before = self.live.control_changes();
        loop {
            // Taken and handed back since the model asked (however fast).
            if control.borrow_and_update().is_none() && self.live.control_changes() >= before + 2 {
                return true;
            }
            tokio::select! {
                changed = control.changed() => if changed.is_err() { return false },
                _ = aborted.changed() => return false,
                () = tokio::time::sleep(Duration::from_secs(1)) => {
                    if self.live.browser_gone() || now_ms() > self.live.deadline_at {
                        return false;
                    }
                }
            }
        }
    }

    /// The messages for one step: the prompt, the earlier answers (their
    /// screenshots only for the newest few: the prompt size guardrail), and
    /// the screenshot now.
    fn messages(&self, system: &str, history: &[(String, Vec<u8>)], now: &[u8]) -> Vec<Message> {
        let keep_from = history
            .len()
            .saturating_sub(self.tasks.0.settings.history_images);
        let mut out = vec![Message::System(system.to_owned())];
        for (i, (answer, jpeg)) in history.iter().enumerate() {
            if i >= keep_from {
                out.push(Message::User {
                    text: None,
                    images: vec![("image/jpeg", jpeg.clone())],
                });
            }
            out.push(Message::Assistant(answer.clone()));
        }
        out.push(Message::User {
            text: None,
            images: vec![("image/jpeg", now.to_vec())],
        });
        out
    }
}

/// A model failure as the task's end.
fn model_failure(e: &ModelError) -> Outcome {
    Outcome::failed("error", e.code(), e.to_string())
}
