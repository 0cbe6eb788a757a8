//! Each tool as CDP calls on the session's active tab, with the tab lock held.

use std::time::Duration;

use serde_json::{Value, json};

use super::gate::TargetCheck;
use super::output::{
    Dom, Done, Navigated, Pdf, Screenshot, Selected, SnapshotResult, TabClosed, TabInfo, Waited,
};
use super::{ElementTarget, LiveInput, Tool, ToolError, ToolOutput};
use crate::audit::redact;
use crate::cdp::{self, CdpError, Locator, WaitTarget, snapshot};
use crate::sessions::files::{self, UploadFile, Uploaded};
use crate::sessions::{RunningSession, SessionConfig, Tabs};

/// The audit row's params: what was targeted, never typed text (its length)
/// or a URL's secrets.
pub(super) fn audit_params(tool: &Tool) -> Value {
    let target = |t: &Option<ElementTarget>| match t {
        None => json!({}),
        Some(ElementTarget::Point(x, y)) => json!({ "x": x, "y": y }),
        Some(ElementTarget::Selector(s)) => json!({ "selector": s }),
        Some(ElementTarget::Ref(r)) => json!({ "ref": r }),
    };
    match tool {
        Tool::Navigate { url, wait } => {
            json!({ "url": redact::url(url.as_str()), "wait": wait })
        }
        Tool::Screenshot {
            full_page, format, ..
        } => json!({ "full_page": full_page, "format": format }),
        Tool::Click(t) | Tool::Hover(t) => target(&Some(t.clone())),
        Tool::Type {
            text,
            target: t,
            submit,
        } => {
            let mut v = target(t);
            v["text"] = json!(redact::typed_text(text));
            v["submit"] = json!(submit);
            v
        }
        Tool::TypeTotp { target: t, label } => {
            let mut v = target(t);
            v["label"] = json!(label);
            v
        }
        // A single printable key is typed text: audited redacted.
        Tool::Press { key } if key.chars().count() == 1 => {
            json!({ "key": redact::typed_text(key) })
        }
        Tool::Press { key } => json!({ "key": key }),
        Tool::Scroll { dx, dy, target: t } => {
            let mut v = target(t);
            v["dx"] = json!(dx);
            v["dy"] = json!(dy);
            v
        }
        Tool::Select { target: t, values } => {
            let mut v = target(&Some(t.clone()));
            v["values"] = json!(values.len());
            v
        }
        Tool::WaitFor(WaitTarget::Text(t)) => json!({ "text": redact::typed_text(t) }),
        Tool::WaitFor(WaitTarget::Selector(s)) => json!({ "selector": s }),
        Tool::ReadDom { max_chars } => json!({ "max_chars": max_chars }),
        Tool::Snapshot(l) => json!({ "max_depth": l.max_depth, "max_nodes": l.max_nodes }),
        Tool::TabOpen { url } => json!({ "url": url.as_ref().map(|u| redact::url(u.as_str())) }),
        Tool::TabFocus { tab } | Tool::TabClose { tab } => json!({ "tab": tab }),
        Tool::Back | Tool::Forward | Tool::Reload | Tool::Pdf | Tool::TabsList => json!({}),
        // Each file by name, size and hash: never its content.
        Tool::Upload { target: t, files } => {
            let mut v = target(&Some(t.clone()));
            v["files"] = json!(files.iter().map(|f| f.meta()).collect::<Vec<_>>());
            v
        }
        // A prompt's answer is typed text: its length only.
        Tool::Dialog { accept, text, tab } => json!({
            "accept": accept,
            "text": text.as_deref().map(redact::typed_text),
            "tab_id": tab,
        }),
        Tool::Input(input) => input_params(input),
    }
}

/// An operator input's audit params: where and which button, a named
/// key's name; a printable key or inserted text only as its length.
fn input_params(input: &LiveInput) -> Value {
    match input {
        LiveInput::Mouse {
            kind,
            x,
            y,
            button,
            click_count,
            ..
        } => json!({
            "kind": format!("{kind:?}").to_lowercase(),
            "x": x.round(),
            "y": y.round(),
            "button": format!("{button:?}").to_lowercase(),
            "click_count": click_count,
        }),
        LiveInput::Wheel { dx, dy, .. } => json!({ "dx": dx, "dy": dy }),
        LiveInput::Key { down, key, .. } if key.chars().count() == 1 => {
            json!({ "down": down, "key": redact::typed_text(key) })
        }
        LiveInput::Key { down, key, .. } => json!({ "down": down, "key": key }),
        LiveInput::Text(text) => json!({ "text": redact::typed_text(text) }),
        LiveInput::Resize(v) => json!({ "width": v.width, "height": v.height }),
    }
}

