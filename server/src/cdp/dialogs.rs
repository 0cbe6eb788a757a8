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

use chromiumoxide::cdp::browser_protocol::page::{DialogType, EventJavascriptDialogOpening};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use super::CdpError;
use super::raw::{RawReceiver, RawSender, connect_raw};

/// The most characters of a dialog's message kept (a page may put
/// megabytes in one).
pub const MAX_MESSAGE_CHARS: usize = 2000;

/// The most characters of the address of a dialog's frame kept (a
/// `data:` frame's address may be megabytes long).
pub const MAX_URL_CHARS: usize = 2048;

/// The most tabs the follower follows in one browser: a tab past it is
/// let go at once, its dialogs unknown (a browser that announces more is
/// broken or hostile; its memory limit ends a real one long before).
const MAX_TABS: usize = 1024;

/// The most new tabs held at once until Cordon's connection has set them
/// up; past it a new tab is let go at once.
const MAX_HELD: usize = 32;

/// How long an answer sent through the follower may wait for the
/// browser's reply.
const ANSWER_BOUND: std::time::Duration = std::time::Duration::from_secs(5);

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
    /// Which opening this is (the follower counts them): two dialogs
    /// alike in every word are still two.
    #[serde(skip)]
    pub(crate) opening: u64,
}

impl Dialog {
    fn from_event(ev: &EventJavascriptDialogOpening, tab: &str, opening: u64) -> Self {
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
            url: ev.url.chars().take(MAX_URL_CHARS).collect(),
            tab_id: tab.to_owned(),
            opening,
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
    /// Whether the follower runs (set when it starts, cleared when its
    /// connection ends).
    following: std::sync::atomic::AtomicBool,
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
    /// The dialog the answer is for: another one open in its place by
    /// the time the follower sends it is not answered.
    expect: Dialog,
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

    /// Forgets tab `target`'s dialog if it is still `which` (the browser
    /// said none is showing: its closing was never heard).
    fn closed_if(&self, target: &str, which: u64) {
        let mut open = self.0.open.lock().expect("dialogs lock");
        if open.get(target).is_some_and(|d| d.opening == which) {
            open.remove(target);
            drop(open);
            self.0.notify.notify_waiters();
        }
    }

    /// Whether the follower runs ([`follow`](Self::follow)): false before
    /// it started and once its connection ended (then no dialog is
    /// known, and none is seen opening).
    pub fn following(&self) -> bool {
        self.0.following.load(std::sync::atomic::Ordering::SeqCst)
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
            held: Arc::new(tokio::sync::Semaphore::new(MAX_HELD)),
        };
        self.0
            .following
            .store(true, std::sync::atomic::Ordering::SeqCst);
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

    /// Answers the dialog open in tab `target`: OK (with `text` for a
    /// prompt) or Cancel, through the follower, whose session saw it open
    /// (a session attached after a dialog opened cannot answer it).
    /// `expect`: the dialog judged; when another has taken its place (or
    /// none is open) by the time the follower sends the answer, nothing
    /// is answered and the call fails with [`CdpError::DialogChanged`].
    /// Nothing else answers: without the follower the browser is gone
    /// ([`CdpError::BrowserGone`]), and a tab it no longer follows has
    /// closed ([`CdpError::TabNotFound`]).
    pub async fn answer(
        &self,
        target: &str,
        expect: &Dialog,
        accept: bool,
        text: Option<&str>,
    ) -> Result<(), CdpError> {
        let (done, answered) = oneshot::channel();
        let queue = self.0.queue.lock().expect("queue lock").clone();
        let sent = queue.is_some_and(|q| {
            q.send(Queued::Answer(Answer {
                target: target.to_owned(),
                expect: expect.clone(),
                accept,
                text: text.map(str::to_owned),
                done,
            }))
            .is_ok()
        });
        if !sent {
            return Err(CdpError::BrowserGone);
        }
        match tokio::time::timeout(ANSWER_BOUND, answered).await {
            Ok(Ok(res)) => res,
            Ok(Err(_)) => Err(CdpError::BrowserGone),
            Err(_) => Err(CdpError::Timeout(
                "answering the dialog",
                u64::try_from(ANSWER_BOUND.as_millis()).unwrap_or(u64::MAX),
            )),
        }
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

/// What the follower needs to let a new tab go.
struct Follower {
    attached: Attached,
    resume: mpsc::UnboundedSender<Queued>,
    /// New tabs held until Cordon's connection set them up ([`MAX_HELD`]).
    held: Arc<tokio::sync::Semaphore>,
}

/// A message from the browser, as far as the follower reads it: nothing
/// of a message is built that the follower does not use (a browser may
/// send hundreds of megabytes in one).
#[derive(serde::Deserialize)]
struct Incoming<'a> {
    id: Option<u64>,
    #[serde(default, borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default, rename = "sessionId", borrow)]
    session: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    error: Option<Failure>,
    // `params` and `result` are skipped unbuilt, as every field not named.
}

/// A call's failure: Chromium's message names the failure, never page
/// content.
#[derive(serde::Deserialize)]
struct Failure {
    #[serde(default)]
    message: Option<String>,
}

/// A message's `params`, read as `T`.
#[derive(serde::Deserialize)]
struct With<T> {
    params: T,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct AttachedTo {
    session_id: String,
    target_info: TargetOf,
    #[serde(default)]
    waiting_for_debugger: bool,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct TargetOf {
    target_id: String,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct DetachedFrom {
    session_id: String,
}

/// An id as Chromium makes them (32 hex digits for a target, as many for
/// a session): anything else from the browser is not followed.
fn plausible_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// An answer sent, waiting for the browser's reply.
struct Pending {
    done: oneshot::Sender<Result<(), CdpError>>,
    session: String,
    tab: String,
    /// The opening answered, forgotten if the browser says none shows.
    opening: Option<u64>,
}

/// The follower's loop ([`Dialogs::follow`]): attaches to each page the
/// browser announces, notes its dialogs opening and closing, and sends the
/// answers queued. Ends with the connection (the browser gone: no dialog
/// is left open) or the registry. The registry is reached only between
/// awaits (the loop never keeps it alive).
async fn follow_tabs(
    state: std::sync::Weak<State>,
    follower: Follower,
    mut tx: RawSender,
    mut rx: RawReceiver,
    mut queue: mpsc::UnboundedReceiver<Queued>,
    ready: oneshot::Sender<Result<(), CdpError>>,
) {
    let mut ready = Some(ready);
    // The follower's session in each tab (the tab of each session).
    let mut tabs: HashMap<String, String> = HashMap::new();
    let mut answering: HashMap<u64, Pending> = HashMap::new();
    let mut next: u64 = 0;
    let mut openings: u64 = 0;
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
                let Ok(msg) = serde_json::from_str::<Incoming<'_>>(&text) else { continue };
                if let Some(id) = msg.id {
                    let res = match msg.error {
                        Some(e) => Err(CdpError::Failed(e.message.unwrap_or_else(|| "failed".into()))),
                        None => Ok(()),
                    };
                    if id == 0 {
                        if let Some(r) = ready.take() {
                            let _ = r.send(res);
                        }
                    } else if let Some(p) = answering.remove(&id) {
                        // A dialog whose closing was never heard (the
                        // browser says none shows) is forgotten.
                        if let (Err(CdpError::Failed(m)), Some(which)) = (&res, p.opening)
                            && m.contains("No dialog is showing")
                            && let Some(state) = state.upgrade()
                        {
                            Dialogs(state).closed_if(&p.tab, which);
                        }
                        let _ = p.done.send(res);
                    }
                    continue;
                }
                let tab = msg.session.as_deref().and_then(|s| tabs.get(s));
                match msg.method.as_deref().unwrap_or("") {
                    "Target.attachedToTarget" => {
                        let Ok(With { params: a }) = serde_json::from_str::<With<AttachedTo>>(&text) else {
                            continue;
                        };
                        let (session, tab) = (a.session_id, a.target_info.target_id);
                        if !plausible_id(&session) || !plausible_id(&tab) {
                            continue;
                        }
                        let go = "Runtime.runIfWaitingForDebugger";
                        if tabs.len() >= MAX_TABS {
                            tracing::warn!("a browser announced more tabs than are followed; this one's dialogs are not known");
                            if a.waiting_for_debugger && send(&mut tx, &mut next, &session, go, json!({})).await.is_err() {
                                break;
                            }
                            continue;
                        }
                        tabs.insert(session.clone(), tab.clone());
                        // `Page` first: the tab's first document runs once
                        // it is let go, and may alert at once.
                        if send(&mut tx, &mut next, &session, "Page.enable", json!({})).await.is_err() {
                            break;
                        }
                        if a.waiting_for_debugger {
                            match follower.held.clone().try_acquire_owned() {
                                Ok(permit) => {
                                    let (attached, resume) = (follower.attached.clone(), follower.resume.clone());
                                    tokio::spawn(async move {
                                        attached(tab).await;
                                        drop(permit);
                                        let _ = resume.send(Queued::Resume(session));
                                    });
                                }
                                // Too many held at once: let go now.
                                Err(_) => {
                                    if send(&mut tx, &mut next, &session, go, json!({})).await.is_err() {
                                        break;
                                    }
                                }
                            }
                        }
                    }
                    "Target.detachedFromTarget" => {
                        let Ok(With { params: d }) = serde_json::from_str::<With<DetachedFrom>>(&text) else {
                            continue;
                        };
                        if let Some(tab) = tabs.remove(&d.session_id) {
                            // Its answers will not be replied to.
                            answering.retain(|_, p| {
                                p.session != d.session_id
                            });
                            if let Some(state) = state.upgrade() {
                                Dialogs(state).closed(&tab);
                            }
                        }
                    }
                    "Page.javascriptDialogOpening" if let Some(tab) = tab => {
                        match serde_json::from_str::<With<EventJavascriptDialogOpening>>(&text) {
                            Ok(With { params: ev }) => {
                                openings += 1;
                                let d = Dialog::from_event(&ev, tab, openings);
                                tracing::debug!(kind = ?d.kind, "a dialog opened");
                                if let Some(state) = state.upgrade() {
                                    Dialogs(state).opened(tab, d);
                                }
                            }
                            // Only the kind: serde's message may quote the page's text.
                            Err(e) => tracing::debug!(category = ?e.classify(), "an unreadable dialog event"),
                        }
                    }
                    "Page.javascriptDialogClosed" if let Some(tab) = tab => {
                        if let Some(state) = state.upgrade() {
                            Dialogs(state).closed(tab);
                        }
                    }
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
                        // The dialog judged must be the one open now: the
                        // events before this point have all been read.
                        let now = state.upgrade().and_then(|s| Dialogs(s).open_on(&a.target));
                        if now.as_ref() != Some(&a.expect) {
                            let _ = a.done.send(Err(CdpError::DialogChanged));
                            continue;
                        }
                        let mut params = json!({ "accept": a.accept });
                        if let Some(text) = a.text {
                            params["promptText"] = Value::String(text);
                        }
                        let answer = "Page.handleJavaScriptDialog";
                        match send(&mut tx, &mut next, &session, answer, params).await {
                            Ok(id) => {
                                answering.insert(id, Pending {
                                    done: a.done,
                                    session,
                                    tab: a.target,
                                    opening: now.map(|d| d.opening),
                                });
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
    // The connection is gone: no dialog is known from here on.
    if let Some(state) = state.upgrade() {
        state
            .following
            .store(false, std::sync::atomic::Ordering::SeqCst);
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
            opening: 0,
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

    /// A browser that says what a test makes it say: a WebSocket server on
    /// loopback speaking CDP's frames, the follower's only peer (a real
    /// Chromium does not send hostile frames on demand).
    struct FakeBrowser {
        url: String,
        heard: mpsc::UnboundedReceiver<Value>,
        say: mpsc::UnboundedSender<String>,
    }

    impl FakeBrowser {
        async fn start() -> Self {
            use futures::{SinkExt, StreamExt};
            use tokio_tungstenite::tungstenite::Message;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!(
                "ws://{}/devtools/browser/fake",
                listener.local_addr().unwrap()
            );
            let (heard_tx, heard) = mpsc::unbounded_channel();
            let (say, mut said) = mpsc::unbounded_channel::<String>();
            tokio::spawn(async move {
                let (tcp, _) = listener.accept().await.unwrap();
                let ws = tokio_tungstenite::accept_async(tcp).await.unwrap();
                let (mut out, mut inc) = ws.split();
                loop {
                    tokio::select! {
                        m = inc.next() => match m {
                            Some(Ok(Message::Text(t))) => {
                                let _ = heard_tx.send(serde_json::from_str::<Value>(&t).unwrap());
                            }
                            Some(Ok(_)) => {}
                            _ => break,
                        },
                        s = said.recv() => match s {
                            Some(s) => {
                                if out.send(Message::text(s)).await.is_err() {
                                    break;
                                }
                            }
                            None => break,
                        },
                    }
                }
            });
            Self { url, heard, say }
        }

        /// The next command the follower sent (not `Page.enable`).
        async fn next(&mut self) -> Value {
            loop {
                let m = tokio::time::timeout(std::time::Duration::from_secs(30), self.heard.recv())
                    .await
                    .expect("the follower sent nothing")
                    .expect("the connection ended");
                if m["method"] != "Page.enable" {
                    return m;
                }
            }
        }

        fn say(&self, v: &Value) {
            self.say.send(v.to_string()).unwrap();
        }

        fn attach(&self, session: &str, tab: &str, waiting: bool) {
            self.say(&json!({"method": "Target.attachedToTarget", "params": {
                "sessionId": session,
                "targetInfo": {"targetId": tab, "type": "page", "title": "", "url": "", "attached": true, "canAccessOpener": false},
                "waitingForDebugger": waiting,
            }}));
        }

        fn dialog(&self, session: &str, message: &str, url: &str) {
            self.say(&json!({"method": "Page.javascriptDialogOpening", "sessionId": session, "params": {
                "url": url, "frameId": "F", "message": message, "type": "confirm", "hasBrowserHandler": false,
            }}));
        }
    }

    /// The follower on `fake`, its hook waiting forever; `follow` returns
    /// once the fake answered the auto-attach.
    async fn follow(fake: &mut FakeBrowser) -> Dialogs {
        let dialogs = Dialogs::default();
        let d = dialogs.clone();
        let url = fake.url.clone();
        let pending: Attached = Arc::new(|_| Box::pin(std::future::pending::<()>()));
        let following = tokio::spawn(async move { d.follow(&url, pending).await });
        let attach = fake.next().await;
        assert_eq!(attach["method"], "Target.setAutoAttach", "{attach}");
        fake.say(&json!({"id": 0, "result": {}}));
        following.await.unwrap().unwrap();
        assert!(dialogs.following());
        dialogs
    }

    async fn until(what: &str, check: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        while !check() {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }

    fn queue(
        dialogs: &Dialogs,
        target: &str,
        expect: Dialog,
    ) -> oneshot::Receiver<Result<(), CdpError>> {
        let (done, answered) = oneshot::channel();
        let q = dialogs.0.queue.lock().unwrap().clone().unwrap();
        assert!(
            q.send(Queued::Answer(Answer {
                target: target.into(),
                expect,
                accept: true,
                text: None,
                done,
            }))
            .is_ok()
        );
        answered
    }

    const TAB: &str = "A1B2C3D4E5F60718293A4B5C6D7E8F90";
    const SESSION: &str = "0F1E2D3C4B5A69788796A5B4C3D2E1F0";

    /// A hostile browser's frames: unreadable ones are skipped, a
    /// dialog's address is cut, ids that no Chromium makes are not
    /// followed, and the follower lives on through all of it.
    #[tokio::test]
    async fn a_hostile_browsers_frames_are_cut_or_skipped_and_the_follower_lives_on() {
        let mut fake = FakeBrowser::start().await;
        let dialogs = follow(&mut fake).await;
        for junk in [
            "[0,0,0,0]",
            "not json",
            "{\"id\":\"x\"}",
            "{\"method\":7}",
            "{\"method\":\"Target.attachedToTarget\",\"params\":{\"sessionId\":[]}}",
        ] {
            fake.say.send(junk.to_owned()).unwrap();
        }
        fake.attach(&"s".repeat(200), "T", false);
        fake.attach(SESSION, TAB, false);
        let long = format!("data:text/html,{}", "x".repeat(1 << 20));
        fake.dialog(SESSION, &"m".repeat(10_000), &long);
        until("the dialog is known", || dialogs.open_on(TAB).is_some()).await;
        let d = dialogs.open_on(TAB).unwrap();
        assert_eq!(d.url.chars().count(), MAX_URL_CHARS);
        assert_eq!(d.message.chars().count(), MAX_MESSAGE_CHARS);
        assert!(dialogs.open_on("T").is_none());
        assert!(dialogs.following());
    }

    /// A browser that announces tabs without end: past `MAX_HELD` held at
    /// once a new tab is let go at once, past `MAX_TABS` it is not
    /// followed; the hook is never run more than `MAX_HELD` times at once.
    #[tokio::test]
    async fn a_flood_of_new_tabs_is_let_go_and_bounded() {
        let mut fake = FakeBrowser::start().await;
        let dialogs = follow(&mut fake).await;
        let n = MAX_TABS + 100;
        for i in 0..n {
            fake.attach(&format!("S{i:031}"), &format!("T{i:031}"), true);
        }
        // Every tab past the first MAX_HELD is let go at once (the hook
        // of those never returns).
        let mut resumed = 0;
        while resumed < n - MAX_HELD {
            let m = fake.next().await;
            assert_eq!(m["method"], "Runtime.runIfWaitingForDebugger", "{m}");
            resumed += 1;
        }
        fake.dialog(&format!("S{:031}", n - 1), "past the cap", "http://a.test/");
        fake.dialog(&format!("S{:031}", 7), "followed", "http://a.test/");
        until("a followed tab's dialog", || {
            dialogs.open_on(&format!("T{:031}", 7)).is_some()
        })
        .await;
        assert!(
            dialogs.open_on(&format!("T{:031}", n - 1)).is_none(),
            "a tab past the cap"
        );
        assert!(dialogs.following());
    }

    /// An answer goes only to the dialog it was for: another opened in its
    /// place is not answered; the browser saying none shows forgets a
    /// dialog whose closing was never heard; an answer the browser never
    /// replies to ends when its tab detaches.
    #[tokio::test]
    async fn an_answer_goes_only_to_the_dialog_it_was_for() {
        let mut fake = FakeBrowser::start().await;
        let dialogs = follow(&mut fake).await;
        fake.attach(SESSION, TAB, false);
        fake.dialog(SESSION, "Discard the draft?", "http://a.test/");
        until("the first dialog", || dialogs.open_on(TAB).is_some()).await;
        let judged = dialogs.open_on(TAB).unwrap();
        // Another takes its place before the answer goes out.
        fake.say(&json!({"method": "Page.javascriptDialogClosed", "sessionId": SESSION, "params": {"result": false, "userInput": ""}}));
        fake.dialog(SESSION, "Transfer the funds?", "http://a.test/");
        until("the second dialog", || {
            dialogs
                .open_on(TAB)
                .is_some_and(|d| d.message.starts_with("Transfer"))
        })
        .await;
        let got = queue(&dialogs, TAB, judged).await.unwrap();
        assert!(matches!(got, Err(CdpError::DialogChanged)), "{got:?}");
        // The same words again are another dialog too.
        let now = dialogs.open_on(TAB).unwrap();
        let mut twin = now.clone();
        twin.opening += 1;
        assert!(matches!(
            queue(&dialogs, TAB, twin).await.unwrap(),
            Err(CdpError::DialogChanged)
        ));
        // The one open now is answered; the browser says none shows.
        let answer = queue(&dialogs, TAB, now);
        let sent = fake.next().await;
        assert_eq!(sent["method"], "Page.handleJavaScriptDialog", "{sent}");
        assert_eq!(sent["sessionId"], SESSION);
        fake.say(&json!({"id": sent["id"], "error": {"code": -32000, "message": "No dialog is showing"}}));
        assert!(answer.await.unwrap().is_err());
        until("the stale dialog is forgotten", || {
            dialogs.open_on(TAB).is_none()
        })
        .await;
        // No reply, then the tab detaches: the answer ends.
        fake.dialog(SESSION, "Again?", "http://a.test/");
        until("a third dialog", || dialogs.open_on(TAB).is_some()).await;
        let answer = queue(&dialogs, TAB, dialogs.open_on(TAB).unwrap());
        assert_eq!(fake.next().await["method"], "Page.handleJavaScriptDialog");
        fake.say(&json!({"method": "Target.detachedFromTarget", "params": {"sessionId": SESSION}}));
        let ended = tokio::time::timeout(std::time::Duration::from_secs(10), answer).await;
        assert!(
            matches!(ended, Ok(Err(_))),
            "the answer did not end: {ended:?}"
        );
        assert!(dialogs.open_on(TAB).is_none());
        // The connection ends: the follower says so.
        drop(fake);
        until("the follower ends", || !dialogs.following()).await;
    }
}
