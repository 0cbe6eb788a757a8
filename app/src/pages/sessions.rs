//! The live sessions list: opened, changed and closed sessions show up
//! without a reload (server change notices, no polling). Filters live in
//! the URL, so a filtered view can be bookmarked.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::api::sessions::{SessionFilter, list_sessions};
use crate::components::time::{now_ms, span};
use crate::components::{ErrorView, on_change};

const STATES: [(&str, &str); 6] = [
    ("", "Running"),
    ("starting", "Starting"),
    ("ready", "Ready"),
    ("closing", "Closing"),
    ("closed", "Closed"),
    ("failed", "Failed"),
];

/// The sessions page.
#[component]
pub fn Sessions() -> impl IntoView {
    let query = use_query_map();
    let filter = move || {
        let q = query.get();
        SessionFilter {
            tenant: q.get("tenant").filter(|t| !t.is_empty()),
            state: q.get("state").filter(|s| !s.is_empty()),
        }
    };
    let list = Resource::new(filter, |f| list_sessions(f.tenant, f.state));
    on_change(&["sessions"], move || list.refetch());
    view! {
        <section class="page">
            <h1>"Sessions"</h1>
            <form method="get" class="filters" id="session-filters">
                <label>"Tenant "
                    <input name="tenant" value=move || filter().tenant.unwrap_or_default() maxlength="64" placeholder="any"/>
                </label>
                <label>"State "
                    <select name="state">
                        {STATES.iter().map(|(v, label)| {
                            let v = *v;
                            view! { <option value=v selected=move || filter().state.unwrap_or_default() == v>{*label}</option> }
                        }).collect_view()}
                    </select>
                </label>
                <button type="submit">"Filter"</button>
            </form>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || list.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(rows) if rows.is_empty() => view! {
                        <p class="empty" id="no-sessions">"No session matches. Sessions appear here as agents open them."</p>
                    }.into_any(),
                    Ok(rows) => {
                        let now = now_ms();
                        view! {
                            <table class="list" id="sessions">
                                <thead><tr>
                                    <th>"Session"</th><th>"Tenant"</th><th>"Mode"</th><th>"Recording"</th>
                                    <th>"Age"</th><th>"Tool calls"</th><th>"Last action"</th><th>"State"</th>
                                </tr></thead>
                                <tbody>
                                    {rows.into_iter().map(|s| view! {
                                        <tr data-session=s.id.clone() data-state=s.state.clone()>
                                            <td><a href=format!("/sessions/{}", s.id)><code>{s.id.clone()}</code></a></td>
                                            <td>{s.tenant.clone()}</td>
                                            <td>{s.mode.clone()}</td>
                                            <td>{s.record.clone()}</td>
                                            <td>{span(s.closed_at.unwrap_or(now) - s.created_at)}</td>
                                            <td class="num">{s.tool_calls}</td>
                                            <td>{s.last_action.clone().unwrap_or_else(|| "—".into())}</td>
                                            <td><span class="badge" data-status=s.state.clone()>{s.state.clone()}</span></td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any()
                    }
                })}
            </Transition>
        </section>
    }
}