/// A coordinate on the viewport: finite, clamped onto `0..=max`.
fn clamp(v: f64, max: u32) -> Result<f64, ToolError> {
    if !v.is_finite() {
        return Err(ToolError::Invalid("coordinates must be numbers".into()));
    }
    Ok(v.clamp(0.0, f64::from(max.saturating_sub(1))))
}

/// An operator's input checked against the viewport: coordinates finite
/// and clamped onto it, wheel deltas bounded, a new size in range.
fn check_input(input: &LiveInput, viewport: (u32, u32)) -> Result<LiveInput, ToolError> {
    let mut out = input.clone();
    match &mut out {
        LiveInput::Mouse { x, y, .. } => {
            *x = clamp(*x, viewport.0)?;
            *y = clamp(*y, viewport.1)?;
        }
        LiveInput::Wheel { x, y, dx, dy, .. } => {
            *x = clamp(*x, viewport.0)?;
            *y = clamp(*y, viewport.1)?;
            if !dx.is_finite() || !dy.is_finite() {
                return Err(ToolError::Invalid("wheel deltas must be numbers".into()));
            }
            *dx = dx.clamp(-10_000.0, 10_000.0);
            *dy = dy.clamp(-10_000.0, 10_000.0);
        }
        LiveInput::Resize(v) => {
            if !(200..=3840).contains(&v.width) || !(200..=2160).contains(&v.height) {
                return Err(ToolError::Invalid(
                    "the viewport must be 200–3840 × 200–2160 pixels".into(),
                ));
            }
        }
        LiveInput::Key { .. } | LiveInput::Text(_) => {}
    }
    Ok(out)
}

/// Runs an operator's (checked) input on `page`.
async fn input(
    session: &RunningSession,
    page: &chromiumoxide::Page,
    input: &LiveInput,
) -> Result<ToolOutput, CdpError> {
    match input {
        LiveInput::Mouse {
            kind,
            x,
            y,
            button,
            buttons,
            click_count,
            modifiers,
        } => {
            cdp::mouse_event(
                page,
                *kind,
                *x,
                *y,
                *button,
                *buttons,
                *click_count,
                *modifiers,
            )
            .await?;
        }
        LiveInput::Wheel {
            x,
            y,
            dx,
            dy,
            modifiers,
        } => cdp::wheel_with(page, *x, *y, *dx, *dy, *modifiers).await?,
        LiveInput::Key {
            down,
            key,
            code,
            modifiers,
        } => cdp::key_event(page, *down, key, code, *modifiers).await?,
        LiveInput::Text(text) => cdp::insert_text(page, text).await?,
        LiveInput::Resize(v) => {
            cdp::size_viewport(page, v.width, v.height).await?;
            session.set_viewport(*v);
        }
    }
    Ok(DONE)
}

/// Resolves a target against the session's viewport and last snapshot.
pub(super) fn locate(
    target: &ElementTarget,
    tabs: &Tabs,
    viewport: (u32, u32),
) -> Result<Locator, ToolError> {
    match target {
        ElementTarget::Point(x, y) => {
            if *x > f64::from(viewport.0) || *y > f64::from(viewport.1) {
                return Err(ToolError::Invalid(
                    "x and y must lie inside the viewport".into(),
                ));
            }
            Ok(Locator::Point(*x, *y))
        }
        ElementTarget::Selector(s) => Ok(Locator::Selector(s.clone())),
        ElementTarget::Ref(r) => match tabs.refs.get(r) {
            Some(id) => Ok(Locator::Node(*id, r.clone())),
            None => Err(ToolError::ElementNotFound(format!(
                "unknown ref {r:?}; take a snapshot first"
            ))),
        },
    }
}

const DONE: ToolOutput = ToolOutput::Done(Done { success: true });

