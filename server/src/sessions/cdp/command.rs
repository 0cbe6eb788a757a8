//! One client command decided: parsed, judged by the rules (`rules.rs`),
//! and, when it acts, checked for operator control and by the risk gate
//! like the tool API's, and audited as the agent with `"via": "cdp"`
//! (lengths, hashes and hosts, never typed text, scripts or URLs).

use chromiumoxide::cdp::browser_protocol::target::TargetId;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::serve::{Conn, heavy};
use super::{Act, Closing, Verdict, decide};
use crate::audit::NewEvent;
use crate::sessions::SessionManager;
use crate::sessions::tool::{LiveInput, Tool, ToolError};

/// What to do with one client message.
pub(super) enum Step {
    /// Send it on; `Some(id)`: a heavy command ([`MAX_IN_FLIGHT`]).
    Forward(String, Option<u64>),
    Reply(String),
    /// A last answer (if any), then close.
    End(Option<String>, Closing),
}

impl SessionManager {
    /// Decides one client message.
    pub(super) async fn cdp_command(&self, conn: &mut Conn, text: &str) -> Step {
        let msg = match super::bounded::parse(text, super::bounded::MAX_NODES) {
            Ok(msg) => msg,
            Err(super::bounded::Unread::NotJson) => {
                return Step::Reply(error_reply(
                    None,
                    None,
                    -32700,
                    "Cordon: the message is not JSON",
                ));
            }
            Err(super::bounded::Unread::TooMany) => {
                return Step::Reply(error_reply(
                    None,
                    None,
                    -32600,
                    &format!(
                        "Cordon: a command of over {} JSON values is not read (send bulk data as one string)",
                        super::bounded::MAX_NODES
                    ),
                ));
            }
        };
        let session_id = msg.get("sessionId").and_then(Value::as_str);
        // Chromium's ids are 32-bit: a larger one it would answer without
        // an id, and a heavy command's slot would never come back.
        let Some(id) = msg
            .get("id")
            .and_then(Value::as_u64)
            .filter(|id| i32::try_from(*id).is_ok())
        else {
            return Step::Reply(error_reply(
                None,
                session_id,
                -32600,
                "Cordon: each command needs an integer id from 0 to 2147483647",
            ));
        };
        let Some(method) = msg.get("method").and_then(Value::as_str) else {
            return Step::Reply(error_reply(
                Some(id),
                session_id,
                -32600,
                "Cordon: each command needs a method",
            ));
        };
        let params = msg.get("params").unwrap_or(&Value::Null);
        // Where the client left the pointer in this tab before this event.
        let pointer = session_id.and_then(|s| conn.pointer.get(s).copied());
        if method == "Input.dispatchMouseEvent"
            && let Some(s) = session_id
        {
            let at = (params["x"].as_f64(), params["y"].as_f64());
            match (params["type"].as_str(), at) {
                (Some("mouseMoved"), (Some(x), Some(y))) => {
                    conn.pointer.insert(s.to_owned(), (x, y));
                }
                _ => {
                    conn.pointer.remove(s);
                }
            }
        }
        match decide(method, params, &conn.ctx) {
            // Two heavy commands of one id would be answered as one: the
            // second's slot would never come back.
            Verdict::Pass
                if heavy(method) && conn.heavy_ids.lock().expect("heavy ids").contains(&id) =>
            {
                *conn.counts.entry("refused").or_default() += 1;
                Step::Reply(error_reply(
                    Some(id),
                    session_id,
                    -32600,
                    "Cordon: a command with this id is still waiting for its answer",
                ))
            }
            // What would mislead or stop an operator who drives now.
            Verdict::Pass | Verdict::Rewrite(_)
                if let Some(holder) = conn.session.control()
                    && super::disturbs_operator(method, params) =>
            {
                *conn.counts.entry("refused").or_default() += 1;
                let e = ToolError::OperatorHasControl(holder.name);
                Step::Reply(error_reply(
                    Some(id),
                    session_id,
                    -32000,
                    &format!("Cordon refused {method} ({}): {e}", e.code()),
                ))
            }
            Verdict::Pass => {
                *conn.counts.entry("passed").or_default() += 1;
                Step::Forward(text.to_owned(), heavy(method).then_some(id))
            }
            Verdict::Rewrite(p) => {
                *conn.counts.entry("rewritten").or_default() += 1;
                let mut msg = msg.clone();
                msg["params"] = p;
                Step::Forward(msg.to_string(), None)
            }
            Verdict::Refuse { rule, why } => {
                *conn.counts.entry("refused").or_default() += 1;
                self.cdp_audit(
                    conn,
                    &format!("cdp.{method}"),
                    json!({ "rule": rule }),
                    &format!("refused: {rule}"),
                )
                .await;
                Step::Reply(error_reply(
                    Some(id),
                    session_id,
                    -32000,
                    &format!("Cordon refused {method} ({rule}): {why}"),
                ))
            }
            Verdict::CloseSession => {
                let closed = self.close(&conn.owner, &conn.session.id).await;
                let reply = match closed {
                    Ok(_) => json!({ "id": id, "result": {} }).to_string(),
                    Err(e) => error_reply(Some(id), session_id, -32000, &e.to_string()),
                };
                // The answer goes out before the socket closes.
                Step::End(Some(reply), Closing::new(1000, "the session was closed"))
            }
            Verdict::Act(act) => {
                // Judged where it acts, given what is down in the tab.
                let tab = session_id.unwrap_or_default();
                let judged = match conn.gestures.judge(tab, act.clone()) {
                    super::gesture::Judged::As(a) => a,
                    super::gesture::Judged::TwoAtOnce => {
                        *conn.counts.entry("refused").or_default() += 1;
                        return Step::Reply(error_reply(
                            Some(id),
                            session_id,
                            -32000,
                            &format!(
                                "Cordon refused {method} (multi_touch): lift the finger down (touchEnd) before another goes down: the risk gate judges each press where it lands"
                            ),
                        ));
                    }
                };
                let there = matches!(judged, Act::Press { x, y } if pointer == Some((x, y)));
                let step = self
                    .cdp_act(
                        conn,
                        (id, method, session_id),
                        judged,
                        there,
                        (text, params),
                    )
                    .await;
                if matches!(step, Step::Forward(..)) {
                    conn.gestures.sent(tab, method, params, &act);
                }
                step
            }
        }
    }

