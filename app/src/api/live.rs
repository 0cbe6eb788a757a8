//! The live view: watching a session's browser and driving it.
//!
//! A page asks [`live_ticket`] for a short-lived, single-use ticket bound to
//! the operator and the session, then opens the WebSocket
//! `/live/{session}?ticket=…` (same origin, so the dashboard cookie goes
//! along and is checked too). Over it:
//!
//! - server → browser: a [`ServerMsg::Frame`] text message describing the
//!   JPEG that follows as the next binary message (the newest frame only: a
//!   slow socket gets fewer frames, never a queue), and text messages for
//!   the page state, who has control, errors and the end;
//! - browser → server: [`ClientMsg`] as JSON text messages, coordinates in
//!   the page's CSS pixels (the frame's [`FrameMeta`] maps canvas pixels to
//!   them). A malformed, unknown or oversized message is dropped with a
//!   [`ServerMsg::Error`] and the socket stays open.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::auth::Role;
use crate::error::UiError;

/// The largest text message the server reads, in bytes; larger ones are
/// dropped with an error.
pub const MAX_CLIENT_MESSAGE: usize = 16 * 1024;
/// The longest text an `insert_text` message may carry, in characters.
pub const MAX_TEXT_CHARS: usize = 4096;

/// What [`live_ticket`] hands out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LiveAccess {
    /// The WebSocket path with the ticket (`/live/s_…?ticket=…`); valid once,
    /// for [`LiveAccess::expires_in_s`] seconds.
    pub path: String,
    /// Seconds the ticket stays valid.
    pub expires_in_s: u64,
    /// Whether this operator may take control (role operator or admin).
    pub may_control: bool,
}

/// Where the pointer is, in the page's CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// From the viewport's left edge.
    pub x: f64,
    /// From the viewport's top edge.
    pub y: f64,
}

/// A mouse action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseAction {
    /// The pointer moved.
    Move,
    /// A button went down.
    Down,
    /// A button went up.
    Up,
    /// Down and up at once.
    Click,
}

/// A mouse button.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MouseButton {
    /// None (a move).
    #[default]
    None,
    /// Left.
    Left,
    /// Middle.
    Middle,
    /// Right.
    Right,
    /// Back.
    Back,
    /// Forward.
    Forward,
}

/// A key action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyAction {
    /// Pressed (repeats while held).
    Down,
    /// Released.
    Up,
}

/// Modifier bits, as CDP counts them: Alt = 1, Ctrl = 2, Meta = 4, Shift = 8.
pub type Modifiers = u8;

/// What the browser sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
// Variants without data are empty structs, so `deny_unknown_fields` also
// refuses extra fields on them (serde lets unit variants of an internally
// tagged enum carry any).
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ClientMsg {
    /// A mouse event.
    Mouse {
        /// Move, down, up or click.
        action: MouseAction,
        /// Page CSS pixels.
        x: f64,
        /// Page CSS pixels.
        y: f64,
        /// Which button changed.
        #[serde(default)]
        button: MouseButton,
        /// Buttons held (1 left, 2 right, 4 middle, 8 back, 16 forward).
        #[serde(default)]
        buttons: u8,
        /// 1 for a click, 2 for a double click.
        #[serde(default)]
        click_count: u8,
        /// Modifier bits.
        #[serde(default)]
        modifiers: Modifiers,
    },
    /// A wheel turn.
    Wheel {
        /// Page CSS pixels.
        x: f64,
        /// Page CSS pixels.
        y: f64,
        /// Horizontal delta.
        dx: f64,
        /// Vertical delta.
        dy: f64,
        /// Modifier bits.
        #[serde(default)]
        modifiers: Modifiers,
    },
    /// A key went down or up (`KeyboardEvent.key` and `.code`).
    Key {
        /// Down or up.
        action: KeyAction,
        /// `KeyboardEvent.key`: `Enter`, `a`, `ArrowLeft`.
        key: String,
        /// `KeyboardEvent.code`: `Enter`, `KeyA`, `ArrowLeft`.
        #[serde(default)]
        code: String,
        /// Modifier bits.
        #[serde(default)]
        modifiers: Modifiers,
    },
    /// Text inserted at the focus as an IME or a paste would.
    Text {
        /// At most [`MAX_TEXT_CHARS`] characters.
        text: String,
    },
    /// Load a URL in the shown tab.
    Navigate {
        /// `http(s)://…`.
        url: String,
    },
    /// History back.
    Back {},
    /// History forward.
    Forward {},
    /// Reload.
    Reload {},
    /// Open a tab (and show it).
    TabOpen {
        /// Where, or `about:blank`.
        #[serde(default)]
        url: Option<String>,
    },
    /// Show and drive another tab.
    TabSwitch {
        /// Its id.
        id: String,
    },
    /// Close a tab.
    TabClose {
        /// Its id.
        id: String,
    },
    /// Resize the page's viewport.
    Resize {
        /// CSS pixels.
        width: u32,
        /// CSS pixels.
        height: u32,
    },
    /// Answer the shown tab's JavaScript dialog: OK (with a prompt's text)
    /// or Cancel.
    Dialog {
        /// OK (true) or Cancel.
        accept: bool,
        /// A prompt's answer, at most [`MAX_TEXT_CHARS`] characters.
        #[serde(default)]
        text: Option<String>,
    },
    /// Take control: agent tool calls are refused until handed back.
    TakeControl {},
    /// Hand control back.
    ReleaseControl {},
}

