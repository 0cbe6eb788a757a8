//! `run_task` against a real HTTP server speaking the chat-completions
//! protocol that replays scripted UI-TARS answers (no model runs here),
//! driving a real Chromium on loopback pages.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode as HttpStatus};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{AgentClient, Backend, TestApp, assert_error, session_app};
use crate::site;

/// What the fake model answers next.
#[derive(Clone)]
pub(crate) enum Reply {
    /// A chat completion with this text.
    Text(&'static str),
    /// An HTTP error.
    Status(u16),
    /// No answer for this long.
    Hang(Duration),
}

/// One request the fake received (images counted, not kept).
#[derive(Debug, Clone)]
struct Seen {
    authorization: Option<String>,
    images: usize,
    texts: Vec<String>,
    /// The colour at (300, 300) of the newest image (the page now).
    pixel: Option<[u8; 3]>,
}

#[derive(Clone, Default)]
pub(crate) struct Fake {
    script: Arc<Mutex<VecDeque<Reply>>>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Fake {
    /// Every text the model was sent, in order.
    pub(crate) fn texts(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .flat_map(|s| s.texts.clone())
            .collect()
    }
}

async fn completions(
    State(f): State<Fake>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut images = 0;
    let mut texts = Vec::new();
    let mut pixel = None;
    for m in &messages {
        match &m["content"] {
            Value::String(s) => texts.push(s.clone()),
            Value::Array(parts) => {
                for p in parts {
                    if p["type"] == "image_url" {
                        assert!(
                            p["image_url"]["url"]
                                .as_str()
                                .is_some_and(|u| u.starts_with("data:image/jpeg;base64,")),
                            "images are inline JPEGs"
                        );
                        images += 1;
                        let data = p["image_url"]["url"].as_str().unwrap_or_default();
                        let jpeg = base64::engine::general_purpose::STANDARD
                            .decode(data.trim_start_matches("data:image/jpeg;base64,"))
                            .expect("base64");
                        let img = image::load_from_memory(&jpeg).expect("a JPEG").to_rgb8();
                        pixel = Some(img.get_pixel(300, 300).0);
                    } else if let Some(t) = p["text"].as_str() {
                        texts.push(t.to_owned());
                    }
                }
            }
            _ => {}
        }
    }
    f.seen.lock().unwrap().push(Seen {
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
        images,
        texts,
        pixel,
    });
    let next = f.script.lock().unwrap().pop_front();
    match next {
        Some(Reply::Text(t)) => Json(json!({
            "id": "chatcmpl-test",
            "object": "chat.completion",
            "choices": [{ "index": 0, "message": { "role": "assistant", "content": t }, "finish_reason": "stop" }],
            "usage": { "prompt_tokens": 1200, "completion_tokens": 40 },
        }))
        .into_response(),
        Some(Reply::Status(s)) => (HttpStatus::from_u16(s).unwrap(), "model error").into_response(),
        Some(Reply::Hang(d)) => {
            tokio::time::sleep(d).await;
            HttpStatus::GATEWAY_TIMEOUT.into_response()
        }
        None => (HttpStatus::INTERNAL_SERVER_ERROR, "script exhausted").into_response(),
    }
}

/// Starts the fake model on a free loopback port with `script`.
pub(crate) async fn fake_model(script: Vec<Reply>) -> (SocketAddr, Fake) {
    let fake = Fake::default();
    fake.script.lock().unwrap().extend(script);
    let app = axum::Router::new()
        .route("/v1/chat/completions", post(completions))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, fake)
}

const KEY: &str = "sk-model-key-never-shown";

async fn app_with_model(site: &site::Site, model: SocketAddr) -> TestApp {
    // Pictures are checked: a loaded machine's late frame is waited for
    // (the default favours speed).
    model_app(
        site,
        model,
        &[
            ("CORDON_MODEL_TIMEOUT_S", "3"),
            ("CORDON_TASK_FRAME_SETTLE_MS", "400"),
        ],
    )
    .await
}

/// An app for tests that check each step's picture: a generous wait for
/// the repaint (3 s), and for a frame still being encoded once the page
/// has drawn (0.4 s): a slow machine is not a stale picture.
async fn app_checking_pictures(site: &site::Site, model: SocketAddr) -> TestApp {
    model_app(
        site,
        model,
        &[
            ("CORDON_TASK_FRAME_WAIT_MS", "3000"),
            ("CORDON_TASK_FRAME_SETTLE_MS", "400"),
        ],
    )
    .await
}

/// An app on SQLite whose tasks use the fake model at `model`, with
/// `extra` settings.
async fn model_app(site: &site::Site, model: SocketAddr, extra: &[(&str, &str)]) -> TestApp {
    let base = format!("http://{model}/v1");
    let mut env = vec![
        ("CORDON_MODEL_BASE_URL", base.as_str()),
        ("CORDON_MODEL_API_KEY", KEY),
    ];
    env.extend_from_slice(extra);
    session_app(Backend::Sqlite, &site.allow(), &env).await
}

async fn run(agent: &AgentClient, body: Value) -> (StatusCode, Value) {
    agent.post("/api/tasks", body).await
}

/// Model coordinates of page point (x, y) on a 1280×720 screenshot:
/// UI-TARS-1.5 sees it resized to 1288×728.
fn model_xy(x: f64, y: f64) -> (f64, f64) {
    (x * 1288.0 / 1280.0, y * 728.0 / 720.0)
}

/// Which of red, green and blue dominates `px`.
fn colour(px: Option<[u8; 3]>) -> &'static str {
    match px {
        Some([r, g, b]) if r > 150 && g < 100 && b < 100 => "red",
        Some([r, g, b]) if g > 100 && r < 100 && b < 100 => "green",
        Some([r, g, b]) if b > 150 && r < 100 && g < 100 => "blue",
        _ => "other",
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_step_shows_the_model_the_page_after_its_last_action() {
    let site = site::start().await;
    let (x, y) = model_xy(300.0, 300.0);
    let click: &'static str = Box::leak(
        format!("Thought: Next colour.\nAction: click(start_box='({x:.0},{y:.0})')")
            .into_boxed_str(),
    );
    let script = vec![
        Reply::Text(click),
        Reply::Text(click),
        Reply::Text(click),
        Reply::Text("Action: finished(content='done')"),
    ];
    let (model, fake) = fake_model(script).await;
    let app = app_checking_pictures(&site, model).await;
    let agent = app.agent("acme").await;

    let (status, result) = run(
        &agent,
        json!({ "instruction": "click the pad three times", "start_url": site.url("/colours") }),
    )
    .await;

    assert_eq!(status, StatusCode::OK, "{result}");
    assert_eq!(result["status"], "finished", "{result}");
    // Each picture is the page after the click before it: blue, then red,
    // green, blue (a picture from before a click would repeat a colour).
    let seen = fake.seen.lock().unwrap().clone();
    let colours: Vec<&str> = seen.iter().map(|s| colour(s.pixel)).collect();
    assert_eq!(
        colours,
        ["blue", "red", "green", "blue"],
        "{:?}",
        seen.iter().map(|s| s.pixel).collect::<Vec<_>>()
    );
    // The pictures came from the tab's screencast, not from captures.
    let metrics = app.get("/metrics").await.text().await.unwrap();
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with(r#"cordon_task_pictures_total{source="screencast"}"#)),
        "{metrics}"
    );
}

/// A click that changes nothing on screen: the step's picture is still the
/// page after every action, and the wait for a repaint that never comes
/// ends once the page has drawn and the settle time passed (0.4 s here),
/// not at the 3 s bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_whose_action_changes_nothing_shows_the_page_without_waiting_out_the_bound() {
    no_op_steps("/half-pad").await;
}

