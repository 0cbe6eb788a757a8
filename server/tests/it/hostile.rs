//! The hostile-page corpus (`tests/fixtures/hostile/`, one trick a page):
//! each page tries to make the risk gate answer "low" for an action that
//! deletes or pays, by how the action lands (keys, a form's submit
//! button, raw input), by what script can see (generated content, closed
//! shadow roots, rewritten prototypes), by what is under the pointer
//! (overlays, `pointer-events`, frames, a canvas) or by changing the
//! target while the approval waits. Each test proves the action waited
//! for an operator and, denied, never ran.

use app::api::auth::Role;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::gate::{centre_of, decide, one_pending, pending, title};
use crate::helpers::{AgentClient, TestApp, assert_error};
use crate::site;

/// An app, `acme`'s agent on the hostile page `name` (a path, with a
/// query if the page takes one), and an operator.
pub(crate) struct On {
    pub(crate) site: site::Site,
    pub(crate) app: TestApp,
    pub(crate) agent: AgentClient,
    pub(crate) sid: String,
    pub(crate) cookie: String,
}

pub(crate) async fn open_on(name: &str) -> On {
    let site = site::start().await;
    // The site under both its names (a cross-site frame), with the gate
    // tests' rules (acme's approvals wait 30 s).
    let allow = format!("{},localhost:{}", site.allow(), site.addr.port());
    let app = crate::helpers::session_app(
        crate::helpers::Backend::Sqlite,
        &allow,
        &[("CORDON_APPROVAL_TIMEOUT_S", "30")],
    )
    .await;
    let agent = app.agent("acme").await;
    let sid = agent.open(json!({})).await;
    agent
        .navigate_ok(&sid, &site.url(&format!("/hostile/{name}")))
        .await;
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    On {
        site,
        app,
        agent,
        sid,
        cookie,
    }
}

impl On {
    /// Runs tool `tool` with `body` as the agent; asserts it waits for an
    /// operator with a reason holding each of `why`, denies it, and asserts
    /// the agent hears `denied_by_operator` and the page's title is
    /// unchanged (the action never ran). Answers the approval shown.
    pub(crate) async fn waits_and_denied(&self, tool: &str, body: Value, why: &[&str]) -> Value {
        let before = title(&self.agent, &self.sid).await;
        let call = {
            let agent = self.agent.clone();
            let sid = self.sid.clone();
            let tool = tool.to_owned();
            tokio::spawn(async move { agent.tool(&sid, &tool, body).await })
        };
        let (waiting, call) = self.approval_for(call).await;
        let reasons = waiting["reasons"].to_string();
        for w in why {
            assert!(reasons.contains(w), "{tool}: {w:?} not in {waiting}");
        }
        let id = waiting["id"].as_str().unwrap().to_owned();
        let (status, v) = decide(&self.app, &self.cookie, &id, false).await;
        assert_eq!(status, StatusCode::OK, "{v}");
        let answer = call.await.unwrap();
        assert_error(&answer, StatusCode::FORBIDDEN, "denied_by_operator");
        let after = title(&self.agent, &self.sid).await;
        assert_eq!(after, before, "{tool}: the denied action ran");
        waiting
    }

    /// Waits until `call` waits for an operator, and answers the approval
    /// shown; fails at once, with what the call answered and the page's
    /// title, if the call ends first (it ran without waiting).
    async fn approval_for<T: std::fmt::Debug + Send + 'static>(
        &self,
        call: tokio::task::JoinHandle<T>,
    ) -> (Value, tokio::task::JoinHandle<T>) {
        let waiting =
            crate::helpers::wait_until("an approval to wait", crate::helpers::PATIENCE, || async {
                if call.is_finished() {
                    return Ok(None);
                }
                let all = pending(&self.app, &self.cookie).await;
                let mine: Vec<&Value> = all.iter().filter(|a| a["session"] == self.sid).collect();
                match mine.as_slice() {
                    [one] => Ok(Some((*one).clone())),
                    _ => Err(format!("{all:?}")),
                }
            })
            .await;
        match waiting {
            Some(w) => (w, call),
            None => {
                let answer = call.await.unwrap();
                panic!(
                    "ran without waiting for an operator: answered {answer:?}; the page's title is now {:?}",
                    title(&self.agent, &self.sid).await
                );
            }
        }
    }

    pub(crate) async fn ok(&self, tool: &str, body: Value) {
        let (status, v) = self.agent.tool(&self.sid, tool, body).await;
        assert_eq!(status, StatusCode::OK, "{tool}: {v}");
    }

    pub(crate) async fn stop(self) {
        assert!(pending(&self.app, &self.cookie).await.is_empty());
        self.app.stop().await;
        drop(self.site);
    }
}

#[tokio::test]
async fn enter_in_a_field_or_type_with_submit_is_judged_by_the_forms_submit_button() {
    let on = open_on("keyboard-submit.html").await;
    on.waits_and_denied(
        "type",
        json!({ "selector": "#confirm", "text": "acme/site", "submit": true }),
        &["destructive_click", "Delete repository"],
    )
    .await;
    // Focused by a (harmless) click on the field, then Enter.
    on.ok("click", json!({ "selector": "#confirm" })).await;
    on.waits_and_denied(
        "press",
        json!({ "key": "Enter" }),
        &["submits its form with", "Delete repository"],
    )
    .await;
    on.stop().await;
}

