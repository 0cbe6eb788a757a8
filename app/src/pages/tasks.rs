//! Tasks (`run_task`) of every tenant, newest first. Those whose model
//! called for an operator (`call_user()`) come first, each with the way to
//! its live view: take control there, do what the model could not, hand
//! back, and the task goes on. Live: starts, steps and ends show without a
//! reload.

use leptos::prelude::*;

use crate::api::tasks::{TaskLine, list_tasks};
use crate::components::time::{ago, span};
use crate::components::{ErrorView, on_change};

/// The tasks page.
#[component]
pub fn Tasks() -> impl IntoView {
    let list = Resource::new(|| (), |_| list_tasks());
    on_change(&["sessions"], move || list.refetch());
    view! {
        <section class="page">
            <h1>"Tasks"</h1>
            <p class="muted">"Whole tasks agents gave to the model loop (run_task). Open one for its trace: every step's thought, action, outcome and the screenshot the model saw."</p>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || list.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(l) if l.tasks.is_empty() => view! {
                        <p class="empty" id="no-tasks">"No task yet. Tasks appear here as agents start them (POST /api/tasks or the MCP tool browser_run_task)."</p>
                    }.into_any(),
                    Ok(l) => {
                        let now = l.now;
                        let (waiting, rest): (Vec<TaskLine>, Vec<TaskLine>) =
                            l.tasks.into_iter().partition(|t| t.waiting);
                        view! {
                            {(!waiting.is_empty()).then(|| view! {
                                <h2>"Waiting for an operator"</h2>
                                <div class="cards" id="waiting-tasks">
                                    {waiting.into_iter().map(|t| view! { <WaitingCard t now/> }).collect_view()}
                                </div>
                            })}
                            {(!rest.is_empty()).then(|| view! {
                            <table class="list" id="tasks">
                                <thead><tr>
                                    <th>"Task"</th><th>"Tenant"</th><th>"Session"</th><th>"Started"</th>
                                    <th>"Took"</th><th>"Steps"</th><th>"Status"</th>
                                </tr></thead>
                                <tbody>
                                    {rest.into_iter().map(|t| view! {
                                        <tr data-task=t.id.clone() data-status=t.status.clone()>
                                            <td><a href=format!("/tasks/{}", t.id)><code>{t.id.clone()}</code></a></td>
                                            <td>{t.tenant.clone()}</td>
                                            <td>{t.session.clone().map(|s| view! {
                                                <a href=format!("/sessions/{s}")><code>{s.clone()}</code></a>
                                            })}</td>
                                            <td>{ago(t.created_at, now)}</td>
                                            <td>{span(t.ended_at.unwrap_or(now) - t.created_at)}</td>
                                            <td class="num">{t.steps}</td>
                                            <td><span class="badge" data-status=t.status.clone()>{t.status.clone()}</span></td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                            })}
                        }.into_any()
                    }
                })}
            </Transition>
        </section>
    }
}

/// A task whose model asked for a person.
#[component]
fn WaitingCard(t: TaskLine, now: i64) -> impl IntoView {
    view! {
        <article class="card pending" data-task=t.id.clone()>
            <header>
                <span class="badge" data-status="waiting">"waiting"</span>" "
                <a href=format!("/tasks/{}", t.id)><code>{t.id.clone()}</code></a>
                <span class="muted">" · "{t.tenant.clone()}" · step "{t.steps}" · started "{ago(t.created_at, now)}</span>
            </header>
            <p>"The model asked for a person. Open the live view, take control, do what it could not (a captcha, a second factor), then hand back: the task goes on."</p>
            {t.session.map(|s| view! {
                <p><a class="button primary" href=format!("/sessions/{s}/live")>"Open the live view"</a></p>
            })}
        </article>
    }
}
