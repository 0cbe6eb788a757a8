//! JavaScript dialogs (`alert`, `confirm`, `prompt`, `beforeunload`): the
//! ones open in each tab, as Chromium announces them, and the answer.
//!
//! A dialog stops its page: every call that runs script or input there
//! waits until it is answered. So a tab's open dialog is known here from
//! the browser's own events (never from the page), a call that opens one
//! ends at once ([`Dialogs::guard`]), and calls on a tab with one open are
//! refused until it is answered ([`Dialogs::answer`]).
//!
//! The events come on a connection of Cordon's own to the browser
//! ([`Dialogs::follow`]), attached to every tab before its first document
//! runs: chromiumoxide attaches to a new tab (a popup) only a moment after
//! it starts, and Chromium tells a session that enables its `Page` domain
//! later nothing of a dialog already open, nor takes its answer.

use std::collections::HashMap;
use std::sync::Arc;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::page::{
    DialogType, EventJavascriptDialogOpening, HandleJavaScriptDialogParams,
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::CdpError;
use super::raw::{RawReceiver, RawSender, answer_of, connect_raw};

/// The most characters of a dialog's message kept (a page may put
/// megabytes in one).
pub const MAX_MESSAGE_CHARS: usize = 2000;

/// What kind of dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DialogKind {
    /// `alert()`: only OK.
    Alert,
    /// `confirm()`: OK or Cancel.
    Confirm,
    /// `prompt()`: a text, OK or Cancel.
    Prompt,
    /// "Leave this page?" on the way out of a page that asks.
    Beforeunload,
}

impl DialogKind {
    /// Its name, as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alert => "alert",
            Self::Confirm => "confirm",
            Self::Prompt => "prompt",
            Self::Beforeunload => "beforeunload",
        }
    }
}

/// A dialog open in a tab, as the browser announced it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct Dialog {
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    #[serde(rename = "type")]
    pub kind: DialogKind,
    /// Its message (at most 2000 characters).
    pub message: String,
    /// A prompt's default text.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_prompt: Option<String>,
    /// The address of the frame that opened it.
    pub url: String,
    /// The tab it is open in.
    pub tab_id: String,
}

impl Dialog {
    fn from_event(ev: &EventJavascriptDialogOpening, tab: &str) -> Self {
        let cut = |s: &str| s.chars().take(MAX_MESSAGE_CHARS).collect::<String>();
        Self {
            kind: match ev.r#type {
                DialogType::Alert => DialogKind::Alert,
                DialogType::Confirm => DialogKind::Confirm,
                DialogType::Prompt => DialogKind::Prompt,
                DialogType::Beforeunload => DialogKind::Beforeunload,
            },
            message: cut(&ev.message),
            default_prompt: ev
                .default_prompt
                .as_deref()
                .filter(|_| ev.r#type == DialogType::Prompt)
                .map(cut),
            url: ev.url.clone(),
            tab_id: tab.to_owned(),
        }
    }
}

/// The dialogs open in the browser's tabs, by target id.
#[derive(Clone, Default)]
pub struct Dialogs(Arc<State>);

#[derive(Default)]
struct State {
    open: std::sync::Mutex<HashMap<String, Dialog>>,
    notify: tokio::sync::Notify,
    /// The follower's queue ([`Dialogs::follow`]): answers and tabs to let go.
    queue: std::sync::Mutex<Option<mpsc::UnboundedSender<Queued>>>,
    follower: std::sync::Mutex<Option<tokio::task::AbortHandle>>,
}

impl Drop for State {
    fn drop(&mut self) {
        if let Some(f) = self.follower.get_mut().expect("follower lock").take() {
            f.abort();
        }
    }
}

/// What the follower is asked to send.
enum Queued {
    /// An answer to a tab's dialog.
    Answer(Answer),
    /// Let a new tab go (its follower's session): chromiumoxide knows it.
    Resume(String),
}

/// Waits until Cordon's own connection (chromiumoxide) has attached to
/// a tab, by its target id (bounded by whoever passes it).
pub type Attached = Arc<dyn Fn(String) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// An answer to the dialog of tab `target`, sent by the follower.
struct Answer {
    target: String,
    accept: bool,
    text: Option<String>,
    done: oneshot::Sender<Result<(), CdpError>>,
}

/// How long the browser may take to attach the follower to its tabs.
const ATTACH_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

impl Dialogs {
    /// The dialog open in tab `target`, if any.
    pub fn open_on(&self, target: &str) -> Option<Dialog> {
        self.0
            .open
            .lock()
            .expect("dialogs lock")
            .get(target)
            .cloned()
    }

    /// The tabs with a dialog open, in order of their ids.
    pub fn open_tabs(&self) -> Vec<String> {
        let open = self.0.open.lock().expect("dialogs lock");
        let mut tabs: Vec<String> = open.keys().cloned().collect();
        tabs.sort_unstable();
        tabs
    }