#[tokio::test]
async fn tab_then_enter_or_space_on_a_destructive_button_waits() {
    let on = open_on("keyboard-focus.html").await;
    on.ok("click", json!({ "selector": "#start" })).await;
    // Tab only moves the focus: it runs at once.
    on.ok("press", json!({ "key": "Tab" })).await;
    for key in ["Enter", " "] {
        on.waits_and_denied(
            "press",
            json!({ "key": key }),
            &["destructive_click", "Delete repository"],
        )
        .await;
    }
    on.stop().await;
}

/// A page's keydown handler moves the focus from "Next" to "Delete
/// repository" while the key is down, so the key's keypress (on which
/// Enter presses the focused button) would land on the destructive one:
/// the key is judged again where it acts, once the page has handled its
/// keydown. Approved, it presses what was approved.
#[tokio::test]
async fn a_key_whose_keydown_moves_the_focus_is_judged_where_it_lands() {
    let on = open_on("keydown-moves-focus.html").await;
    let back_on_next = || async {
        on.ok("click", json!({ "selector": "#field" })).await;
        on.ok("press", json!({ "key": "Tab" })).await;
    };
    for key in ["Enter", " "] {
        back_on_next().await;
        on.waits_and_denied(
            "press",
            json!({ "key": key }),
            &["destructive_click", "Delete repository"],
        )
        .await;
    }
    back_on_next().await;
    let call = {
        let agent = on.agent.clone();
        let sid = on.sid.clone();
        tokio::spawn(async move { agent.tool(&sid, "press", json!({ "key": "Enter" })).await })
    };
    let (waiting, call) = on.approval_for(call).await;
    assert!(
        waiting["reasons"].to_string().contains("Delete repository"),
        "{waiting}"
    );
    let id = waiting["id"].as_str().unwrap();
    let (status, v) = decide(&on.app, &on.cookie, id, true).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, v) = call.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(title(&on.agent, &on.sid).await, "DELETED");
    on.stop().await;
}

/// Enter on a focused link leaves the page at its keydown, before the
/// second look at the focus; a focused button leaves at the keypress. Both
/// answer as pressed and land, every time.
#[tokio::test]
async fn enter_that_leaves_the_page_answers_as_pressed_and_lands() {
    let on = open_on("link-enter.html").await;
    for query in ["", "?button", "", "?button", "", "?button"] {
        let url = on.site.url(&format!("/hostile/link-enter.html{query}"));
        on.agent.navigate_ok(&on.sid, &url).await;
        on.ok("press", json!({ "key": "Enter" })).await;
        poll_title(&on, "LANDED").await;
    }
    on.stop().await;
}

/// `type`'s text moves the focus (the field's `input` handler) onto a
/// destructive button before its submit's Enter: judged where Enter lands.
/// An honest page that cancels Enter's keydown gets no keypress: the
/// key judged in two steps is still one key to the page.
#[tokio::test]
async fn a_submit_whose_text_moved_the_focus_waits_and_a_cancelled_enter_presses_nothing() {
    let on = open_on("keydown-moves-focus.html?input").await;
    on.waits_and_denied(
        "type",
        json!({ "selector": "#field", "text": "x", "submit": true }),
        &["destructive_click", "Delete repository"],
    )
    .await;
    on.stop().await;
    let on = open_on("keydown-moves-focus.html?prevent").await;
    for key in ["Enter", " "] {
        on.ok("press", json!({ "key": key })).await;
        assert_eq!(title(&on.agent, &on.sid).await, "Repository", "{key:?}");
    }
    // Not cancelled, a click presses "Next": the page works.
    on.ok("click", json!({ "selector": "#next" })).await;
    assert_eq!(title(&on.agent, &on.sid).await, "NEXT");
    on.stop().await;
}

/// Enter by other ways than `press`: `type` with `submit` on a focused
/// button presses it; a typed newline in a field submits its form; Enter
/// on a checkbox submits its form. Each is judged by what it presses.
#[tokio::test]
async fn type_with_submit_on_a_button_a_typed_newline_and_enter_on_a_checkbox_wait() {
    let on = open_on("keyboard-focus.html").await;
    on.waits_and_denied(
        "type",
        json!({ "selector": "#danger", "text": "x", "submit": true }),
        &["destructive_click", "Delete repository"],
    )
    .await;
    on.stop().await;
    let on = open_on("keyboard-submit.html").await;
    on.waits_and_denied(
        "type",
        json!({ "selector": "#confirm", "text": "\n" }),
        &["submits its form with", "Delete repository"],
    )
    .await;
    on.stop().await;
    let on = open_on("checkbox-enter.html").await;
    on.ok("press", json!({ "key": "Tab" })).await;
    on.waits_and_denied(
        "press",
        json!({ "key": "Enter" }),
        &["submits its form with", "Delete repository"],
    )
    .await;
    // Space toggles the box: nothing is submitted, nothing waits.
    on.ok("press", json!({ "key": " " })).await;
    assert_eq!(title(&on.agent, &on.sid).await, "Repository");
    on.stop().await;
}

/// A label clicks its control; a form's default button may be an image
/// input: each is judged by what it sets off.
#[tokio::test]
async fn a_label_is_judged_by_its_control_and_enter_by_an_image_submit_button() {
    let on = open_on("label-for.html").await;
    on.waits_and_denied(
        "click",
        json!({ "selector": "#label" }),
        &["Delete repository"],
    )
    .await;
    on.stop().await;
    let on = open_on("image-submit.html").await;
    on.waits_and_denied(
        "type",
        json!({ "selector": "#q", "text": "x", "submit": true }),
        &["submits its form with", "Delete repository"],
    )
    .await;
    on.stop().await;
}