/// Runs `tool` on the active tab, as the engine's settings `cfg` say (how
/// an upload reaches the browser). A crash of that tab's renderer while it
/// runs ends the call at once with [`ToolError::TabCrashed`].
pub(super) async fn run(
    session: &RunningSession,
    tabs: &mut Tabs,
    tool: &Tool,
    timeout: Duration,
    check: Option<&TargetCheck<'_>>,
    cfg: &SessionConfig,
) -> Result<ToolOutput, ToolError> {
    let v = session.viewport();
    let viewport = (v.width, v.height);
    let locator = match tool {
        Tool::Click(t)
        | Tool::Hover(t)
        | Tool::Select { target: t, .. }
        | Tool::Upload { target: t, .. } => Some(locate(t, tabs, viewport)?),
        Tool::Type {
            target: Some(t), ..
        }
        | Tool::Scroll {
            target: Some(t), ..
        } => Some(locate(t, tabs, viewport)?),
        _ => None,
    };
    let checked = match tool {
        Tool::Input(i) => Some(check_input(i, viewport)?),
        _ => None,
    };
    // Tab tools act on the browser, not on the active tab.
    match tool {
        Tool::TabsList => return tabs_list(session, tabs).await,
        Tool::TabOpen { url } => {
            let page = session
                .open_tab(tabs, url.as_ref().map(|u| u.as_str()))
                .await?;
            let id = page.target_id().inner().clone();
            return describe(session, vec![page], Some(&id))
                .await?
                .pop()
                .map(ToolOutput::Tab)
                .ok_or_else(|| ToolError::ActionFailed("the new tab closed at once".into()));
        }
        Tool::TabFocus { tab } => return tab_focus(session, tabs, tab).await,
        Tool::TabClose { tab } => return tab_close(session, tabs, tab).await,
        _ => {}
    }
    let mut page = match tool {
        // A dialog answered in the tab named (a popup's, say).
        Tool::Dialog { tab: Some(tab), .. } => named_tab(session, tab).await?,
        _ => session.page(tabs).await?,
    };
    let crashes = session.conn.crashes().clone();
    let downloads = session.conn.downloads().clone();
    let crashed = page.target_id().inner().clone();
    if crashes.happened_to(&crashed) {
        if !tool.navigates() {
            return Err(ToolError::TabCrashed);
        }
        // A crashed tab cannot be driven again (chromiumoxide keeps its
        // pending navigation): a fresh tab takes its place.
        let old = page.clone();
        let _ = tokio::time::timeout(Duration::from_secs(2), old.close()).await;
        crashes.clear(&crashed);
        page = session.open_tab(tabs, None).await?;
    }
    let target = page.target_id().inner().clone();
    // A dialog stops the page: nothing but its answer runs there.
    let dialogs = session.conn.dialogs().clone();
    match (dialogs.open_on(&target), tool) {
        (Some(d), Tool::Dialog { accept, text, .. }) => {
            let text = text
                .as_deref()
                .filter(|_| d.kind == cdp::DialogKind::Prompt);
            // The gate's look again, at the dialog answered now: another
            // may have taken the judged one's place.
            if let Some(check) = check {
                let (host, element) = super::gate::dialog_facts(&d);
                (check.allow)(&host, element)?;
            }
            match dialogs.answer(&target, &d, *accept, text).await {
                Ok(()) => {}
                // Another dialog took its place as the answer went out:
                // nothing was answered; the agent is told what is open.
                Err(CdpError::DialogChanged) => {
                    return Err(match dialogs.any_open(&target) {
                        Some(now) => dialog_open(&now),
                        None => ToolError::NoDialog,
                    });
                }
                Err(e) => return Err(e.into()),
            }
            dialogs.settled(&target, &d, Duration::from_secs(1)).await;
            return Ok(ToolOutput::DialogAnswered(super::output::DialogAnswered {
                accepted: *accept,
                dialog: d,
            }));
        }
        // Another tab's (tabs of one site share a renderer, which it
        // stops): answered there.
        (None, _) if let Some(d) = dialogs.any_open(&target) => return Err(dialog_open(&d)),
        (None, Tool::Dialog { .. }) => return Err(ToolError::NoDialog),
        (Some(d), _) => return Err(dialog_open(&d)),
        (None, _) => {}
    }
    downloads.clear(&target);
    if tool.navigates() {
        tabs.refs.clear();
    }
    let page = &page;
    let locator = locator.as_ref();
    // What the risk gate's check stopped a click with.
    let mut stopped = None;
    let work = async {
        Ok(match tool {
            Tool::Navigate { url, wait } => {
                match cdp::navigate(page, url.as_str(), *wait, timeout).await {
                    Ok(nav) => ToolOutput::Navigated(Navigated::from_navigation(nav, None)),
                    // Possibly the guard's refusal of a CONNECT: told apart
                    // once the refusals are read (`run_tool`).
                    Err(CdpError::Failed(m)) => {
                        let mut nav = cdp::current(page).await?;
                        // The tab shows an error page for the URL asked for.
                        nav.final_url = url.as_str().to_owned();
                        let mut nav = Navigated::from_navigation(nav, None);
                        nav.failure = Some(m);
                        ToolOutput::Navigated(nav)
                    }
                    Err(e) => return Err(e),
                }
            }
            Tool::Back | Tool::Forward => {
                let delta = if matches!(tool, Tool::Back) { -1 } else { 1 };
                let moved = cdp::history(page, delta, timeout).await?;
                let nav = cdp::current(page).await?;
                ToolOutput::Navigated(Navigated::from_navigation(nav, Some(moved)))
            }
            Tool::Reload => {
                cdp::reload(page, timeout).await?;
                let nav = cdp::current(page).await?;
                ToolOutput::Navigated(Navigated::from_navigation(nav, None))
            }
            Tool::Screenshot {
                full_page,
                format,
                quality,
            } => {
                let bytes = cdp::screenshot(page, *format, *quality, *full_page, timeout).await?;
                let (width, height) = image::ImageReader::new(std::io::Cursor::new(&bytes))
                    .with_guessed_format()
                    .ok()
                    .and_then(|r| r.into_dimensions().ok())
                    .unwrap_or_default();
                ToolOutput::Screenshot(Screenshot {
                    bytes,
                    format: *format,
                    width,
                    height,
                    captured_at: crate::time::rfc3339_ms(crate::time::now_ms()),
                    persisted_path: None,
                    screenshot_id: None,
                })
            }
            Tool::Click(_) => {
                let locator = locator.expect("located");
                match check {
                    Some(check) => {
                        if let Err(e) = cdp::click_checked(
                            page,
                            locator,
                            timeout,
                            &session.sandbox.cdp_url,
                            |h, f| (check.allow)(h, f),
                        )
                        .await?
                        {
                            stopped = Some(e);
                        }
                    }
                    None => cdp::click(page, locator, timeout).await?,
                }
                DONE
            }
            Tool::Hover(_) => {
                cdp::hover(page, locator.expect("located"), timeout).await?;
                DONE
            }
            // A key that acts on the focus is judged again where it acts
            // (the gate's check, once the page has handled the keydown).
            Tool::Type { text, submit, .. } => {
                match check {
                    Some(check) if *submit => {
                        // Run again after an approval of its Enter: the
                        // text is in already.
                        if !check.again {
                            cdp::type_text(page, locator, text, false, timeout).await?;
                        }
                        let enter = named_key("Enter", "", 0, true);
                        stopped = checked_key(session, page, check, enter, true, timeout).await?;
                    }
                    _ => cdp::type_text(page, locator, text, *submit, timeout).await?,
                }
                DONE
            }
            Tool::Press { key } => {
                match check {
                    Some(check) => {
                        let key = named_key(key, "", 0, true);
                        let before = check.again;
                        stopped = checked_key(session, page, check, key, before, timeout).await?;
                    }
                    None => cdp::press(page, key, timeout).await?,
                }
                DONE
            }
            Tool::Scroll { dx, dy, .. } => {
                cdp::scroll(page, locator, *dx, *dy, viewport, timeout).await?;
                DONE
            }
            Tool::Select { values, .. } => {
                let selected =
                    cdp::select(page, locator.expect("located"), values, timeout).await?;
                ToolOutput::Selected(Selected { selected })
            }
            Tool::WaitFor(target) => ToolOutput::Waited(Waited {
                waited_ms: cdp::wait_for(page, target, timeout).await?,
            }),
            Tool::ReadDom { max_chars } => {
                // Codes blanked before the cut: one cut in half would not
                // match, and its first digits would be shown.
                let blank = |html: &mut String| session.scrub_codes(html);
                let (html, truncated_to) = cdp::read_dom(page, *max_chars, timeout, blank).await?;
                ToolOutput::Dom(Dom { html, truncated_to })
            }
            Tool::Snapshot(limits) => {
                let snap = match tokio::time::timeout(timeout, snapshot::take(page, *limits)).await
                {
                    Ok(r) => r?,
                    Err(_) => {
                        return Err(CdpError::Timeout(
                            "snapshot",
                            u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                        ));
                    }
                };
                let mut nodes = snap.nodes;
                session.scrub_snapshot(&mut nodes, &snap.refs);
                tabs.refs = snap.refs;
                ToolOutput::Snapshot(SnapshotResult {
                    nodes,
                    truncated: snap.truncated,
                    count: snap.count,
                })
            }
            Tool::Pdf => ToolOutput::Pdf(Pdf {
                bytes: cdp::pdf(page, timeout).await?,
            }),
            // An agent's raw Enter or Space going down, as `press`.
            Tool::Input(LiveInput::Key {
                down: true,
                key,
                code,
                modifiers,
            }) if let Some(check) = check => {
                let key = named_key(key, code, *modifiers, false);
                stopped = checked_key(session, page, check, key, check.again, timeout).await?;
                DONE
            }
            Tool::Input(_) => input(session, page, checked.as_ref().expect("checked")).await?,
            Tool::Upload { files, .. } => {
                let in_page = cfg.upload_in_page;
                upload(
                    session,
                    page,
                    locator.expect("located"),
                    files,
                    timeout,
                    in_page,
                )
                .await?
            }
            // Runs through `SessionManager::type_totp`, which needs the vault.
            Tool::TypeTotp { .. } => {
                return Err(CdpError::Failed(
                    "type_totp reached the plain tool runner".into(),
                ));
            }
            Tool::TabsList
            | Tool::TabOpen { .. }
            | Tool::TabFocus { .. }
            | Tool::TabClose { .. }
            | Tool::Dialog { .. } => {
                unreachable!("tab tools and dialog are handled above")
            }
        })
    };
    // A dialog the action opens stops the page: the action answers at
    // once with it (what it sent has been sent); a read cannot finish.
    let work = async {
        match dialogs.guard(&target, work).await? {
            Ok(out) => Ok(out),
            Err(d) if tool.acts() => Ok(ToolOutput::DialogOpened(super::output::DialogOpened {
                dialog_opened: d,
            })),
            Err(d) => Err(CdpError::DialogOpen(dialog_message(&d))),
        }
    };
    let work = crashes.guard(&target, || CdpError::TabCrashed, work);
    if !tool.navigates() {
        let res = work.await;
        if let Some(e) = stopped {
            return Err(e);
        }
        return Ok(res?);
    }
    let res = downloads
        .guard(&target, || CdpError::DownloadRefused, work)
        .await;
    if matches!(res, Err(CdpError::DownloadRefused)) {
        // chromiumoxide still waits for the navigation: end it.
        cdp::reset_tab(page).await;
        // Allowed, the download goes on in the browser: the navigation
        // answers with where the tab is now.
        if session.downloads.is_some() {
            let mut nav = Navigated::from_navigation(cdp::current(page).await?, None);
            nav.download_started = Some(true);
            return Ok(ToolOutput::Navigated(nav));
        }
    }
    Ok(res?)
}

