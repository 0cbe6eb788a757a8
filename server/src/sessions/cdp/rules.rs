//! What the CDP endpoint does with each command, decided from its method
//! and parameters alone (no I/O, so every rule has a unit test): forward
//! it as it is, forward it after the checks of a command that acts,
//! rewrite it, close the session, or refuse it naming the rule.
//! `docs/cdp.md` has the same table in a user's words; keep the two
//! together.

use serde_json::{Value, json};

/// What a command may do in this session.
#[derive(Debug, Clone, Default)]
pub struct Context {
    /// Operator mode: logins from the vault were injected, so nothing may
    /// read cookies back out.
    pub sealed: bool,
    /// Where downloads go when the session allows them (the folder as the
    /// browser sees it); `None`: downloads are refused.
    pub download_dir: Option<String>,
}

/// The decision on one command.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Forwarded as it is (counted, not audited one by one).
    Pass,
    /// Forwarded after the checks of a command that acts: refused while
    /// an operator holds control, audited (some), judged by the risk gate
    /// (presses, activation keys, typing, navigations).
    Act(Act),
    /// Forwarded with these parameters instead of the client's.
    Rewrite(Value),
    /// `Browser.close`: Cordon closes the session (its browser and
    /// profile are destroyed) and answers `{}`.
    CloseSession,
    /// Answered by Cordon with a CDP error naming `rule`; never forwarded.
    Refuse {
        /// Stable rule name (`vault_sealed`, `file_paths`, …).
        rule: &'static str,
        /// What to do instead.
        why: String,
    },
}

/// A command that acts on the page or the browser.
#[derive(Debug, Clone, PartialEq)]
pub enum Act {
    /// A button, finger or drop going down at a point (CSS pixels of the
    /// target tab's viewport): judged as a click there.
    Press {
        /// CSS pixels.
        x: f64,
        /// CSS pixels.
        y: f64,
    },
    /// A mouse button going up at a point (CSS pixels): judged as a
    /// click there unless it goes up where it went down, with nothing
    /// moved between (the press was judged there): the up of a drag is
    /// its drop, and a page may act on `mouseup`.
    Release {
        /// CSS pixels.
        x: f64,
        /// CSS pixels.
        y: f64,
    },
    /// A touch event's one point (or none, as a touch ends): judged where
    /// a finger goes down or lifts ([`super::gesture`]): a point whose id
    /// no finger down has is a finger going down, whatever the event's
    /// type says.
    Touch {
        /// The point's id (0 when absent, as Chromium counts it), `None`
        /// for an event with no point (the touch ends).
        id: Option<i64>,
        /// CSS pixels.
        x: f64,
        /// CSS pixels.
        y: f64,
        /// `touchCancel`: the fingers lift without acting.
        cancel: bool,
        /// `touchStart`: judged as a finger going down whatever is down.
        start: bool,
    },
    /// A drop that carries text (`Input.dispatchDragEvent`'s `drop` with
    /// items): the text goes into what it lands on, as typing does.
    /// Judged as typing there (a password field refuses it) and as a
    /// press there.
    Drop {
        /// CSS pixels.
        x: f64,
        /// CSS pixels.
        y: f64,
        /// The items' text (audited as its length only).
        text: String,
    },
    /// A key that activates the focused element (Enter, Space).
    Key(String),
    /// Text typed at the focus (audited as its length only).
    Text(String),
    /// Input that acts on nothing by itself (moves, wheels, key ups).
    Motion,
    /// The target's main frame loads `url` (http(s) or about:blank).
    Navigate(String),
    /// A reload or a step in history.
    History,
    /// A new tab, at `url` when given.
    OpenTab(Option<String>),
    /// Script run in the page: audited once per connection per distinct
    /// source (its SHA-256 and length, never the source).
    Script(String),
    /// Tabs closed, contexts made or disposed.
    Targets,
    /// Changes to the document, cookies or storage (counted).
    Change,
    /// OK on the tab's JavaScript dialog: judged by the dialog's message
    /// (Cancel acts on nothing and passes).
    DialogOk,
}

impl Act {
    /// Whether the act gets an audit row of its own (the rest are counted
    /// in the connection's `cdp.disconnected` row).
    pub fn audited(&self) -> bool {
        !matches!(self, Self::Motion | Self::Change | Self::Touch { .. })
    }
}

/// Permissions a client may grant (what a page may ask for without
/// reaching the host or other sites).
const SAFE_PERMISSIONS: &[&str] = &[
    "geolocation",
    "notifications",
    "clipboardReadWrite",
    "clipboardSanitizedWrite",
    "sensors",
    "backgroundSync",
    "durableStorage",
    "idleDetection",
    "storageAccess",
];

fn refuse(rule: &'static str, why: impl Into<String>) -> Verdict {
    Verdict::Refuse {
        rule,
        why: why.into(),
    }
}

fn str_of<'a>(params: &'a Value, key: &str) -> Option<&'a str> {
    params.get(key).and_then(Value::as_str)
}

fn num_of(params: &Value, key: &str) -> f64 {
    params.get(key).and_then(Value::as_f64).unwrap_or(f64::NAN)
}

/// Whether a client may send a tab to `url`: the web and a blank page,
/// never the browser's own schemes or the sandbox's files.
pub fn url_allowed(url: &str) -> bool {
    if url.is_empty() || url == "about:blank" {
        return true;
    }
    url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
}