    /// A command that acts: control, the risk gate, the audit row.
    /// `there`: a press at the point the client's last move put the pointer
    /// (and, as clients await their moves, the page has handled the hover
    /// there): judged where it is, without moving again.
    async fn cdp_act(
        &self,
        conn: &mut Conn,
        (id, method, session_id): (u64, &str, Option<&str>),
        act: Act,
        there: bool,
        (text, params): (&str, &Value),
    ) -> Step {
        let session = conn.session.clone();
        if let Some(holder) = session.control() {
            *conn.counts.entry("refused").or_default() += 1;
            let e = ToolError::OperatorHasControl(holder.name);
            return Step::Reply(error_reply(
                Some(id),
                session_id,
                -32000,
                &format!("Cordon refused {method} ({}): {e}", e.code()),
            ));
        }
        let tab = session_id.and_then(|s| {
            let targets = conn.targets.lock().expect("targets lock");
            targets
                .get(s)
                .filter(|(_, kind)| kind == "page")
                .map(|(t, _)| TargetId::from(t.clone()))
        });
        let tool = match &act {
            Act::Press { x, y } if there => Some(Tool::Click(
                crate::sessions::tool::ElementTarget::Point(*x, *y),
            )),
            Act::Press { x, y } => Some(press_at(*x, *y)),
            // A finger lifting away from where it went down: judged where
            // it is, without a mouse moved there.
            Act::Release { x, y } if method == "Input.dispatchTouchEvent" => Some(Tool::Click(
                crate::sessions::tool::ElementTarget::Point(*x, *y),
            )),
            Act::Release { x, y } => Some(Tool::Input(LiveInput::Mouse {
                kind: crate::cdp::MouseKind::Up,
                x: *x,
                y: *y,
                button: match params["button"].as_str() {
                    Some("right") => crate::cdp::Button::Right,
                    Some("middle") => crate::cdp::Button::Middle,
                    Some("back") => crate::cdp::Button::Back,
                    Some("forward") => crate::cdp::Button::Forward,
                    _ => crate::cdp::Button::Left,
                },
                buttons: 0,
                click_count: params["clickCount"].as_i64().unwrap_or(1),
                modifiers: 0,
            })),
            Act::Key(key) => Some(Tool::Press { key: key.clone() }),
            // Typing where it lands (a dropped newline submits nothing);
            // judged as a press there too, below.
            Act::Drop { x, y, text } => Some(Tool::Type {
                text: text.replace(['\r', '\n'], " "),
                target: Some(crate::sessions::tool::ElementTarget::Point(*x, *y)),
                submit: false,
            }),
            Act::Text(t) => Some(Tool::Type {
                text: t.clone(),
                target: None,
                submit: false,
            }),
            // An address the gate cannot read does not go unjudged: it
            // is refused, as the tool API refuses it.
            Act::Navigate(url) | Act::OpenTab(Some(url)) => {
                match crate::domain::TargetUrl::parse(url) {
                    Ok(url) if matches!(act, Act::Navigate(_)) => Some(Tool::Navigate {
                        url,
                        wait: crate::cdp::WaitUntil::Load,
                    }),
                    Ok(url) => Some(Tool::TabOpen { url: Some(url) }),
                    Err(e) => {
                        *conn.counts.entry("refused").or_default() += 1;
                        let rule = json!({ "rule": "url_invalid" });
                        self.cdp_audit(
                            conn,
                            &format!("cdp.{method}"),
                            rule,
                            "refused: url_invalid",
                        )
                        .await;
                        return Step::Reply(error_reply(
                            Some(id),
                            session_id,
                            -32000,
                            &format!("Cordon refused {method} (url_invalid): {e}"),
                        ));
                    }
                }
            }
            Act::DialogOk => Some(Tool::Dialog {
                accept: true,
                text: None,
                tab: None,
            }),
            _ => None,
        };
        let audited = audit_params(method, &act);
        let event = NewEvent::new(conn.actor.clone(), format!("cdp.{method}"))
            .tenant(&session.tenant)
            .session(session.id.as_str())
            .params(audited.clone());
        // Sent by Cordon itself: answered here.
        let mut sent_here = false;
        if let Some(tool) = &tool {
            // What acts on a tab needs that tab: a flattened session of a page.
            let needs_tab = !matches!(act, Act::OpenTab(_));
            if needs_tab && tab.is_none() {
                *conn.counts.entry("refused").or_default() += 1;
                return Step::Reply(error_reply(
                    Some(id),
                    session_id,
                    -32000,
                    &format!(
                        "Cordon refused {method} (no_tab): input and navigation go to a tab's own session (attach with flatten: true)"
                    ),
                ));
            }
            // Enter or Space going down with its character: sent by
            // Cordon in two steps, judged again once the page has handled
            // the keydown (`SessionManager::cdp_key_down`).
            let with_character = matches!(act, Act::Key(_))
                && method == "Input.dispatchKeyEvent"
                && params["type"] == "keyDown"
                && params["text"].as_str().is_some_and(|t| !t.is_empty());
            let gated = match &tab {
                Some(t) if with_character => {
                    self.cdp_key_down(&session, &conn.actor, tool, &event, t, params)
                        .await
                }
                _ => self
                    .gate_in_tab(&session, &conn.actor, tool, &event, tab.as_ref())
                    .await
                    .map(|()| false),
            };
            // A drop of text is a press where it lands as well.
            let gated = match (gated, &act) {
                (Ok(sent), Act::Drop { x, y, .. }) => self
                    .gate_in_tab(
                        &session,
                        &conn.actor,
                        &press_at(*x, *y),
                        &event,
                        tab.as_ref(),
                    )
                    .await
                    .map(|()| sent),
                (gated, _) => gated,
            };
            match gated {
                Ok(sent) => sent_here = sent,
                Err(e) => {
                    *conn.counts.entry("refused").or_default() += 1;
                    return Step::Reply(error_reply(
                        Some(id),
                        session_id,
                        -32000,
                        &format!("Cordon refused {method} ({}): {e}", e.code()),
                    ));
                }
            }
        }
        session.touch();
        *conn.counts.entry("acted").or_default() += 1;
        let audit = match &act {
            Act::Script(src) => conn.scripts.insert(sha256(src)),
            a => a.audited(),
        };
        if audit {
            self.cdp_audit(conn, &format!("cdp.{method}"), audited, "ok")
                .await;
        }
        if sent_here {
            let mut done = json!({ "id": id, "result": {} });
            if let Some(s) = session_id {
                done["sessionId"] = json!(s);
            }
            return Step::Reply(done.to_string());
        }
        Step::Forward(text.to_owned(), None)
    }