/// The refusal of a call on a tab whose page a dialog stops.
pub(super) fn dialog_open(d: &cdp::Dialog) -> ToolError {
    ToolError::DialogOpen(dialog_message(d))
}

/// A named key going down (and up after its character, when `up`).
fn named_key<'a>(key: &'a str, code: &'a str, modifiers: i64, up: bool) -> cdp::KeyDown<'a> {
    cdp::KeyDown::Named(cdp::KeyAct {
        key,
        code,
        modifiers,
        up,
    })
}

/// A key that acts on the focus (Enter or Space), sent with the gate's
/// `check` where it acts ([`cdp::press_checked`]): its focus judged once the
/// page has handled the keydown, and before the key goes down too when
/// `before`. `Some(e)`: the check stopped it, with `e`.
async fn checked_key(
    session: &RunningSession,
    page: &chromiumoxide::Page,
    check: &TargetCheck<'_>,
    key: cdp::KeyDown<'_>,
    before: bool,
    timeout: Duration,
) -> Result<Option<ToolError>, CdpError> {
    let browser = &session.sandbox.cdp_url;
    let allow = |h: &str, f| (check.allow)(h, f);
    let sent = cdp::press_checked(page, key, timeout, browser, before, allow).await?;
    Ok(sent.err())
}

fn dialog_message(d: &cdp::Dialog) -> String {
    let kind = d.kind.as_str();
    format!(
        "a JavaScript {kind} dialog is open in tab {} and stops its page ({:?}); answer it with dialog (accept: true or false) in that tab first",
        d.tab_id, d.message
    )
}

