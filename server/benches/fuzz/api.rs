//! The agent API's JSON bodies, parsed the way the handlers parse them:
//! `axum::Json::from_bytes` (what `ApiJson` wraps) into each request type,
//! then the type's own check (`into_call`, `validate`, …), and a refusal
//! turned into the API's error answer. MCP's path (a JSON object through
//! `serde_path_to_error`) is run on the same input. Every input goes to
//! every type: a valid body of one is a malformed body of the others.

use axum::response::IntoResponse;
use cordon::error::ApiError;
use cordon::sessions::tool::input::{
    ElementReq, NavigateReq, OpenTabReq, PressReq, ReadDomReq, ScreenshotReq, ScrollReq, SelectReq,
    SnapshotReq, TabsReq, TypeReq, UploadReq, WaitForReq,
};
use cordon::sessions::{OpenRequest, ToolCall, ToolError};
use rand::Rng;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::mutate::Gen;
use crate::{Outcome, Target};

pub const TARGET: Target = Target {
    name: "api",
    dict: &[
        "\"url\":",
        "\"wait\":\"load\"",
        "\"timeout_ms\":",
        "\"x\":",
        "\"y\":",
        "\"selector\":",
        "\"ref\":",
        "\"text\":",
        "\"submit\":true",
        "\"key\":",
        "\"dx\":",
        "\"values\":[",
        "\"files\":[{\"name\":\"a.txt\",\"content_base64\":\"aGk=\"}]",
        "\"max_chars\":",
        "\"max_depth\":",
        "\"action\":\"close\"",
        "\"tab_id\":",
        "\"full_page\":true",
        "\"format\":\"jpeg\"",
        "\"quality\":",
        "\"credential_mode\":\"operator\"",
        "\"domains\":[\"example.com\"]",
        "\"grant_token\":",
        "\"viewport\":{\"width\":1280,\"height\":720}",
        "\"deadline_s\":",
        "\"downloads\":\"allow\"",
        "\"instruction\":",
        "\"start_url\":",
        "\"max_steps\":",
        "\"reason\":",
        "null",
        "{",
        "}",
        "[",
        "]",
        ",",
    ],
    shape,
    run,
};

fn text(g: &mut Gen) -> Value {
    match g.below(6) {
        0 => json!(""),
        1 => json!("x".repeat(g.pick(&[16, 17, 33, 2049, 4097, 65_537]))),
        _ => json!(g.text(24)),
    }
}

fn num(g: &mut Gen) -> Value {
    match g.below(6) {
        0 => json!(g.rng.random::<f64>() * 2e6 - 1e6),
        1 => json!(u64::MAX),
        2 => json!(-1),
        3 => json!(0),
        _ => json!(g.below(5000)),
    }
}

fn url(g: &mut Gen) -> Value {
    json!(format!(
        "{}{}",
        g.pick(&[
            "https://example.com/",
            "http://127.0.0.1:1/",
            "ftp://x/",
            "javascript:1",
            "https://user:pw@example.com/",
            "http://[::1]:99999/",
            ""
        ]),
        g.text(8)
    ))
}

fn shape(g: &mut Gen) -> Vec<u8> {
    let v = match g.below(16) {
        0 => json!({ "url": url(g), "wait": g.pick(&["load", "domcontentloaded", "none", "x"]),
                     "timeout_ms": num(g) }),
        1 => json!({ "full_page": g.chance(0.5), "format": g.pick(&["png", "jpeg", "webp"]),
                     "quality": num(g) }),
        2 => json!({ "x": num(g), "y": num(g), "timeout_ms": num(g) }),
        3 => json!({ "selector": text(g) }),
        4 => json!({ "ref": text(g) }),
        5 => json!({ "text": text(g), "selector": text(g), "submit": g.chance(0.5) }),
        6 => json!({ "key": g.pick(&["Enter", "Tab", "a", "ArrowDown", "Hyper", ""]) }),
        7 => json!({ "dx": num(g), "dy": num(g), "ref": text(g) }),
        8 => json!({ "selector": text(g), "values": [text(g), text(g)] }),
        9 => json!({ "text": text(g), "timeout_ms": num(g) }),
        10 => json!({ "max_chars": num(g) }),
        11 => json!({ "max_depth": num(g), "max_nodes": num(g) }),
        12 => json!({ "action": g.pick(&["list", "open", "focus", "close"]), "tab_id": text(g) }),
        13 => json!({ "selector": "#f", "files": [{ "name": text(g),
                      "content_base64": g.pick(&["aGk=", "aGk", "====", "@@", ""]) }] }),
        14 => json!({ "credential_mode": g.pick(&["clean", "operator", "refresh"]),
                      "domains": [text(g), "example.com"], "record": "off",
                      "deadline_s": num(g), "viewport": { "width": num(g), "height": num(g) },
                      "grant_token": text(g), "downloads": "deny" }),
        _ => json!({ "instruction": text(g), "start_url": url(g), "domains": ["example.com"],
                     "max_steps": num(g), "reason": text(g) }),
    };
    serde_json::to_vec(&v).expect("JSON")
}

