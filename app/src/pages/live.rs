//! A session's browser, live: the streamed view (drawn and driven by
//! `public/live.js`, which speaks the WebSocket protocol of
//! [`crate::api::live`]), who has control, and for a refresh session its
//! countdown and the save panel.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::live::{
    DomainPreviewView, SavedView, refresh_preview, save_refresh, session_totp, type_totp,
};
use crate::api::sessions::{SessionDetail, get_session};
use crate::components::time::{span, utc};
use crate::components::{ActionError, ErrorView};

/// The live page. The viewer is rendered from the id alone and never
/// again while the page stays (a refetch would reconnect it); it learns
/// the session's end from its socket. The header and the save panel read
/// the session once.
#[component]
pub fn Live() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.get().get("id").unwrap_or_default();
    let detail = Resource::new(id, get_session);
    view! {
        <section class="page live-page">
            <p class="crumbs">
                <a href="/sessions">"Sessions"</a>" / "
                <a href=move || format!("/sessions/{}", id())><code>{id}</code></a>" / live"
            </p>
            <Transition fallback=|| view! { <h1>"Live view"</h1> }>
                {move || detail.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(d) => view! { <Header d/> }.into_any(),
                })}
            </Transition>
            {move || view! { <Viewer id=id()/> }}
            <Transition fallback=|| ()>
                {move || detail.get().and_then(Result::ok).and_then(|d| {
                    let s = d.session;
                    (s.mode == "refresh" && matches!(s.state.as_str(), "starting" | "ready"))
                        .then(|| view! {
                            <CodePanel id=s.id.clone()/>
                            <SavePanel id=s.id domains=s.domains/>
                        })
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Header(d: SessionDetail) -> impl IntoView {
    let s = d.session;
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
                <span data-control>"Waiting for the browser…"</span>
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
                <div class="live-dialog" data-dialog role="alertdialog" aria-modal="false" aria-labelledby="live-dialog-kind" aria-describedby="live-dialog-message" hidden>
                    <p class="live-dialog-kind" id="live-dialog-kind" data-dialog-kind>"The page asks"</p>
                    <p class="live-dialog-message" id="live-dialog-message" data-dialog-message></p>
                    <input type="text" data-dialog-text aria-label="Your answer" autocomplete="off" spellcheck="false" hidden/>
                    <div class="live-dialog-buttons">
                        <button type="button" data-dialog-answer="cancel">"Cancel"</button>
                        <button type="button" class="primary" data-dialog-answer="ok">"OK"</button>
                    </div>
                    <p class="live-dialog-note" data-dialog-note>"The page is stopped until the dialog is answered."</p>
                </div>
                <div class="live-focus" data-focus-hint hidden>"Keyboard captured · "<button type="button" data-blur>"Release (Shift+Esc)"</button></div>
            </div>
            <p class="live-error" data-error role="alert" hidden></p>
        </div>
    }
}

/// A refresh session's second-factor seeds: "Type the code for <label>"
/// types the current code into the focused field of the remote page.
#[component]
fn CodePanel(id: String) -> impl IntoView {
    let sid = StoredValue::new(id.clone());
    let seeds = Resource::new(move || sid.get_value(), session_totp);
    let typed = Action::new(move |label: &String| {
        let (s, l) = (sid.get_value(), label.clone());
        async move { type_totp(s, l).await }
    });
    let error = Signal::derive(move || typed.value().get().and_then(Result::err));
    view! {
        <Transition fallback=|| ()>
            {move || seeds.get().and_then(Result::ok).map(|list| if list.is_empty() {
                view! {
                    <p class="muted code-note" id="no-codes">"Asked for a one-time code? Add the site's seed on the "<a href="/credentials">"Credentials"</a>" page, then reload this page: Cordon types the code for you."</p>
                }.into_any()
            } else {
                view! {
                    <section class="code-panel" id="code-panel" aria-labelledby="code-title">
                        <h2 id="code-title">"One-time codes"</h2>
                        <p class="muted">"Click into the code field in the browser above, then:"</p>
                        <div class="toolbar">
                            {list.into_iter().map(|t| {
                                let label = t.label.clone();
                                view! {
                                    <button type="button" data-type-code=t.label.clone() disabled=move || typed.pending().get()
                                        on:click=move |_| { typed.dispatch(label.clone()); }>
                                        {format!("Type the code for {}", t.label)}
                                    </button>
                                }
                            }).collect_view()}
                            <span class="form-status" role="status" aria-live="polite" id="code-status">
                                {move || typed.value().get().and_then(Result::ok).map(|n| format!("Typed {n} digits."))}
                            </span>
                        </div>
                        <ActionError error/>
                    </section>
                }.into_any()
            })}
        </Transition>
    }
}

/// Choose domains, review what would be stored (names and flags, never
/// values), save, and see what changed against the previous login.
#[component]
fn SavePanel(id: String, domains: Vec<String>) -> impl IntoView {
    let chosen = RwSignal::new(
        domains
            .iter()
            .map(|d| (d.clone(), true))
            .collect::<Vec<_>>(),
    );
    let picked = move || {
        chosen
            .get()
            .into_iter()
            .filter(|(_, on)| *on)
            .map(|(d, _)| d)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let sid = StoredValue::new(id);
    let preview = Action::new(move |domains: &String| {
        let (s, d) = (sid.get_value(), domains.clone());
        async move { refresh_preview(s, d).await }
    });
    let save = Action::new(move |domains: &String| {
        let (s, d) = (sid.get_value(), domains.clone());
        async move { save_refresh(s, d).await }
    });
    let preview_error = Signal::derive(move || preview.value().get().and_then(Result::err));
    let save_error = Signal::derive(move || save.value().get().and_then(Result::err));
    let saved = move || save.value().get().and_then(Result::ok);
    view! {
        <section class="save-panel" id="save-panel" aria-labelledby="save-title">
            <h2 id="save-title">"Save the login"</h2>
            {move || match saved() {
                Some(report) => view! { <Saved report/> }.into_any(),
                None => view! {
                    <fieldset class="domains">
                        <legend>"Domains (and their subdomains) to save"</legend>
                        {domains.iter().enumerate().map(|(i, d)| {
                            let d = d.clone();
                            view! {
                                <label class="check">
                                    <input type="checkbox" name="domain" value=d.clone()
                                        prop:checked=move || chosen.get().get(i).is_some_and(|c| c.1)
                                        on:change=move |ev| {
                                            let on = event_target_checked(&ev);
                                            chosen.update(|c| if let Some(x) = c.get_mut(i) { x.1 = on });
                                        }/>
                                    <code>{d}</code>
                                </label>
                            }
                        }).collect_view()}
                    </fieldset>
                    <div class="toolbar">
                        <button type="button" id="review-save" disabled=move || picked().is_empty() || preview.pending().get()
                            on:click=move |_| { preview.dispatch(picked()); }>
                            {move || if preview.pending().get() { "Reading the browser…" } else { "Review what will be saved" }}
                        </button>
                        <button type="button" class="primary" id="save-login" disabled=move || picked().is_empty() || save.pending().get()
                            on:click=move |_| { save.dispatch(picked()); }>
                            {move || if save.pending().get() { "Saving…" } else { "Save to the vault and end the session" }}
                        </button>
                    </div>
                    <ActionError error=preview_error/>
                    <ActionError error=save_error/>
                    {move || preview.value().get().and_then(Result::ok).map(|rows| view! { <Preview rows/> })}
                }.into_any(),
            }}
        </section>
    }
}

#[component]
fn Preview(rows: Vec<DomainPreviewView>) -> impl IntoView {
    view! {
        <div id="save-preview">
            {rows.into_iter().map(|d| {
                let empty = d.cookies.is_empty();
                view! {
                    <h3><code>{d.domain.clone()}</code></h3>
                    {if empty {
                        view! { <p class="empty">"No cookie for "<code>{d.domain.clone()}</code>" yet: log in first. Saving keeps the previous login for it."</p> }.into_any()
                    } else {
                        view! {
                            <table class="list" data-preview=d.domain.clone()>
                                <thead><tr><th>"Cookie"</th><th>"Domain"</th><th>"Path"</th><th>"Expires (UTC)"</th><th>"Flags"</th></tr></thead>
                                <tbody>
                                    {d.cookies.into_iter().map(|c| {
                                        let mut flags = Vec::new();
                                        if c.http_only { flags.push("HttpOnly".to_owned()); }
                                        if c.secure { flags.push("Secure".to_owned()); }
                                        if let Some(s) = c.same_site { flags.push(format!("SameSite={s}")); }
                                        view! {
                                            <tr><td><code>{c.name}</code></td><td>{c.domain}</td><td>{c.path}</td>
                                            <td>{c.expires.map_or_else(|| "end of session".to_owned(), utc)}</td><td>{flags.join(" · ")}</td></tr>
                                        }
                                    }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any()
                    }}
                    {(!d.origins.is_empty()).then(|| view! {
                        <p class="muted">"localStorage: "
                            {d.origins.into_iter().map(|o| format!("{} ({})", o.origin, o.keys.join(", "))).collect::<Vec<_>>().join("; ")}
                        </p>
                    })}
                }
            }).collect_view()}
        </div>
    }
}

#[component]
fn Saved(report: Vec<SavedView>) -> impl IntoView {
    let list = |v: &[String]| {
        if v.is_empty() {
            "—".to_owned()
        } else {
            v.join(", ")
        }
    };
    view! {
        <div id="save-result" role="status">
            <p class="ok">"Saved. The session has ended; operator-mode sessions with a grant now get this login."</p>
            <table class="list" id="save-diff">
                <thead><tr><th>"Domain"</th><th>"Stored"</th><th>"Added"</th><th>"Removed"</th><th>"Changed"</th></tr></thead>
                <tbody>
                    {report.into_iter().map(|d| view! {
                        <tr data-domain=d.domain.clone()>
                            <td><code>{d.domain.clone()}</code></td>
                            <td>{if d.stored {
                                format!(
                                    "{} {}, {} localStorage {}{}",
                                    d.cookies,
                                    if d.cookies == 1 { "cookie" } else { "cookies" },
                                    d.storage,
                                    if d.storage == 1 { "item" } else { "items" },
                                    if d.replaced { " (replaced the previous login)" } else { " (new)" }
                                )
                            } else {
                                "nothing: no cookie, previous login kept".to_owned()
                            }}</td>
                            <td class="added">{list(&d.added)}</td>
                            <td>{list(&d.removed)}</td>
                            <td>{list(&d.changed)}{(!d.expiry_changed.is_empty()).then(|| format!(" (new expiry: {})", d.expiry_changed.join(", ")))}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
            <p><a href="/credentials">"Back to the credentials"</a></p>
        </div>
    }
}
