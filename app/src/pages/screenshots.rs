//! A session's screenshots: a timeline of thumbnails; a click (or Enter)
//! opens the full image, arrow keys step through, Escape closes. Images come
//! from `/ui/screenshots/<id>`, served to logged-in operators by id only.

use leptos::ev;
use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::screenshots::{ShotView, screenshot_timeline};
use crate::components::ErrorView;
use crate::components::time::utc;

fn thumb(id: &str) -> String {
    format!("/ui/screenshots/{}/thumb", urlencoding(id))
}

fn full(id: &str) -> String {
    format!("/ui/screenshots/{}", urlencoding(id))
}

/// Ids hold `:`; keep them one path segment.
fn urlencoding(id: &str) -> String {
    id.replace(':', "%3A")
}

/// The screenshots page.
#[component]
pub fn Screenshots() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.get().get("id").unwrap_or_default();
    let timeline = Resource::new(id, screenshot_timeline);
    view! {
        <section class="page">
            <p class="crumbs">
                <a href="/sessions">"Sessions"</a>" / "
                <a href=move || format!("/sessions/{}", id())><code>{id}</code></a>" / screenshots"
            </p>
            <h1>"Screenshots"</h1>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || timeline.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(t) => {
                        let kept = match (t.record.as_str(), t.retained_until) {
                            ("audit", Some(until)) => format!("Recording mode audit: kept until {} UTC.", utc(until)),
                            ("audit", None) => "Recording mode audit.".to_owned(),
                            ("transient", _) => "Recording mode transient: the newest 50 are kept while the session runs, none after.".to_owned(),
                            _ => "Recording is off for this session.".to_owned(),
                        };
                        view! {
                            <p class="muted" id="retention">{kept}</p>
                            {if t.shots.is_empty() {
                                view! { <p class="empty" id="no-shots">"No screenshot is kept for this session."</p> }.into_any()
                            } else {
                                view! { <Timeline shots=t.shots/> }.into_any()
                            }}
                        }.into_any()
                    }
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Timeline(shots: Vec<ShotView>) -> impl IntoView {
    let count = shots.len();
    let shots = StoredValue::new(shots);
    let (open, set_open) = signal(None::<usize>);
    let step = move |delta: isize| {
        set_open.update(|o| {
            if let Some(i) = o {
                let next = (*i as isize + delta).clamp(0, count as isize - 1);
                *i = next as usize;
            }
        })
    };
    let handle = window_event_listener(ev::keydown, move |e| {
        if open.get_untracked().is_none() {
            return;
        }
        match e.key().as_str() {
            "ArrowRight" => step(1),
            "ArrowLeft" => step(-1),
            "Escape" => set_open.set(None),
            _ => {}
        }
    });
    on_cleanup(move || handle.remove());
    view! {
        <ol class="timeline" id="timeline">
            {shots.get_value().into_iter().enumerate().map(|(i, s)| view! {
                <li>
                    <button type="button" class="shot" data-seq=s.seq
                        aria-label=format!("Screenshot {} taken {} UTC", s.seq, utc(s.taken_at))
                        on:click=move |_| set_open.set(Some(i))>
                        <img src=thumb(&s.id) alt="" loading="lazy" width="320"/>
                        <span class="shot-caption">"#"{s.seq}" · "{utc(s.taken_at)[11..].to_owned()}</span>
                    </button>
                </li>
            }).collect_view()}
        </ol>
        {move || open.get().map(|i| {
            let s = shots.with_value(|v| v[i].clone());
            view! {
                <div class="viewer" role="dialog" aria-modal="true" aria-label="Screenshot" id="viewer">
                    <div class="viewer-bar">
                        <button type="button" on:click=move |_| step(-1) disabled=i == 0 aria-label="Previous screenshot">"‹"</button>
                        <span id="viewer-caption">{format!("#{} of {count} · {} UTC", s.seq, utc(s.taken_at))}</span>
                        <button type="button" on:click=move |_| step(1) disabled=i + 1 == count aria-label="Next screenshot">"›"</button>
                        <a href=full(&s.id) target="_blank" rel="noopener">"Open image"</a>
                        <button type="button" class="close" on:click=move |_| set_open.set(None) aria-label="Close">"✕"</button>
                    </div>
                    <img src=full(&s.id) alt=format!("Screenshot {}", s.seq) id="viewer-image"/>
                </div>
            }
        })}
    }
}
