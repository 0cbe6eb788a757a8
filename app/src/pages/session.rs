//! One session: what it is, its audit trail, its egress log, "End
//! session" (audited with the operator's id) and "Watch", the live view.

use leptos::prelude::*;
use leptos_router::hooks::use_params_map;

use crate::api::auth::Role;
use crate::api::live::ReleaseControl;
use crate::api::sessions::{EndSession, LiveLinkView, RevokeLiveLink, SessionDetail, get_session};
use crate::components::layout::Me;
use crate::components::time::utc;
use crate::components::{ActionError, ErrorView, on_change};

/// The session page.
#[component]
pub fn Session() -> impl IntoView {
    let params = use_params_map();
    let id = move || params.get().get("id").unwrap_or_default();
    let end = ServerAction::<EndSession>::new();
    let release = ServerAction::<ReleaseControl>::new();
    let revoke = ServerAction::<RevokeLiveLink>::new();
    let detail = Resource::new(
        move || {
            (
                id(),
                end.version().get(),
                release.version().get(),
                revoke.version().get(),
            )
        },
        |(id, _, _, _)| get_session(id),
    );
    on_change(&["sessions"], move || detail.refetch());
    let error = Signal::derive(move || {
        end.value()
            .get()
            .and_then(Result::err)
            .or_else(|| release.value().get().and_then(Result::err))
            .or_else(|| revoke.value().get().and_then(Result::err))
    });
    let me = expect_context::<Me>();
    view! {
        <section class="page">
            <p class="crumbs"><a href="/sessions">"Sessions"</a>" / "<code>{id}</code></p>
            <ActionError error/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || detail.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(d) => view! { <Detail d end release revoke may_end=Signal::derive(move || me.may(Role::Operator))/> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Detail(
    d: SessionDetail,
    end: ServerAction<EndSession>,
    release: ServerAction<ReleaseControl>,
    revoke: ServerAction<RevokeLiveLink>,
    may_end: Signal<bool>,
) -> impl IntoView {
    let s = d.session;
    let links = d.live_links.clone();
    let running = matches!(s.state.as_str(), "starting" | "ready");
    let sid = s.id.clone();
    view! {
        <h1>"Session "<span class="badge" data-status=s.state.clone() id="session-state">{s.state.clone()}</span></h1>
        <dl class="facts">
            <dt>"Tenant"</dt><dd>{s.tenant.clone()}</dd>
            <dt>"Mode"</dt><dd>{s.mode.clone()}{(!s.domains.is_empty()).then(|| format!(" ({})", s.domains.join(", ")))}</dd>
            <dt>"Recording"</dt><dd>{s.record.clone()}" · "<a href=format!("/sessions/{}/screenshots", s.id) id="screenshots-link">{d.screenshots}" screenshots kept"</a></dd>
            <dt>"Started (UTC)"</dt><dd>{utc(s.created_at)}</dd>
            <dt>"Ended (UTC)"</dt><dd>{s.closed_at.map_or_else(|| "—".to_owned(), utc)}{s.close_reason.clone().map(|r| format!(" · {r}"))}</dd>
            <dt>"Tool calls"</dt><dd>{s.tool_calls}</dd>
            <dt>"Control"</dt><dd id="control">{match d.control.clone() {
                Some(name) => format!("operator {name} has taken control: agent tool calls are refused until they hand back"),
                None if running => "the agent drives".to_owned(),
                None => "—".to_owned(),
            }}</dd>
        </dl>
        <div class="toolbar">
            {running.then(|| view! {
                <ActionForm action=end>
                    <input type="hidden" name="id" value=sid/>
                    <button type="submit" class="danger" id="end-session" disabled=move || !may_end.get()>"End session"</button>
                </ActionForm>
            })}
            {(running && d.control.is_some()).then(|| {
                let sid = s.id.clone();
                view! {
                    <ActionForm action=release>
                        <input type="hidden" name="session" value=sid/>
                        <button type="submit" id="hand-back" disabled=move || !may_end.get()>"Hand back to the agent"</button>
                    </ActionForm>
                }
            })}
            {running.then(|| view! {
                <a class="button" id="watch" href=format!("/sessions/{}/live", s.id)>
                    {if s.mode == "refresh" { "Open the browser" } else { "Watch / take control" }}
                </a>
            })}
        </div>
        {(!d.tasks.is_empty()).then(|| view! {
            <h2>"Tasks"</h2>
            <table class="list" id="session-tasks">
                <thead><tr><th>"Task"</th><th>"Status"</th><th>"Steps"</th><th>"Started (UTC)"</th></tr></thead>
                <tbody>
                    {d.tasks.iter().map(|t| view! {
                        <tr>
                            <td><a href=format!("/tasks/{}", t.id)><code>{t.id.clone()}</code></a></td>
                            <td><span class="badge" data-status=t.status.clone()>{t.status.clone()}</span></td>
                            <td class="num">{t.steps}</td>
                            <td>{utc(t.created_at)}</td>
                        </tr>
                    }).collect_view()}
                </tbody>
            </table>
        })}
        {(!links.is_empty()).then(|| view! { <LiveLinks links sid=s.id.clone() revoke may_revoke=may_end/> })}
        <h2>"Audit trail"</h2>
        {if d.audit.is_empty() {
            view! { <p class="empty">"No audited action yet."</p> }.into_any()
        } else {
            view! {
                <table class="list audit" id="session-audit">
                    <thead><tr><th>"Seq"</th><th>"Time (UTC)"</th><th>"Actor"</th><th>"Action"</th><th>"Params"</th><th>"Outcome"</th></tr></thead>
                    <tbody>
                        {d.audit.into_iter().map(|e| view! {
                            <tr><td>{e.seq}</td><td>{e.ts.replace('T', " ").trim_end_matches('Z').to_owned()}</td><td>{e.actor}</td><td>{e.action}</td><td><code>{e.params}</code></td><td>{e.outcome}</td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
            }.into_any()
        }}
        <h2>"Egress"</h2>
        {if d.egress.is_empty() {
            view! { <p class="empty">"No connection through the egress guard."</p> }.into_any()
        } else {
            view! {
                <table class="list" id="session-egress">
                    <thead><tr><th>"Time (UTC)"</th><th>"Host"</th><th>"Decision"</th><th>"Reason"</th><th>"Sent"</th><th>"Received"</th></tr></thead>
                    <tbody>
                        {d.egress.into_iter().map(|e| view! {
                            <tr>
                                <td>{utc(e.ts)}</td>
                                <td><code>{format!("{}:{}", e.host, e.port)}</code></td>
                                <td><span class="badge" data-status=if e.allowed { "allowed" } else { "refused" }>{if e.allowed { "allowed" } else { "refused" }}</span></td>
                                <td>{e.reason.unwrap_or_default()}</td>
                                <td class="num">{bytes(e.bytes_up)}</td>
                                <td class="num">{bytes(e.bytes_down)}</td>
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            }.into_any()
        }}
    }
}

/// The session's live links: who made them, what they allow, and
/// "Revoke" for the active ones (their open views end within a second).
#[component]
fn LiveLinks(
    links: Vec<LiveLinkView>,
    sid: String,
    revoke: ServerAction<RevokeLiveLink>,
    may_revoke: Signal<bool>,
) -> impl IntoView {
    view! {
        <h2>"Live links"</h2>
        <p class="muted">"Pages an agent handed its own users to watch this browser (control: and drive it, as the agent, through the risk gate)."</p>
        <table class="list" id="session-live-links">
            <thead><tr><th>"Link"</th><th>"Mode"</th><th>"State"</th><th>"Made by"</th><th>"Made (UTC)"</th><th>"Expires (UTC)"</th><th></th></tr></thead>
            <tbody>
                {links.into_iter().map(|l| {
                    let active = l.state == "active";
                    let (sid, id) = (sid.clone(), l.id.clone());
                    view! {
                        <tr data-link=l.id.clone()>
                            <td><code>{l.id.clone()}</code></td>
                            <td>{l.mode.clone()}</td>
                            <td><span class="badge" data-status=l.state.clone()>{l.state.clone()}</span></td>
                            <td><code>{format!("agent:{}", l.key_id)}</code></td>
                            <td>{utc(l.created_at)}</td>
                            <td>{utc(l.expires_at)}</td>
                            <td>{active.then(|| view! {
                                <ActionForm action=revoke>
                                    <input type="hidden" name="session" value=sid/>
                                    <input type="hidden" name="id" value=id/>
                                    <button type="submit" class="danger small" disabled=move || !may_revoke.get()>"Revoke"</button>
                                </ActionForm>
                            })}</td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}

fn bytes(n: i64) -> String {
    if n < 1024 {
        format!("{n} B")
    } else if n < 1_048_576 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{:.1} MiB", n as f64 / 1_048_576.0)
    }
}
