//! Step 3 of the tool pipeline: the risk gate (`policy`). Operator input
//! passes (the operator is the human in the loop); for agents, the call is
//! assessed against the tenant's rules: low and medium run at once, a
//! password field is refused outright, high and critical wait for an
//! operator's decision in the dashboard (or, in dry-run, are only recorded).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::{Tool, ToolError, exec};
use crate::audit::{Actor, NewEvent};
use crate::policy::{self, Assessment, Decision, ElementFacts, Facts, Pending, Rules};
use crate::sessions::running::Gesture;
use crate::sessions::{RunningSession, SessionManager};
use crate::time::now_ms;

/// Bound of the browser calls that gather facts and the screenshot.
const LOOK: Duration = Duration::from_secs(3);

/// What the gate decided before the call runs.
#[derive(Debug, Clone)]
pub(super) enum Gate {
    /// Run it.
    Pass,
    /// A click a rule looks at: checked at its target, inside the click.
    AtClick,
    /// A key that acts on the focus (Enter or Space, `type`'s submit),
    /// passed or approved as judged here: checked again where it acts,
    /// inside the key, once the page has handled its keydown (a handler
    /// may move the focus onto another element).
    AtKey(Judged),
    /// A dialog's answer a rule looks at, passed or approved as judged
    /// here: checked again as it is answered (another dialog may have
    /// taken its place meanwhile).
    AtDialog(Judged),
}

/// What the gate let through: the assessment, and what it saw
/// ([`seen`]).
#[derive(Debug, Clone)]
pub(super) struct Judged {
    assessment: Assessment,
    seen: serde_json::Value,
}

/// Whether `tool` (as judged: an agent's raw key down is a `press`) acts
/// on the focus through a key's character: Enter or Space (its keypress
/// presses the focused button or submits its form), or `type`'s submit.
fn acts_at_key(tool: &Tool) -> bool {
    match tool {
        Tool::Press { key } => policy::assess::activation_key(key),
        Tool::Type { submit, .. } => *submit,
        _ => false,
    }
}

/// The gate's check inside the action: a click's at its target (between
/// its lookup and the button going down), a key's at the focus.
pub(super) struct TargetCheck<'a> {
    pub(super) allow: ClickCheck<'a>,
    /// The action runs again after an approval made inside it: the gate
    /// did not judge this run, so a key's focus is judged before the key
    /// goes down too (and `type` does not type its text again).
    pub(super) again: bool,
}

/// An action checked inside itself, run until the check no longer holds
/// it: held, it waits for an operator's decision and runs again, judged
/// anew (a key's focus before the key goes down too: the gate's own
/// judgement was of the page before the approval); held in a dry run, it
/// is recorded and runs as it is. The loop the tool pipeline and the CDP
/// endpoint's keys share: [`check`](Self::check) before each run,
/// [`settle`](Self::settle) after it.
pub(super) struct Checking {
    checks: bool,
    judged: Option<Judged>,
    approved: Option<Approved>,
    recorded: bool,
}

impl Checking {
    /// After the gate let the action through as `gated`.
    pub(super) fn new(gated: Gate) -> Self {
        Self {
            checks: !matches!(gated, Gate::Pass),
            judged: match gated {
                Gate::AtKey(judged) | Gate::AtDialog(judged) => Some(judged),
                _ => None,
            },
            approved: None,
            recorded: false,
        }
    }

    /// The check for the next run (none when the gate does not look).
    pub(super) fn check<'a>(
        &'a self,
        manager: &'a SessionManager,
        session: &'a RunningSession,
        tool: &'a Tool,
    ) -> Option<TargetCheck<'a>> {
        self.checks.then(|| TargetCheck {
            allow: if self.recorded {
                Box::new(|_, _| Ok(()))
            } else {
                manager.click_check(session, tool, self.judged.as_ref(), self.approved.as_ref())
            },
            again: self.judged.is_none(),
        })
    }

    /// What a run came to: `Some`, its result; `None`, it was held inside
    /// and the operator's decision is in: run it again.
    pub(super) async fn settle<T>(
        &mut self,
        manager: &SessionManager,
        session: &Arc<RunningSession>,
        actor: &Actor,
        tool: &Tool,
        event: &NewEvent,
        res: Result<T, ToolError>,
    ) -> Option<Result<T, ToolError>> {
        match res {
            Err(ToolError::Held(held)) => {
                match manager.hold(session, actor, tool, event, *held).await {
                    Ok(approved) => {
                        self.recorded = approved.is_none();
                        self.approved = approved;
                        self.judged = None;
                        None
                    }
                    Err(e) => Some(Err(e)),
                }
            }
            res => Some(res),
        }
    }
}