/// Sets `files` on the file input at `locator`: the target is checked
/// first, so nothing is written for anything else.
async fn upload(
    session: &RunningSession,
    page: &chromiumoxide::Page,
    locator: &Locator,
    files: &[UploadFile],
    timeout: Duration,
    in_page: bool,
) -> Result<ToolOutput, CdpError> {
    let input = cdp::file_input(page, locator, timeout).await?;
    if files.len() > 1 && !input.multiple {
        return Err(CdpError::Failed(
            "the file input takes one file (it has no multiple attribute)".into(),
        ));
    }
    if in_page {
        // No directory shared with the browser (a pod, a remote engine):
        // the bytes go over CDP and the page's own File objects carry them.
        let sent: Vec<(&str, &[u8])> = files
            .iter()
            .map(|f| (f.name.as_str(), f.bytes.as_ref()))
            .collect();
        cdp::set_files_in_page(page, &input, &sent, timeout).await?;
    } else {
        let paths =
            files::uploads::write(&session.sandbox.uploads(), session.next_upload_seq(), files)
                .await
                .map_err(|e| {
                    tracing::error!(error = %format!("{e:#}"), "failed to write upload files");
                    CdpError::Failed("the files could not be written for the browser".into())
                })?;
        cdp::set_files(page, &input, paths).await?;
    }
    Ok(ToolOutput::Uploaded(Uploaded {
        files: files.iter().map(UploadFile::meta).collect(),
    }))
}