/// The same on a page that stalls its own `requestAnimationFrame`: the
/// check runs in an isolated world, out of the page's reach.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_stalling_its_animation_frames_does_not_hold_a_no_op_step_to_the_bound() {
    no_op_steps("/half-pad-stalled").await;
}

async fn no_op_steps(path: &str) {
    let site = site::start().await;
    let text = |x: f64, y: f64| -> &'static str {
        let (x, y) = model_xy(x, y);
        Box::leak(
            format!("Thought: Next.\nAction: click(start_box='({x:.0},{y:.0})')").into_boxed_str(),
        )
    };
    // The pad (left), the white margin (right): changes, nothing, changes,
    // nothing, nothing.
    let (pad, margin) = (text(300.0, 300.0), text(1000.0, 300.0));
    let script = vec![
        Reply::Text(pad),
        Reply::Text(margin),
        Reply::Text(pad),
        Reply::Text(margin),
        Reply::Text(margin),
        Reply::Text("Action: finished(content='done')"),
    ];
    let (model, fake) = fake_model(script).await;
    let app = app_checking_pictures(&site, model).await;
    let agent = app.agent("acme").await;

    let (status, result) = run(
        &agent,
        json!({ "instruction": "click around", "start_url": site.url(path) }),
    )
    .await;

    assert_eq!(status, StatusCode::OK, "{result}");
    assert_eq!(result["status"], "finished", "{result}");
    let seen = fake.seen.lock().unwrap().clone();
    let colours: Vec<&str> = seen.iter().map(|s| colour(s.pixel)).collect();
    assert_eq!(
        colours,
        ["blue", "red", "red", "green", "green", "green"],
        "{:?}",
        seen.iter().map(|s| s.pixel).collect::<Vec<_>>()
    );
    // The steps after a margin click (the 3rd, 5th and 6th pictures) did
    // not wait out the 3 s bound: from one trace row to the next, less the
    // model's time, well under it even on a slow machine.
    let id = result["task_id"].as_str().unwrap();
    let steps = app
        .state
        .store
        .task_steps(&id.parse().unwrap())
        .await
        .unwrap();
    assert_eq!(steps.len(), 6, "{result}");
    let gaps: Vec<i64> = steps
        .windows(2)
        .map(|w| w[1].created_at - w[0].created_at - w[1].model_ms.unwrap_or(0))
        .collect();
    for after_margin in [1, 3, 4] {
        assert!(
            gaps[after_margin] < 1500,
            "step {} waited out the bound: gaps {gaps:?} ms",
            after_margin + 2
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_clicks_types_submits_and_finishes_with_one_compact_result_and_a_trace() {
    let site = site::start().await;
    let (ax, ay) = model_xy(200.0, 20.0);
    let (bx, by) = model_xy(300.0, 300.0);
    let answers: Vec<String> = vec![
        format!(
            "Thought: The pad is below the field; I click it first.\nAction: click(start_box='<|box_start|>({bx:.0},{by:.0})<|box_end|>')"
        ),
        format!("Thought: Now the name field.\nAction: click(start_box='({ax:.0},{ay:.0})')"),
        "Thought: Type the name and submit.\nAction: type(content='hello world\\n')".to_owned(),
        "Thought: Done.\nAction: finished(content='{\"submitted\": \"hello world\"}')".to_owned(),
    ];
    let script = answers
        .into_iter()
        .map(|a| Reply::Text(Box::leak(a.into_boxed_str())))
        .collect();
    let (model, fake) = fake_model(script).await;
    let app = app_with_model(&site, model).await;
    let agent = app.agent("acme").await;

    let (status, result) = run(
        &agent,
        json!({ "instruction": "Enter the name hello world and submit", "start_url": site.url("/task-form"), "record": "audit" }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{result}");
    assert_eq!(result["status"], "finished", "{result}");
    assert_eq!(result["step_count"], 4, "{result}");
    assert_eq!(
        result["result_data"]["submitted"], "hello world",
        "{result}"
    );
    assert!(result["final_screenshot_id"].as_str().is_some(), "{result}");
    // The page really got the clicks and the typing.
    assert_eq!(*site.submitted.lock().unwrap(), ["hello world"]);

    // The trace: every step, typed text as its length, screenshots by id.
    let id = result["task_id"].as_str().unwrap();
    let (status, detail) = agent.get(&format!("/api/tasks/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    let steps = detail["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4, "{detail}");
    for s in &steps[..3] {
        assert_eq!(s["outcome"], "ok", "{s}");
        assert!(s["screenshot_id"].as_str().is_some(), "{s}");
        assert_eq!(s["prompt_tokens"], 1200);
        assert!(s["model_ms"].as_i64().is_some());
    }
    assert!(
        steps[0]["action"].as_str().unwrap().starts_with("click("),
        "{detail}"
    );
    assert!(steps[0]["thought"].as_str().unwrap().contains("pad"));
    let typed = steps[2]["action"].as_str().unwrap();
    assert!(
        !typed.contains("hello") && typed.contains("11 characters"),
        "{typed}"
    );
    assert_eq!(steps[3]["outcome"], "finished");
    assert_eq!(
        detail["instruction"],
        "Enter the name hello world and submit"
    );

    // The model saw the instruction, one screenshot a step (at most the
    // newest few with history), and the key as a bearer; the key is nowhere else.
    let seen = fake.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    assert!(
        seen[0]
            .texts
            .iter()
            .any(|t| t.contains("Enter the name hello world"))
    );
    assert_eq!(seen[0].images, 1);
    assert!(seen[3].images <= 3, "{seen:?}");
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some(&*format!("Bearer {KEY}")))
    );
    assert!(!detail.to_string().contains(KEY) && !result.to_string().contains(KEY));

    // The session is closed; the task is listed.
    let sid = result["session_id"].as_str().unwrap();
    let (_, info) = agent.get(&format!("/api/sessions/{sid}")).await;
    assert_eq!(info["state"], "closed", "{info}");
    let (status, list) = agent.get("/api/tasks").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list[0]["task_id"], id);
    // Operators see the trace on the dashboard, linked from the session.
    let (_, cookie) = app
        .operator_session("olive", app::api::auth::Role::Viewer)
        .await;
    let (status, trace) = app
        .server_fn("get_task", &format!("id={id}"), Some(&cookie))
        .await;
    assert_eq!(status, StatusCode::OK, "{trace}");
    assert_eq!(trace["steps"].as_array().map(Vec::len), Some(4), "{trace}");
    // Its screenshots are served to the trace page by their ids.
    let shot = trace["steps"][0]["screenshot_id"].as_str().expect("an id");
    let res = app
        .http
        .get(app.url(&format!("/ui/screenshots/{shot}/thumb")))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{shot}");
    assert!(!trace.to_string().contains("hello world\\n"), "{trace}");
    let (_, detail) = app
        .server_fn("get_session", &format!("id={sid}"), Some(&cookie))
        .await;
    assert_eq!(detail["tasks"][0]["id"], id, "{detail}");
    let (status, _) = app
        .server_fn("get_task", "id=t_nosuchtask", Some(&cookie))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = app.server_fn("get_task", &format!("id={id}"), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    // Another tenant sees none of it.
    let other = app.agent("globex").await;
    let (status, _) = other.get(&format!("/api/tasks/{id}")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_model_answers_outages_limits_and_aborts_end_tasks_with_a_clear_status() {
    let site = site::start().await;
    let hostile =
        Box::leak(format!("Action: type(content='{}')", "x".repeat(1 << 20)).into_boxed_str());
    let (model, _fake) = fake_model(vec![
        // 1: not the grammar.
        Reply::Text("I think I should click somewhere nice."),
        // 2: a 1 MB answer.
        Reply::Text(hostile),
        // 3: the endpoint fails.
        Reply::Status(500),
        // 4: a point outside the image, then waits until max_steps.
        Reply::Text("Action: click(start_box='(5000,5000)')"),
        Reply::Text("Action: wait()"),
        // 5: too slow (the timeout is 3 s).
        Reply::Hang(Duration::from_secs(10)),
        // 6: aborted while the model thinks.
        Reply::Hang(Duration::from_secs(20)),
        // 7: the deadline passes while the model thinks.
        Reply::Hang(Duration::from_secs(20)),
    ])
    .await;
    let app = app_with_model(&site, model).await;
    let agent = app.agent("acme").await;
    let start = site.url("/task-form");
    let task =
        |steps: u32| json!({ "instruction": "do it", "start_url": start, "max_steps": steps });

    let (_, r) = run(&agent, task(5)).await;
    assert_eq!(
        (r["status"].as_str(), r["error"].as_str()),
        (Some("error"), Some("bad_model_answer")),
        "{r}"
    );
    let (_, r) = run(&agent, task(5)).await;
    assert_eq!(
        (r["status"].as_str(), r["error"].as_str()),
        (Some("error"), Some("bad_model_answer")),
        "{r}"
    );
    let (_, r) = run(&agent, task(5)).await;
    assert_eq!(
        (r["status"].as_str(), r["error"].as_str()),
        (Some("error"), Some("model_unavailable")),
        "{r}"
    );
    let (_, r) = run(&agent, task(2)).await;
    assert_eq!(r["status"], "max_steps", "{r}");
    let id = r["task_id"].as_str().unwrap();
    let (_, d) = agent.get(&format!("/api/tasks/{id}")).await;
    assert!(
        d["steps"][0]["outcome"]
            .as_str()
            .unwrap()
            .contains("outside"),
        "{d}"
    );
    let (_, r) = run(&agent, task(5)).await;
    assert_eq!(
        (r["status"].as_str(), r["error"].as_str()),
        (Some("error"), Some("model_unavailable")),
        "{r}"
    );
    assert!(r["summary"].as_str().unwrap().contains("3 s"), "{r}");

    // Abort from another request while the model is thinking.
    let runner = {
        let agent = agent.clone();
        let body = task(5);
        tokio::spawn(async move { agent.post("/api/tasks", body).await })
    };
    let id = crate::helpers::wait_until("the task to run", crate::helpers::PATIENCE, || async {
        let (_, list) = agent.get("/api/tasks").await;
        match list[0]["status"].as_str() {
            Some("running") => Ok(list[0]["task_id"].as_str().unwrap().to_owned()),
            _ => Err(list.to_string()),
        }
    })
    .await;
    let (status, aborted) = agent
        .post(&format!("/api/tasks/{id}/abort"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{aborted}");
    assert_eq!(aborted["status"], "aborted", "{aborted}");
    let (_, r) = runner.await.unwrap();
    assert_eq!(r["status"], "aborted", "{r}");
    let again = agent
        .post(&format!("/api/tasks/{id}/abort"), json!({}))
        .await;
    assert_error(&again, StatusCode::CONFLICT, "task_ended");

    // The deadline (the session's) passes while the model thinks.
    let (_, r) = run(
        &agent,
        json!({ "instruction": "do it", "start_url": start, "deadline_s": 2 }),
    )
    .await;
    assert_eq!(r["status"], "deadline", "{r}");

    // Every task's session is closed, whatever ended it.
    assert_eq!(app.state.sessions.open_count(), 0);
    // Refused before anything starts.
    let big = "x".repeat(9000);
    let r = run(&agent, json!({ "instruction": big, "start_url": start })).await;
    assert_error(&r, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    let r = run(
        &agent,
        json!({ "instruction": "x", "start_url": start, "max_steps": 0 }),
    )
    .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "bad_request");
    let r = run(&agent, json!({ "instruction": "x" })).await;
    assert_error(&r, StatusCode::BAD_REQUEST, "bad_request");
    let r = run(
        &agent,
        json!({ "instruction": "x", "start_url": "javascript:alert(1)" }),
    )
    .await;
    assert_error(&r, StatusCode::BAD_REQUEST, "bad_request");
    let r = run(&agent, json!({ "instruction": "x", "start_url": start, "credential_mode": "operator", "domains": ["127.0.0.1"] })).await;
    assert_error(&r, StatusCode::FORBIDDEN, "grant_required");
    let (status, _) = agent.get("/api/tasks/t_nosuchtask").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_model_tasks_are_refused_and_a_down_model_is_an_error() {
    let site = site::start().await;
    let app = session_app(Backend::Sqlite, &site.allow(), &[]).await;
    let agent = app.agent("acme").await;
    let r = run(
        &agent,
        json!({ "instruction": "x", "start_url": site.url("/task-form") }),
    )
    .await;
    assert_error(&r, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    app.stop().await;

    // A port nobody listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let app = app_with_model(&site, addr).await;
    let agent = app.agent("acme").await;
    let (status, r) = run(
        &agent,
        json!({ "instruction": "x", "start_url": site.url("/task-form") }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(
        (r["status"].as_str(), r["error"].as_str()),
        (Some("error"), Some("model_unavailable")),
        "{r}"
    );
    assert_eq!(app.state.sessions.open_count(), 0);
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_user_pauses_the_task_until_an_operator_takes_over_and_hands_back() {
    let site = site::start().await;
    let (model, fake) = fake_model(vec![
        Reply::Text("Thought: A captcha; I need a person.\nAction: call_user()"),
        Reply::Text("Action: finished(content='done after help')"),
    ])
    .await;
    let app = app_with_model(&site, model).await;
    let agent = app.agent("acme").await;
    let runner = {
        let agent = agent.clone();
        let body = json!({ "instruction": "solve it", "start_url": site.url("/task-form") });
        tokio::spawn(async move { agent.post("/api/tasks", body).await })
    };
    let (id, sid) =
        crate::helpers::wait_until("the task to wait", crate::helpers::PATIENCE, || async {
            let (_, list) = agent.get("/api/tasks").await;
            let Some(id) = list[0]["task_id"].as_str() else {
                return Err(list.to_string());
            };
            let (_, d) = agent.get(&format!("/api/tasks/{id}")).await;
            if d["steps"][0]["outcome"] == "waiting for an operator" {
                Ok((id.to_owned(), d["session_id"].as_str().unwrap().to_owned()))
            } else {
                Err(d.to_string())
            }
        })
        .await;
    // Nothing more is asked of the model while it waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.seen.lock().unwrap().len(), 1);
    // The dashboard shows it waiting: a badge and the Tasks page; not to
    // someone logged out.
    let (_, cookie) = app
        .operator_session("vic", app::api::auth::Role::Viewer)
        .await;
    let (status, n) = app.server_fn("waiting_tasks", "", Some(&cookie)).await;
    assert_eq!((status, n), (StatusCode::OK, json!(1)));
    let (status, list) = app.server_fn("list_tasks", "", Some(&cookie)).await;
    assert_eq!(status, StatusCode::OK, "{list}");
    let line = list["tasks"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["id"] == id.as_str()))
        .unwrap_or_else(|| panic!("{list}"));
    assert_eq!(line["waiting"], true, "{line}");
    assert_eq!(line["session"], sid.as_str(), "{line}");
    let (status, _) = app.server_fn("waiting_tasks", "", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let live = app
        .state
        .sessions
        .find_live(&sid.parse().unwrap())
        .await
        .expect("running");
    app.state
        .sessions
        .take_control(&live, "op_helper", "olive")
        .await
        .unwrap();
    app.state
        .sessions
        .release_control(&live, cordon::audit::Actor::Operator("op_helper".into()))
        .await
        .unwrap();
    let (status, r) = runner.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_eq!(r["status"], "finished", "{r}");
    assert_eq!(r["summary"], "done after help");
    assert_eq!(r["task_id"], id.as_str());
    assert_eq!(r["step_count"], 2);
    // Helped: nothing waits any more.
    let (status, n) = app.server_fn("waiting_tasks", "", Some(&cookie)).await;
    assert_eq!((status, n), (StatusCode::OK, json!(0)));
    let (_, list) = app.server_fn("list_tasks", "", Some(&cookie)).await;
    assert_eq!(list["tasks"][0]["waiting"], false, "{list}");
    assert_eq!(list["tasks"][0]["status"], "finished", "{list}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_ends_running_tasks_as_aborted_and_keeps_their_trace() {
    let site = site::start().await;
    let (model, _fake) = fake_model(vec![]).await;
    let app = app_with_model(&site, model).await;
    let agent = app.agent("acme").await;
    let store = &app.state.store;
    let left = cordon::domain::TaskId::generate();
    let row = cordon::store::tasks::TaskRow {
        id: left.to_string(),
        tenant_id: "acme".into(),
        api_key_id: None,
        session_id: None,
        instruction: "left running".into(),
        status: "running".into(),
        summary: None,
        result_data: None,
        error: None,
        step_count: 0,
        max_steps: 5,
        final_screenshot_id: None,
        host: app.state.sessions.host().to_owned(),
        created_at: cordon::time::now_ms(),
        ended_at: None,
    };
    store.task_insert(&row).await.unwrap();
    store
        .task_step_insert(&cordon::store::tasks::StepRow {
            task_id: row.id.clone(),
            n: 1,
            thought: Some("halfway".into()),
            action: Some("wait()".into()),
            outcome: "ok".into(),
            screenshot_id: None,
            model_ms: Some(5),
            prompt_tokens: None,
            completion_tokens: None,
            created_at: cordon::time::now_ms(),
        })
        .await
        .unwrap();
    // What `serve` does at start.
    cordon::tasks::Tasks::start(
        &app.state.settings.task_settings(),
        store.clone(),
        app.state.sessions.clone(),
    )
    .await
    .unwrap();
    let (_, d) = agent.get(&format!("/api/tasks/{left}")).await;
    assert_eq!(d["status"], "aborted", "{d}");
    assert_eq!(d["error"], "restarted", "{d}");
    assert_eq!(d["steps"].as_array().map(Vec::len), Some(1), "{d}");
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browser_run_task_over_mcp_answers_the_same_compact_result() {
    let site = site::start().await;
    let (model, _fake) = fake_model(vec![Reply::Text(
        "Action: finished(content='{\"ok\": true}')",
    )])
    .await;
    let app = app_with_model(&site, model).await;
    let agent = app.agent("acme").await;
    let mut mcp = crate::mcp::Mcp::of(&app, &agent).await;
    let r = mcp
        .ok(
            "browser_run_task",
            json!({ "instruction": "nothing to do", "start_url": site.url("/task-form") }),
        )
        .await;
    assert_eq!(r["status"], "finished", "{r}");
    assert_eq!(r["result_data"]["ok"], true, "{r}");
    let err = mcp
        .err(
            "browser_run_task",
            json!({ "instruction": "x".repeat(9000), "start_url": site.url("/") }),
        )
        .await;
    assert!(err.starts_with("payload_too_large: "), "{err}");
    let err = mcp.err("browser_run_task", json!({ "nonsense": 1 })).await;
    assert!(err.starts_with("bad_request: "), "{err}");
    app.stop().await;
}

/// The model neither sees nor answers a page's dialogs: `run_task` answers
/// each with Cancel (so a `confirm("Delete …?")` a click opens deletes
/// nothing, and an alert while the page loads does not stop the task),
/// audited as the task's, and the step's trace says so.
/// A popup the task never looked at alerts a moment after it loads: its
/// dialog stops the task's tab too (tabs of one site share a renderer).
/// The task cancels it, in the popup's tab, as it cancels its own tab's.
#[tokio::test]
async fn a_task_cancels_a_dialog_in_a_popup_it_never_looked_at() {
    let site = site::start().await;
    // The "Open" button of popup-alert.html, at the page's top left.
    let (x, y) = model_xy(30.0, 18.0);
    let click = format!("Thought: Open.\nAction: click(start_box='({x:.0},{y:.0})')");
    // Waits of 2 s each: the popup alerts 1.5 s after its load (long
    // after Cordon follows the new tab, even on a slow machine), well
    // before the last picture.
    let script = vec![
        Reply::Text(Box::leak(click.into_boxed_str())),
        Reply::Text("Action: wait()"),
        Reply::Text("Action: wait()"),
        Reply::Text("Action: wait()"),
        Reply::Text("Thought: Done.\nAction: finished(content='done')"),
    ];
    let (model, _fake) = fake_model(script).await;
    let app = app_with_model(&site, model).await;
    let agent = app.agent("acme").await;
    let (status, result) = run(
        &agent,
        json!({ "instruction": "Open it", "start_url": site.url("/hostile/popup-alert.html?ms=1500") }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{result}");
    assert_eq!(result["status"], "finished", "{result}");
    let cancels = dialog_answers(&app, &result).await;
    assert!(
        !cancels.is_empty()
            && cancels
                .iter()
                .all(|p| p["accept"] == false && p["tab_id"].is_string()),
        "{cancels:?}"
    );
    // The popup reached its alert (it asks for /hang just before).
    assert!(
        site.hangs.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "the popup never alerted"
    );
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_cancels_the_pages_dialogs_and_says_so() {
    let site = site::start().await;
    let (x, y) = model_xy(200.0, 100.0);
    let click = format!("Thought: Next.\nAction: click(start_box='({x:.0},{y:.0})')");
    let script = vec![
        Reply::Text(Box::leak(click.into_boxed_str())),
        Reply::Text("Thought: Done.\nAction: finished(content='done')"),
    ];
    let (model, _fake) = fake_model(script).await;
    let app = app_with_model(&site, model).await;
    let agent = app.agent("acme").await;
    let (status, result) = run(
        &agent,
        json!({ "instruction": "Go on", "start_url": site.url("/hostile/confirm-dialog.html?welcome") }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{result}");
    assert_eq!(result["status"], "finished", "{result}");
    let id = result["task_id"].as_str().unwrap();
    let (_, detail) = agent.get(&format!("/api/tasks/{id}")).await;
    let steps = detail["steps"].as_array().unwrap();
    assert_eq!(
        steps[0]["outcome"], "ok; the page opened a confirm dialog, which run_task cancels",
        "{detail}"
    );
    // Both dialogs were answered with Cancel, by the task, through the
    // pipeline.
    let cancels = dialog_answers(&app, &result).await;
    assert_eq!(cancels.len(), 2, "{cancels:?}");
    assert!(cancels.iter().all(|p| p["accept"] == false), "{cancels:?}");
    app.stop().await;
}

/// The audited parameters of every dialog answer in the task's session.
async fn dialog_answers(app: &TestApp, result: &Value) -> Vec<Value> {
    let sid = result["session_id"].as_str().unwrap();
    let all = app.state.store.audit_page(0, 10_000).await.unwrap();
    all.iter()
        .filter(|e| e.session.as_deref() == Some(sid) && e.action == "tool.dialog")
        .filter(|e| e.outcome == "requested")
        .map(|e| serde_json::from_str::<Value>(&e.params).unwrap())
        .collect()
}

/// A task aborted while its click waits for an operator runs nothing:
/// the approval is withdrawn at once (an operator can no longer approve
/// it), the click is audited as called off, and the task ends aborted.
/// A task whose key is revoked while it runs acts no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_tasks_held_click_and_a_revoked_keys_task_act_no_more() {
    let site = site::start().await;
    let (x, y) = model_xy(300.0, 100.0);
    let click = Box::leak(format!("Action: click(start_box='({x:.0},{y:.0})')").into_boxed_str());
    let mut script = vec![Reply::Text(click)];
    script.extend(std::iter::repeat_n(Reply::Text("Action: wait()"), 12));
    let (model, _fake) = fake_model(script).await;
    let app = app_with_model(&site, model).await;
    let agent = app.agent("acme").await;
    let (_, cookie) = app
        .operator_session("olive", app::api::auth::Role::Operator)
        .await;
    let runner = {
        let agent = agent.clone();
        let body = json!({ "instruction": "delete it", "start_url": site.url("/two-buttons"), "max_steps": 3 });
        tokio::spawn(async move { agent.post("/api/tasks", body).await })
    };
    let approval = crate::helpers::wait_until(
        "the click to wait for an operator",
        crate::helpers::PATIENCE,
        || async {
            match crate::gate::pending(&app, &cookie).await.as_slice() {
                [one] => Ok(one.clone()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    let (_, list) = agent.get("/api/tasks").await;
    let id = list[0]["task_id"].as_str().unwrap().to_owned();
    let (status, aborted) = agent
        .post(&format!("/api/tasks/{id}/abort"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{aborted}");
    assert_eq!(aborted["status"], "aborted", "{aborted}");
    assert!(
        crate::gate::pending(&app, &cookie).await.is_empty(),
        "the approval outlived the abort"
    );
    let (status, decided) =
        crate::gate::decide(&app, &cookie, approval["id"].as_str().unwrap(), true).await;
    assert_ne!(
        status,
        StatusCode::OK,
        "an aborted task's click was approved: {decided}"
    );
    let (_, r) = runner.await.unwrap();
    assert_eq!(r["status"], "aborted", "{r}");
    let rows = app.state.store.audit_page(0, 10_000).await.unwrap();
    assert!(
        rows.iter()
            .any(|e| e.action == "tool.click" && e.outcome == "refused: called_off"),
        "no called-off row"
    );
    assert!(
        !rows
            .iter()
            .any(|e| e.action == "tool.click" && e.outcome == "ok"),
        "the click ran"
    );

    // Waits step by step until the key is revoked.
    let runner = {
        let agent = agent.clone();
        let body =
            json!({ "instruction": "wait", "start_url": site.url("/task-form"), "max_steps": 12 });
        tokio::spawn(async move { agent.post("/api/tasks", body).await })
    };
    crate::helpers::wait_until("a first step", crate::helpers::PATIENCE, || async {
        let (_, list) = agent.get("/api/tasks").await;
        match list[0]["step_count"].as_i64() {
            Some(n) if n >= 1 && list[0]["status"] == "running" => Ok(()),
            _ => Err(list.to_string()),
        }
    })
    .await;
    let key = crate::helpers::key_id(&app, "acme").await.parse().unwrap();
    assert!(app.state.store.api_key_revoke(&key).await.unwrap());
    let (_, r) = runner.await.unwrap();
    assert_eq!(
        (r["status"].as_str(), r["error"].as_str()),
        (Some("denied"), Some("key_revoked")),
        "{r}"
    );
    assert!(r["step_count"].as_i64().unwrap() < 6, "{r}");
    app.stop().await;
}

/// The model endpoint answering with a redirect is an answer refused:
/// the images and the prompt go nowhere else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_endpoint_that_redirects_is_refused_and_not_followed() {
    let site = site::start().await;
    let hits = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let elsewhere = {
        let hits = hits.clone();
        let app = axum::Router::new().fallback(move || {
            let hits = hits.clone();
            async move {
                hits.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                "thanks for the pictures"
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    };
    let redirector = {
        let to = format!("http://{elsewhere}/steal");
        let app = axum::Router::new().fallback(move || {
            let to = to.clone();
            async move {
                (
                    HttpStatus::TEMPORARY_REDIRECT,
                    [(axum::http::header::LOCATION, to)],
                )
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    };
    let app = app_with_model(&site, redirector).await;
    let agent = app.agent("acme").await;
    let (_, r) = run(
        &agent,
        json!({ "instruction": "do it", "start_url": site.url("/task-form"), "max_steps": 2 }),
    )
    .await;
    assert_eq!(
        (r["status"].as_str(), r["error"].as_str()),
        (Some("error"), Some("model_refused")),
        "{r}"
    );
    assert_eq!(
        hits.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the redirect was followed"
    );
    app.stop().await;
}