/// A select is judged by the option it chooses, named by value or text;
/// a harmless option runs at once.
#[tokio::test]
async fn a_select_is_judged_by_the_option_it_chooses() {
    let on = open_on("select-option.html").await;
    for values in [json!(["d"]), json!(["Delete repository"])] {
        on.waits_and_denied(
            "select",
            json!({ "selector": "#s", "values": values }),
            &["destructive_click", "Delete repository"],
        )
        .await;
    }
    on.ok("select", json!({ "selector": "#s", "values": ["r"] }))
        .await;
    assert_eq!(title(&on.agent, &on.sid).await, "Repository");
    on.stop().await;
}

/// `type` judges its target, and the keys go where the focus is: a target
/// that does not keep the focus is refused before a key is sent.
#[tokio::test]
async fn typing_into_a_target_that_does_not_keep_the_focus_is_refused() {
    let on = open_on("focus-elsewhere.html").await;
    let (status, v) = on
        .agent
        .tool(
            &on.sid,
            "type",
            json!({ "selector": "#note", "text": "hunter2" }),
        )
        .await;
    assert_ne!(status, StatusCode::OK, "{v}");
    assert!(v.to_string().contains("does not take the focus"), "{v}");
    assert_eq!(title(&on.agent, &on.sid).await, "Sign in", "typed");
    on.stop().await;
}

/// The gate's check and the action are one step: another call of the
/// same agent (a `press Tab` right behind a `press Enter`) cannot move the
/// focus between what the gate judged and what the key acts on.
#[tokio::test]
async fn a_call_queued_behind_a_judged_key_cannot_move_the_focus_in_between() {
    let on = open_on("keyboard-focus.html").await;
    on.ok("click", json!({ "selector": "#start" })).await;
    let press = |key: &'static str| {
        let agent = on.agent.clone();
        let sid = on.sid.clone();
        tokio::spawn(async move { agent.tool(&sid, "press", json!({ "key": key })).await })
    };
    // Both calls queue behind the tab lock, Enter first (the pauses only
    // order them; either order must end without a press unjudged).
    let live = on.app.live("acme", &on.sid).await;
    let tabs = live.tabs.lock().await;
    let enter = press("Enter");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let tab = press("Tab");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    drop(tabs);
    // Had Tab run first, Enter is judged on the button: denied.
    crate::helpers::wait_until("both calls to end", crate::helpers::PATIENCE, || async {
        for p in pending(&on.app, &on.cookie).await {
            decide(&on.app, &on.cookie, p["id"].as_str().unwrap(), false).await;
        }
        if enter.is_finished() && tab.is_finished() {
            Ok(())
        } else {
            Err("still running".to_owned())
        }
    })
    .await;
    assert_eq!(
        title(&on.agent, &on.sid).await,
        "Repository",
        "Enter pressed the button the gate never judged"
    );
    on.stop().await;
}

#[tokio::test]
async fn a_name_from_css_generated_content_is_read_as_the_browser_shows_it() {
    let on = open_on("generated-content.html").await;
    on.waits_and_denied(
        "click",
        json!({ "selector": "#danger" }),
        &["Delete organization"],
    )
    .await;
    on.stop().await;
}

#[tokio::test]
async fn a_button_in_a_closed_shadow_root_is_judged_by_selector_and_by_point() {
    let on = open_on("closed-shadow.html").await;
    on.waits_and_denied(
        "click",
        json!({ "selector": "#host" }),
        &["Delete repository"],
    )
    .await;
    let (x, y) = centre_of(&on.app, &on.sid, "#host").await;
    on.waits_and_denied("click", json!({ "x": x, "y": y }), &["Delete repository"])
        .await;
    on.stop().await;
}

/// Chromium's hit test takes a point of the document; the press's point
/// is the viewport's. On a page scrolled by 200 px, "Delete repository"
/// sits where a gate that mixed the two would read "Next".
#[tokio::test]
async fn a_click_on_a_scrolled_page_is_judged_where_the_button_goes_down() {
    let on = open_on("scrolled.html").await;
    // The page names itself once it has scrolled.
    crate::gate::wait_title(&on.agent, &on.sid, "Repository").await;
    // "Delete repository" is at 300–360 px of the viewport, "Next" at 100–160.
    on.waits_and_denied(
        "click",
        json!({ "x": 100, "y": 330 }),
        &["Delete repository"],
    )
    .await;
    on.waits_and_denied(
        "click",
        json!({ "selector": "#danger" }),
        &["Delete repository"],
    )
    .await;
    // What is harmless at its point runs at once (the gate is not merely
    // holding every click on a scrolled page).
    on.ok("click", json!({ "x": 100, "y": 130 })).await;
    assert_eq!(title(&on.agent, &on.sid).await, "Repository");
    on.stop().await;
}

#[tokio::test]
async fn rewritten_prototypes_do_not_change_what_the_gate_reads() {
    let on = open_on("prototype-lies.html").await;
    on.waits_and_denied(
        "click",
        json!({ "selector": "#danger" }),
        &["Delete organization"],
    )
    .await;
    on.stop().await;
}

#[tokio::test]
async fn a_transparent_overlay_and_a_click_through_label_are_judged_by_what_the_click_hits() {
    let on = open_on("overlay.html").await;
    // The agent asks for "Next"; the click would land on the overlay.
    on.waits_and_denied("click", json!({ "selector": "#next" }), &["Delete account"])
        .await;
    on.stop().await;
    let on = open_on("pointer-events.html").await;
    on.waits_and_denied(
        "click",
        json!({ "selector": "#label" }),
        &["Delete account"],
    )
    .await;
    on.stop().await;
}