/// Chromium's modifier bits (`Input.dispatchKeyEvent`).
const ALT: i64 = 1;
const CTRL: i64 = 2;
const META: i64 = 4;

/// A click the gate stopped at its target, before the button went down.
#[derive(Debug)]
pub struct Held {
    assessment: Assessment,
    /// The target's box, for the outline on the approval's screenshot.
    rect: Option<[f64; 4]>,
    /// What the gate saw ([`seen`]): an approval holds for this only.
    seen: serde_json::Value,
}

/// What an operator approved: the assessment, and what the gate saw when
/// it was made ([`seen`]). The action runs after the approval only if it
/// is judged the same on the same page and element: an approval of
/// "Delete" on one page is no approval of "Delete" on another.
#[derive(Debug, Clone)]
pub(super) struct Approved {
    assessment: Assessment,
    seen: serde_json::Value,
}

impl Approved {
    /// Whether `assessment`, made of what `seen` says, is what was approved.
    fn holds_for(&self, assessment: &Assessment, seen: &serde_json::Value) -> bool {
        same(&self.assessment, assessment) && self.seen == *seen
    }
}

/// A dialog as the gate judges its answer: the host of the frame that
/// opened it, and its message as the element OK acts on (an alert has
/// only OK: it acts on nothing).
pub(super) fn dialog_facts(d: &crate::cdp::Dialog) -> (String, serde_json::Value) {
    let element = if d.kind == crate::cdp::DialogKind::Alert {
        serde_json::Value::Null
    } else {
        json!({
            "name": d.message,
            "names": [d.message],
            "role": "dialog",
            "activates": true,
        })
    };
    let host = url::Url::parse(&d.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .unwrap_or_default();
    (host, element)
}

/// What an approval is bound to: the page's host and address, the
/// history entry a step goes to, and the element's facts (its names,
/// kind, form, link, context) without its box and the scroll, which may
/// move a little while the approval waits without the element changing.
pub(super) fn seen(
    host: &str,
    element: &serde_json::Value,
    history: Option<&str>,
) -> serde_json::Value {
    let mut element = element.clone();
    if let Some(facts) = element.as_object_mut() {
        facts.remove("rect");
        facts.remove("scroll");
    }
    json!({ "host": host, "element": element, "history": history })
}

tokio::task_local! {
    /// The calling tool call's hold on its session's `acting` lock
    /// (`RunningSession::acting`, taken in `pipeline.rs`): let go while
    /// an approval waits, so the session's other calls run meanwhile, and
    /// taken again before the action is judged anew.
    pub(super) static ACTING: std::cell::RefCell<Option<tokio::sync::OwnedMutexGuard<()>>>;
}

tokio::task_local! {
    /// Set by a caller that can be called off while its action waits for
    /// an operator (a task: its abort): once it says `true`, the action
    /// runs nothing, whatever the operator decides.
    pub static CALLED_OFF: tokio::sync::watch::Receiver<bool>;
}

/// Resolves once the calling task is called off ([`CALLED_OFF`]); never
/// for a caller that cannot be.
async fn called_off() {
    let Ok(mut off) = CALLED_OFF.try_with(Clone::clone) else {
        return std::future::pending().await;
    };
    if off.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Whether the calling task has been called off by now.
fn is_called_off() -> bool {
    CALLED_OFF.try_with(|off| *off.borrow()).unwrap_or(false)
}

/// The gate's check of a click's target, run by the click between its
/// lookup and the button going down: an error stops it.
pub(super) type ClickCheck<'a> =
    Box<dyn Fn(&str, serde_json::Value) -> Result<(), ToolError> + Send + Sync + 'a>;

impl SessionManager {
    /// Lets `tool` through, or answers why not. `event` is the call's own
    /// audit row (written here with a refusal's outcome when it is refused).
    /// An approved action is looked at again before it runs: if what the
    /// gate sees changed while the approval waited, it waits again.
    pub(super) async fn gate(
        &self,
        session: &Arc<RunningSession>,
        actor: &Actor,
        tool: &Tool,
        event: &NewEvent,
        bound: Duration,
    ) -> Result<Gate, ToolError> {
        self.gate_in(session, actor, tool, event, bound, None).await
    }

    /// A CDP client's command that acts (`sessions::cdp`), judged as the
    /// agent's tool call or raw input it amounts to, in the tab the client
    /// sent it to (not the tool API's active tab). `Ok`: it may run now
    /// (at once, or approved by an operator).
    pub async fn gate_in_tab(
        &self,
        session: &Arc<RunningSession>,
        actor: &Actor,
        tool: &Tool,
        event: &NewEvent,
        tab: Option<&chromiumoxide::cdp::browser_protocol::target::TargetId>,
    ) -> Result<(), ToolError> {
        let bound = Duration::from_secs(10);
        self.gate_in(session, actor, tool, event, bound, tab)
            .await
            .map(|_| ())
    }

    /// A CDP client's key going down with its character (`keyDown` with
    /// the `text` of Enter or Space), judged as `press` at its tab's focus
    /// and then sent by Cordon in two steps, as the tool API's `press` is:
    /// the key without its character, a look at the focus once the page has
    /// handled the keydown, the character (a keydown handler that moves the
    /// focus onto a destructive button does not take the keypress there
    /// unjudged). Held there, it waits for an operator and runs again.
    /// `Ok(false)`: nothing to check (an operator's, or no rule looks):
    /// the client's command goes on as it is.
    pub async fn cdp_key_down(
        &self,
        session: &Arc<RunningSession>,
        actor: &Actor,
        tool: &Tool,
        event: &NewEvent,
        tab: &chromiumoxide::cdp::browser_protocol::target::TargetId,
        params: &serde_json::Value,
    ) -> Result<bool, ToolError> {
        let bound = Duration::from_secs(10);
        let gated = self
            .gate_in(session, actor, tool, event, bound, Some(tab))
            .await?;
        if !matches!(gated, Gate::AtKey(_)) {
            return Ok(false);
        }
        let mut checking = Checking::new(gated);
        loop {
            let check = checking
                .check(self, session, tool)
                .expect("a key is checked");
            let page = session.page_of(tab).await?;
            let sent = crate::cdp::press_checked(
                &page,
                crate::cdp::KeyDown::Client(params),
                bound,
                &session.sandbox.cdp_url,
                check.again,
                |h, f| (check.allow)(h, f),
            )
            .await?;
            drop(check);
            if let Some(sent) = checking
                .settle(self, session, actor, tool, event, sent)
                .await
            {
                return sent.map(|()| true);
            }
        }
    }

    async fn gate_in(
        &self,
        session: &Arc<RunningSession>,
        actor: &Actor,
        tool: &Tool,
        event: &NewEvent,
        bound: Duration,
        tab: Option<&chromiumoxide::cdp::browser_protocol::target::TargetId>,
    ) -> Result<Gate, ToolError> {
        if matches!(actor, Actor::Operator(_)) {
            return Ok(Gate::Pass);
        }
        // Alt with a character fires the page's `accesskey` (Chromium on
        // Linux), pressing an element the focus is not on: refused, as
        // the CDP endpoint refuses it (`access_key`). AltGr (Ctrl+Alt)
        // types and passes.
        if let Tool::Input(super::LiveInput::Key {
            down: true,
            key,
            modifiers,
            ..
        }) = tool
            && modifiers & (ALT | CTRL | META) == ALT
            && key.chars().count() == 1
            && !key.chars().all(char::is_control)
        {
            self.0
                .store
                .audit_append(event.clone().outcome("refused: access_key"))
                .await?;
            return Err(ToolError::DeniedByPolicy(
                "Alt with a character fires the page's access keys, which the risk gate cannot judge"
                    .into(),
            ));
        }
        // An agent's raw input (`run_task`'s double and right clicks,
        // drags, hotkeys, text) is judged as the click, key or typing it is.
        let judged = match tool {
            Tool::Input(input) => match as_action(input) {
                Some(t) => t,
                None => return Ok(Gate::Pass),
            },
            t => t.clone(),
        };
        // A raw button down or up: the gesture it belongs to.
        let gesture = match tool {
            Tool::Input(input) => gesture_of(input),
            _ => None,
        };
        // A raw button going down or up is judged with the pointer at its
        // point (moved there first, as the press would), once the page
        // has handled the hover.
        let pointer = match tool {
            Tool::Input(input) => pointer_before(input),
            _ => None,
        };
        let rules = self.0.policy.rules(session.tenant.as_str());
        let look = policy::assess::needs_page(&judged, rules);
        let navigates_away = matches!(
            judged,
            Tool::Navigate { .. } | Tool::TabOpen { url: Some(_) } | Tool::Back | Tool::Forward
        ) && !session.domains.is_empty();
        // The common case: no rule looks at this tool; nothing is asked of
        // the browser.
        if !look && !navigates_away {
            return Ok(Gate::Pass);
        }
        // A click's target is read by the click's own lookup: no round
        // trip of the gate's.
        if matches!(tool, Tool::Click(_)) && tab.is_none() {
            return Ok(Gate::AtClick);
        }
        let mut approved: Option<Approved> = None;
        loop {
            let inspected = tokio::time::timeout(
                bound,
                self.inspect(session, &judged, rules, look, tab, pointer),
            )
            .await
            .unwrap_or_else(|_| {
                Err(ToolError::Timeout(format!(
                    "checking the action's risk did not finish within {} ms",
                    bound.as_millis()
                )))
            });
            let (assessment, screenshot, seen) = match inspected {
                Ok(found) => found,
                // What could not be checked does not run (a bad selector or
                // ref fails here as it would in the tool), and is audited.
                Err(e) => {
                    self.0
                        .store
                        .audit_append(event.clone().outcome("refused: risk check failed"))
                        .await?;
                    return Err(e);
                }
            };
            // Let through as judged: a key that acts on the focus is
            // looked at again where it acts.
            let pass = |assessment: Assessment, seen: serde_json::Value| {
                if acts_at_key(&judged) {
                    Gate::AtKey(Judged { assessment, seen })
                } else if matches!(judged, Tool::Dialog { .. }) && tab.is_none() {
                    Gate::AtDialog(Judged { assessment, seen })
                } else {
                    Gate::Pass
                }
            };
            if approved
                .as_ref()
                .is_some_and(|a| a.holds_for(&assessment, &seen))
                || gesture.is_some_and(|g| session.shares_input_approval(&assessment, &seen, g))
            {
                return Ok(pass(assessment, seen));
            }
            let waits = assessment.waits() && !rules.dry_run;
            self.decide(
                session,
                actor,
                tool,
                event,
                assessment.clone(),
                screenshot,
                rules,
            )
            .await?;
            if !waits {
                return Ok(pass(assessment, seen));
            }
            if let Some(g) = gesture {
                session.remember_input_approval(&assessment, &seen, g);
            }
            approved = Some(Approved { assessment, seen });
        }
    }

    /// The check a click runs at its target, or a key at the focus: the
    /// assessment of what it found; an action that would wait (or is
    /// forbidden) is stopped there. `judged`: what the gate let through
    /// before the key (the same element, or one judged the same, passes);
    /// `approved`: what an operator approved for this action; the same
    /// facts pass, changed ones are held again.
    pub(super) fn click_check<'a>(
        &'a self,
        session: &'a RunningSession,
        tool: &'a Tool,
        judged: Option<&'a Judged>,
        approved: Option<&'a Approved>,
    ) -> ClickCheck<'a> {
        let rules = self.0.policy.rules(session.tenant.as_str());
        // An agent's raw key down is judged as the `press` it is.
        let action = match tool {
            Tool::Input(input) => as_action(input),
            t => Some(t.clone()),
        };
        Box::new(move |host, element| {
            let Some(tool) = &action else {
                return Ok(());
            };
            let seen = seen(host, &element, None);
            let facts = Facts {
                domains: session.domains.clone(),
                page_host: Some(host.to_owned()).filter(|h| !h.is_empty()),
                element: element_facts_of(element)?,
                history_url: None,
            };
            let assessment = policy::assess(tool, &facts, rules);
            if judged.is_some_and(|j| j.seen == seen || same(&j.assessment, &assessment))
                || approved.is_some_and(|a| a.holds_for(&assessment, &seen))
            {
                return Ok(());
            }
            if assessment.forbidden || assessment.waits() {
                return Err(ToolError::Held(Box::new(Held {
                    rect: facts.element.as_ref().and_then(|e| e.rect),
                    assessment,
                    seen,
                })));
            }
            Ok(())
        })
    }

    /// A click stopped at its target: the operator's decision (or the
    /// dry-run's record), with the page as it is now, the target outlined.
    /// Answers what was approved (`None`: nothing waited, a dry run).
    pub(super) async fn hold(
        &self,
        session: &Arc<RunningSession>,
        actor: &Actor,
        tool: &Tool,
        event: &NewEvent,
        held: Held,
    ) -> Result<Option<Approved>, ToolError> {
        let rules = self.0.policy.rules(session.tenant.as_str());
        // A page a dialog stops draws nothing new.
        let screenshot =
            if held.assessment.forbidden || rules.dry_run || matches!(tool, Tool::Dialog { .. }) {
                None
            } else {
                let mut tabs = session.tabs.lock().await;
                let page = session.page(&mut tabs).await?;
                let shot = approval_shot(&page).await;
                drop(tabs);
                outline(shot, held.rect).await
            };
        let waits = held.assessment.waits() && !rules.dry_run;
        self.decide(
            session,
            actor,
            tool,
            event,
            held.assessment.clone(),
            screenshot,
            rules,
        )
        .await?;
        Ok(waits.then_some(Approved {
            assessment: held.assessment,
            seen: held.seen,
        }))
    }

    /// What follows an assessment: refused, run, recorded (dry run), or
    /// waiting for an operator.
    #[expect(clippy::too_many_arguments)]
    async fn decide(
        &self,
        session: &Arc<RunningSession>,
        actor: &Actor,
        tool: &Tool,
        event: &NewEvent,
        assessment: Assessment,
        screenshot: Option<Vec<u8>>,
        rules: &Rules,
    ) -> Result<(), ToolError> {
        let details = json!({
            "level": assessment.level,
            "reasons": assessment.reasons,
        });
        if assessment.forbidden {
            let mut params = event.params.clone();
            params["risk"] = details;
            self.0
                .store
                .audit_append(
                    event
                        .clone()
                        .params(params)
                        .outcome("refused: denied_by_policy"),
                )
                .await?;
            return Err(ToolError::DeniedByPolicy(
                "typing into a password field is never allowed: credentials come only from the vault"
                    .into(),
            ));
        }
        if let Some(host) = &assessment.leaves_for {
            // Whatever follows (runs at once, recorded in a dry run, or
            // approved below), the tab may then load it.
            let allow = || session.allow_host(host);
            if !assessment.waits() || rules.dry_run {
                allow();
            }
        }
        if !assessment.waits() {
            return Ok(());
        }
        let about = |action: &str| {
            NewEvent::new(actor.clone(), action)
                .tenant(&session.tenant)
                .session(session.id.as_str())
                .params(json!({
                    "action": tool.action(),
                    "params": event.params,
                    "level": assessment.level,
                    "reasons": assessment.reasons,
                }))
        };
        if rules.dry_run {
            self.0
                .store
                .audit_append(about("approval.would_wait"))
                .await?;
            return Ok(());
        }
        self.wait_for_operator(session, actor, tool, event, &assessment, screenshot, rules)
            .await?;
        if let Some(host) = &assessment.leaves_for {
            session.allow_host(host);
        }
        Ok(())
    }

    #[expect(clippy::too_many_arguments)]
    async fn wait_for_operator(
        &self,
        session: &Arc<RunningSession>,
        actor: &Actor,
        tool: &Tool,
        event: &NewEvent,
        assessment: &Assessment,
        screenshot: Option<Vec<u8>>,
        rules: &Rules,
    ) -> Result<(), ToolError> {
        let now = now_ms();
        let timeout_ms = i64::try_from(rules.timeout.as_millis()).unwrap_or(i64::MAX);
        let (waiting, info) = self.0.approvals.open(
            Pending {
                id: String::new(),
                tenant: session.tenant.as_str().to_owned(),
                session: session.id.as_str().to_owned(),
                actor: actor.as_stored(),
                action: tool.action().to_owned(),
                params: event.params.clone(),
                level: assessment.level,
                reasons: assessment.reasons.clone(),
                created_at: now,
                expires_at: now.saturating_add(timeout_ms),
                has_screenshot: false,
            },
            screenshot,
        );
        let audit_params = json!({
            "approval": info.id,
            "action": info.action,
            "params": info.params,
            "level": info.level,
            "reasons": info.reasons,
        });
        self.0
            .store
            .audit_append(
                NewEvent::new(actor.clone(), "approval.requested")
                    .tenant(&session.tenant)
                    .session(session.id.as_str())
                    .params(audit_params.clone())
                    .outcome("pending"),
            )
            .await?;
        session.touch();
        // The session's other calls may run while the operator decides;
        // this one is judged anew once it holds the lock again.
        let held = ACTING.try_with(|a| a.borrow_mut().take()).ok().flatten();
        let released = held.is_some();
        drop(held);
        // Called off meanwhile: the request is withdrawn (`waiting` is
        // dropped with the wait).
        let decision = tokio::select! {
            d = waiting.decision(rules.timeout) => Some(d),
            () = called_off() => None,
        };
        if released {
            let again = session.acting.clone().lock_owned().await;
            let _ = ACTING.try_with(|a| *a.borrow_mut() = Some(again));
        }
        session.touch();
        let refuse = |code: &str| event.clone().outcome(format!("refused: {code}"));
        // A task aborted while its action waited (or as it was approved):
        // no one is left to act for.
        let Some(decision) = decision.filter(|_| !is_called_off()) else {
            self.0.store.audit_append(refuse("called_off")).await?;
            return Err(ToolError::DeniedByPolicy(format!(
                "the task was aborted while this {} waited for an operator; it was not run",
                tool.action()
            )));
        };
        match decision {
            // An agent whose key was revoked while its action waited is
            // no one to act for: the approval lapses with the key.
            Some(Decision::Approved(_)) => match actor {
                Actor::Agent(key) if !self.0.store.api_key_active(key).await? => {
                    self.0.store.audit_append(refuse("key_revoked")).await?;
                    Err(ToolError::DeniedByPolicy(format!(
                        "the API key was revoked while this {} waited for an operator; it was not run",
                        tool.action()
                    )))
                }
                _ => Ok(()),
            },
            Some(Decision::Denied(operator)) => {
                self.0
                    .store
                    .audit_append(refuse("denied_by_operator"))
                    .await?;
                Err(ToolError::DeniedByOperator(format!(
                    "an operator denied this {} ({}); do not retry it without a new reason",
                    tool.action(),
                    decided_by(&operator)
                )))
            }
            None => {
                self.0
                    .store
                    .audit_append(
                        NewEvent::new(Actor::System, "approval.timed_out")
                            .tenant(&session.tenant)
                            .session(session.id.as_str())
                            .params(audit_params)
                            .outcome("denied"),
                    )
                    .await?;
                self.0
                    .store
                    .audit_append(refuse("approval_timed_out"))
                    .await?;
                Err(ToolError::ApprovalTimedOut(format!(
                    "no operator decided on this {} within {} s; it was not run",
                    tool.action(),
                    rules.timeout.as_secs()
                )))
            }
        }
    }

    /// The assessment, with the facts a rule needs read from the active
    /// tab (and, when the call will wait, the page with the target
    /// outlined), under the tab lock.
    async fn inspect(
        &self,
        session: &Arc<RunningSession>,
        tool: &Tool,
        rules: &Rules,
        look: bool,
        tab: Option<&chromiumoxide::cdp::browser_protocol::target::TargetId>,
        pointer: Option<Pointer>,
    ) -> Result<(Assessment, Option<Vec<u8>>, serde_json::Value), ToolError> {
        let mut facts = Facts {
            domains: session.domains.clone(),
            ..Facts::default()
        };
        let history = match tool {
            Tool::Back => Some(-1),
            Tool::Forward => Some(1),
            _ => None,
        };
        if !look && history.is_none() {
            let a = policy::assess(tool, &facts, rules);
            if !a.waits() || rules.dry_run {
                return Ok((a, None, serde_json::Value::Null));
            }
        }
        let mut tabs = session.tabs.lock().await;
        let page = match (tab, tool) {
            (Some(id), _) => session.page_of(id).await?,
            // A dialog answered in the tab named.
            (None, Tool::Dialog { tab: Some(t), .. }) => exec::named_tab(session, t).await?,
            (None, _) => session.page(&mut tabs).await?,
        };
        if let Some(delta) = history {
            facts.history_url = crate::cdp::history_url(&page, delta, LOOK).await?;
        }
        let mut element_seen = serde_json::Value::Null;
        // A dialog stops the page: OK on it is judged by its message, and
        // nothing else is looked at (or runs) until it is answered.
        let open = session.conn.dialogs().open_on(page.target_id().inner());
        if let Tool::Dialog { .. } = tool {
            let (host, element) = match &open {
                Some(d) => dialog_facts(d),
                // A CDP client answers a dialog Cordon did not see open
                // (the tab was followed too late): not harmless.
                None if tab.is_some() => (
                    String::new(),
                    json!({ "unknown": "a dialog Cordon did not see open" }),
                ),
                None => return Err(ToolError::NoDialog),
            };
            facts.page_host = Some(host).filter(|h| !h.is_empty());
            element_seen = element.clone();
            facts.element = element_facts_of(element)?;
            let seen = seen(
                facts.page_host.as_deref().unwrap_or_default(),
                &element_seen,
                None,
            );
            // No screenshot: a page a dialog stops draws nothing new.
            return Ok((policy::assess(tool, &facts, rules), None, seen));
        }
        if let Some(d) = session.conn.dialogs().any_open(page.target_id().inner()) {
            return Err(exec::dialog_open(&d));
        }
        if look {
            // A CDP client's tab has the viewport the client gave it: its
            // points are judged wherever they are (outside the page, no
            // element: unknown).
            let v = match tab {
                Some(_) => super::super::Viewport {
                    width: u32::MAX,
                    height: u32::MAX,
                },
                None => session.viewport(),
            };
            let target = match tool {
                Tool::Click(t)
                | Tool::Select { target: t, .. }
                | Tool::Upload { target: t, .. } => Some(t),
                Tool::Type { target, .. } => target.as_ref(),
                _ => None,
            };
            let locator = target
                .map(|t| exec::locate(t, &tabs, (v.width, v.height)))
                .transpose()?;
            let (host, element) = match (&locator, pointer) {
                (Some(crate::cdp::Locator::Point(x, y)), Some(held)) => {
                    crate::cdp::facts_under_pointer(
                        &page,
                        (*x, *y),
                        held,
                        LOOK,
                        &session.sandbox.cdp_url,
                    )
                    .await?
                }
                _ => {
                    crate::cdp::element_facts(
                        &page,
                        locator.as_ref(),
                        LOOK,
                        &session.sandbox.cdp_url,
                    )
                    .await?
                }
            };
            facts.page_host = Some(host).filter(|h| !h.is_empty());
            element_seen = element.clone();
            facts.element = element_facts_of(element)?;
        }
        let seen = seen(
            facts.page_host.as_deref().unwrap_or_default(),
            &element_seen,
            facts.history_url.as_deref(),
        );
        let a = policy::assess(tool, &facts, rules);
        if !a.waits() || rules.dry_run {
            return Ok((a, None, seen));
        }
        let shot = approval_shot(&page).await;
        drop(tabs);
        let rect = facts.element.as_ref().and_then(|e| e.rect);
        Ok((a, outline(shot, rect).await, seen))
    }

    /// The pending approvals (the dashboard's queue).
    pub fn approvals(&self) -> &policy::Approvals {
        &self.0.approvals
    }

    /// An operator's decision on a pending approval, audited as
    /// `approval.decided`; the waiting call then runs or is refused.
    pub async fn decide_approval(
        &self,
        id: &str,
        approve: bool,
        operator: &str,
    ) -> Result<Pending, policy::DecideError> {
        let decision = if approve {
            Decision::Approved(operator.to_owned())
        } else {
            Decision::Denied(operator.to_owned())
        };
        let info = self.0.approvals.decide(id, decision)?;
        let mut event = NewEvent::new(Actor::Operator(operator.to_owned()), "approval.decided")
            .session(info.session.clone())
            .params(json!({
                "approval": info.id,
                "action": info.action,
                "params": info.params,
                "level": info.level,
                "reasons": info.reasons,
            }))
            .outcome(if approve { "approved" } else { "denied" });
        if let Ok(tenant) = info.tenant.parse() {
            event = event.tenant(&tenant);
        }
        if let Err(e) = self.0.store.audit_append(event).await {
            tracing::error!(error = %format!("{e:#}"), "failed to audit an approval decision");
        }
        Ok(info)
    }
}

