//! One CDP connection's loop: a raw connection of its own to the browser,
//! the browser's messages sealed (operator mode) and sent on through the
//! bounded way to the client, the client's commands rate-limited, decided
//! (`command.rs`) and forwarded, heavy ones held to [`MAX_IN_FLIGHT`], and
//! the connection's first and last audit rows.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::command::Step;
use super::outbound::Cut;
use super::{
    Closing, Context, FromClient, MAX_COMMANDS_PER_SECOND, MAX_IN_FLIGHT, Outbound, SLOW_CLIENT,
    Slot, seal,
};
use crate::audit::Actor;
use crate::sessions::{CredentialMode, RunningSession, SessionManager};
use crate::store::api_keys::ApiKeyOwner;

/// How often a connection asks whether its API key is still live.
const KEY_CHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Whether a command is heavy for the renderer ([`MAX_IN_FLIGHT`]).
pub(super) fn heavy(method: &str) -> bool {
    matches!(
        method,
        "Page.captureScreenshot" | "Page.printToPDF" | "Page.captureSnapshot"
    )
}

/// The id of a response as Chromium writes it (`{"id":12,…`).
fn response_id(text: &str) -> Option<u64> {
    let rest = text.strip_prefix("{\"id\":")?;
    let end = rest.find(|c: char| !c.is_ascii_digit())?;
    rest[..end].parse().ok()
}

/// What the connection knows while it runs.
pub(super) struct Conn {
    pub(super) session: Arc<RunningSession>,
    pub(super) owner: ApiKeyOwner,
    pub(super) actor: Actor,
    pub(super) ctx: Context,
    /// CDP session id → (target id, target type), from the browser's
    /// `Target.attachedToTarget` events.
    pub(super) targets: Arc<std::sync::Mutex<HashMap<String, (String, String)>>>,
    /// Scripts already audited on this connection (SHA-256).
    pub(super) scripts: HashSet<String>,
    /// Commands by outcome, for the `cdp.disconnected` row.
    pub(super) counts: HashMap<&'static str, u64>,
    /// Each CDP session's last mouse event, when it was a move: its point.
    pub(super) pointer: HashMap<String, (f64, f64)>,
    /// The ids of heavy commands sent and not yet answered.
    pub(super) heavy_ids: Arc<std::sync::Mutex<HashSet<u64>>>,
    /// What is down in each tab (a button, a finger).
    pub(super) gestures: super::gesture::Gestures,
}

/// A one-second window of commands.
struct Rate {
    since: Instant,
    seen: u32,
}

impl Rate {
    fn take(&mut self) -> bool {
        if self.since.elapsed() >= Duration::from_secs(1) {
            self.since = Instant::now();
            self.seen = 0;
        }
        self.seen += 1;
        self.seen <= MAX_COMMANDS_PER_SECOND
    }
}