#[tokio::test]
async fn a_click_into_a_same_origin_frame_is_judged_by_the_button_inside() {
    let on = open_on("frame-same-origin.html").await;
    // The button fills the frame's top-left 300×100 (the frame is at 0, 0).
    on.waits_and_denied("click", json!({ "x": 150, "y": 50 }), &["Delete account"])
        .await;
    on.stop().await;
}

#[tokio::test]
async fn a_click_on_pay_in_a_cross_site_frame_or_on_a_canvas_waits() {
    let on = open_on("frame-cross-site.html").await;
    // The frame's page (its own site) says when it is there.
    crate::gate::wait_title(&on.agent, &on.sid, "Checkout ready").await;
    // Out of process, the gate follows the click into the frame and sees
    // "Pay now": the payment rule (more in `hostile_frames.rs`).
    on.waits_and_denied(
        "click",
        json!({ "x": 150, "y": 50 }),
        &["payment_click", "Pay now"],
    )
    .await;
    on.stop().await;
    let on = open_on("canvas.html").await;
    on.waits_and_denied(
        "click",
        json!({ "x": 150, "y": 50 }),
        &["unknown_target", "canvas"],
    )
    .await;
    on.stop().await;
}

#[tokio::test]
async fn an_approved_click_whose_target_changed_while_waiting_waits_again() {
    let on = open_on("swap-during-approval.html").await;
    let call = {
        let agent = on.agent.clone();
        let sid = on.sid.clone();
        tokio::spawn(async move {
            agent
                .tool(&sid, "click", json!({ "x": 150, "y": 40 }))
                .await
        })
    };
    let first = one_pending(&on.app, &on.cookie, &on.sid).await;
    assert!(
        first["reasons"].to_string().contains("Delete draft"),
        "{first}"
    );
    // The page swaps the button while the operator reads the approval.
    {
        let live = on.app.live("acme", &on.sid).await;
        let mut tabs = live.tabs.lock().await;
        let page = live.page(&mut tabs).await.unwrap();
        cordon::cdp::evaluate(&page, "window.swap()").await.unwrap();
    }
    let id = first["id"].as_str().unwrap().to_owned();
    let (status, v) = decide(&on.app, &on.cookie, &id, true).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    // Approved for "Delete draft", it finds "Pay now": it waits again.
    let second =
        crate::helpers::wait_until("a second approval", crate::helpers::PATIENCE, || async {
            let all = pending(&on.app, &on.cookie).await;
            match all.as_slice() {
                [one] if one["id"] != first["id"] => Ok(one.clone()),
                _ => Err(format!("{all:?}")),
            }
        })
        .await;
    assert!(
        second["reasons"].to_string().contains("Pay now"),
        "{second}"
    );
    let id = second["id"].as_str().unwrap().to_owned();
    let (status, v) = decide(&on.app, &on.cookie, &id, false).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let answer = call.await.unwrap();
    assert_error(&answer, StatusCode::FORBIDDEN, "denied_by_operator");
    assert_eq!(title(&on.agent, &on.sid).await, "Drafts", "nothing ran");
    on.stop().await;
}

/// Approves the one pending approval of `on`'s session, the click `call`
/// still waiting; answers the next approval that follows it (the click
/// judged anew found something else), failing if the call ends first.
async fn approve_and_expect_another(
    on: &On,
    first: &Value,
    call: &tokio::task::JoinHandle<(StatusCode, Value)>,
) -> Value {
    let id = first["id"].as_str().unwrap().to_owned();
    let (status, v) = decide(&on.app, &on.cookie, &id, true).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    crate::helpers::wait_until("a second approval", crate::helpers::PATIENCE, || async {
        assert!(
            !call.is_finished(),
            "the click ran on the first approval; the title is now {:?}",
            title(&on.agent, &on.sid).await
        );
        let all = pending(&on.app, &on.cookie).await;
        match all.as_slice() {
            [one] if one["id"] != first["id"] => Ok(one.clone()),
            _ => Err(format!("{all:?}")),
        }
    })
    .await
}

/// An approval is bound to what the operator saw: another row's "Delete"
/// (the rows swapped while it waited) or the same button on another page
/// (the agent navigated while it waited) waits again.
#[tokio::test]
async fn an_approval_holds_for_the_row_and_page_it_was_given_on_only() {
    let on = open_on("same-name.html").await;
    let click = |on: &On| {
        let agent = on.agent.clone();
        let sid = on.sid.clone();
        tokio::spawn(async move {
            agent
                .tool(&sid, "click", json!({ "x": 100, "y": 40 }))
                .await
        })
    };
    // The rows swap while the operator reads the approval.
    let call = click(&on);
    let first = one_pending(&on.app, &on.cookie, &on.sid).await;
    {
        let live = on.app.live("acme", &on.sid).await;
        let mut tabs = live.tabs.lock().await;
        let page = live.page(&mut tabs).await.unwrap();
        cordon::cdp::evaluate(&page, "window.swap()").await.unwrap();
    }
    let second = approve_and_expect_another(&on, &first, &call).await;
    let (status, v) = decide(&on.app, &on.cookie, second["id"].as_str().unwrap(), false).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_error(
        &call.await.unwrap(),
        StatusCode::FORBIDDEN,
        "denied_by_operator",
    );
    assert_eq!(
        title(&on.agent, &on.sid).await,
        "Repositories",
        "nothing ran"
    );

    // The agent goes to another repository's page while the operator
    // reads the approval of this one's.
    on.agent
        .navigate_ok(
            &on.sid,
            &on.site.url("/hostile/same-name.html?only=scratch"),
        )
        .await;
    let call = click(&on);
    let first = one_pending(&on.app, &on.cookie, &on.sid).await;
    on.agent
        .navigate_ok(
            &on.sid,
            &on.site.url("/hostile/same-name.html?only=production"),
        )
        .await;
    let second = approve_and_expect_another(&on, &first, &call).await;
    let (status, v) = decide(&on.app, &on.cookie, second["id"].as_str().unwrap(), false).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_error(
        &call.await.unwrap(),
        StatusCode::FORBIDDEN,
        "denied_by_operator",
    );
    assert_eq!(
        title(&on.agent, &on.sid).await,
        "Repositories",
        "nothing ran"
    );
    on.stop().await;
}