    /// Appends a row about this connection (a failure is logged, never
    /// answered to the client).
    pub(super) async fn cdp_audit(
        &self,
        conn: &Conn,
        action: &str,
        mut params: Value,
        outcome: &str,
    ) {
        params["via"] = json!(crate::audit::Surface::Cdp.as_str());
        let event = NewEvent::new(conn.actor.clone(), action)
            .tenant(&conn.session.tenant)
            .session(conn.session.id.as_str())
            .params(params)
            .outcome(outcome);
        if let Err(e) = self.0.store.audit_append(event).await {
            tracing::error!(error = %format!("{e:#}"), "failed to audit a CDP command");
        }
    }
}

/// A left button going down at a point, as the gate judges it (the
/// pointer moved there first).
fn press_at(x: f64, y: f64) -> Tool {
    Tool::Input(LiveInput::Mouse {
        kind: crate::cdp::MouseKind::Down,
        x,
        y,
        button: crate::cdp::Button::Left,
        buttons: 1,
        click_count: 1,
        modifiers: 0,
    })
}

/// The audit row's parameters of an act: never typed text, a script or a
/// URL (which may carry tokens): lengths, hashes and hosts.
fn audit_params(method: &str, act: &Act) -> Value {
    let host = |url: &str| {
        url::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_owned))
    };
    let mut p = match act {
        Act::Press { x, y } | Act::Release { x, y } | Act::Touch { x, y, .. } => {
            json!({ "x": x, "y": y })
        }
        Act::Key(key) => json!({ "key": key }),
        Act::Text(t) => json!({ "text_len": t.chars().count() }),
        Act::Drop { x, y, text } => json!({ "x": x, "y": y, "text_len": text.chars().count() }),
        Act::Navigate(url) => json!({ "host": host(url) }),
        Act::OpenTab(url) => json!({ "host": url.as_deref().and_then(host) }),
        Act::Script(src) => json!({ "script_sha256": sha256(src), "script_len": src.len() }),
        Act::DialogOk => json!({ "accept": true }),
        Act::History | Act::Targets | Act::Motion | Act::Change => json!({}),
    };
    p["method"] = json!(method);
    p["via"] = json!(crate::audit::Surface::Cdp.as_str());
    p
}