impl ClientMsg {
    /// Whether the message drives the browser (needs control), as opposed
    /// to asking for control.
    pub fn is_input(&self) -> bool {
        !matches!(self, Self::TakeControl {} | Self::ReleaseControl {})
    }
}

/// How a frame maps onto the page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameMeta {
    /// Frame number on this socket, from 1.
    pub seq: u64,
    /// When Chromium made it (Unix ms).
    pub ts: f64,
    /// The viewport's width in CSS pixels (what the frame's width shows).
    pub width: f64,
    /// The viewport's height in CSS pixels.
    pub height: f64,
    /// Pixels of the frame above the page (mobile emulation).
    pub offset_top: f64,
    /// Pinch zoom.
    pub page_scale: f64,
    /// Page scroll, CSS pixels.
    pub scroll_x: f64,
    /// Page scroll, CSS pixels.
    pub scroll_y: f64,
}

/// One tab.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TabInfo {
    /// Its id.
    pub id: String,
    /// URL.
    pub url: String,
    /// Title.
    pub title: String,
    /// Whether it is the one shown and driven.
    pub active: bool,
}

/// The shown tab's state and the tab strip.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageState {
    /// The shown tab's URL.
    pub url: String,
    /// The shown tab's title.
    pub title: String,
    /// Whether it is loading.
    pub loading: bool,
    /// Every tab, in creation order.
    pub tabs: Vec<TabInfo>,
    /// The JavaScript dialog open in the shown tab (it stops the page
    /// until answered with [`ClientMsg::Dialog`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<DialogView>,
}

/// A JavaScript dialog as the live view shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DialogView {
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    pub kind: String,
    /// Its message.
    pub message: String,
    /// A prompt's default text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_prompt: Option<String>,
}

/// Who drives the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlState {
    /// The operator holding control, by name (agents are refused meanwhile).
    pub holder: Option<String>,
    /// Whether that is this socket's operator.
    pub yours: bool,
    /// Whether this socket's operator may take control.
    pub may_control: bool,
}

/// What the server sends as text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMsg {
    /// First message: the session.
    Hello {
        /// `s_…`.
        session: String,
        /// `clean`, `operator` or `refresh`.
        mode: String,
        /// Viewport, CSS pixels.
        width: u32,
        /// Viewport, CSS pixels.
        height: u32,
    },
    /// Describes the binary JPEG that follows.
    Frame(FrameMeta),
    /// The shown tab and the tab strip changed.
    Page(PageState),
    /// Control changed.
    Control(ControlState),
    /// A message was refused or a call failed; the socket stays open.
    Error {
        /// Stable code (`bad_message`, `not_in_control`, `forbidden`, …).
        code: String,
        /// For people.
        message: String,
    },
    /// The session ended (or the dashboard session did); the socket closes.
    Ended {
        /// Why.
        reason: String,
    },
}

/// One cookie a save would store: never its value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CookieRow {
    /// Name.
    pub name: String,
    /// Its `domain` attribute.
    pub domain: String,
    /// Path.
    pub path: String,
    /// Unix ms; none for a session cookie.
    pub expires: Option<i64>,
    /// `HttpOnly`.
    pub http_only: bool,
    /// `Secure`.
    pub secure: bool,
    /// `SameSite`, if set.
    pub same_site: Option<String>,
}

/// The localStorage keys of one origin (never values).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OriginRow {
    /// `https://app.example.com`.
    pub origin: String,
    /// Keys.
    pub keys: Vec<String>,
}

/// What saving would store for one domain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DomainPreviewView {
    /// The domain (and its subdomains).
    pub domain: String,
    /// Its cookies.
    pub cookies: Vec<CookieRow>,
    /// localStorage of its open origins.
    pub origins: Vec<OriginRow>,
}

