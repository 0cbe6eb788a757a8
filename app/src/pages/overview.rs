use leptos::prelude::*;

use crate::api::health::{RecordingUsage, ReplicaLine, SystemStatus, get_status};
use crate::components::time::{now_ms, span, utc};
use crate::components::{ErrorView, on_change};

/// Health of the control plane, re-checked on demand.
#[component]
pub fn Overview() -> impl IntoView {
    let status = Resource::new(|| (), |_| get_status());
    on_change(&["sessions", "grants", "credentials"], move || {
        status.refetch()
    });
    let (checks, set_checks) = signal(1u32);
    let recheck = move |_| {
        set_checks.update(|n| *n += 1);
        status.refetch();
    };
    view! {
        <section class="page">
            <h1>"Overview"</h1>
            <div class="toolbar">
                <button class="primary" id="recheck" on:click=recheck>"Check again"</button>
                <span class="muted" id="check-count">{move || format!("checks: {}", checks.get())}</span>
            </div>
            <Transition fallback=|| view! { <p class="muted">"Checking…"</p> }>
                {move || status.get().map(|res| match res {
                    Ok(s) => view! { <StatusTable s/> }.into_any(),
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn StatusTable(s: SystemStatus) -> impl IntoView {
    let ok = |b: bool| if b { "ok" } else { "problem" };
    let count = |state: &str| {
        s.sessions
            .iter()
            .find(|(st, _)| st == state)
            .map_or(0, |(_, n)| *n)
    };
    let running = count("starting") + count("ready") + count("closing");
    let ended = count("closed") + count("failed");
    let chain = match &s.last_verification {
        None => view! { <span class="muted">"not verified since start"</span> }.into_any(),
        Some(v) if v.intact => view! { <span class="ok-text">{format!("intact ({} events)", v.events)}</span> }.into_any(),
        Some(v) => view! { <span class="bad-text">{format!("broken at seq {}", v.broken_seq.unwrap_or_default())}</span> }.into_any(),
    };
    let now = now_ms();
    view! {
        <div class="tiles" id="tiles">
            <a class="tile" href="/sessions" id="tile-sessions">
                <span class="tile-n">{running}</span>
                <span class="tile-l">"sessions running"</span>
                <span class="tile-s">{format!("{} ready · {} starting · {} ended in 24 h", count("ready"), count("starting"), ended)}</span>
            </a>
            <a class="tile" href="/grants" id="tile-grants" class:attention=s.pending_grants != 0>
                <span class="tile-n">{s.pending_grants}</span>
                <span class="tile-l">"grant requests waiting"</span>
                <span class="tile-s">"approve or deny on the Grants page"</span>
            </a>
            <div class="tile" id="tile-pool">
                <span class="tile-n">{format!("{}/{}", s.pool_ready, s.pool_size)}</span>
                <span class="tile-l">"warm browsers"</span>
                <span class="tile-s">{format!("sandbox driver: {}", s.driver)}</span>
            </div>
            <a class="tile" href="/audit" id="tile-audit">
                <span class="tile-n">{s.audit_events}</span>
                <span class="tile-l">"audit events"</span>
                <span class="tile-s">"chain: "{chain}</span>
            </a>
        </div>
        <h2>"Credentials expiring within 7 days"</h2>
        {if s.expiring.is_empty() {
            view! { <p class="empty" id="expiring-none">"None: every stored credential is good for at least a week."</p> }.into_any()
        } else {
            view! {
                <table class="list" id="expiring">
                    <thead><tr><th>"Tenant"</th><th>"Domain"</th><th>"First cookie expires"</th></tr></thead>
                    <tbody>
                        {s.expiring.iter().map(|c| {
                            let e = c.earliest_expiry.unwrap_or_default();
                            view! {
                                <tr>
                                    <td>{c.tenant.clone()}</td>
                                    <td><code>{c.domain.clone()}</code></td>
                                    <td class="warn">{if e <= now { format!("expired {} UTC", utc(e)) } else { format!("in {} ({} UTC)", span(e - now), utc(e)) }}</td>
                                </tr>
                            }
                        }).collect_view()}
                    </tbody>
                </table>
            }.into_any()
        }}
        <h2>"Health"</h2>

        <table class="status" id="status">
            <tbody>
                <tr>
                    <th>"Database"</th>
                    <td>{s.database.clone()}</td>
                    <td class=ok(s.database_ok) data-check="database">{ok(s.database_ok)}</td>
                </tr>
                <tr>
                    <th>"Chromium"</th>
                    <td><code>{s.chromium_path.clone()}</code></td>
                    <td class=ok(s.chromium_ok) data-check="chromium">{ok(s.chromium_ok)}</td>
                </tr>
                <tr>
                    <th>"Audit log"</th>
                    <td>{format!("{} events", s.audit_events)}</td>
                    <td></td>
                </tr>
                <tr>
                    <th>"Version"</th>
                    <td>{s.version.clone()}</td>
                    <td></td>
                </tr>
            </tbody>
        </table>
        <p class="muted">"Checked at " <time id="checked-at">{s.checked_at.clone()}</time></p>
        <Replicas rows=s.replicas.clone() now/>
        <h2>"Recordings"</h2>
        <Recordings rows=s.recordings.clone()/>
    }
}

/// The control planes sharing this database, shown once there is more
/// than one: which is up, which runs the housekeeping, what each runs.
#[component]
fn Replicas(rows: Vec<ReplicaLine>, now: i64) -> impl IntoView {
    if rows.len() < 2 {
        return ().into_any();
    }
    let up = rows.iter().filter(|r| r.state == "up").count();
    view! {
        <h2>"Replicas"</h2>
        <p class="muted" id="replicas-summary">
            {format!("{up} of {} up; any replica answers for the others' sessions.", rows.len())}
        </p>
        <table class="list" id="replicas">
                <thead>
                    <tr>
                        <th>"Replica"</th>
                        <th>"State"</th>
                        <th>"Sessions"</th>
                        <th>"Last heartbeat"</th>
                        <th>"Up since (UTC)"</th>
                        <th>"Version"</th>
                    </tr>
                </thead>
                <tbody>
                    {rows
                        .into_iter()
                        .map(|r| {
                            let status = match r.state.as_str() {
                                "up" => "active",
                                "lost" => "failed",
                                _ => "closed",
                            };
                            view! {
                                <tr data-replica=r.name.clone()>
                                    <td>
                                        <code>{r.name.clone()}</code>
                                        {(r.this || r.leader).then(|| view! {
                                            <div class="replica-roles">
                                                {r.this.then(|| view! { <span class="badge" data-role="this">"this page"</span> " " })}
                                                {r.leader.then(|| view! { <span class="badge" data-status="active" data-role="leader" title="runs the reaper and the clean-up jobs">"housekeeping"</span> })}
                                            </div>
                                        })}
                                    </td>
                                    <td><span class="badge" data-status=status>{r.state.clone()}</span></td>
                                    <td>{r.running}</td>
                                    <td>{format!("{} ago", span(now - r.heartbeat_at))}</td>
                                    <td>{utc(r.started_at)}</td>
                                    <td>{r.version.clone()}</td>
                                </tr>
                            }
                            // Erased: the nested row type is deep enough to
                            // reach the compiler's query-depth limit.
                            .into_any()
                        })
                        .collect_view()}
                </tbody>
            </table>
    }
    .into_any()
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Each tenant's screenshots on disk against its quota.
#[component]
fn Recordings(rows: Vec<RecordingUsage>) -> impl IntoView {
    if rows.is_empty() {
        return view! {
            <p class="muted" id="recordings-empty">"No tenant yet: recordings appear here per tenant."</p>
        }
        .into_any();
    }
    view! {
        <table class="status" id="recordings">
            <tbody>
                {rows
                    .into_iter()
                    .map(|r| {
                        let pct = r
                            .used_bytes
                            .saturating_mul(100)
                            .checked_div(r.quota_bytes)
                            .map_or(100, |p| p.min(100));
                        let full = pct >= 90;
                        view! {
                            <tr data-tenant=r.tenant.clone()>
                                <th>{r.tenant.clone()}</th>
                                <td>
                                    {format!("{} of {}", mib(r.used_bytes), mib(r.quota_bytes))}
                                    <meter min="0" max="100" value=pct.to_string() high="90"></meter>
                                </td>
                                <td class=if full { "problem" } else { "ok" }>
                                    {if full { "nearly full" } else { "ok" }}
                                </td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </tbody>
        </table>
    }
    .into_any()
}