impl SessionManager {
    /// Serves one CDP client until it leaves, the browser goes, or a rule
    /// cuts it off; answers how to close its WebSocket.
    pub async fn serve_cdp(
        &self,
        slot: Slot,
        owner: ApiKeyOwner,
        mut inbound: mpsc::Receiver<FromClient>,
        outbound: Outbound,
    ) -> Closing {
        let session = slot.session.clone();
        let Ok((mut up, mut down)) = crate::cdp::connect_raw(&session.sandbox.cdp_url).await else {
            return Closing::new(1011, "the session's browser is gone");
        };
        let sealed = session.mode == CredentialMode::Operator;
        let mut conn = Conn {
            ctx: Context {
                sealed,
                download_dir: session
                    .downloads
                    .as_ref()
                    // Taken over CDP, they stay refused in the browser.
                    .filter(|d| d.shares_folder())
                    .map(|_| session.sandbox.downloads().inside.display().to_string()),
            },
            actor: Actor::Agent(owner.key_id.clone()),
            owner,
            session: session.clone(),
            targets: Arc::default(),
            scripts: HashSet::new(),
            counts: HashMap::new(),
            pointer: HashMap::new(),
            heavy_ids: Arc::default(),
            gestures: super::gesture::Gestures::default(),
        };
        self.cdp_audit(&conn, "cdp.connected", json!({}), "ok")
            .await;
        let (targets, out) = (conn.targets.clone(), outbound.clone());
        let in_flight = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
        let heavy_ids = conn.heavy_ids.clone();
        let (answered, answered_ids) = (in_flight.clone(), heavy_ids.clone());
        let mut from_browser = tokio::spawn(async move {
            while let Some(text) = down.next().await {
                if let Some(id) = response_id(&text)
                    && answered_ids.lock().expect("heavy ids").remove(&id)
                {
                    answered.add_permits(1);
                }
                track_targets(&text, &targets);
                let text = if sealed {
                    match seal::seal(text) {
                        Some(t) => t,
                        None => continue,
                    }
                } else {
                    text
                };
                match out.send(text).await {
                    Ok(()) => {}
                    Err(Cut::Slow) => {
                        return Closing::new(1008, "the client left its messages unread");
                    }
                    Err(Cut::Closed) => return Closing::new(1000, "closed"),
                }
            }
            Closing::new(1011, "the session's browser is gone")
        });
        let mut rate = Rate {
            since: Instant::now(),
            seen: 0,
        };
        // The key is asked after again every second: revoked, its
        // connections end within a second, as its requests do at once.
        let mut key_check = tokio::time::interval(KEY_CHECK);
        key_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let closing = loop {
            tokio::select! {
                ended = &mut from_browser => {
                    break ended.unwrap_or(Closing::new(1011, "internal error"));
                }
                _ = key_check.tick() => {
                    match self.0.store.api_key_active(&conn.owner.key_id).await {
                        Ok(true) => {}
                        Ok(false) => break Closing::new(1008, "the API key was revoked"),
                        Err(e) => {
                            tracing::warn!(error = %format!("{e:#}"), "cdp: cannot check the API key");
                        }
                    }
                }
                frame = inbound.recv() => {
                    let text = match frame {
                        None => break Closing::new(1000, "closed"),
                        Some(FromClient::Binary) => {
                            break Closing::new(1003, "CDP messages are JSON text frames");
                        }
                        Some(FromClient::TooLarge) => {
                            break Closing::new(1009, "message over 16 MiB");
                        }
                        // Its bytes are given back as it is taken.
                        Some(FromClient::Text(t, _taken)) => t,
                    };
                    if !rate.take() {
                        break Closing::new(1008, "over 1000 commands in one second");
                    }
                    match self.cdp_command(&mut conn, &text).await {
                        Step::Forward(t, Some(id)) => {
                            // Given back when its answer passes (above).
                            tokio::select! {
                                permit = in_flight.clone().acquire_owned() => match permit {
                                    Ok(p) => p.forget(),
                                    Err(_) => break Closing::new(1011, "internal error"),
                                },
                                ended = &mut from_browser => {
                                    break ended.unwrap_or(Closing::new(1011, "internal error"));
                                }
                                () = tokio::time::sleep(SLOW_CLIENT * 6) => {
                                    break Closing::new(1011, "the browser does not answer");
                                }
                            }
                            heavy_ids.lock().expect("heavy ids").insert(id);
                            if up.send(t).await.is_err() {
                                break Closing::new(1011, "the session's browser is gone");
                            }
                        }
                        Step::Forward(t, None) => {
                            if up.send(t).await.is_err() {
                                break Closing::new(1011, "the session's browser is gone");
                            }
                        }
                        Step::Reply(t) => {
                            if outbound.send(t).await.is_err() {
                                break Closing::new(1008, "the client left its messages unread");
                            }
                        }
                        Step::End(last, c) => {
                            if let Some(t) = last {
                                let _ = outbound.send(t).await;
                            }
                            break c;
                        }
                    }
                }
            }
        };
        from_browser.abort();
        up.close().await;
        let counts = std::mem::take(&mut conn.counts);
        self.cdp_audit(
            &conn,
            "cdp.disconnected",
            json!({ "commands": counts, "close_code": closing.code }),
            closing.reason,
        )
        .await;
        closing
    }
}

/// Notes the browser's attach and detach events (which CDP session is
/// which tab).
fn track_targets(text: &str, targets: &std::sync::Mutex<HashMap<String, (String, String)>>) {
    let Some(method) = seal::event_method(text) else {
        return;
    };
    if method != "Target.attachedToTarget" && method != "Target.detachedFromTarget" {
        return;
    }
    let Ok(v) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let p = &v["params"];
    let Some(sid) = p["sessionId"].as_str() else {
        return;
    };
    let mut map = targets.lock().expect("targets lock");
    if method == "Target.attachedToTarget" {
        if let (Some(t), Some(kind)) = (
            p["targetInfo"]["targetId"].as_str(),
            p["targetInfo"]["type"].as_str(),
        ) {
            map.insert(sid.to_owned(), (t.to_owned(), kind.to_owned()));
        }
    } else {
        map.remove(sid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_and_detach_events_map_sessions_to_tabs() {
        let map = std::sync::Mutex::new(HashMap::new());
        track_targets(
            r#"{"method":"Target.attachedToTarget","params":{"sessionId":"S1","targetInfo":{"targetId":"T1","type":"page"},"waitingForDebugger":false}}"#,
            &map,
        );
        assert_eq!(
            map.lock().unwrap().get("S1"),
            Some(&("T1".to_owned(), "page".to_owned()))
        );
        track_targets(
            r#"{"method":"Target.detachedFromTarget","params":{"sessionId":"S1"}}"#,
            &map,
        );
        assert!(map.lock().unwrap().is_empty());
    }

    #[test]
    fn heavy_commands_and_response_ids_are_recognised() {
        assert!(heavy("Page.captureScreenshot") && heavy("Page.printToPDF"));
        assert!(!heavy("Page.enable") && !heavy("Runtime.evaluate"));
        assert_eq!(response_id(r#"{"id":42,"result":{}}"#), Some(42));
        assert_eq!(response_id(r#"{"method":"Page.loadEventFired"}"#), None);
        assert_eq!(response_id(r#"{"id":}"#), None);
    }

    #[test]
    fn a_burst_over_the_rate_is_cut() {
        let mut r = Rate {
            since: Instant::now(),
            seen: 0,
        };
        let passed = (0..2_000).filter(|_| r.take()).count();
        assert_eq!(passed, MAX_COMMANDS_PER_SECOND as usize);
    }
}