async fn describe(
    session: &RunningSession,
    pages: Vec<chromiumoxide::Page>,
    active: Option<&str>,
) -> Result<Vec<TabInfo>, CdpError> {
    let mut out = Vec::with_capacity(pages.len());
    for p in pages {
        let id = p.target_id().inner().clone();
        // A page a dialog stops runs no script (nor do the other pages of
        // its renderer): the title is the browser's.
        let title = match session.conn.dialogs().any_open(&id) {
            Some(_) => cdp::title_of_target(session.conn.browser(), &p).await,
            None => cdp::title(&p).await,
        };
        // A tab that is closing answers with errors; it is not listed.
        let (Ok(url), Ok(title)) = (p.url().await, title) else {
            continue;
        };
        out.push(TabInfo {
            active: active == Some(id.as_str()),
            url: url.unwrap_or_default(),
            title,
            tab_id: id,
        });
    }
    Ok(out)
}

async fn tabs_list(session: &RunningSession, tabs: &mut Tabs) -> Result<ToolOutput, ToolError> {
    let active = session.page(tabs).await?.target_id().inner().clone();
    Ok(ToolOutput::Tabs(
        describe(session, session.pages().await?, Some(&active)).await?,
    ))
}

/// The session's tab `tab`.
pub(super) async fn named_tab(
    session: &RunningSession,
    tab: &str,
) -> Result<chromiumoxide::Page, ToolError> {
    Ok(session
        .pages()
        .await?
        .into_iter()
        .find(|p| p.target_id().inner() == tab)
        .ok_or_else(|| CdpError::TabNotFound(format!("no tab {tab:?} in this session")))?)
}