#[tokio::test]
async fn raw_input_of_run_task_double_and_right_clicks_and_keys_is_judged_as_the_action() {
    use cordon::audit::Actor;
    use cordon::cdp::{Button, MouseKind};
    use cordon::sessions::{LiveInput, Tool, ToolCall};
    let on = open_on("gesture.html").await;
    let live = on.app.live("acme", &on.sid).await;
    let agent = Actor::Agent(crate::helpers::key_id(&on.app, "acme").await);
    // As run_task sends a double click: down/up twice at the button.
    let mouse = |kind, clicks| {
        ToolCall::new(Tool::Input(LiveInput::Mouse {
            kind,
            x: 150.0,
            y: 40.0,
            button: Button::Left,
            buttons: i64::from(matches!(kind, MouseKind::Down)),
            click_count: clicks,
            modifiers: 0,
        }))
    };
    let down = {
        let sessions = on.app.state.sessions.clone();
        let live = live.clone();
        let agent = agent.clone();
        let call = mouse(MouseKind::Down, 1);
        tokio::spawn(async move {
            sessions
                .run_tool(&live, agent, cordon::audit::Surface::Task, call)
                .await
        })
    };
    let waiting = one_pending(&on.app, &on.cookie, &on.sid).await;
    assert!(
        waiting["reasons"].to_string().contains("Delete forever"),
        "{waiting}"
    );
    let id = waiting["id"].as_str().unwrap().to_owned();
    decide(&on.app, &on.cookie, &id, false).await;
    let got = down.await.unwrap();
    assert!(
        matches!(got, Err(cordon::sessions::ToolError::DeniedByOperator(_))),
        "{got:?}"
    );
    assert_eq!(title(&on.agent, &on.sid).await, "Files");
    // A key that types, into nothing dangerous, runs at once; a move does.
    let moved = on
        .app
        .state
        .sessions
        .run_tool(
            &live,
            agent.clone(),
            cordon::audit::Surface::Task,
            mouse(MouseKind::Move, 0),
        )
        .await;
    assert!(moved.is_ok(), "{moved:?}");

    // Approved, a double click's own events share the approval: its up,
    // its second down and up. Another click at the same point, a moment
    // later, is another click: it waits again.
    let run = |call: ToolCall| {
        let sessions = on.app.state.sessions.clone();
        let live = live.clone();
        let agent = agent.clone();
        tokio::spawn(async move {
            sessions
                .run_tool(&live, agent, cordon::audit::Surface::Task, call)
                .await
        })
    };
    let down = run(mouse(MouseKind::Down, 1));
    let waiting = one_pending(&on.app, &on.cookie, &on.sid).await;
    decide(&on.app, &on.cookie, waiting["id"].as_str().unwrap(), true).await;
    let got = down.await.unwrap();
    assert!(got.is_ok(), "{got:?}");
    for (kind, clicks) in [(MouseKind::Up, 1), (MouseKind::Down, 2), (MouseKind::Up, 2)] {
        let got = tokio::time::timeout(crate::helpers::PATIENCE, run(mouse(kind, clicks)))
            .await
            .expect("the double click's own events do not wait")
            .unwrap();
        assert!(got.is_ok(), "{kind:?} {clicks}: {got:?}");
    }
    let again = run(mouse(MouseKind::Down, 1));
    let waiting = one_pending(&on.app, &on.cookie, &on.sid).await;
    decide(&on.app, &on.cookie, waiting["id"].as_str().unwrap(), false).await;
    let got = again.await.unwrap();
    assert!(
        matches!(got, Err(cordon::sessions::ToolError::DeniedByOperator(_))),
        "another click shared the approval: {got:?}"
    );
    on.stop().await;
}

/// The hover tricks: each page shows a harmless "Next" until the pointer is
/// over it, and "Delete repository" under the pointer (`:hover` generated
/// content, a `:hover` rule showing another button, a `mouseover` handler
/// replacing the button). `visible`: the selector of what shows before
/// the hover. The point is inside the button, away from the pointer's
/// start.
const HOVER_PAGES: [(&str, &str); 3] = [
    ("hover-generated-content.html", "#go"),
    ("hover-display-swap.html", "#next"),
    ("hover-handler-swap.html", "#go"),
];

/// A click by selector and by point on `page`, each in a fresh session
/// (the pointer never there before): waits, judged by what the pointer
/// is over.
async fn a_click_on_a_hover_swap_waits(page: &str, visible: &str) {
    for body in [
        json!({ "selector": visible }),
        json!({ "x": 250, "y": 140 }),
    ] {
        let on = open_on(page).await;
        let waiting = on
            .waits_and_denied("click", body.clone(), &["Delete repository"])
            .await;
        println!("{page} {body}: {}", waiting["reasons"]);
        on.stop().await;
    }
}

#[tokio::test]
async fn a_label_that_changes_on_hover_by_generated_content_is_judged_under_the_pointer() {
    let (page, visible) = HOVER_PAGES[0];
    a_click_on_a_hover_swap_waits(page, visible).await;
}

