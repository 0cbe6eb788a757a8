//! The hostile-page corpus, continued: clicks whose target the tab's own
//! hit test does not reach. A button in a frame from another site runs in
//! a renderer of its own (out of process); the gate follows the click into
//! that frame and judges the button there, so a destructive one waits and
//! a harmless one runs, as in the tab itself. A point on a `::before` or
//! `::after` is judged by the button it belongs to. Each page shows what
//! was pressed in the tab's title.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::gate::{centre_of, wait_title};
use crate::hostile::{On, open_on};

/// The points of the two buttons of `oopif-inner.html` (Delete repository
/// above Next, 300×100 each) in the tab, framed by `frame-oopif.html`
/// (the frame's content box at 55, 45).
const DELETE: (f64, f64) = (205.0, 95.0);
const NEXT: (f64, f64) = (205.0, 195.0);
/// The same, one frame deeper (`?nested`: the inner frame's content box
/// at 20, 10 of the middle frame's).
const NESTED_DELETE: (f64, f64) = (225.0, 105.0);
const NESTED_NEXT: (f64, f64) = (225.0, 205.0);

/// The fields of `oopif-login.html` in the tab: user name above password.
const USER_FIELD: (f64, f64) = DELETE;
const PASSWORD_FIELD: (f64, f64) = NEXT;

fn at((x, y): (f64, f64)) -> Value {
    json!({ "x": x, "y": y })
}

/// Waits until the framed page says it has been drawn (a click on a
/// frame the browser has no picture of yet goes to the framing page, as
/// a person's would), and checks that the
/// browser runs `n` frames of the session out of process (each a target
/// of its own): a test that passed on a frame in the tab's process would
/// prove nothing.
async fn framed_out_of_process(on: &On, n: usize) {
    wait_title(&on.agent, &on.sid, "ready").await;
    let live = on.app.live("acme", &on.sid).await;
    let (mut tx, mut rx) = cordon::cdp::connect_raw(&live.sandbox.cdp_url)
        .await
        .unwrap();
    tx.send(json!({ "id": 1, "method": "Target.getTargets" }).to_string())
        .await
        .unwrap();
    let targets = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let msg: Value = serde_json::from_str(&rx.next().await.unwrap()).unwrap();
            if msg["id"] == 1 {
                return msg;
            }
        }
    })
    .await
    .unwrap();
    tx.close().await;
    let frames: Vec<&Value> = targets["result"]["targetInfos"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["type"] == "iframe")
        .collect();
    assert_eq!(frames.len(), n, "out-of-process frames: {targets}");
}

/// Clicks at `point` as the agent: it runs at once (nothing waits), and
/// the page's title then says `shows` (the click landed).
async fn runs(on: &On, point: (f64, f64), shows: &str) {
    on.ok("click", at(point)).await;
    wait_title(&on.agent, &on.sid, shows).await;
}

/// Asserts the approval was for the button itself (its name matched a
/// rule), not for a target the gate could not see.
fn judged_by_name(waiting: &Value) {
    let reasons = waiting["reasons"].to_string();
    assert!(
        reasons.contains("destructive_click") && !reasons.contains("unknown_target"),
        "{waiting}"
    );
}

#[tokio::test]
async fn a_destructive_button_in_an_out_of_process_frame_waits_and_a_harmless_one_runs() {
    let on = open_on("frame-oopif.html").await;
    framed_out_of_process(&on, 1).await;
    let waiting = on
        .waits_and_denied("click", at(DELETE), &["Delete repository"])
        .await;
    judged_by_name(&waiting);
    runs(&on, NEXT, "NEXT").await;

    // What following the click into the frame costs: the gate's reads at
    // "Next" with the follow and without it (the `<iframe>` read as
    // unknown), and at a point of the tab's own page, alternating.
    let live = on.app.live("acme", &on.sid).await;
    let cdp_url = live.sandbox.cdp_url.clone();
    let page = {
        let mut tabs = live.tabs.lock().await;
        live.page(&mut tabs).await.unwrap()
    };
    let bound = Duration::from_secs(10);
    let mut times: [Vec<Duration>; 3] = Default::default();
    for _ in 0..21 {
        for (i, (point, url)) in [(NEXT, cdp_url.as_str()), (NEXT, ""), ((600.0, 450.0), "")]
            .into_iter()
            .enumerate()
        {
            let locator = cordon::cdp::Locator::Point(point.0, point.1);
            let t = Instant::now();
            let (_, facts) = cordon::cdp::element_facts(&page, Some(&locator), bound, url)
                .await
                .unwrap();
            times[i].push(t.elapsed());
            let followed = facts["unknown"].is_null();
            assert_eq!(followed, i != 1, "{point:?} {url:?}: {facts}");
        }
    }
    let p50 = |v: &mut Vec<Duration>| {
        v.sort();
        format!("{:?} (min {:?})", v[v.len() / 2], v[0])
    };
    println!(
        "the gate's reads at a point, p50: followed into the frame {}, stopped at the <iframe> {}, on the tab's page {}",
        p50(&mut times[0]),
        p50(&mut times[1]),
        p50(&mut times[2])
    );
    on.stop().await;
}