/// The decision on `method` with `params` (`Value::Null` when absent).
pub fn decide(method: &str, params: &Value, ctx: &Context) -> Verdict {
    let (domain, name) = method.split_once('.').unwrap_or((method, ""));
    match (domain, name) {
        // The sandbox and Cordon's own control.
        ("Tethering" | "SystemInfo", _) => refuse(
            "host_probe",
            "this domain reaches the host machine, not the session's browser",
        ),
        ("Security", "setIgnoreCertificateErrors" | "handleCertificateError")
        | ("Security", "setOverrideCertificateErrors") => refuse(
            "certificate_errors",
            "certificate errors stay errors in a Cordon session",
        ),
        ("Target", "exposeDevToolsProtocol" | "setRemoteLocations") => refuse(
            "devtools_exposure",
            "pages may not be given the protocol, and the browser connects nowhere for discovery",
        ),
        ("Target", "sendMessageToTarget") => refuse(
            "flatten_only",
            "use flattened sessions (attachToTarget with flatten: true and sessionId on each command)",
        ),
        ("Target", "attachToTarget" | "setAutoAttach" | "attachToBrowserTarget")
            if name != "attachToBrowserTarget"
                && params.get("flatten").and_then(Value::as_bool) != Some(true) =>
        {
            refuse(
                "flatten_only",
                "only flattened sessions are served: pass flatten: true",
            )
        }
        ("Target", "createBrowserContext")
            if params.get("proxyServer").is_some()
                || params.get("proxyBypassList").is_some()
                || params.get("originsWithUniversalNetworkAccess").is_some() =>
        {
            refuse(
                "egress",
                "a context's traffic goes through the session's egress guard: no proxy or universal access of its own",
            )
        }
        ("Target", "createTarget") => match str_of(params, "url") {
            Some(url) if !url_allowed(url) => {
                refuse("url_scheme", "tabs open http(s) URLs or about:blank only")
            }
            url => Verdict::Act(Act::OpenTab(
                url.filter(|u| !u.is_empty() && *u != "about:blank")
                    .map(str::to_owned),
            )),
        },
        ("Target", "closeTarget" | "createBrowserContext" | "disposeBrowserContext") => {
            Verdict::Act(Act::Targets)
        }
        ("Browser", "close") => Verdict::CloseSession,
        ("Browser", "crash" | "crashGpuProcess" | "executeBrowserCommand") => refuse(
            "browser_control",
            "the browser's life is Cordon's: close the session with Browser.close or DELETE /api/sessions/{id}",
        ),
        ("Browser" | "Page", "setDownloadBehavior") => download_behavior(params, ctx),
        ("Browser", "grantPermissions") => {
            let all_safe = params
                .get("permissions")
                .and_then(Value::as_array)
                .is_some_and(|p| {
                    p.iter()
                        .all(|x| x.as_str().is_some_and(|n| SAFE_PERMISSIONS.contains(&n)))
                });
            if all_safe {
                Verdict::Pass
            } else {
                refuse(
                    "permission",
                    format!(
                        "only these permissions may be granted: {}",
                        SAFE_PERMISSIONS.join(", ")
                    ),
                )
            }
        }
        ("Browser", "setPermission") => {
            let name = params
                .pointer("/permission/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if SAFE_PERMISSIONS.contains(&name) {
                Verdict::Pass
            } else {
                refuse(
                    "permission",
                    format!(
                        "only these permissions may be set: {}",
                        SAFE_PERMISSIONS.join(", ")
                    ),
                )
            }
        }
        ("DOM", "setFileInputFiles") => refuse(
            "file_paths",
            "files come from the caller, not from paths: POST /api/sessions/{id}/upload",
        ),
        // The vault stays sealed in operator mode.
        ("Network", "getCookies" | "getAllCookies" | "loadNetworkResource")
        | ("Storage", "getCookies")
        | ("Page", "getCookies")
            if ctx.sealed =>
        {
            refuse(
                "vault_sealed",
                "this session carries logins from the vault: its cookies cannot be read over CDP",
            )
        }
        // Input: judged like the tool API's clicks, keys and typing.
        ("Input", "setIgnoreInputEvents") => refuse(
            "input_lock",
            "the browser's input belongs to the session (an operator may need it)",
        ),
        // Files named by path: the page would read the sandbox's (or the
        // host's) files, the profile's cookie database among them.
        ("Input", "dispatchDragEvent")
            if params
                .pointer("/data/files")
                .and_then(Value::as_array)
                .is_some_and(|f| !f.is_empty()) =>
        {
            refuse(
                "file_paths",
                "a drag carries no files by path: files come from the caller, POST /api/sessions/{id}/upload",
            )
        }
        // Several fingers at once: the gate judges a touch where its first
        // point lands, and the others would press unjudged.
        ("Input", "dispatchTouchEvent")
            if params
                .get("touchPoints")
                .and_then(Value::as_array)
                .is_some_and(|p| p.len() > 1) =>
        {
            refuse(
                "multi_touch",
                "a touch carries one point at a time: the risk gate judges each press where it lands",
            )
        }
        ("Input", "dispatchKeyEvent") if access_key(params) => refuse(
            "access_key",
            "Alt with a character fires the page's access keys, which the risk gate cannot judge",
        ),
        ("Input", _) => Verdict::Act(input(name, params)),
        ("Page", "handleJavaScriptDialog")
            if params.get("accept").and_then(Value::as_bool) != Some(false) =>
        {
            Verdict::Act(Act::DialogOk)
        }
        // Navigation.
        ("Page", "navigate") => match str_of(params, "url") {
            Some(url) if url_allowed(url) => Verdict::Act(Act::Navigate(url.to_owned())),
            _ => refuse("url_scheme", "navigate to http(s) URLs or about:blank only"),
        },
        ("Page", "reload") if str_of(params, "scriptToEvaluateOnLoad").is_some() => {
            Verdict::Act(Act::Script(
                str_of(params, "scriptToEvaluateOnLoad")
                    .unwrap_or("")
                    .to_owned(),
            ))
        }
        ("Page", "reload" | "navigateToHistoryEntry" | "resetNavigationHistory") => {
            Verdict::Act(Act::History)
        }
        // Script.
        ("Runtime", "evaluate" | "compileScript") | ("Debugger", "evaluateOnCallFrame") => {
            Verdict::Act(Act::Script(
                str_of(params, "expression").unwrap_or("").to_owned(),
            ))
        }
        ("Runtime", "callFunctionOn") => Verdict::Act(Act::Script(
            str_of(params, "functionDeclaration")
                .unwrap_or("")
                .to_owned(),
        )),
        ("Page", "addScriptToEvaluateOnNewDocument") => Verdict::Act(Act::Script(
            str_of(params, "source").unwrap_or("").to_owned(),
        )),
        ("Page", "addScriptToEvaluateOnLoad") => Verdict::Act(Act::Script(
            str_of(params, "scriptSource").unwrap_or("").to_owned(),
        )),
        ("Debugger", "setScriptSource") => Verdict::Act(Act::Script(
            str_of(params, "scriptSource").unwrap_or("").to_owned(),
        )),
        // A breakpoint's condition is script run in the page.
        ("Debugger", "setBreakpoint" | "setBreakpointByUrl" | "setBreakpointOnFunctionCall")
            if str_of(params, "condition").is_some_and(|c| !c.is_empty()) =>
        {
            Verdict::Act(Act::Script(
                str_of(params, "condition").unwrap_or("").to_owned(),
            ))
        }
        // Changes.
        ("Page", "setDocumentContent" | "close")
        | (
            "DOM",
            "setOuterHTML"
            | "setAttributeValue"
            | "setAttributesAsText"
            | "removeNode"
            | "removeAttribute"
            | "setNodeValue"
            | "setNodeName"
            | "moveTo"
            | "copyTo"
            | "focus"
            | "undo"
            | "redo",
        )
        | ("Network", "setCookie" | "setCookies" | "deleteCookies" | "clearBrowserCookies")
        | ("Storage", "setCookies" | "clearCookies" | "clearDataForOrigin") => {
            Verdict::Act(Act::Change)
        }
        _ => Verdict::Pass,
    }
}