#[tokio::test]
async fn a_button_a_hover_rule_shows_in_place_of_another_is_judged_under_the_pointer() {
    let (page, visible) = HOVER_PAGES[1];
    a_click_on_a_hover_swap_waits(page, visible).await;
}

#[tokio::test]
async fn a_button_a_mouseover_handler_swaps_in_is_judged_under_the_pointer() {
    let (page, visible) = HOVER_PAGES[2];
    a_click_on_a_hover_swap_waits(page, visible).await;
}

#[tokio::test]
async fn run_tasks_raw_button_down_on_a_hover_swap_is_judged_under_the_pointer() {
    use cordon::audit::Actor;
    use cordon::cdp::{Button, MouseKind};
    use cordon::sessions::{LiveInput, Tool, ToolCall};
    for (page, _) in HOVER_PAGES {
        // As run_task sends a double or right click: the button goes down
        // at the point, with no move before it.
        for (button, buttons) in [(Button::Left, 1), (Button::Right, 2)] {
            let on = open_on(page).await;
            let live = on.app.live("acme", &on.sid).await;
            let down = {
                let sessions = on.app.state.sessions.clone();
                let call = ToolCall::new(Tool::Input(LiveInput::Mouse {
                    kind: MouseKind::Down,
                    x: 250.0,
                    y: 140.0,
                    button,
                    buttons,
                    click_count: 1,
                    modifiers: 0,
                }));
                let agent = Actor::Agent(crate::helpers::key_id(&on.app, "acme").await);
                tokio::spawn(async move {
                    sessions
                        .run_tool(&live, agent, cordon::audit::Surface::Task, call)
                        .await
                })
            };
            let (waiting, down) = on.approval_for(down).await;
            println!("{page} {button:?} down: {}", waiting["reasons"]);
            assert!(
                waiting["reasons"].to_string().contains("Delete repository"),
                "{page} {button:?}: {waiting}"
            );
            let id = waiting["id"].as_str().unwrap().to_owned();
            let (status, v) = decide(&on.app, &on.cookie, &id, false).await;
            assert_eq!(status, StatusCode::OK, "{v}");
            let got = down.await.unwrap();
            assert!(
                matches!(got, Err(cordon::sessions::ToolError::DeniedByOperator(_))),
                "{page} {button:?}: {got:?}"
            );
            assert_eq!(title(&on.agent, &on.sid).await, "Wizard", "{page}");
            on.stop().await;
        }
    }
}

