//! The live view's browser messages: what the socket's `on_text` does with
//! a text frame (the size bound, `serde_json` into `ClientMsg`, then the
//! tool calls it becomes).

use app::api::live::{ClientMsg, MAX_CLIENT_MESSAGE};
use rand::Rng;
use serde_json::{Value, json};

use crate::mutate::Gen;
use crate::{Outcome, Target};

pub const TARGET: Target = Target {
    name: "live",
    dict: &[
        "{\"type\":\"mouse\",\"action\":\"click\",\"x\":1,\"y\":2}",
        "{\"type\":\"key\",\"action\":\"down\",\"key\":\"a\"}",
        "\"type\":",
        "\"mouse\"",
        "\"wheel\"",
        "\"key\"",
        "\"text\"",
        "\"navigate\"",
        "\"tab_open\"",
        "\"tab_switch\"",
        "\"resize\"",
        "\"take_control\"",
        "\"release_control\"",
        "\"action\":",
        "\"button\":",
        "\"buttons\":",
        "\"click_count\":",
        "\"modifiers\":",
        "\"x\":",
        "\"dx\":",
        "\"url\":",
        "\"width\":",
        "null",
        "true",
        "{}",
        "[]",
        ",",
    ],
    shape,
    run,
};

fn num(g: &mut Gen) -> Value {
    match g.below(5) {
        0 => json!(g.rng.random::<f64>() * 4000.0),
        1 => json!(g.below(300)),
        2 => json!(-(g.below(100) as i64)),
        3 => json!(f64::MAX),
        _ => json!(g.below(2000)),
    }
}

fn url(g: &mut Gen) -> String {
    let u = g.pick(&[
        "https://example.com/",
        "http://127.0.0.1:8080/x?y=1",
        "javascript:alert(1)",
        "file:///etc/passwd",
        "about:blank",
        "http://[::1]/",
        "https://xn--80ak6aa92e.com/",
        "",
    ]);
    format!("{u}{}", g.text(10))
}

fn shape(g: &mut Gen) -> Vec<u8> {
    let v = match g.below(12) {
        0 | 1 => json!({
            "type": "mouse",
            "action": g.pick(&["move", "down", "up", "click", "drag"]),
            "x": num(g), "y": num(g),
            "button": g.pick(&["none", "left", "middle", "right", "back", "forward", "x"]),
            "buttons": num(g), "click_count": num(g), "modifiers": num(g),
        }),
        2 => json!({ "type": "wheel", "x": num(g), "y": num(g), "dx": num(g), "dy": num(g),
                     "modifiers": num(g) }),
        3 | 4 => json!({ "type": "key", "action": g.pick(&["down", "up"]),
                         "key": g.text(6), "code": g.text(6), "modifiers": num(g) }),
        5 => json!({ "type": "text", "text": g.text(80) }),
        6 => json!({ "type": "navigate", "url": url(g) }),
        7 => json!({ "type": "tab_open", "url": url(g) }),
        8 => json!({ "type": g.pick(&["tab_switch", "tab_close"]), "id": g.text(20) }),
        9 => json!({ "type": "resize", "width": num(g), "height": num(g) }),
        _ => json!({ "type": g.pick(&["back", "forward", "reload", "take_control",
                                      "release_control"]) }),
    };
    serde_json::to_vec(&v).expect("JSON")
}

fn run(input: &[u8]) -> Outcome {
    // A WebSocket text frame is UTF-8 by the time the socket sees it.
    let text = String::from_utf8_lossy(input);
    if text.len() > MAX_CLIENT_MESSAGE {
        return Outcome::Refused("too_large");
    }
    let msg: ClientMsg = match serde_json::from_str(&text) {
        Ok(m) => m,
        Err(e) => {
            // What the socket sends back (`bad_message`).
            let _ = format!("message dropped: {e}");
            return Outcome::Refused("bad_message");
        }
    };
    match cordon::live::socket::calls(msg) {
        Ok(_) => Outcome::Accepted,
        Err(_) => Outcome::Refused("invalid"),
    }
}