/// The page as an approval shows it (JPEG q70), if it can be captured.
async fn approval_shot(page: &chromiumoxide::Page) -> Option<Vec<u8>> {
    crate::cdp::screenshot(page, crate::cdp::ImageFormat::Jpeg, Some(70), false, LOOK)
        .await
        .ok()
}

/// The element facts the browser's reads reported, as `assess` takes them.
fn element_facts_of(element: serde_json::Value) -> Result<Option<ElementFacts>, ToolError> {
    serde_json::from_value(element).map_err(|e| ToolError::Protocol(format!("element facts: {e}")))
}

/// The screenshot with the target's box outlined (as it is, without a box
/// or when outlining fails).
async fn outline(shot: Option<Vec<u8>>, rect: Option<[f64; 4]>) -> Option<Vec<u8>> {
    match (shot, rect) {
        (Some(jpeg), Some(rect)) => {
            tokio::task::spawn_blocking(move || policy::outline::outline(&jpeg, rect).ok())
                .await
                .ok()
                .flatten()
        }
        (shot, _) => shot,
    }
}

fn decided_by(operator: &str) -> String {
    format!("operator:{operator}")
}

/// Whether two assessments say the same (the facts an operator approved
/// still hold).
fn same(a: &Assessment, b: &Assessment) -> bool {
    a.level == b.level && a.reasons == b.reasons && a.forbidden == b.forbidden
}