#[tokio::test]
async fn script_navigation_and_open_redirects_cannot_take_an_operator_session_off_its_domains() {
    let site = site::start().await;
    let allow = format!("{},localhost:{}", site.allow(), site.addr.port());
    let app = crate::helpers::session_app(crate::helpers::Backend::Sqlite, &allow, &[]).await;
    let agent = app.agent("acme").await;
    let (_, token, _) = crate::grants::granted(&app, &agent, &["127.0.0.1"], true).await;
    let (status, opened) = crate::grants::open_operator(&agent, &["127.0.0.1"], &token).await;
    assert_eq!(status, StatusCode::CREATED, "{opened}");
    let sid = opened["session_id"].as_str().unwrap().to_owned();
    let page = site.url("/hostile/script-navigation.html");
    agent.navigate_ok(&sid, &page).await;

    // Each refusal is audited with its host only (never the URL).
    let refusals = |n: usize| {
        let app = &app;
        async move {
            crate::helpers::wait_until(
                &format!("{n} refusals"),
                crate::helpers::PATIENCE,
                || async {
                    let events = crate::gate::audit(app).await;
                    let mine: Vec<_> = events
                        .into_iter()
                        .filter(|e| e.action == "navigation.refused")
                        .collect();
                    if mine.len() >= n {
                        Ok(mine)
                    } else {
                        Err(format!("{mine:?}"))
                    }
                },
            )
            .await
        }
    };

    // The click is harmless to the gate; the page's script then leaves.
    let (status, v) = agent
        .tool(&sid, "click", json!({ "selector": "#go" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    refusals(1).await;
    // A page that leaves by itself, on a timer.
    let (status, v) = agent
        .tool(&sid, "navigate", json!({ "url": format!("{page}?timer") }))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    refusals(2).await;
    // An open redirect on an allowed host: the hop off the list fails.
    let other = format!("http://localhost:{}/hostile/landing.html", site.addr.port());
    let answer = agent
        .tool(
            &sid,
            "navigate",
            json!({ "url": site.url(&format!("/redirect?to={}", urlencoding(&other))) }),
        )
        .await;
    assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "action_failed");
    assert!(
        answer.1.to_string().contains("ERR_BLOCKED_BY_CLIENT"),
        "{answer:?}"
    );
    let refused = refusals(3).await;
    for e in &refused {
        let params: Value = serde_json::from_str(&e.params).unwrap();
        assert_eq!(params["host"], "localhost", "{e:?}");
        assert!(!e.params.contains("landing"), "no URL: {e:?}");
    }
    assert_ne!(title(&agent, &sid).await, "LANDED");

    // A navigation the operator approved is let through.
    let (_, cookie) = app.operator_session("olive", Role::Operator).await;
    let nav = {
        let agent = agent.clone();
        let sid = sid.clone();
        let other = other.clone();
        tokio::spawn(async move { agent.tool(&sid, "navigate", json!({ "url": other })).await })
    };
    let waiting = one_pending(&app, &cookie, &sid).await;
    let id = waiting["id"].as_str().unwrap().to_owned();
    let (status, v) = decide(&app, &cookie, &id, true).await;
    assert_eq!(status, StatusCode::OK, "{v}");
    let (status, v) = nav.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(title(&agent, &sid).await, "LANDED");
    app.stop().await;
}

fn urlencoding(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A harmless "Next" whose click asks `confirm("Delete repository …?")`:
/// the click answers at once with the dialog (the page stops until it is
/// answered, and nothing else runs there meanwhile); OK is judged by the
/// dialog's message and waits, Cancel and an alert's OK run at once.
#[tokio::test]
async fn ok_on_a_confirm_dialog_is_judged_by_its_message() {
    let on = open_on("confirm-dialog.html").await;
    let (status, v) = on
        .agent
        .tool(&on.sid, "click", json!({ "selector": "#next" }))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["dialog_opened"]["type"], "confirm", "{v}");
    let message = v["dialog_opened"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("Delete repository acme/site?"), "{v}");
    // The page is stopped: a read is refused, with the dialog named.
    let read = on.agent.tool(&on.sid, "read_dom", json!({})).await;
    assert_error(&read, StatusCode::CONFLICT, "dialog_open");
    assert!(read.1.to_string().contains("Delete repository"), "{read:?}");
    let click = on
        .agent
        .tool(&on.sid, "click", json!({ "selector": "#hello" }))
        .await;
    assert_error(&click, StatusCode::CONFLICT, "dialog_open");
    // OK waits for an operator, by the message; denied, the dialog stays.
    on.waits_and_denied(
        "dialog",
        json!({ "accept": true }),
        &["destructive_click", "Delete repository acme/site?"],
    )
    .await;
    let (status, v) = on
        .agent
        .tool(&on.sid, "dialog", json!({ "accept": false }))
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["accepted"], false, "{v}");
    assert_eq!(v["dialog"]["type"], "confirm", "{v}");
    poll_title(&on, "KEPT").await;
    // Nothing is open now.
    let none = on
        .agent
        .tool(&on.sid, "dialog", json!({ "accept": true }))
        .await;
    assert_error(&none, StatusCode::CONFLICT, "no_dialog");
    // An alert's OK acts on nothing: it runs at once.
    let (status, v) = on
        .agent
        .tool(&on.sid, "click", json!({ "selector": "#hello" }))
        .await;
    assert_eq!(v["dialog_opened"]["type"], "alert", "{status} {v}");
    on.ok("dialog", json!({ "accept": true })).await;
    poll_title(&on, "GREETED").await;
    on.stop().await;
}

/// A page may submit a file input's form on its `change`: an upload is
/// judged by that form's submit button as well as by the input, and one
/// outside any form runs at once.
#[tokio::test]
async fn an_upload_is_judged_by_the_form_its_change_may_submit() {
    let on = open_on("upload-change.html").await;
    let file = json!([{ "name": "a.txt", "content_base64": "aGVsbG8=" }]);
    on.waits_and_denied(
        "upload",
        json!({ "selector": "#attach", "files": file }),
        &["submits its form with", "Delete repository"],
    )
    .await;
    on.ok("upload", json!({ "selector": "#avatar", "files": file }))
        .await;
    poll_title(&on, "AVATAR 1").await;
    on.stop().await;
}

/// A tab the page opens, which alerts on its own before any call has
/// listed it, is followed from its start: listed and focused at once (its
/// title is the browser's), calls on it are refused with the dialog, and
/// OK answers the alert.
#[tokio::test]
async fn a_popup_that_alerts_before_any_call_lists_it_is_known_to_have_its_dialog() {
    popup_alert_is_known("popup-alert.html").await;
}

/// The same when the popup alerts while its first document is parsed, a
/// few milliseconds after the tab exists: only a session attached to it
/// before it ran, and with `Page` enabled, hears of the dialog (or can
/// answer it).
#[tokio::test]
async fn a_popup_that_alerts_as_its_first_document_loads_is_known_to_have_its_dialog() {
    popup_alert_is_known("popup-alert.html?ms=now").await;
}

async fn popup_alert_is_known(page: &str) {
    use std::sync::atomic::Ordering;
    let on = open_on(page).await;
    on.ok("click", json!({ "selector": "#open" })).await;
    // The popup's script ran to its alert; nothing has asked for its tab.
    crate::helpers::wait_until("the popup's alert", crate::helpers::PATIENCE, || async {
        match on.site.hangs.load(Ordering::SeqCst) {
            0 => Err("no request of the popup yet".to_owned()),
            _ => Ok(()),
        }
    })
    .await;
    let (status, tabs) = on
        .agent
        .get(&format!("/api/sessions/{}/tabs", on.sid))
        .await;
    assert_eq!(status, StatusCode::OK, "{tabs}");
    let popup = tabs
        .as_array()
        .and_then(|l| l.iter().find(|t| t["active"] == false))
        .map(|t| t["tab_id"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no popup listed: {tabs}"));
    let (status, v) = on
        .agent
        .post(
            &format!("/api/sessions/{}/tabs/{popup}/focus", on.sid),
            json!({}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    // A dialog not known would stop the read until the call's bound.
    let read = on.agent.tool(&on.sid, "read_dom", json!({})).await;
    assert_error(&read, StatusCode::CONFLICT, "dialog_open");
    assert!(read.1.to_string().contains("Welcome"), "{read:?}");
    on.ok("dialog", json!({ "accept": true })).await;
    // The popup's script goes on: its title is the active tab's.
    crate::helpers::wait_until("the popup's title", crate::helpers::PATIENCE, || async {
        let (_, tabs) = on
            .agent
            .get(&format!("/api/sessions/{}/tabs", on.sid))
            .await;
        let active = tabs
            .as_array()
            .and_then(|l| l.iter().find(|t| t["active"] == true).cloned());
        match active {
            Some(t) if t["title"] == "Welcomed" => Ok(()),
            _ => Err(tabs.to_string()),
        }
    })
    .await;
    on.stop().await;
}

/// A popup's dialog stops the opener's calls too (one renderer): the
/// agent answers it by the popup's `tab_id` without focusing it, and the
/// opener's calls work again. A tab id that is not the session's is 404.
#[tokio::test]
async fn a_popups_dialog_is_answered_by_its_tab_id_without_focusing_it() {
    use std::sync::atomic::Ordering;
    let on = open_on("popup-alert.html").await;
    on.ok("click", json!({ "selector": "#open" })).await;
    crate::helpers::wait_until("the popup's alert", crate::helpers::PATIENCE, || async {
        match on.site.hangs.load(Ordering::SeqCst) {
            0 => Err("no request of the popup yet".to_owned()),
            _ => Ok(()),
        }
    })
    .await;
    // The opener's read is refused, naming the popup's tab.
    let read =
        crate::helpers::wait_until("the opener stopped", crate::helpers::PATIENCE, || async {
            let read = on.agent.tool(&on.sid, "read_dom", json!({})).await;
            if read.0 == StatusCode::CONFLICT {
                Ok(read)
            } else {
                Err(format!("{read:?}"))
            }
        })
        .await;
    assert_error(&read, StatusCode::CONFLICT, "dialog_open");
    let (_, tabs) = on
        .agent
        .get(&format!("/api/sessions/{}/tabs", on.sid))
        .await;
    let popup = tabs
        .as_array()
        .and_then(|l| l.iter().find(|t| t["active"] == false))
        .map(|t| t["tab_id"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no popup listed: {tabs}"));
    assert!(read.1.to_string().contains(&popup), "{read:?}");
    // The active tab has none; tabs that are not the session's are 404.
    let none = on
        .agent
        .tool(&on.sid, "dialog", json!({ "accept": true }))
        .await;
    assert_error(&none, StatusCode::CONFLICT, "no_dialog");
    for bad in ["0123456789ABCDEF0123456789ABCDEF", "../x", ""] {
        let v = on
            .agent
            .tool(&on.sid, "dialog", json!({ "accept": true, "tab_id": bad }))
            .await;
        assert_error(&v, StatusCode::NOT_FOUND, "tab_not_found");
    }
    let (status, v) = on
        .agent
        .tool(
            &on.sid,
            "dialog",
            json!({ "accept": true, "tab_id": popup }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{v}");
    assert_eq!(v["dialog"]["tab_id"], popup.as_str(), "{v}");
    // The opener works again; the popup's script went on, unfocused.
    on.ok("read_dom", json!({})).await;
    crate::helpers::wait_until("the popup's title", crate::helpers::PATIENCE, || async {
        let (_, tabs) = on
            .agent
            .get(&format!("/api/sessions/{}/tabs", on.sid))
            .await;
        let shown = tabs.as_array().and_then(|l| {
            l.iter()
                .find(|t| t["tab_id"] == popup.as_str() && t["active"] == false)
                .cloned()
        });
        match shown {
            Some(t) if t["title"] == "Welcomed" => Ok(()),
            _ => Err(tabs.to_string()),
        }
    })
    .await;
    on.stop().await;
}

/// Waits until the page's title is `want` (a dialog's answer lets the
/// page's script go on after the call answered).
async fn poll_title(on: &On, want: &str) {
    crate::helpers::wait_until("the page's title", crate::helpers::PATIENCE, || async {
        let t = title(&on.agent, &on.sid).await;
        if t == want { Ok(()) } else { Err(t) }
    })
    .await;
}

/// A page that answers for its own HTML (a getter on `outerHTML` that
/// returns 30 MB of lies) and sets a 5 MB title: `read_dom` reads the
/// real document in an isolated world (the getter is never called) and
/// answers within its bound; the title comes back cut.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_lies_about_its_html_and_swells_its_title_is_read_within_bounds() {
    let on = open_on("lying-dom.html").await;
    let (status, dom) = on
        .agent
        .tool(&on.sid, "read_dom", json!({ "max_chars": 5000 }))
        .await;
    assert_eq!(status, StatusCode::OK, "{dom}");
    let html = dom["html"].as_str().unwrap();
    // The real document (its swollen title first), not the getter's lie.
    assert!(
        html.starts_with("<html><head><title>TTTT"),
        "{}",
        &html[..html.len().min(300)]
    );
    assert!(!html.contains("LIE"), "the page's getter answered");
    assert_eq!(dom["truncated_to"], 5000, "{}", dom["truncated_to"]);
    assert!(html.chars().count() <= 5000);
    let (status, nav) = on.agent.tool(&on.sid, "reload", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let title = nav["title"].as_str().unwrap_or_default();
    assert!(
        !title.is_empty() && title.chars().count() <= cordon::cdp::MAX_TITLE_CHARS,
        "{}",
        title.chars().count()
    );
    let (_, tabs) = on
        .agent
        .get(&format!("/api/sessions/{}/tabs", on.sid))
        .await;
    assert!(
        tabs.to_string().len() < 20_000,
        "{}",
        tabs.to_string().len()
    );
    // The page's getter was never called by Cordon.
    let live = on.app.live("acme", &on.sid).await;
    let mut tabs = live.tabs.lock().await;
    let page = live.page(&mut tabs).await.unwrap();
    let lied = cordon::cdp::evaluate(&page, "window.lied || 0")
        .await
        .unwrap();
    assert_eq!(lied, 0, "the page's outerHTML getter was called");
}