    /// A dialog open in any tab (the one of `first`, if it has one). Tabs
    /// of one site share a renderer, whose every page a dialog stops: a
    /// dialog in one tab may stop the others too.
    pub fn any_open(&self, first: &str) -> Option<Dialog> {
        let open = self.0.open.lock().expect("dialogs lock");
        open.get(first)
            .or_else(|| open.values().min_by(|a, b| a.tab_id.cmp(&b.tab_id)))
            .cloned()
    }

    fn opened(&self, target: &str, dialog: Dialog) {
        self.0
            .open
            .lock()
            .expect("dialogs lock")
            .insert(target.to_owned(), dialog);
        self.0.notify.notify_waiters();
    }

    fn closed(&self, target: &str) {
        self.0.open.lock().expect("dialogs lock").remove(target);
        self.0.notify.notify_waiters();
    }

    /// Follows the dialogs of every tab of the browser at `ws_url`, on a
    /// connection of its own, from the start of each: attached to every
    /// page (`Target.setAutoAttach` at the browser, a new one held before
    /// its first document runs), `Page` enabled there, then let go once
    /// `attached` says Cordon's own connection has attached to it too (a
    /// tab stopped by a dialog before then would stop that connection's
    /// set-up of it, and every call that lists the tabs). Returns once the
    /// browser has attached the follower to the tabs open now; the
    /// connection lives as long as this registry, or the browser.
    pub async fn follow(&self, ws_url: &str, attached: Attached) -> Result<(), CdpError> {
        let (mut tx, rx) = connect_raw(ws_url).await?;
        let attach = json!({
            "id": 0,
            "method": "Target.setAutoAttach",
            "params": {
                "autoAttach": true,
                "waitForDebuggerOnStart": true,
                "flatten": true,
                "filter": [{ "type": "page" }],
            },
        });
        tx.send(attach.to_string()).await?;
        let (queued, queue) = mpsc::unbounded_channel();
        let (ready, is_ready) = oneshot::channel();
        // Weak: the follower must not keep the registry (and its own abort
        // handle) alive.
        let state = Arc::downgrade(&self.0);
        let follower = Follower {
            attached,
            resume: queued.clone(),
        };
        let task = tokio::spawn(follow_tabs(state, follower, tx, rx, queue, ready));
        *self.0.queue.lock().expect("queue lock") = Some(queued);
        if let Some(old) = self
            .0
            .follower
            .lock()
            .expect("follower lock")
            .replace(task.abort_handle())
        {
            old.abort();
        }
        match tokio::time::timeout(ATTACH_BOUND, is_ready).await {
            Ok(Ok(Ok(()))) => Ok(()),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(CdpError::BrowserGone),
            Err(_) => Err(CdpError::Timeout(
                "following the tabs' dialogs",
                u64::try_from(ATTACH_BOUND.as_millis()).unwrap_or(u64::MAX),
            )),
        }
    }

    /// Answers the dialog open in `page`: OK (with `text` for a prompt) or
    /// Cancel, through the follower, whose session saw it open (a session
    /// attached after a dialog opened cannot answer it). A tab the follower
    /// does not know (none running) is answered on `page` itself.
    pub async fn answer(
        &self,
        page: &Page,
        accept: bool,
        text: Option<&str>,
    ) -> Result<(), CdpError> {
        let target = page.target_id().inner().clone();
        let (done, answered) = oneshot::channel();
        let queue = self.0.queue.lock().expect("queue lock").clone();
        let sent = queue.is_some_and(|q| {
            q.send(Queued::Answer(Answer {
                target,
                accept,
                text: text.map(str::to_owned),
                done,
            }))
            .is_ok()
        });
        if sent {
            match answered.await {
                Ok(Err(CdpError::TabNotFound(_))) | Err(_) => {}
                Ok(res) => return res,
            }
        }
        let mut params = HandleJavaScriptDialogParams::new(accept);
        params.prompt_text = text.map(str::to_owned);
        page.execute(params).await?;
        Ok(())
    }

    /// Waits, at most `bound`, until tab `target` no longer shows
    /// `answered`: the browser's closing event has reached Cordon (or
    /// another dialog took its place). An answer returns once the state
    /// says so, so the next look (a task's next picture) does not see the
    /// dialog it just answered and answer it again.
    pub async fn settled(&self, target: &str, answered: &Dialog, bound: std::time::Duration) {
        let _ = tokio::time::timeout(bound, async {
            loop {
                let notified = self.0.notify.notified();
                if self.open_on(target).as_ref() != Some(answered) {
                    return;
                }
                notified.await;
            }
        })
        .await;
    }