/// The handler's path for one body type: `Json::from_bytes` (a rejection
/// becomes its message, as `ApiJson` answers it), then `check`.
fn body<T: DeserializeOwned>(
    input: &[u8],
    object: Option<&serde_json::Map<String, Value>>,
    check: impl Fn(T) -> Result<(), ApiError>,
) -> bool {
    let http = match axum::Json::<T>::from_bytes(input) {
        Ok(axum::Json(v)) => answer(check(v)),
        Err(rejection) => {
            let _ = rejection.body_text();
            false
        }
    };
    if let Some(args) = object {
        match serde_path_to_error::deserialize::<_, T>(Value::Object(args.clone())) {
            Ok(v) => {
                answer(check(v));
            }
            Err(e) => {
                let _ = e.to_string();
            }
        }
    }
    http
}

/// Whether a check passed; a refusal is rendered as the API answers it.
fn answer(r: Result<(), ApiError>) -> bool {
    match r {
        Ok(()) => true,
        Err(e) => {
            let _ = e.into_response();
            false
        }
    }
}

fn call<T>(into: fn(T) -> Result<ToolCall, ToolError>) -> impl Fn(T) -> Result<(), ApiError> {
    move |t| into(t).map(drop).map_err(ApiError::from)
}

fn run(input: &[u8]) -> Outcome {
    let value: Option<Value> = serde_json::from_slice(input).ok();
    let object = value.as_ref().and_then(Value::as_object);
    let results = [
        body(input, object, call(NavigateReq::into_call)),
        body(input, object, call(ScreenshotReq::into_call)),
        body(input, object, call(ElementReq::into_click)),
        body(input, object, call(ElementReq::into_hover)),
        body(input, object, call(TypeReq::into_call)),
        body(input, object, call(PressReq::into_call)),
        body(input, object, call(ScrollReq::into_call)),
        body(input, object, call(SelectReq::into_call)),
        body(input, object, call(WaitForReq::into_call)),
        body(input, object, call(ReadDomReq::into_call)),
        body(input, object, call(SnapshotReq::into_call)),
        body(input, object, call(OpenTabReq::into_call)),
        body(input, object, call(TabsReq::into_call)),
        body(input, object, call(UploadReq::into_call)),
        body(input, object, |r: OpenRequest| {
            r.validate(600, 3600)
                .map(drop)
                .map_err(|e| ApiError::BadRequest(e.to_string()))
        }),
        body(input, object, |r: cordon::tasks::TaskRequest| {
            let start = r
                .start_url
                .clone()
                .or_else(|| r.domains.first().map(|d| format!("https://{d}/")))
                .unwrap_or_default();
            cordon::domain::TargetUrl::parse(&start)
                .map(drop)
                .map_err(|e| ApiError::BadRequest(e.to_string()))
        }),
        body(input, object, |r: cordon::grants::NewGrantRequest| {
            cordon::grants::parse_domains(&r.domains)
                .map(drop)
                .map_err(|e| ApiError::BadRequest(e.to_string()))
        }),
    ];
    match (value.is_some(), results.iter().any(|ok| *ok)) {
        (_, true) => Outcome::Accepted,
        (true, false) => Outcome::Refused("refused_by_every_type"),
        (false, false) => Outcome::Refused("not_json"),
    }
}