#[tokio::test]
async fn keys_on_a_focus_inside_an_out_of_process_frame_are_judged_by_the_focused_button() {
    // "Next" on top, "Delete repository" below it.
    let on = open_on("frame-oopif.html?inner=oopif-inner.html%3Fnext-first").await;
    framed_out_of_process(&on, 1).await;
    // A click on "Next" runs, and leaves the focus on it, in the frame.
    runs(&on, DELETE, "NEXT").await;
    // Enter on it runs at once: the focus is read in the frame (before,
    // the tab's focus read as the `<iframe>`, unknown, and waited).
    on.ok("press", json!({ "key": "Enter" })).await;
    // Tab moves the focus to "Delete repository", still in the frame.
    on.ok("press", json!({ "key": "Tab" })).await;
    for key in ["Enter", " "] {
        let waiting = on
            .waits_and_denied("press", json!({ "key": key }), &["Delete repository"])
            .await;
        judged_by_name(&waiting);
    }
    on.stop().await;
}

#[tokio::test]
async fn typing_into_a_password_field_inside_an_out_of_process_frame_is_refused() {
    let on = open_on("frame-oopif.html?inner=oopif-login.html").await;
    framed_out_of_process(&on, 1).await;
    // The user name field: typing there runs at once.
    on.ok("click", at(USER_FIELD)).await;
    on.ok("type", json!({ "text": "alice" })).await;
    wait_title(&on.agent, &on.sid, "user 5 pw 0").await;
    // The password field: refused, as in the tab, by text and by key.
    on.ok("click", at(PASSWORD_FIELD)).await;
    let typed = on
        .agent
        .tool(&on.sid, "type", json!({ "text": "pw-canary-0f5e" }))
        .await;
    crate::helpers::assert_error(&typed, reqwest::StatusCode::FORBIDDEN, "denied_by_policy");
    let key = on.agent.tool(&on.sid, "press", json!({ "key": "p" })).await;
    crate::helpers::assert_error(&key, reqwest::StatusCode::FORBIDDEN, "denied_by_policy");
    // Nothing reached the field (the page reports each input's length).
    assert_eq!(crate::gate::title(&on.agent, &on.sid).await, "user 5 pw 0");
    on.stop().await;
}

#[tokio::test]
async fn a_lying_frame_out_of_process_is_judged_by_what_the_browser_shows() {
    // Rewritten prototypes say "Next"; the second button is in a closed
    // shadow root.
    let on = open_on("frame-oopif.html?inner=oopif-lies.html").await;
    framed_out_of_process(&on, 1).await;
    let waiting = on
        .waits_and_denied("click", at(DELETE), &["Delete organization"])
        .await;
    judged_by_name(&waiting);
    let waiting = on
        .waits_and_denied("click", at(NEXT), &["Delete repository"])
        .await;
    judged_by_name(&waiting);
    on.stop().await;
}

#[tokio::test]
async fn a_button_two_out_of_process_frames_deep_is_judged_by_its_name() {
    let on = open_on("frame-oopif.html?nested").await;
    framed_out_of_process(&on, 2).await;
    let waiting = on
        .waits_and_denied("click", at(NESTED_DELETE), &["Delete repository"])
        .await;
    judged_by_name(&waiting);
    runs(&on, NESTED_NEXT, "NEXT").await;
    on.stop().await;
}

#[tokio::test]
async fn a_point_on_a_pseudo_element_is_judged_by_the_button_it_belongs_to() {
    let on = open_on("pseudo-labels.html").await;
    // Each button is its pseudo-element's box: its centre is on the
    // generated text.
    let danger = centre_of(&on.app, &on.sid, "#danger").await;
    let waiting = on
        .waits_and_denied("click", at(danger), &["Delete organization"])
        .await;
    judged_by_name(&waiting);
    let next = centre_of(&on.app, &on.sid, "#next").await;
    runs(&on, next, "NEXT").await;
    on.stop().await;
}

#[tokio::test]
async fn a_scaled_frame_is_judged_where_the_click_lands_and_a_rotated_one_is_unknown() {
    // Drawn at half size, "Next" above "Delete repository": a point taken
    // into the frame without the scale would find "Next" where the click
    // lands on "Delete repository".
    let on = open_on("frame-oopif.html?scaled&inner=oopif-inner.html%3Fnext-first").await;
    framed_out_of_process(&on, 1).await;
    let waiting = on
        .waits_and_denied("click", at((122.5, 112.5)), &["Delete repository"])
        .await;
    judged_by_name(&waiting);
    runs(&on, (122.5, 62.5), "NEXT").await;
    on.stop().await;

    // Turned by 10°: the gate does not map points into it; even "Next"
    // (at the frame's centre) is unknown, never harmless.
    let on = open_on("frame-oopif.html?rotated").await;
    framed_out_of_process(&on, 1).await;
    on.waits_and_denied("click", at((255.0, 195.0)), &["unknown_target"])
        .await;
    on.stop().await;
}
