//! A session's browser, live: the streamed view (drawn and driven by
//! `public/live.js`, which speaks the WebSocket protocol of
//! [`crate::api::live`]), who has control, and for a refresh session its
//! countdown and the save panel.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::sessions::{SessionDetail, get_session};
use crate::components::time::span;
use crate::components::{ErrorView, on_change};

/// The live page.
#[component]
pub fn Live() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.get().get("id").unwrap_or_default();
    let detail = Resource::new(id, get_session);
    on_change(&["sessions"], move || detail.refetch());
    view! {
        <section class="page live-page">
            <p class="crumbs">
                <a href="/sessions">"Sessions"</a>" / "
                <a href=move || format!("/sessions/{}", id())><code>{id}</code></a>" / live"
            </p>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || detail.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(d) => view! { <Body d/> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Body(d: SessionDetail) -> impl IntoView {
    let s = d.session;
    let running = matches!(s.state.as_str(), "starting" | "ready");
    let refresh = s.mode == "refresh";
    let title = if refresh {
        "Log in".to_owned()
    } else {
        format!("Live view · {}", s.tenant)
    };
    view! {
        <h1>{title}" "<span class="badge" data-status=s.state.clone()>{s.state.clone()}</span></h1>
        {refresh.then(|| view! {
            <p class="muted">
                "Log in to "<strong>{s.domains.join(", ")}</strong>" for tenant "<strong>{s.tenant.clone()}</strong>
                " in the browser below, then save. Nothing typed here is recorded; the session ends "
                <Countdown deadline=s.deadline_at/>"."
            </p>
        })}
        {if running {
            view! { <Viewer id=s.id.clone()/> }.into_any()
        } else {
            view! {
                <p class="empty" id="live-ended">
                    "This session has ended"{s.close_reason.map(|r| format!(" ({r})"))}"; there is nothing to watch."
                </p>
            }.into_any()
        }}
    }
}

/// "in 14 min 32 s", counting down in the browser.
#[component]
fn Countdown(deadline: i64) -> impl IntoView {
    let now = RwSignal::new(crate::components::time::now_ms());
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(
            move || now.set(crate::components::time::now_ms()),
            std::time::Duration::from_secs(1),
        ) {
            on_cleanup(move || handle.clear());
        }
    });
    view! {
        <span class="countdown" id="countdown">
            {move || {
                let left = deadline - now.get();
                if left <= 0 { "now".to_owned() } else { format!("in {}", span(left)) }
            }}
        </span>
    }
}

/// The streamed browser and its controls; `live.js` brings them to life.
#[component]
fn Viewer(id: String) -> impl IntoView {
    view! {
        <div class="live" data-live-view data-session=id data-state="connecting" id="live-view">
            <div class="live-bar">
                <span class="conn" data-conn role="status" aria-live="polite">"Connecting…"</span>
                <button type="button" data-act="back" aria-label="Back" title="Back">"←"</button>
                <button type="button" data-act="forward" aria-label="Forward" title="Forward">"→"</button>
                <button type="button" data-act="reload" aria-label="Reload" title="Reload">"⟳"</button>
                <form class="live-url" data-url-form>
                    <input name="url" data-url type="text" aria-label="Address" placeholder="https://…" autocomplete="off" spellcheck="false"/>
                    <button type="submit">"Go"</button>
                </form>
                <span class="fps" data-fps title="Frames delivered per second">"0 fps"</span>
            </div>
            <div class="live-tabs" data-tabs role="tablist" aria-label="Tabs"></div>
            <div class="live-control">
                <span data-control>"Nobody has taken control: the agent drives."</span>
                <button type="button" data-take hidden>"Take control"</button>
                <button type="button" data-release hidden>"Hand back to the agent"</button>
                <label class="viewport">"Viewport "
                    <select data-viewport aria-label="Viewport size">
                        <option value="">"—"</option>
                        <option value="1280x720">"1280 × 720"</option>
                        <option value="1366x768">"1366 × 768"</option>
                        <option value="1920x1080">"1920 × 1080"</option>
                        <option value="390x844">"390 × 844 (phone)"</option>
                    </select>
                </label>
            </div>
            <div class="live-stage" data-stage>
                <canvas data-canvas width="1280" height="720" aria-label="The session's browser. Click to drive it and type; Shift+Escape gives the keyboard back."></canvas>
                <textarea class="live-keys" data-keys aria-label="Keyboard input for the session's browser" autocomplete="off" autocapitalize="off" spellcheck="false"></textarea>
                <div class="live-overlay" data-overlay>"Connecting…"</div>
                <div class="live-focus" data-focus-hint hidden>"Keyboard captured · "<button type="button" data-blur>"Release (Shift+Esc)"</button></div>
            </div>
            <p class="live-error" data-error role="alert" hidden></p>
        </div>
    }
}