/// Downloads follow the session's policy whatever the client asks: refused
/// (`deny`), or saved by their GUID into Cordon's folder (where
/// `GET /api/sessions/{id}/downloads` finds them). The client's own path
/// is never used: it names a folder on the client's machine, or the host's.
fn download_behavior(params: &Value, ctx: &Context) -> Verdict {
    let mut rewritten = match &ctx.download_dir {
        None => json!({ "behavior": "deny" }),
        Some(dir) => json!({ "behavior": "allowAndName", "downloadPath": dir }),
    };
    if let Some(context) = params.get("browserContextId") {
        rewritten["browserContextId"] = context.clone();
    }
    rewritten["eventsEnabled"] = json!(true);
    Verdict::Rewrite(rewritten)
}

/// The key a key event activates the focused element with, whatever
/// field says so: its `key` (a link acts on Enter's keydown, a button on
/// Space), its `code` or key codes (the key Chromium makes of them), or a
/// carriage return or newline in its `text` or `unmodifiedText` (a
/// keypress with char code 13 presses a button and submits a form,
/// whatever the key is called). `None`: it activates nothing.
fn activation(params: &Value) -> Option<&'static str> {
    let field = |k: &str| str_of(params, k).unwrap_or("");
    let code = params
        .get("windowsVirtualKeyCode")
        .or_else(|| params.get("nativeVirtualKeyCode"))
        .and_then(Value::as_i64);
    let texts = [field("text"), field("unmodifiedText")];
    let enter = matches!(field("key"), "Enter")
        || matches!(field("code"), "Enter" | "NumpadEnter")
        || code == Some(13)
        || texts.iter().any(|t| t.contains(['\r', '\n']))
        || inserts_newline(params);
    let space = crate::policy::assess::activation_key(field("key"))
        || field("code") == "Space"
        || code == Some(32)
        || texts.contains(&" ");
    if enter {
        Some("Enter")
    } else if space {
        Some(" ")
    } else {
        None
    }
}

/// Whether a key event pastes at the focus: a key bound to paste
/// ([`crate::policy::assess::pastes`]), or editing `commands` that insert
/// what the clipboard or the kill ring holds (`paste`,
/// `pasteAndMatchStyle`, `yank`…; Blink reads them without regard to
/// case).
fn pastes(params: &Value) -> bool {
    let field = |k: &str| str_of(params, k).unwrap_or("");
    let vk = params
        .get("windowsVirtualKeyCode")
        .or_else(|| params.get("nativeVirtualKeyCode"))
        .and_then(Value::as_i64);
    let modifiers = params.get("modifiers").and_then(Value::as_i64).unwrap_or(0);
    crate::policy::assess::pastes(field("key"), field("code"), vk, modifiers)
        || params
            .get("commands")
            .and_then(Value::as_array)
            .is_some_and(|c| {
                c.iter().filter_map(Value::as_str).any(|c| {
                    let c = c.to_ascii_lowercase();
                    c.starts_with("paste") || c.starts_with("yank")
                })
            })
}

/// Whether a key event's editing `commands` insert a newline (Chromium
/// runs them with the key, whatever the key is: `insertNewline` in a text
/// field submits its form as Enter does). Blink reads command names
/// without regard to case.
fn inserts_newline(params: &Value) -> bool {
    params
        .get("commands")
        .and_then(Value::as_array)
        .is_some_and(|c| {
            c.iter().filter_map(Value::as_str).any(|c| {
                let c = c.to_ascii_lowercase();
                c.starts_with("insertnewline")
                    || c.starts_with("insertlinebreak")
                    || c.starts_with("insertparagraph")
            })
        })
}