fn sha256(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// A CDP error answer.
fn error_reply(id: Option<u64>, session_id: Option<&str>, code: i64, message: &str) -> String {
    let mut v = json!({ "error": { "code": code, "message": message } });
    if let Some(id) = id {
        v["id"] = json!(id);
    }
    if let Some(s) = session_id {
        v["sessionId"] = json!(s);
    }
    v.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audit_params_never_carry_text_scripts_or_urls() {
        let p = audit_params("Input.insertText", &Act::Text("hunter2".into()));
        assert_eq!(p["text_len"], 7);
        assert!(!p.to_string().contains("hunter2"));
        let p = audit_params(
            "Page.navigate",
            &Act::Navigate("https://a.example/x?token=SECRET".into()),
        );
        assert_eq!(p["host"], "a.example");
        assert!(!p.to_string().contains("SECRET"));
        let p = audit_params("Runtime.evaluate", &Act::Script("secret()".into()));
        assert_eq!(p["script_len"], 8);
        assert!(!p.to_string().contains("secret()"));
        assert_eq!(p["via"], "cdp");
    }

    #[test]
    fn errors_keep_the_commands_id_and_session() {
        let e: Value =
            serde_json::from_str(&error_reply(Some(3), Some("S"), -32000, "no")).unwrap();
        assert_eq!(e["id"], 3);
        assert_eq!(e["sessionId"], "S");
        assert_eq!(e["error"]["code"], -32000);
        let e: Value = serde_json::from_str(&error_reply(None, None, -32700, "bad")).unwrap();
        assert!(e.get("id").is_none());
    }
}
