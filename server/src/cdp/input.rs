//! Real input events: mouse and keyboard through `Input.*`, so pages see
//! what a person's actions would produce.

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, DispatchMouseEventParams, DispatchMouseEventType,
    InsertTextParams, MouseButton,
};
use chromiumoxide::keys::get_key_definition;

use super::CdpError;

/// Moves the mouse to (x, y).
pub async fn mouse_move(page: &Page, x: f64, y: f64) -> Result<(), CdpError> {
    page.execute(DispatchMouseEventParams::new(
        DispatchMouseEventType::MouseMoved,
        x,
        y,
    ))
    .await?;
    Ok(())
}

/// A left click at (x, y): move, press, release.
pub async fn click(page: &Page, x: f64, y: f64, click_count: i64) -> Result<(), CdpError> {
    mouse_move(page, x, y).await?;
    press_release(page, x, y, click_count).await
}

/// The left button down and up at (x, y), the pointer already there.
pub(super) async fn press_release(
    page: &Page,
    x: f64,
    y: f64,
    click_count: i64,
) -> Result<(), CdpError> {
    for kind in [
        DispatchMouseEventType::MousePressed,
        DispatchMouseEventType::MouseReleased,
    ] {
        let mut ev = DispatchMouseEventParams::new(kind, x, y);
        ev.button = Some(MouseButton::Left);
        ev.buttons = Some(1);
        ev.click_count = Some(click_count);
        page.execute(ev).await?;
    }
    Ok(())
}

/// A wheel event at (x, y).
pub async fn wheel(page: &Page, x: f64, y: f64, dx: f64, dy: f64) -> Result<(), CdpError> {
    let mut ev = DispatchMouseEventParams::new(DispatchMouseEventType::MouseWheel, x, y);
    ev.delta_x = Some(dx);
    ev.delta_y = Some(dy);
    page.execute(ev).await?;
    Ok(())
}

/// Inserts text at the focus, as an IME would (one event, any characters).
pub async fn insert_text(page: &Page, text: &str) -> Result<(), CdpError> {
    page.execute(InsertTextParams::new(text)).await?;
    Ok(())
}

/// Whether `key` names a key `press` can send.
pub fn is_known_key(key: &str) -> bool {
    get_key_definition(key).is_some()
}

/// The key the risk gate judges `key` as: a carriage return or newline is
/// Enter ([`key_event`] sends it as its own text, and a keypress of char
/// code 13 presses a button or submits a form as Enter does); any other
/// key is itself.
pub fn dom_key(key: &str) -> &str {
    if key.contains(['\r', '\n']) {
        "Enter"
    } else {
        key
    }
}

/// The schema of a key name [`is_known_key`] accepts: one of them.
pub fn key_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut keys: Vec<&str> = chromiumoxide::keys::USKEYBOARD_LAYOUT
        .iter()
        .map(|k| k.key)
        .collect();
    keys.sort_unstable();
    keys.dedup();
    schemars::json_schema!({ "type": "string", "enum": keys })
}

/// The message for a key `press` cannot send.
pub fn unknown_key(key: &str) -> String {
    format!(
        "unknown key {:?}: use a KeyboardEvent.key name such as Enter, Tab, ArrowDown or a",
        key.chars().take(32).collect::<String>()
    )
}

/// Presses and releases one key named as in `KeyboardEvent.key`
/// (`Enter`, `Tab`, `ArrowDown`, `a`, …), with optional modifiers
/// (Alt=1, Ctrl=2, Meta=4, Shift=8).
pub async fn press(page: &Page, key: &str, modifiers: i64) -> Result<(), CdpError> {
    let def = get_key_definition(key).ok_or_else(|| CdpError::UnknownKey(unknown_key(key)))?;
    let text = def.text.or((def.key.len() == 1).then_some(def.key));
    let base = |kind| {
        let mut ev = DispatchKeyEventParams::new(kind);
        ev.key = Some(def.key.to_owned());
        ev.code = Some(def.code.to_owned());
        ev.windows_virtual_key_code = Some(def.key_code);
        ev.native_virtual_key_code = Some(def.key_code);
        ev.modifiers = Some(modifiers);
        ev
    };
    let mut down = base(if text.is_some() && modifiers & 0b0110 == 0 {
        DispatchKeyEventType::KeyDown
    } else {
        DispatchKeyEventType::RawKeyDown
    });
    if modifiers & 0b0110 == 0 {
        down.text = text.map(str::to_owned);
    }
    page.execute(down).await?;
    page.execute(base(DispatchKeyEventType::KeyUp)).await?;
    Ok(())
}

/// A key that acts on the focus (Enter or Space), sent in two steps for a
/// look at the page in between ([`super::press_checked`]).
#[derive(Debug, Clone, Copy)]
pub struct KeyAct<'a> {
    /// `KeyboardEvent.key` (a carriage return or newline is Enter).
    pub key: &'a str,
    /// `KeyboardEvent.code`; empty: the key's own.
    pub code: &'a str,
    /// Alt=1, Ctrl=2, Meta=4, Shift=8.
    pub modifiers: i64,
    /// The key goes up after its character (a press); a raw key down
    /// leaves it down for its own key up.
    pub up: bool,
}