/// The buttons held while the pointer moves to a raw button event's
/// point: the button that drags (`None` when none is), the buttons'
/// mask, the modifiers.
type Pointer = (crate::cdp::Button, i64, i64);

/// How the pointer is moved before a raw button down or up is judged: with
/// the buttons held just before the event (a down's own button not yet,
/// an up's still). `None` for anything else.
fn pointer_before(input: &super::LiveInput) -> Option<Pointer> {
    use crate::cdp::{Button, MouseKind};
    let super::LiveInput::Mouse {
        kind,
        button,
        buttons,
        modifiers,
        ..
    } = input
    else {
        return None;
    };
    let bit = match button {
        Button::None => 0,
        Button::Left => 1,
        Button::Right => 2,
        Button::Middle => 4,
        Button::Back => 8,
        Button::Forward => 16,
    };
    match kind {
        MouseKind::Move => None,
        MouseKind::Down => {
            let held = buttons & !bit;
            Some((Button::None, held, *modifiers))
        }
        MouseKind::Up => {
            let held = buttons | bit;
            let drags = if held == 0 { Button::None } else { *button };
            Some((drags, held, *modifiers))
        }
    }
}

/// The gesture a raw button down or up belongs to; `None` for other input.
fn gesture_of(input: &super::LiveInput) -> Option<Gesture> {
    match input {
        super::LiveInput::Mouse {
            kind: kind @ (crate::cdp::MouseKind::Down | crate::cdp::MouseKind::Up),
            x,
            y,
            click_count,
            ..
        } => Some(Gesture {
            at: (*x, *y),
            down: matches!(kind, crate::cdp::MouseKind::Down),
            clicks: (*click_count).max(1),
        }),
        _ => None,
    }
}

