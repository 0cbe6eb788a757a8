use leptos::prelude::*;

use crate::api::{RecordingUsage, SystemStatus, get_status};

/// Health of the control plane, re-checked on demand.
#[component]
pub fn Overview() -> impl IntoView {
    let status = Resource::new(|| (), |_| get_status());
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
                    Err(e) => view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn StatusTable(s: SystemStatus) -> impl IntoView {
    let ok = |b: bool| if b { "ok" } else { "problem" };
    view! {
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
        <h2>"Recordings"</h2>
        <Recordings rows=s.recordings.clone()/>
    }
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