/// Whether `method` would mislead or stop an operator who holds control
/// of the session (the person drives; a client's commands that act are
/// refused meanwhile, and so are these, which change what the operator
/// sees or stop the page under them): restyling or drawing over the
/// page, pausing or freezing its script, answering its requests, taking
/// its file chooser, resizing its window, deleting its storage. What a
/// client's set-up of a new tab sends (viewport, media, user agent,
/// auto-attach) and reads pass.
pub fn disturbs_operator(method: &str, params: &Value) -> bool {
    let (domain, name) = method.split_once('.').unwrap_or((method, ""));
    let verb = |verbs: &[&str]| verbs.iter().any(|v| name.starts_with(v));
    match domain {
        "CSS" => verb(&["add", "create", "force", "set"]),
        "Overlay" => verb(&["highlight", "set"]),
        "DOM" => name == "scrollIntoViewIfNeeded",
        "Debugger" => {
            !matches!(
                name,
                "enable"
                    | "disable"
                    | "resume"
                    | "removeBreakpoint"
                    | "setAsyncCallStackDepth"
                    | "setBlackboxPatterns"
                    | "setBlackboxedRanges"
            ) && !verb(&["get", "search"])
        }
        "DOMDebugger" | "EventBreakpoints" => verb(&["set"]),
        "Page" => matches!(
            name,
            "crash"
                | "stopLoading"
                | "setWebLifecycleState"
                | "setInterceptFileChooserDialog"
                | "bringToFront"
                | "setFontFamilies"
                | "setFontSizes"
        ),
        "Runtime" => name == "terminateExecution",
        "Fetch" => match name {
            "enable" | "fulfillRequest" | "failRequest" | "continueWithAuth" => true,
            // Let go as it is, a paused request does not stop the page;
            // changed, it answers the page as the client pleases.
            "continueRequest" | "continueResponse" => params
                .as_object()
                .is_some_and(|p| p.keys().any(|k| k != "requestId")),
            _ => false,
        },
        "Network" => matches!(
            name,
            "emulateNetworkConditions"
                | "emulateNetworkConditionsByRule"
                | "overrideNetworkState"
                | "setBlockedURLs"
        ),
        "Browser" => matches!(name, "setWindowBounds" | "setContentsSize"),
        "Emulation" => matches!(
            name,
            "setScriptExecutionDisabled" | "setCPUThrottlingRate" | "setVirtualTimePolicy"
        ),
        "Animation" => verb(&["set", "seek"]),
        "Target" => name == "activateTarget",
        "FedCm" => verb(&["select", "click", "open", "dismiss"]),
        "WebAuthn" => !matches!(name, "enable" | "disable") && !verb(&["get"]),
        "Storage" | "IndexedDB" | "CacheStorage" | "DOMStorage" => verb(&[
            "clear", "delete", "set", "remove", "override", "reset", "run",
        ]),
        _ => false,
    }
}

/// A key going down with Alt and a character: Chromium fires the page's
/// `accesskey` for it (on Linux), acting on an element the focus is not on.
fn access_key(params: &Value) -> bool {
    const ALT: i64 = 1;
    let alt = params
        .get("modifiers")
        .and_then(Value::as_i64)
        .is_some_and(|m| m & ALT != 0);
    let down = matches!(
        str_of(params, "type"),
        Some("keyDown" | "rawKeyDown" | "char")
    );
    let character = |k: &str| {
        str_of(params, k)
            .is_some_and(|t| t.chars().count() == 1 && !t.chars().all(char::is_control))
    };
    alt && down && (character("key") || character("unmodifiedText") || character("text"))
}