/// The action an agent's raw input performs, as the gate judges it: a
/// button going down or up is a click at its point (the up of a drag is
/// its drop), a key down of Enter or Space acts on the focus, a printable
/// key or text is typing; moves, wheels and resizes act on nothing.
fn as_action(input: &super::LiveInput) -> Option<Tool> {
    use super::LiveInput;
    match input {
        LiveInput::Mouse {
            kind: crate::cdp::MouseKind::Down | crate::cdp::MouseKind::Up,
            x,
            y,
            ..
        } => Some(Tool::Click(super::ElementTarget::Point(*x, *y))),
        // A paste types what the gate never saw: judged as typing.
        LiveInput::Key {
            down: true,
            key,
            code,
            modifiers,
        } if policy::assess::pastes(key, code, None, *modifiers) => Some(Tool::Type {
            text: String::new(),
            target: None,
            submit: false,
        }),
        // Judged by the key Chromium is sent (`"\r"` goes as Enter).
        LiveInput::Key {
            down: true, key, ..
        } if policy::assess::activation_key(crate::cdp::dom_key(key))
            || key.chars().count() == 1 =>
        {
            Some(Tool::Press {
                key: crate::cdp::dom_key(key).to_owned(),
            })
        }
        LiveInput::Text(text) => Some(Tool::Type {
            text: text.clone(),
            target: None,
            submit: false,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(key: &str) -> super::super::LiveInput {
        super::super::LiveInput::Key {
            down: true,
            key: key.into(),
            code: String::new(),
            modifiers: 0,
        }
    }

    #[test]
    fn enter_space_and_a_submit_are_judged_again_where_they_act_and_nothing_else_is() {
        let press = |k: &str| Tool::Press { key: k.into() };
        for k in ["Enter", " ", "Space"] {
            assert!(acts_at_key(&press(k)), "{k:?}");
        }
        for k in ["Tab", "a", "ArrowDown", "Escape"] {
            assert!(!acts_at_key(&press(k)), "{k:?}");
        }
        let typed = |submit| Tool::Type {
            text: "x".into(),
            target: None,
            submit,
        };
        assert!(acts_at_key(&typed(true)));
        assert!(!acts_at_key(&typed(false)));
        // A raw Enter going down is judged as `press` ([`as_action`]).
        let raw = as_action(&key("\r")).unwrap();
        assert!(acts_at_key(&raw), "{raw:?}");
        assert!(!acts_at_key(&Tool::Click(
            super::super::ElementTarget::Point(1.0, 1.0)
        )));
    }

    #[test]
    fn a_carriage_return_or_newline_key_is_judged_as_enter() {
        for k in ["\r", "\n", "Enter"] {
            match as_action(&key(k)) {
                Some(Tool::Press { key }) => assert_eq!(key, "Enter", "{k:?}"),
                other => panic!("{k:?}: {other:?}"),
            }
        }
        match as_action(&key("a")) {
            Some(Tool::Press { key }) => assert_eq!(key, "a"),
            other => panic!("{other:?}"),
        }
    }
}