/// What a save stored for one domain, and how it differs from before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedView {
    /// The domain.
    pub domain: String,
    /// False when it had no cookie (the previous credential is kept).
    pub stored: bool,
    /// Cookies stored.
    pub cookies: usize,
    /// localStorage items stored.
    pub storage: usize,
    /// Whether it replaced a previous credential.
    pub replaced: bool,
    /// Cookie names new since the previous credential.
    pub added: Vec<String>,
    /// Cookie names gone.
    pub removed: Vec<String>,
    /// Cookie names with a new value or expiry.
    pub changed: Vec<String>,
    /// Of those, the ones whose expiry changed.
    pub expiry_changed: Vec<String>,
}

/// What a refresh session would store for the chosen domains (space or
/// comma separated; each one of the session's).
#[server(prefix = "/ui/fn", endpoint = "refresh_preview")]
pub async fn refresh_preview(
    session: String,
    domains: String,
) -> Result<Vec<DomainPreviewView>, UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "save logins").await?;
    ctl.refresh_preview(&op, session, domains).await
}

/// Reads, encrypts and stores the chosen domains' cookies and localStorage
/// from a refresh session (replacing the previous credentials), then ends
/// the session; answers what changed.
#[server(prefix = "/ui/fn", endpoint = "save_refresh")]
pub async fn save_refresh(session: String, domains: String) -> Result<Vec<SavedView>, UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "save logins").await?;
    ctl.save_refresh(&op, session, domains).await
}

/// A ticket for the live view of `session`: single use, valid for a minute
/// at most, bound to this operator and that session.
#[server(prefix = "/ui/fn", endpoint = "live_ticket")]
pub async fn live_ticket(session: String) -> Result<LiveAccess, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "watch sessions").await?;
    ctl.live_ticket(&op, session).await
}

/// Starts a refresh session for `tenant` and the domains (space or comma
/// separated); answers its id. `start_url` defaults to the first domain's
/// `https://` address.
#[server(prefix = "/ui/fn", endpoint = "start_refresh")]
pub async fn start_refresh(
    tenant: String,
    domains: String,
    start_url: Option<String>,
) -> Result<String, UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "start refresh sessions").await?;
    ctl.start_refresh(&op, tenant, domains, start_url).await
}

/// The TOTP seeds of a refresh session's domains (labels and parameters).
#[server(prefix = "/ui/fn", endpoint = "session_totp")]
pub async fn session_totp(session: String) -> Result<Vec<super::credentials::TotpView>, UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "type second-factor codes").await?;
    ctl.session_totp(&op, session).await
}

/// Types the current code of the seed `label` into the focused field of a
/// refresh session's page; answers how many digits (never which).
#[server(prefix = "/ui/fn", endpoint = "type_totp")]
pub async fn type_totp(session: String, label: String) -> Result<usize, UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "type second-factor codes").await?;
    ctl.type_totp(&op, session, label).await
}

/// Hands control of a session back to its agent (whoever holds it).
#[server(prefix = "/ui/fn", endpoint = "release_control")]
pub async fn release_control(session: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Operator, "hand control back").await?;
    ctl.release_control(&op, session).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_messages_parse_from_the_documented_shape() {
        let m: ClientMsg = serde_json::from_str(
            r#"{"type":"mouse","action":"down","x":10.5,"y":3,"button":"left","buttons":1,"click_count":1,"modifiers":8}"#,
        )
        .unwrap();
        assert_eq!(
            m,
            ClientMsg::Mouse {
                action: MouseAction::Down,
                x: 10.5,
                y: 3.0,
                button: MouseButton::Left,
                buttons: 1,
                click_count: 1,
                modifiers: 8
            }
        );
        let k: ClientMsg =
            serde_json::from_str(r#"{"type":"key","action":"up","key":"Enter","code":"Enter"}"#)
                .unwrap();
        assert!(matches!(
            k,
            ClientMsg::Key {
                action: KeyAction::Up,
                ..
            }
        ));
        assert_eq!(
            serde_json::from_str::<ClientMsg>(r#"{"type":"take_control"}"#).unwrap(),
            ClientMsg::TakeControl {}
        );
    }

    #[test]
    fn unknown_types_and_fields_are_refused() {
        for bad in [
            r#"{"type":"format_disk"}"#,
            r#"{"type":"back","extra":1}"#,
            r#"{"type":"mouse","action":"hover","x":1,"y":1}"#,
            r#"{"x":1}"#,
            r#"[]"#,
        ] {
            assert!(serde_json::from_str::<ClientMsg>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn server_messages_are_tagged() {
        let s = serde_json::to_string(&ServerMsg::Error {
            code: "bad_message".into(),
            message: "x".into(),
        })
        .unwrap();
        assert_eq!(s, r#"{"type":"error","code":"bad_message","message":"x"}"#);
    }
}