async fn tab_focus(
    session: &RunningSession,
    tabs: &mut Tabs,
    tab: &str,
) -> Result<ToolOutput, ToolError> {
    let page = named_tab(session, tab).await?;
    page.bring_to_front().await.map_err(CdpError::from)?;
    tabs.active = Some(page.target_id().clone());
    tabs.refs.clear();
    describe(session, vec![page], Some(tab))
        .await?
        .pop()
        .map(ToolOutput::Tab)
        .ok_or_else(|| ToolError::TabNotFound(format!("tab {tab:?} closed meanwhile")))
}

async fn tab_close(
    session: &RunningSession,
    tabs: &mut Tabs,
    tab: &str,
) -> Result<ToolOutput, ToolError> {
    let pages = session.pages().await?;
    let count = pages.len();
    let page = pages
        .into_iter()
        .find(|p| p.target_id().inner() == tab)
        .ok_or_else(|| CdpError::TabNotFound(format!("no tab {tab:?} in this session")))?;
    if count <= 1 {
        return Err(ToolError::LastTab);
    }
    // Closed without the page's `beforeunload` handler ("Leave site?"),
    // as Puppeteer's `page.close()` closes by default: a hostile page
    // cannot keep its tab open, nor stop the session's other tabs with
    // the dialog.
    session
        .conn
        .browser()
        .execute(
            chromiumoxide::cdp::browser_protocol::target::CloseTargetParams::new(
                page.target_id().clone(),
            ),
        )
        .await
        .map_err(CdpError::from)?;
    // Wait (briefly) until the browser no longer lists it.
    for _ in 0..100 {
        if !session
            .pages()
            .await?
            .iter()
            .any(|p| p.target_id().inner() == tab)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if tabs.active.as_ref().is_some_and(|a| a.inner() == tab) {
        tabs.active = None;
        tabs.refs.clear();
    }
    Ok(ToolOutput::TabClosed(TabClosed {
        closed: tab.to_owned(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cdp::{Button, MouseKind};
    use crate::sessions::Viewport;

    fn mouse(x: f64, y: f64) -> LiveInput {
        LiveInput::Mouse {
            kind: MouseKind::Down,
            x,
            y,
            button: Button::Left,
            buttons: 1,
            click_count: 1,
            modifiers: 0,
        }
    }

    #[test]
    fn input_outside_the_page_is_clamped_onto_its_edge() {
        let got = check_input(&mouse(-50.0, 1.0e12), (1280, 720)).unwrap();
        assert_eq!(got, mouse(0.0, 719.0));
        let got = check_input(&mouse(10.5, 20.25), (1280, 720)).unwrap();
        assert_eq!(got, mouse(10.5, 20.25));
        let wheel = LiveInput::Wheel {
            x: 5000.0,
            y: 5.0,
            dx: 0.0,
            dy: 1.0e9,
            modifiers: 0,
        };
        assert_eq!(
            check_input(&wheel, (1280, 720)).unwrap(),
            LiveInput::Wheel {
                x: 1279.0,
                y: 5.0,
                dx: 0.0,
                dy: 10_000.0,
                modifiers: 0
            }
        );
    }

    #[test]
    fn garbage_coordinates_and_sizes_are_refused() {
        for bad in [
            mouse(f64::NAN, 1.0),
            mouse(1.0, f64::INFINITY),
            LiveInput::Wheel {
                x: 1.0,
                y: 1.0,
                dx: f64::NAN,
                dy: 0.0,
                modifiers: 0,
            },
            LiveInput::Resize(Viewport {
                width: 10,
                height: 720,
            }),
            LiveInput::Resize(Viewport {
                width: 1280,
                height: 100_000,
            }),
        ] {
            assert!(
                matches!(check_input(&bad, (1280, 720)), Err(ToolError::Invalid(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn typed_keys_and_text_are_audited_as_their_length() {
        let key = input_params(&LiveInput::Key {
            down: true,
            key: "p".into(),
            code: "KeyP".into(),
            modifiers: 0,
        })
        .to_string();
        assert!(!key.contains("\"p\"") && !key.contains("KeyP"), "{key}");
        let text = input_params(&LiveInput::Text("hunter2".into())).to_string();
        assert!(!text.contains("hunter2"), "{text}");
        let named = input_params(&LiveInput::Key {
            down: true,
            key: "Enter".into(),
            code: "Enter".into(),
            modifiers: 0,
        })
        .to_string();
        assert!(named.contains("Enter"), "{named}");
    }
}