/// A key held down without its character: [`key_down_raw`] sent its
/// `rawKeyDown` (the page's keydown handlers have run); [`HeldKey::finish`]
/// sends the character (and the key up, for a press), [`HeldKey::release`]
/// only the key up.
#[derive(Debug)]
pub struct HeldKey {
    key: String,
    code: String,
    key_code: Option<i64>,
    text: Option<String>,
    modifiers: i64,
    up: bool,
}

/// A key going down: named (`press`, raw input), or a CDP client's
/// `Input.dispatchKeyEvent` parameters (its key, code, key codes, text and
/// modifiers are kept; it sends its own key up).
#[derive(Debug, Clone, Copy)]
pub enum KeyDown<'a> {
    /// A key by name.
    Named(KeyAct<'a>),
    /// A CDP client's `keyDown`.
    Client(&'a serde_json::Value),
}

impl KeyDown<'_> {
    fn held(self) -> Result<HeldKey, CdpError> {
        Ok(match self {
            Self::Named(act) => {
                // A carriage return or newline is sent as Enter.
                let def = get_key_definition(dom_key(act.key))
                    .ok_or_else(|| CdpError::UnknownKey(unknown_key(act.key)))?;
                let commands = act.modifiers & 0b0110 != 0;
                HeldKey {
                    key: def.key.to_owned(),
                    code: if act.code.is_empty() {
                        def.code
                    } else {
                        act.code
                    }
                    .to_owned(),
                    key_code: Some(def.key_code),
                    text: def
                        .text
                        .or((def.key.len() == 1).then_some(def.key))
                        .filter(|_| !commands)
                        .map(str::to_owned),
                    modifiers: act.modifiers,
                    up: act.up,
                }
            }
            Self::Client(params) => {
                let field = |k: &str| params.get(k).and_then(serde_json::Value::as_str);
                HeldKey {
                    key: field("key").unwrap_or_default().to_owned(),
                    code: field("code").unwrap_or_default().to_owned(),
                    key_code: params
                        .get("windowsVirtualKeyCode")
                        .or_else(|| params.get("nativeVirtualKeyCode"))
                        .and_then(serde_json::Value::as_i64),
                    text: field("text").filter(|t| !t.is_empty()).map(str::to_owned),
                    modifiers: params
                        .get("modifiers")
                        .and_then(serde_json::Value::as_i64)
                        .unwrap_or(0),
                    up: false,
                }
            }
        })
    }
}

/// Sends a key going down without its character.
pub async fn key_down_raw(page: &Page, down: KeyDown<'_>) -> Result<HeldKey, CdpError> {
    let held = down.held()?;
    page.execute(held.event(DispatchKeyEventType::RawKeyDown))
        .await?;
    Ok(held)
}

impl HeldKey {
    fn event(&self, kind: DispatchKeyEventType) -> DispatchKeyEventParams {
        let mut ev = DispatchKeyEventParams::new(kind);
        ev.key = Some(self.key.clone());
        ev.code = Some(self.code.clone());
        ev.windows_virtual_key_code = self.key_code;
        ev.native_virtual_key_code = self.key_code;
        ev.modifiers = Some(self.modifiers);
        ev
    }

    /// The key's character (its `keypress`: Enter presses the focused
    /// button or submits the focused field's form there; Chromium drops it
    /// when the page cancelled the keydown), then, for a press, the key up.
    pub async fn finish(self, page: &Page) -> Result<(), CdpError> {
        if let Some(text) = &self.text {
            let mut ch = self.event(DispatchKeyEventType::Char);
            ch.text = Some(text.clone());
            page.execute(ch).await?;
        }
        if self.up {
            self.release(page).await?;
        }
        Ok(())
    }

    /// Only the key up: the key did nothing but go down.
    pub async fn release(self, page: &Page) -> Result<(), CdpError> {
        page.execute(self.event(DispatchKeyEventType::KeyUp))
            .await?;
        Ok(())
    }
}

/// What a mouse event does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MouseKind {
    /// The pointer moved.
    Move,
    /// A button went down.
    Down,
    /// A button went up.
    Up,
}

/// A mouse button.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Button {
    /// None.
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

impl Button {
    fn cdp(self) -> MouseButton {
        match self {
            Self::None => MouseButton::None,
            Self::Left => MouseButton::Left,
            Self::Middle => MouseButton::Middle,
            Self::Right => MouseButton::Right,
            Self::Back => MouseButton::Back,
            Self::Forward => MouseButton::Forward,
        }
    }
}

/// One raw mouse event at (x, y), as a person's pointer would produce it.
#[allow(clippy::too_many_arguments)]
pub async fn mouse_event(
    page: &Page,
    kind: MouseKind,
    x: f64,
    y: f64,
    button: Button,
    buttons: i64,
    click_count: i64,
    modifiers: i64,
) -> Result<(), CdpError> {
    let kind = match kind {
        MouseKind::Move => DispatchMouseEventType::MouseMoved,
        MouseKind::Down => DispatchMouseEventType::MousePressed,
        MouseKind::Up => DispatchMouseEventType::MouseReleased,
    };
    let mut ev = DispatchMouseEventParams::new(kind, x, y);
    ev.button = Some(button.cdp());
    ev.buttons = Some(buttons);
    ev.click_count = Some(click_count);
    ev.modifiers = Some(modifiers);
    page.execute(ev).await?;
    Ok(())
}

