//! JavaScript dialogs (`alert`, `confirm`, `prompt`, `beforeunload`): the
//! ones open in each tab, as Chromium announces them, and the answer.
//!
//! A dialog stops its page: every call that runs script or input there
//! waits until it is answered. So a tab's open dialog is known here from
//! the browser's own events (never from the page), a call that opens one
//! ends at once ([`Dialogs::guard`]), and calls on a tab with one open are
//! refused until it is answered ([`answer`]).

use std::collections::HashMap;
use std::sync::Arc;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::page::{
    DialogType, EventJavascriptDialogClosed, EventJavascriptDialogOpening,
    HandleJavaScriptDialogParams,
};
use futures::StreamExt;

use super::CdpError;

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
    /// Tabs whose dialogs are followed.
    watched: std::sync::Mutex<std::collections::HashSet<String>>,
    notify: tokio::sync::Notify,
    watchers: std::sync::Mutex<Vec<tokio::task::AbortHandle>>,
}

impl Drop for State {
    fn drop(&mut self) {
        for w in self.watchers.get_mut().expect("watchers lock").drain(..) {
            w.abort();
        }
    }
}

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

    /// Follows `page`'s dialogs from now on (once per tab: a tab already
    /// followed is left as it is).
    pub(super) async fn watch(&self, page: &Page) -> Result<(), CdpError> {
        let target = page.target_id().inner().clone();
        if !self
            .0
            .watched
            .lock()
            .expect("watched lock")
            .insert(target.clone())
        {
            return Ok(());
        }
        let res = self.listen(page, target.clone()).await;
        if res.is_err() {
            self.0.watched.lock().expect("watched lock").remove(&target);
        }
        res
    }

    async fn listen(&self, page: &Page, target: String) -> Result<(), CdpError> {
        let mut opening = page
            .event_listener::<EventJavascriptDialogOpening>()
            .await?;
        let mut closed = page.event_listener::<EventJavascriptDialogClosed>().await?;
        // Weak: the watcher must not keep the registry (and its own abort
        // handle) alive.
        let state = Arc::downgrade(&self.0);
        let task = tokio::spawn(async move {
            loop {
                let ev = tokio::select! {
                    Some(ev) = opening.next() => Some(Dialog::from_event(&ev, &target)),
                    Some(_) = closed.next() => None,
                    else => break,
                };
                let Some(state) = state.upgrade() else { break };
                let dialogs = Dialogs(state);
                match ev {
                    Some(d) => {
                        tracing::debug!(kind = ?d.kind, "a dialog opened");
                        dialogs.opened(&target, d);
                    }
                    None => dialogs.closed(&target),
                }
            }
            // The tab is gone: so is its dialog.
            if let Some(state) = state.upgrade() {
                let dialogs = Dialogs(state);
                dialogs.closed(&target);
                dialogs
                    .0
                    .watched
                    .lock()
                    .expect("watched lock")
                    .remove(&target);
            }
        });
        let mut watchers = self.0.watchers.lock().expect("watchers lock");
        watchers.retain(|w| !w.is_finished());
        watchers.push(task.abort_handle());
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

/// Follows the dialogs of the new tab `id` as soon as chromiumoxide has
/// attached to it (tried for about two seconds; a tab that closes first
/// has none to follow).
pub(super) async fn follow_new(
    dialogs: Dialogs,
    browser: std::sync::Weak<chromiumoxide::Browser>,
    id: chromiumoxide::cdp::browser_protocol::target::TargetId,
) {
    for _ in 0..80 {
        let Some(b) = browser.upgrade() else { return };
        let page = b.get_page(id.clone()).await;
        drop(b);
        if let Ok(page) = page {
            if let Err(e) = dialogs.watch(&page).await {
                tracing::debug!(error = %e, "cannot follow a new tab's dialogs (closing?)");
            }
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
}

/// Answers the dialog open in `page`: OK (with `text` for a prompt) or
/// Cancel.
pub async fn answer(page: &Page, accept: bool, text: Option<&str>) -> Result<(), CdpError> {
    let mut params = HandleJavaScriptDialogParams::new(accept);
    params.prompt_text = text.map(str::to_owned);
    page.execute(params).await?;
    Ok(())
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
