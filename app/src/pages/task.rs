//! One task's trace: what was asked, how it ended, and every step (the
//! model's thought, the action, its outcome, the screenshot it saw).

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::tasks::{TaskTrace, get_task};
use crate::components::time::utc;
use crate::components::{ErrorView, on_change};

/// The task page.
#[component]
pub fn Task() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.get().get("id").unwrap_or_default();
    let trace = Resource::new(id, get_task);
    on_change(&["sessions"], move || trace.refetch());
    view! {
        <section class="page">
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || trace.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(t) => view! { <Trace t/> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Trace(t: TaskTrace) -> impl IntoView {
    let task = t.task;
    let crumbs = task.session.clone().map(|s| {
        view! { <a href=format!("/sessions/{s}")><code>{s.clone()}</code></a>" / " }
    });
    view! {
        <p class="crumbs"><a href="/sessions">"Sessions"</a>" / "{crumbs}"task"</p>
        <h1>"Task "<span class="badge" data-status=task.status.clone() id="task-status">{task.status.clone()}</span></h1>
        {task.waiting.then(|| view! {
            <p class="notice" id="task-waiting">
                "The model asked for a person. "
                {task.session.clone().map(|s| view! {
                    <a href=format!("/sessions/{s}/live")>"Open the live view"</a>
                })}
                ", take control, do what it could not, then hand back: the task goes on."
            </p>
        })}
        <dl class="facts">
            <dt>"Instruction"</dt><dd class="instruction">{t.instruction}</dd>
            <dt>"Result"</dt><dd id="task-summary">{t.summary.unwrap_or_else(|| "—".into())}{t.error.map(|e| format!(" ({e})"))}</dd>
            <dt>"Tenant"</dt><dd>{task.tenant}</dd>
            <dt>"Steps"</dt><dd>{task.steps}" of at most "{t.max_steps}</dd>
            <dt>"Started (UTC)"</dt><dd>{utc(task.created_at)}</dd>
            <dt>"Ended (UTC)"</dt><dd>{task.ended_at.map_or_else(|| "running".to_owned(), utc)}</dd>
        </dl>
        <h2>"Trace"</h2>
        {if t.steps.is_empty() {
            view! { <p class="empty">"No step yet: the model has not answered."</p> }.into_any()
        } else {
            view! {
                <ol class="trace" id="trace">
                    {t.steps.into_iter().map(|s| {
                        let ok = s.outcome == "ok" || s.outcome == "finished";
                        view! {
                            <li class="step" data-step=s.n>
                                {s.screenshot_id.clone().map(|id| view! {
                                    <a href=format!("/ui/screenshots/{id}") target="_blank" rel="noopener">
                                        <img src=format!("/ui/screenshots/{id}/thumb") alt=format!("What the model saw at step {}", s.n) loading="lazy" width="320" height="180"/>
                                    </a>
                                })}
                                <div class="step-body">
                                    <p class="step-head"><strong>{format!("Step {}", s.n)}</strong>" "
                                        <span class="badge" data-status=if ok { "ok" } else { "refused" }>{s.outcome.clone()}</span>
                                        <span class="muted">{s.model_ms.map(|ms| format!(" · model {ms} ms"))}{s.prompt_tokens.zip(s.completion_tokens).map(|(i, o)| format!(" · {i}+{o} tokens"))}</span>
                                    </p>
                                    {s.thought.map(|th| view! { <p class="thought">{th}</p> })}
                                    {s.action.map(|a| view! { <p><code>{a}</code></p> })}
                                </div>
                            </li>
                        }
                    }).collect_view()}
                </ol>
            }.into_any()
        }}
    }
}