/// An `Input.*` command as what it does.
fn input(name: &str, params: &Value) -> Act {
    let kind = str_of(params, "type").unwrap_or("");
    match (name, kind) {
        ("dispatchDragEvent", "drop")
            if let Some(items) = params
                .pointer("/data/items")
                .and_then(Value::as_array)
                .filter(|i| !i.is_empty()) =>
        {
            Act::Drop {
                x: num_of(params, "x"),
                y: num_of(params, "y"),
                text: items
                    .iter()
                    .filter_map(|i| str_of(i, "data"))
                    .collect::<Vec<_>>()
                    .join(" "),
            }
        }
        ("dispatchMouseEvent" | "emulateTouchFromMouseEvent", "mousePressed")
        | ("dispatchDragEvent", "drop") => Act::Press {
            x: num_of(params, "x"),
            y: num_of(params, "y"),
        },
        ("synthesizeTapGesture", _) => Act::Press {
            x: num_of(params, "x"),
            y: num_of(params, "y"),
        },
        ("dispatchMouseEvent" | "emulateTouchFromMouseEvent", "mouseReleased") => Act::Release {
            x: num_of(params, "x"),
            y: num_of(params, "y"),
        },
        ("dispatchTouchEvent", kind) => {
            let first = params.pointer("/touchPoints/0");
            Act::Touch {
                // Chromium numbers a point without an id by its place.
                id: first.map(|p| p.get("id").and_then(Value::as_i64).unwrap_or(0)),
                x: first.map_or(f64::NAN, |p| num_of(p, "x")),
                y: first.map_or(f64::NAN, |p| num_of(p, "y")),
                cancel: kind == "touchCancel",
                start: kind == "touchStart",
            }
        }
        ("dispatchKeyEvent", "keyDown" | "rawKeyDown" | "char") => {
            let text = str_of(params, "text").unwrap_or("");
            if pastes(params) {
                // What the clipboard holds, typed at the focus (and Enter
                // or Space too when the event is also one: judged as
                // typing that submits).
                Act::Text(match activation(params) {
                    Some("Enter") => "\n".to_owned(),
                    Some(key) => key.to_owned(),
                    None => String::new(),
                })
            } else if let Some(key) = activation(params) {
                Act::Key(key.to_owned())
            } else if !text.is_empty() && !text.chars().all(char::is_control) {
                Act::Text(text.to_owned())
            } else {
                Act::Motion
            }
        }
        ("insertText" | "imeSetComposition", _) => {
            Act::Text(str_of(params, "text").unwrap_or("").to_owned())
        }
        _ => Act::Motion,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed() -> Context {
        Context {
            sealed: true,
            download_dir: None,
        }
    }

    fn rule(v: &Verdict) -> Option<&'static str> {
        match v {
            Verdict::Refuse { rule, .. } => Some(rule),
            _ => None,
        }
    }

    #[test]
    fn cookie_reads_are_refused_only_when_the_vault_is_sealed() {
        for m in [
            "Network.getCookies",
            "Network.getAllCookies",
            "Storage.getCookies",
            "Page.getCookies",
            "Network.loadNetworkResource",
        ] {
            assert_eq!(
                rule(&decide(m, &Value::Null, &sealed())),
                Some("vault_sealed"),
                "{m}"
            );
            assert_eq!(
                decide(m, &Value::Null, &Context::default()),
                Verdict::Pass,
                "{m}"
            );
        }
        // Setting cookies is not reading them.
        assert_eq!(
            decide("Network.setCookie", &json!({}), &sealed()),
            Verdict::Act(Act::Change)
        );
    }

    #[test]
    fn what_would_break_the_sandbox_or_cordons_control_is_refused_in_every_session() {
        let ctx = Context::default();
        let cases = [
            ("Tethering.bind", json!({"port": 22}), "host_probe"),
            ("SystemInfo.getProcessInfo", json!({}), "host_probe"),
            (
                "Security.setIgnoreCertificateErrors",
                json!({"ignore": true}),
                "certificate_errors",
            ),
            (
                "Target.exposeDevToolsProtocol",
                json!({"targetId": "x"}),
                "devtools_exposure",
            ),
            (
                "Target.setRemoteLocations",
                json!({"locations": []}),
                "devtools_exposure",
            ),
            (
                "Target.sendMessageToTarget",
                json!({"message": "{}"}),
                "flatten_only",
            ),
            (
                "Target.attachToTarget",
                json!({"targetId": "x"}),
                "flatten_only",
            ),
            (
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": false, "flatten": false}),
                "flatten_only",
            ),
            (
                "Target.createBrowserContext",
                json!({"proxyServer": "http://10.0.0.1:3128"}),
                "egress",
            ),
            (
                "Target.createTarget",
                json!({"url": "file:///etc/passwd"}),
                "url_scheme",
            ),
            (
                "Page.navigate",
                json!({"url": "chrome://settings"}),
                "url_scheme",
            ),
            (
                "Page.navigate",
                json!({"url": "javascript:alert(1)"}),
                "url_scheme",
            ),
            ("Page.navigate", json!({}), "url_scheme"),
            ("Browser.crash", json!({}), "browser_control"),
            (
                "Browser.executeBrowserCommand",
                json!({"commandId": "openTabSearch"}),
                "browser_control",
            ),
            (
                "Browser.grantPermissions",
                json!({"permissions": ["geolocation", "videoCapture"]}),
                "permission",
            ),
            (
                "Browser.setPermission",
                json!({"permission": {"name": "midiSysex"}, "setting": "granted"}),
                "permission",
            ),
            (
                "DOM.setFileInputFiles",
                json!({"files": ["/etc/shadow"], "nodeId": 3}),
                "file_paths",
            ),
            (
                "Input.setIgnoreInputEvents",
                json!({"ignore": true}),
                "input_lock",
            ),
        ];
        for (method, params, want) in cases {
            assert_eq!(
                rule(&decide(method, &params, &ctx)),
                Some(want),
                "{method} {params}"
            );
        }
    }

    #[test]
    fn what_clients_need_passes() {
        let ctx = sealed();
        for (method, params) in [
            (
                "Target.setAutoAttach",
                json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            ),
            (
                "Target.attachToTarget",
                json!({"targetId": "x", "flatten": true}),
            ),
            ("Target.attachToBrowserTarget", json!({})),
            ("Target.setDiscoverTargets", json!({"discover": true})),
            ("Page.enable", json!({})),
            ("Network.enable", json!({})),
            ("Page.captureScreenshot", json!({"format": "png"})),
            ("Browser.getVersion", json!({})),
            (
                "Browser.grantPermissions",
                json!({"permissions": ["geolocation"]}),
            ),
            (
                "Emulation.setDeviceMetricsOverride",
                json!({"width": 800, "height": 600, "deviceScaleFactor": 1, "mobile": false}),
            ),
            ("Fetch.enable", json!({"patterns": [{"urlPattern": "*"}]})),
            // Cancel on a dialog acts on nothing.
            ("Page.handleJavaScriptDialog", json!({"accept": false})),
        ] {
            assert_eq!(decide(method, &params, &ctx), Verdict::Pass, "{method}");
        }
        // OK is judged by the gate, and so is an answer that does not say
        // which.
        for params in [json!({"accept": true}), json!({}), json!({"accept": "no"})] {
            assert_eq!(
                decide("Page.handleJavaScriptDialog", &params, &ctx),
                Verdict::Act(Act::DialogOk),
                "{params}"
            );
        }
        assert_eq!(
            decide("Browser.close", &json!({}), &ctx),
            Verdict::CloseSession
        );
        assert_eq!(
            decide("Target.createTarget", &json!({"url": "about:blank"}), &ctx),
            Verdict::Act(Act::OpenTab(None))
        );
        assert_eq!(
            decide(
                "Target.createTarget",
                &json!({"url": "https://a.example/x"}),
                &ctx
            ),
            Verdict::Act(Act::OpenTab(Some("https://a.example/x".into())))
        );
    }

    #[test]
    fn downloads_follow_the_sessions_policy_whatever_the_client_asks() {
        let asked = json!({"behavior": "allowAndName", "downloadPath": "/home/me/Downloads", "browserContextId": "C1", "eventsEnabled": true});
        assert_eq!(
            decide("Browser.setDownloadBehavior", &asked, &Context::default()),
            Verdict::Rewrite(
                json!({"behavior": "deny", "browserContextId": "C1", "eventsEnabled": true})
            )
        );
        let allowed = Context {
            sealed: false,
            download_dir: Some("/downloads".into()),
        };
        assert_eq!(
            decide(
                "Page.setDownloadBehavior",
                &json!({"behavior": "allow", "downloadPath": "/etc"}),
                &allowed
            ),
            Verdict::Rewrite(
                json!({"behavior": "allowAndName", "downloadPath": "/downloads", "eventsEnabled": true})
            )
        );
    }

    #[test]
    fn input_is_judged_as_the_click_key_or_typing_it_is() {
        let ctx = Context::default();
        let act = |m: &str, p: Value| match decide(m, &p, &ctx) {
            Verdict::Act(a) => a,
            other => panic!("{m}: {other:?}"),
        };
        assert_eq!(
            act(
                "Input.dispatchMouseEvent",
                json!({"type": "mousePressed", "x": 10.5, "y": 20, "button": "left", "clickCount": 1})
            ),
            Act::Press { x: 10.5, y: 20.0 }
        );
        assert_eq!(
            act(
                "Input.dispatchMouseEvent",
                json!({"type": "mouseMoved", "x": 1, "y": 2})
            ),
            Act::Motion
        );
        assert_eq!(
            act(
                "Input.dispatchMouseEvent",
                json!({"type": "mouseReleased", "x": 1, "y": 2})
            ),
            Act::Release { x: 1.0, y: 2.0 }
        );
        assert_eq!(
            act(
                "Input.dispatchTouchEvent",
                json!({"type": "touchStart", "touchPoints": [{"x": 3, "y": 4}]})
            ),
            Act::Touch {
                id: Some(0),
                x: 3.0,
                y: 4.0,
                cancel: false,
                start: true
            }
        );
        // Pasting types what the clipboard holds: judged as typing.
        for params in [
            json!({"type": "rawKeyDown", "key": "v", "code": "KeyV", "windowsVirtualKeyCode": 86, "modifiers": 2}),
            json!({"type": "rawKeyDown", "key": "Insert", "code": "Insert", "windowsVirtualKeyCode": 45, "modifiers": 8}),
            json!({"type": "keyDown", "key": "x", "commands": ["Paste"]}),
            json!({"type": "rawKeyDown", "key": "y", "commands": ["yank"]}),
        ] {
            assert_eq!(
                act("Input.dispatchKeyEvent", params.clone()),
                Act::Text(String::new()),
                "{params}"
            );
        }
        // A paste that is also Enter is typing that submits.
        for params in [
            json!({"type": "rawKeyDown", "key": "Enter", "commands": ["paste"]}),
            json!({"type": "rawKeyDown", "key": "v", "windowsVirtualKeyCode": 86, "modifiers": 2, "text": "\r"}),
        ] {
            assert_eq!(
                act("Input.dispatchKeyEvent", params.clone()),
                Act::Text("\n".into()),
                "{params}"
            );
        }
        // Editing commands that insert a newline act as Enter, whatever
        // the key (`insertNewline` in a field submits its form).
        for cmd in [
            "insertNewline",
            "InsertLineBreak",
            "insertParagraph",
            "insertNewlineInQuotedContent",
        ] {
            for kind in ["keyDown", "rawKeyDown", "char"] {
                assert_eq!(
                    act(
                        "Input.dispatchKeyEvent",
                        json!({"type": kind, "key": "x", "commands": [cmd]})
                    ),
                    Act::Key("Enter".into()),
                    "{cmd} {kind}"
                );
            }
        }
        assert_eq!(
            act(
                "Input.dispatchKeyEvent",
                json!({"type": "rawKeyDown", "key": "a", "commands": ["selectAll"]})
            ),
            Act::Motion
        );
        assert_eq!(
            act(
                "Input.dispatchDragEvent",
                json!({"type": "drop", "x": 5, "y": 6, "data": {"items": [], "dragOperationsMask": 1}})
            ),
            Act::Press { x: 5.0, y: 6.0 }
        );
        // A drop that carries text types it where it lands.
        assert_eq!(
            act(
                "Input.dispatchDragEvent",
                json!({"type": "drop", "x": 5, "y": 6, "data": {"items": [
                    {"mimeType": "text/plain", "data": "hunter2"},
                    {"mimeType": "text/html", "data": "<b>hunter2</b>"}
                ], "dragOperationsMask": 1}})
            ),
            Act::Drop {
                x: 5.0,
                y: 6.0,
                text: "hunter2 <b>hunter2</b>".into()
            }
        );
        // Entering and moving over acts on nothing.
        assert_eq!(
            act(
                "Input.dispatchDragEvent",
                json!({"type": "dragOver", "x": 5, "y": 6, "data": {"items": [
                    {"mimeType": "text/plain", "data": "hunter2"}
                ], "dragOperationsMask": 1}})
            ),
            Act::Motion
        );
        assert_eq!(
            act("Input.synthesizeTapGesture", json!({"x": 7, "y": 8})),
            Act::Press { x: 7.0, y: 8.0 }
        );
        assert_eq!(
            act(
                "Input.dispatchKeyEvent",
                json!({"type": "keyDown", "key": "Enter", "text": "\r"})
            ),
            Act::Key("Enter".into())
        );
        assert_eq!(
            act(
                "Input.dispatchKeyEvent",
                json!({"type": "rawKeyDown", "key": " "})
            ),
            Act::Key(" ".into())
        );
        assert_eq!(
            act(
                "Input.dispatchKeyEvent",
                json!({"type": "keyDown", "key": "a", "text": "a"})
            ),
            Act::Text("a".into())
        );
        assert_eq!(
            act(
                "Input.dispatchKeyEvent",
                json!({"type": "char", "text": "b"})
            ),
            Act::Text("b".into())
        );
        assert_eq!(
            act(
                "Input.dispatchKeyEvent",
                json!({"type": "keyUp", "key": "Enter"})
            ),
            Act::Motion
        );
        assert_eq!(
            act("Input.insertText", json!({"text": "hunter2"})),
            Act::Text("hunter2".into())
        );
        // Enter and Space under other names: whatever field says so.
        for params in [
            json!({"type": "char", "text": "\r"}),
            json!({"type": "char", "key": "Enter"}),
            json!({"type": "keyDown", "key": "a", "text": "\r"}),
            json!({"type": "rawKeyDown", "key": "a", "unmodifiedText": "\n"}),
            json!({"type": "rawKeyDown", "code": "NumpadEnter"}),
            json!({"type": "rawKeyDown", "windowsVirtualKeyCode": 13}),
            json!({"type": "keyDown", "key": "Enter", "modifiers": 1}),
        ] {
            assert_eq!(
                act("Input.dispatchKeyEvent", params.clone()),
                Act::Key("Enter".into()),
                "{params}"
            );
        }
        for params in [
            json!({"type": "rawKeyDown", "code": "Space"}),
            json!({"type": "rawKeyDown", "nativeVirtualKeyCode": 32}),
            json!({"type": "char", "text": " "}),
        ] {
            assert_eq!(
                act("Input.dispatchKeyEvent", params.clone()),
                Act::Key(" ".into()),
                "{params}"
            );
        }
        // A press without a point is judged at a point no element has.
        match act("Input.dispatchMouseEvent", json!({"type": "mousePressed"})) {
            Act::Press { x, y } => assert!(x.is_nan() && y.is_nan()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_touch_of_several_points_is_refused_and_one_point_is_judged_where_it_lands() {
        let ctx = sealed();
        let two = json!({ "type": "touchStart", "touchPoints": [{ "x": 1, "y": 2 }, { "x": 300, "y": 400 }] });
        for kind in ["touchStart", "touchMove", "touchEnd"] {
            let mut p = two.clone();
            p["type"] = json!(kind);
            let v = decide("Input.dispatchTouchEvent", &p, &ctx);
            assert_eq!(rule(&v), Some("multi_touch"), "{kind}: {v:?}");
        }
        // One point: a touch act, judged where a finger goes down or
        // lifts (`gesture.rs`).
        let one = json!({ "type": "touchStart", "touchPoints": [{ "x": 300, "y": 400 }] });
        assert_eq!(
            decide("Input.dispatchTouchEvent", &one, &ctx),
            Verdict::Act(Act::Touch {
                id: Some(0),
                x: 300.0,
                y: 400.0,
                cancel: false,
                start: true
            })
        );
        let end = json!({ "type": "touchEnd", "touchPoints": [] });
        assert!(matches!(
            decide("Input.dispatchTouchEvent", &end, &ctx),
            Verdict::Act(Act::Touch { id: None, .. })
        ));
    }

    #[test]
    fn a_drop_of_files_by_path_and_access_keys_are_refused() {
        let ctx = Context::default();
        for files in [json!(["/etc/hostname"]), json!(["a", "b"])] {
            let v = decide(
                "Input.dispatchDragEvent",
                &json!({"type": "drop", "x": 1, "y": 1, "data": {"items": [], "files": files, "dragOperationsMask": 1}}),
                &ctx,
            );
            assert_eq!(rule(&v), Some("file_paths"), "{v:?}");
        }
        // Any stage of a drag that names files (the drop reads them).
        let v = decide(
            "Input.dispatchDragEvent",
            &json!({"type": "dragEnter", "x": 1, "y": 1, "data": {"items": [], "files": ["/x"], "dragOperationsMask": 1}}),
            &ctx,
        );
        assert_eq!(rule(&v), Some("file_paths"), "{v:?}");
        // A drag of items alone is judged as a press at its drop.
        assert!(matches!(
            decide(
                "Input.dispatchDragEvent",
                &json!({"type": "drop", "x": 1, "y": 1, "data": {"items": [], "files": [], "dragOperationsMask": 1}}),
                &ctx,
            ),
            Verdict::Act(Act::Press { .. })
        ));
        for params in [
            json!({"type": "rawKeyDown", "key": "d", "modifiers": 1, "unmodifiedText": "d"}),
            json!({"type": "keyDown", "key": "d", "modifiers": 3, "text": "d"}),
            json!({"type": "char", "text": "x", "modifiers": 1}),
        ] {
            let v = decide("Input.dispatchKeyEvent", &params, &ctx);
            assert_eq!(rule(&v), Some("access_key"), "{params}: {v:?}");
        }
        // Alt alone, Alt with a named key, Shift with a character: no
        // access key.
        for params in [
            json!({"type": "rawKeyDown", "key": "Alt", "modifiers": 1}),
            json!({"type": "rawKeyDown", "key": "ArrowLeft", "modifiers": 1}),
            json!({"type": "keyDown", "key": "D", "modifiers": 8, "text": "D"}),
            json!({"type": "keyUp", "key": "d", "modifiers": 1}),
        ] {
            assert!(
                matches!(
                    decide("Input.dispatchKeyEvent", &params, &ctx),
                    Verdict::Act(_)
                ),
                "{params}"
            );
        }
    }

    #[test]
    fn scripts_and_navigations_are_acts() {
        let ctx = Context::default();
        assert_eq!(
            decide("Runtime.evaluate", &json!({"expression": "1+1"}), &ctx),
            Verdict::Act(Act::Script("1+1".into()))
        );
        assert_eq!(
            decide(
                "Runtime.callFunctionOn",
                &json!({"functionDeclaration": "() => 1"}),
                &ctx
            ),
            Verdict::Act(Act::Script("() => 1".into()))
        );
        assert_eq!(
            decide(
                "Page.navigate",
                &json!({"url": "http://127.0.0.1:8080/a"}),
                &ctx
            ),
            Verdict::Act(Act::Navigate("http://127.0.0.1:8080/a".into()))
        );
        assert_eq!(
            decide("Page.reload", &json!({}), &ctx),
            Verdict::Act(Act::History)
        );
        assert!(!Act::Motion.audited() && !Act::Change.audited() && Act::History.audited());
    }

    #[test]
    fn every_way_of_running_script_is_a_script_act() {
        let ctx = Context::default();
        for (m, p, src) in [
            (
                "Page.addScriptToEvaluateOnLoad",
                json!({"scriptSource": "a()"}),
                "a()",
            ),
            (
                "Page.reload",
                json!({"scriptToEvaluateOnLoad": "b()"}),
                "b()",
            ),
            (
                "Debugger.setScriptSource",
                json!({"scriptId": "1", "scriptSource": "c()"}),
                "c()",
            ),
            (
                "Debugger.setBreakpointByUrl",
                json!({"lineNumber": 1, "url": "x", "condition": "d()"}),
                "d()",
            ),
            (
                "Debugger.setBreakpoint",
                json!({"location": {}, "condition": "e()"}),
                "e()",
            ),
            (
                "Debugger.setBreakpointOnFunctionCall",
                json!({"objectId": "o", "condition": "f()"}),
                "f()",
            ),
        ] {
            assert_eq!(
                decide(m, &p, &ctx),
                Verdict::Act(Act::Script(src.into())),
                "{m}"
            );
        }
        // A reload without a script is a step in history.
        assert_eq!(
            decide("Page.reload", &json!({}), &ctx),
            Verdict::Act(Act::History)
        );
    }

    #[test]
    fn what_would_mislead_or_stop_an_operator_at_the_wheel_is_named() {
        for (m, p) in [
            (
                "CSS.setStyleSheetText",
                json!({"styleSheetId": "1", "text": "#d::after{content:'Cancel'}"}),
            ),
            ("CSS.addRule", json!({})),
            ("CSS.forcePseudoState", json!({})),
            ("Overlay.highlightRect", json!({})),
            ("Overlay.setShowFPSCounter", json!({"show": true})),
            ("DOM.scrollIntoViewIfNeeded", json!({})),
            ("Debugger.pause", json!({})),
            ("Debugger.setPauseOnExceptions", json!({"state": "all"})),
            (
                "DOMDebugger.setEventListenerBreakpoint",
                json!({"eventName": "click"}),
            ),
            ("Page.crash", json!({})),
            ("Page.stopLoading", json!({})),
            ("Page.setWebLifecycleState", json!({"state": "frozen"})),
            (
                "Page.setInterceptFileChooserDialog",
                json!({"enabled": true}),
            ),
            ("Runtime.terminateExecution", json!({})),
            ("Fetch.enable", json!({})),
            (
                "Fetch.fulfillRequest",
                json!({"requestId": "r", "responseCode": 200}),
            ),
            (
                "Fetch.failRequest",
                json!({"requestId": "r", "errorReason": "Failed"}),
            ),
            (
                "Fetch.continueRequest",
                json!({"requestId": "r", "postData": "eA=="}),
            ),
            ("Network.emulateNetworkConditions", json!({"offline": true})),
            ("Network.setBlockedURLs", json!({"urls": ["*"]})),
            ("Browser.setWindowBounds", json!({})),
            (
                "Emulation.setScriptExecutionDisabled",
                json!({"value": true}),
            ),
            ("Animation.setPlaybackRate", json!({"playbackRate": 0})),
            ("Target.activateTarget", json!({"targetId": "t"})),
            ("WebAuthn.addVirtualAuthenticator", json!({})),
            ("DOMStorage.clear", json!({})),
            ("IndexedDB.deleteDatabase", json!({})),
        ] {
            assert!(disturbs_operator(m, &p), "{m}");
        }
        // Reads, and what a client's set-up of a new tab sends, pass.
        for (m, p) in [
            ("CSS.getComputedStyleForNode", json!({})),
            ("CSS.enable", json!({})),
            ("Page.captureScreenshot", json!({})),
            ("Page.enable", json!({})),
            ("Page.setLifecycleEventsEnabled", json!({"enabled": true})),
            ("Runtime.runIfWaitingForDebugger", json!({})),
            (
                "Emulation.setFocusEmulationEnabled",
                json!({"enabled": true}),
            ),
            ("Emulation.setDeviceMetricsOverride", json!({})),
            ("Emulation.setEmulatedMedia", json!({})),
            ("Network.setExtraHTTPHeaders", json!({})),
            ("Target.setAutoAttach", json!({})),
            ("Fetch.continueRequest", json!({"requestId": "r"})),
            ("Debugger.resume", json!({})),
            ("Debugger.getScriptSource", json!({})),
            ("WebAuthn.getCredentials", json!({})),
            ("Storage.getUsageAndQuota", json!({})),
        ] {
            assert!(!disturbs_operator(m, &p), "{m}");
        }
    }
}