    /// Runs `fut`, but answers the dialog at once when one opens meanwhile
    /// (in tab `target`, or in another, which may share its renderer: the
    /// page stopped, `fut` would wait until the dialog is answered). `fut`
    /// is dropped then; what it sent has been sent.
    pub async fn guard<T>(
        &self,
        target: &str,
        fut: impl Future<Output = Result<T, CdpError>>,
    ) -> Result<Result<T, Dialog>, CdpError> {
        let opened = async {
            loop {
                let notified = self.0.notify.notified();
                if let Some(d) = self.any_open(target) {
                    return d;
                }
                notified.await;
            }
        };
        tokio::select! {
            biased;
            res = fut => res.map(Ok),
            d = opened => Ok(Err(d)),
        }
    }
}

/// The follower's loop ([`Dialogs::follow`]): attaches to each page the
/// browser announces, notes its dialogs opening and closing, and sends the
/// answers queued. Ends with the connection (the browser gone: no dialog
/// is left open) or the registry.
/// What the follower needs to let a new tab go.
struct Follower {
    attached: Attached,
    resume: mpsc::UnboundedSender<Queued>,
}

async fn follow_tabs(
    state: std::sync::Weak<State>,
    follower: Follower,
    mut tx: RawSender,
    mut rx: RawReceiver,
    mut queue: mpsc::UnboundedReceiver<Queued>,
    ready: oneshot::Sender<Result<(), CdpError>>,
) {
    let mut ready = Some(ready);
    // The follower's session in each tab, and the tab of each session.
    let mut tabs: HashMap<String, String> = HashMap::new();
    let mut answering: HashMap<u64, oneshot::Sender<Result<(), CdpError>>> = HashMap::new();
    let mut next: u64 = 0;
    loop {
        tokio::select! {
            text = rx.next() => {
                let Some(text) = text else { break };
                // Of the page events, only the dialogs' are read.
                if text.starts_with(r#"{"method":"Page."#)
                    && !text.starts_with(r#"{"method":"Page.javascriptDialog"#)
                {
                    continue;
                }
                let Ok(mut msg) = serde_json::from_str::<Value>(&text) else { continue };
                let Some(dialogs) = state.upgrade().map(Dialogs) else { break };
                if let Some(id) = msg.get("id").and_then(Value::as_u64) {
                    let res = answer_of(&mut msg).map(|_| ());
                    if id == 0 {
                        if let Some(r) = ready.take() {
                            let _ = r.send(res);
                        }
                    } else if let Some(done) = answering.remove(&id) {
                        let _ = done.send(res);
                    }
                    continue;
                }
                let session = msg.get("sessionId").and_then(Value::as_str);
                let tab = session.and_then(|s| tabs.get(s));
                let params = &msg["params"];
                match msg["method"].as_str().unwrap_or("") {
                    "Target.attachedToTarget" => {
                        let (Some(session), Some(tab)) = (
                            params["sessionId"].as_str(),
                            params["targetInfo"]["targetId"].as_str(),
                        ) else {
                            continue;
                        };
                        tabs.insert(session.to_owned(), tab.to_owned());
                        // `Page` first: the tab's first document runs once
                        // it is let go, and may alert at once.
                        if send(&mut tx, &mut next, session, "Page.enable", json!({})).await.is_err() {
                            break;
                        }
                        if params["waitingForDebugger"] == true {
                            let (attached, resume) = (follower.attached.clone(), follower.resume.clone());
                            let (tab, session) = (tab.to_owned(), session.to_owned());
                            tokio::spawn(async move {
                                attached(tab).await;
                                let _ = resume.send(Queued::Resume(session));
                            });
                        }
                    }
                    "Target.detachedFromTarget" => {
                        if let Some(tab) = params["sessionId"].as_str().and_then(|s| tabs.remove(s)) {
                            dialogs.closed(&tab);
                        }
                    }
                    "Page.javascriptDialogOpening" if let Some(tab) = tab => {
                        match serde_json::from_value::<EventJavascriptDialogOpening>(params.clone()) {
                            Ok(ev) => {
                                let d = Dialog::from_event(&ev, tab);
                                tracing::debug!(kind = ?d.kind, "a dialog opened");
                                dialogs.opened(tab, d);
                            }
                            Err(e) => tracing::debug!(error = %e, "an unreadable dialog event"),
                        }
                    }
                    "Page.javascriptDialogClosed" if let Some(tab) = tab => dialogs.closed(tab),
                    _ => {}
                }
            }
            Some(queued) = queue.recv() => {
                let sent = match queued {
                    Queued::Resume(session) if tabs.contains_key(&session) => {
                        let go = "Runtime.runIfWaitingForDebugger";
                        send(&mut tx, &mut next, &session, go, json!({})).await.map(|_| ())
                    }
                    // Gone meanwhile.
                    Queued::Resume(_) => Ok(()),
                    Queued::Answer(a) => {
                        let session = tabs.iter().find(|(_, t)| **t == a.target).map(|(s, _)| s.clone());
                        let Some(session) = session else {
                            let _ = a.done.send(Err(CdpError::TabNotFound("no such tab".into())));
                            continue;
                        };
                        let mut params = json!({ "accept": a.accept });
                        if let Some(text) = a.text {
                            params["promptText"] = Value::String(text);
                        }
                        let answer = "Page.handleJavaScriptDialog";
                        match send(&mut tx, &mut next, &session, answer, params).await {
                            Ok(id) => {
                                answering.insert(id, a.done);
                                Ok(())
                            }
                            Err(e) => {
                                let _ = a.done.send(Err(CdpError::BrowserGone));
                                Err(e)
                            }
                        }
                    }
                };
                if sent.is_err() {
                    break;
                }
            }
        }
    }
    // The browser is gone: so are its dialogs.
    if let Some(state) = state.upgrade() {
        let dialogs = Dialogs(state);
        for tab in tabs.values() {
            dialogs.closed(tab);
        }
    }
}

/// Sends `method` to the follower's `session` in a tab; answers its id.
async fn send(
    tx: &mut RawSender,
    next: &mut u64,
    session: &str,
    method: &str,
    params: Value,
) -> Result<u64, CdpError> {
    *next += 1;
    let msg = json!({ "id": *next, "sessionId": session, "method": method, "params": params });
    tx.send(msg.to_string()).await.map(|()| *next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dialog(tab: &str, message: &str) -> Dialog {
        Dialog {
            kind: DialogKind::Confirm,
            message: message.into(),
            default_prompt: None,
            url: "http://a.test/".into(),
            tab_id: tab.into(),
        }
    }

    #[tokio::test]
    async fn a_call_ends_when_a_dialog_opens_in_any_tab_its_own_first() {
        let dialogs = Dialogs::default();
        let d = dialogs.clone();
        // Another tab's dialog may stop this tab too (one renderer).
        let call = tokio::spawn(async move {
            d.guard("tab-1", std::future::pending::<Result<(), CdpError>>())
                .await
        });
        dialogs.opened("tab-2", dialog("tab-2", "elsewhere"));
        let got = tokio::time::timeout(std::time::Duration::from_secs(10), call)
            .await
            .expect("the call did not end")
            .unwrap()
            .unwrap();
        assert_eq!(got, Err(dialog("tab-2", "elsewhere")));
        // Its own tab's comes first.
        dialogs.opened("tab-1", dialog("tab-1", "Delete?"));
        assert_eq!(dialogs.any_open("tab-1"), Some(dialog("tab-1", "Delete?")));
        dialogs.closed("tab-1");
        assert_eq!(dialogs.open_on("tab-1"), None);
        assert_eq!(
            dialogs.any_open("tab-1"),
            Some(dialog("tab-2", "elsewhere"))
        );
        dialogs.closed("tab-2");
        assert_eq!(dialogs.any_open("tab-1"), None);
    }

    #[tokio::test]
    async fn an_answer_settles_when_its_dialog_closes_or_another_takes_its_place() {
        use std::time::{Duration, Instant};
        let dialogs = Dialogs::default();
        let asked = dialog("tab-1", "Delete?");
        // Nothing open: at once.
        let t = Instant::now();
        dialogs
            .settled("tab-1", &asked, Duration::from_secs(10))
            .await;
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        for replaced in [false, true] {
            dialogs.opened("tab-1", asked.clone());
            let d = dialogs.clone();
            let a = asked.clone();
            let t = Instant::now();
            let wait = tokio::spawn(async move {
                d.settled("tab-1", &a, Duration::from_secs(30)).await;
            });
            tokio::task::yield_now().await;
            assert!(!wait.is_finished(), "settled while the dialog was open");
            if replaced {
                dialogs.opened("tab-1", dialog("tab-1", "Really?"));
            } else {
                dialogs.closed("tab-1");
            }
            tokio::time::timeout(Duration::from_secs(10), wait)
                .await
                .expect("it settled")
                .unwrap();
            assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
            dialogs.closed("tab-1");
        }
        // Never closed: the bound ends the wait.
        dialogs.opened("tab-1", asked.clone());
        let t = Instant::now();
        dialogs
            .settled("tab-1", &asked, Duration::from_millis(200))
            .await;
        assert!(
            t.elapsed() >= Duration::from_millis(200),
            "{:?}",
            t.elapsed()
        );
    }

    #[tokio::test]
    async fn a_call_that_finishes_first_answers_its_own_result() {
        let dialogs = Dialogs::default();
        let got = dialogs.guard("t", async { Ok(7) }).await.unwrap();
        assert_eq!(got, Ok(7));
    }
}
