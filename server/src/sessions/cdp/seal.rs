//! The vault stays sealed on the way out: in an operator-mode session,
//! every event the browser sends a CDP client loses its cookies before it
//! leaves (the `Cookie` and `Set-Cookie` headers, raw header blocks, the
//! cookie lists of `*ExtraInfo` events, an issue's raw cookie line).
//! Only events of the domains that carry them are parsed at all.

use serde_json::Value;

/// What a redacted value reads as.
pub const REDACTED: &str = "[redacted by Cordon: the vault is sealed]";

/// Whether an event of `method` may carry cookies (and is worth parsing).
pub fn may_carry_cookies(method: &str) -> bool {
    method.starts_with("Network.") || method.starts_with("Fetch.") || method.starts_with("Audits.")
}

/// The method of an event as Chromium writes it (`{"method":"X",…`),
/// without parsing the whole message; `None` for a response (`{"id":…`).
/// A message in another shape is parsed to find out.
pub fn event_method(text: &str) -> Option<std::borrow::Cow<'_, str>> {
    const PREFIX: &str = "{\"method\":\"";
    if let Some(rest) = text.strip_prefix(PREFIX) {
        let end = rest.find('"')?;
        return Some(std::borrow::Cow::Borrowed(&rest[..end]));
    }
    if text.starts_with("{\"id\":") {
        return None;
    }
    let v: Value = serde_json::from_str(text).ok()?;
    if v.get("id").is_some() {
        return None;
    }
    v.get("method")
        .and_then(Value::as_str)
        .map(|m| std::borrow::Cow::Owned(m.to_owned()))
}

fn is_cookie_header(name: &str) -> bool {
    name.eq_ignore_ascii_case("cookie") || name.eq_ignore_ascii_case("set-cookie")
}

/// Removes every cookie from an event's JSON, in place; answers whether
/// anything was removed.
pub fn redact(v: &mut Value) -> bool {
    match v {
        Value::Object(map) => {
            let mut changed = false;
            // `{name, value}` header entries (Fetch).
            let header_entry = map
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(is_cookie_header)
                && map.contains_key("value");
            if header_entry {
                map.insert("value".into(), Value::String(REDACTED.into()));
                changed = true;
            }
            for (key, value) in map.iter_mut() {
                // Raw header blocks under any name (`headersText`,
                // `requestHeadersText`, …).
                if is_cookie_header(key)
                    || key.to_ascii_lowercase().ends_with("headerstext")
                    || key == "rawCookieLine"
                {
                    if !value.is_null() {
                        *value = Value::String(REDACTED.into());
                        changed = true;
                    }
                } else if matches!(
                    key.as_str(),
                    "associatedCookies" | "blockedCookies" | "exemptedCookies" | "cookies"
                ) && value.is_array()
                {
                    *value = Value::Array(Vec::new());
                    changed = true;
                } else if !(header_entry && key == "value") {
                    changed |= redact(value);
                }
            }
            changed
        }
        Value::Array(items) => items.iter_mut().fold(false, |c, i| redact(i) | c),
        _ => false,
    }
}

/// The message with its cookies removed (itself when it has none);
/// `None`: an event that may carry cookies and cannot be read here (too
/// deeply nested, say) is not sent on at all.
pub fn seal(text: String) -> Option<String> {
    let Some(method) = event_method(&text) else {
        return Some(text);
    };
    if !may_carry_cookies(&method) {
        return Some(text);
    }
    let Ok(mut v) = serde_json::from_str::<Value>(&text) else {
        return None;
    };
    Some(if redact(&mut v) { v.to_string() } else { text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cookie_headers_and_lists_are_removed_from_network_events() {
        let ev = json!({
            "method": "Network.requestWillBeSentExtraInfo",
            "params": {
                "requestId": "1",
                "associatedCookies": [{"blockedReasons": [], "cookie": {"name": "sid", "value": "SECRET1"}}],
                "headers": {"Cookie": "sid=SECRET1", "Accept": "*/*"},
                "headersText": "GET / HTTP/1.1\r\nCookie: sid=SECRET1\r\n"
            },
            "sessionId": "S"
        });
        let out = seal(ev.to_string()).unwrap();
        assert!(!out.contains("SECRET1"), "{out}");
        let v: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v["params"]["headers"]["Accept"], "*/*");
        assert_eq!(v["params"]["headers"]["Cookie"], REDACTED);
        assert_eq!(v["sessionId"], "S");

        // The WebSocket handshake's raw request block.
        let ev = json!({
            "method": "Network.webSocketHandshakeResponseReceived",
            "params": {"requestId": "2", "response": {"status": 101,
                "requestHeadersText": "GET /ws HTTP/1.1\r\nCookie: sid=SECRET4\r\n",
                "headersText": "HTTP/1.1 101\r\n"}}
        });
        let out = seal(ev.to_string()).unwrap();
        assert!(!out.contains("SECRET4") && out.contains("101"), "{out}");
        let ev = json!({
            "method": "Network.responseReceivedExtraInfo",
            "params": {"headers": {"set-cookie": "sid=SECRET2; HttpOnly"}, "blockedCookies": [{"cookieLine": "x=SECRET2"}]}
        });
        assert!(!seal(ev.to_string()).unwrap().contains("SECRET2"));
        let ev = json!({
            "method": "Fetch.requestPaused",
            "params": {"request": {"url": "https://a/", "headers": {"cookie": "sid=SECRET3"}},
                       "responseHeaders": [{"name": "Set-Cookie", "value": "sid=SECRET3"}, {"name": "Content-Type", "value": "text/html"}]}
        });
        let out = seal(ev.to_string()).unwrap();
        assert!(
            !out.contains("SECRET3") && out.contains("text/html"),
            "{out}"
        );
        let ev = json!({
            "method": "Audits.issueAdded",
            "params": {"issue": {"details": {"cookieIssueDetails": {"rawCookieLine": "sid=SECRET4"}}}}
        });
        assert!(!seal(ev.to_string()).unwrap().contains("SECRET4"));
    }

    #[test]
    fn other_messages_pass_untouched_and_unparsed() {
        let shot = r#"{"id":7,"result":{"data":"Cookie: sid=NOTASECRET"}}"#;
        assert_eq!(seal(shot.to_owned()).unwrap(), shot);
        let page = r#"{"method":"Page.loadEventFired","params":{"timestamp":1}}"#;
        assert_eq!(seal(page.to_owned()).unwrap(), page);
        // Odd shapes are parsed: an event whose keys come in another order.
        let odd =
            r#"{"params":{"headers":{"Cookie":"sid=S5"}},"method":"Network.requestWillBeSent"}"#;
        assert!(!seal(odd.to_owned()).unwrap().contains("S5"));
        assert_eq!(seal("not json".into()).unwrap(), "not json");
        // A cookie-bearing event too deep to read is not sent on.
        let deep = format!(
            r#"{{"method":"Network.requestWillBeSentExtraInfo","params":{{"headers":{{"Cookie":"sid=S6"}},"x":{}1{}}}}}"#,
            "[".repeat(300),
            "]".repeat(300)
        );
        assert_eq!(seal(deep), None);
        assert_eq!(event_method(r#"{"id":1,"result":{}}"#), None);
    }
}
