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