/// A wheel event at (x, y) with modifiers.
pub async fn wheel_with(
    page: &Page,
    x: f64,
    y: f64,
    dx: f64,
    dy: f64,
    modifiers: i64,
) -> Result<(), CdpError> {
    let mut ev = DispatchMouseEventParams::new(DispatchMouseEventType::MouseWheel, x, y);
    ev.delta_x = Some(dx);
    ev.delta_y = Some(dy);
    ev.modifiers = Some(modifiers);
    page.execute(ev).await?;
    Ok(())
}

/// One key going down or up, named as `KeyboardEvent.key` (`Enter`, `a`,
/// `ArrowLeft`, `é`) with its `code`. A printable key without Ctrl or
/// Meta types its character; a key the keyboard table does not know is
/// sent by name (printable ones as their text), so layouts and dead keys
/// still reach the page.
pub async fn key_event(
    page: &Page,
    down: bool,
    key: &str,
    code: &str,
    modifiers: i64,
) -> Result<(), CdpError> {
    let def = get_key_definition(key);
    let printable = key.chars().count() == 1;
    if def.is_none() && !printable {
        return Err(CdpError::UnknownKey(unknown_key(key)));
    }
    let commands = modifiers & 0b0110 != 0;
    let text = match def {
        Some(d) => d.text.or((d.key.len() == 1).then_some(d.key)),
        None => Some(key),
    }
    .filter(|_| !commands)
    .map(str::to_owned);
    let kind = match (down, text.is_some()) {
        (true, true) => DispatchKeyEventType::KeyDown,
        (true, false) => DispatchKeyEventType::RawKeyDown,
        (false, _) => DispatchKeyEventType::KeyUp,
    };
    let mut ev = DispatchKeyEventParams::new(kind);
    ev.key = Some(def.map_or(key, |d| d.key).to_owned());
    ev.code = Some(match def {
        Some(d) if code.is_empty() => d.code.to_owned(),
        _ => code.to_owned(),
    });
    if let Some(d) = def {
        ev.windows_virtual_key_code = Some(d.key_code);
        ev.native_virtual_key_code = Some(d.key_code);
    }
    ev.modifiers = Some(modifiers);
    if down {
        ev.text = text;
    }
    page.execute(ev).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_key_goes_down_without_its_character_and_keeps_it_for_the_second_step() {
        let enter = KeyDown::Named(KeyAct {
            key: "Enter",
            code: "",
            modifiers: 0,
            up: true,
        })
        .held()
        .unwrap();
        assert_eq!(
            (enter.key.as_str(), enter.code.as_str(), enter.key_code),
            ("Enter", "Enter", Some(13))
        );
        assert_eq!(enter.text.as_deref(), Some("\r"));
        assert!(enter.up);
        let down = enter.event(DispatchKeyEventType::RawKeyDown);
        assert!(down.text.is_none(), "the keydown carries no character");
        // A carriage return is Enter; with Ctrl it types nothing.
        let ctrl = KeyDown::Named(KeyAct {
            key: "\r",
            code: "NumpadEnter",
            modifiers: 2,
            up: false,
        })
        .held()
        .unwrap();
        assert_eq!(
            (ctrl.key.as_str(), ctrl.code.as_str()),
            ("Enter", "NumpadEnter")
        );
        assert!(ctrl.text.is_none() && !ctrl.up);
        assert!(matches!(
            KeyDown::Named(KeyAct {
                key: "NoSuchKey",
                code: "",
                modifiers: 0,
                up: true,
            })
            .held(),
            Err(CdpError::UnknownKey(_))
        ));
    }

    #[test]
    fn a_clients_key_down_keeps_its_names_codes_text_and_modifiers_and_never_goes_up_itself() {
        let params = serde_json::json!({
            "type": "keyDown", "key": "a", "code": "KeyA", "nativeVirtualKeyCode": 13,
            "text": "\r", "modifiers": 8, "commands": ["selectAll"]
        });
        let held = KeyDown::Client(&params).held().unwrap();
        assert_eq!(
            (
                held.key.as_str(),
                held.code.as_str(),
                held.key_code,
                held.modifiers
            ),
            ("a", "KeyA", Some(13), 8)
        );
        assert_eq!(held.text.as_deref(), Some("\r"));
        assert!(!held.up, "the client sends its own key up");
        // Malformed fields are left out, never a failure.
        let odd = serde_json::json!({ "type": "keyDown", "key": 5, "text": "", "modifiers": "x" });
        let held = KeyDown::Client(&odd).held().unwrap();
        assert_eq!(
            (held.key.as_str(), held.text, held.modifiers),
            ("", None, 0)
        );
    }
}
