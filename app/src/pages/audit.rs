use leptos::prelude::*;

use crate::api::{AuditRow, AuditVerification, recent_audit, verify_audit};

/// Events listed per page load.
const LIMIT: i64 = 100;

/// The newest audit events and an on-demand chain verification.
#[component]
pub fn Audit() -> impl IntoView {
    let events = Resource::new(|| (), |_| recent_audit(LIMIT));
    let verify = Action::new(|_: &()| verify_audit());
    view! {
        <section class="page">
            <h1>"Audit log"</h1>
            <div class="toolbar">
                <button class="primary" id="verify" on:click=move |_| { verify.dispatch(()); }>
                    "Verify chain"
                </button>
                <span id="verify-result" role="status">
                    {move || verify.value().get().map(|res| match res {
                        Ok(v) => verification_text(&v),
                        Err(e) => format!("Verification failed: {e}"),
                    })}
                </span>
            </div>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || events.get().map(|res| match res {
                    Ok(rows) if rows.is_empty() => {
                        view! { <p class="muted">"No events yet."</p> }.into_any()
                    }
                    Ok(rows) => view! { <AuditTable rows/> }.into_any(),
                    Err(e) => view! { <p class="error" role="alert">{e.to_string()}</p> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

fn verification_text(v: &AuditVerification) -> String {
    if v.intact {
        format!("Chain intact: {} events verified.", v.events)
    } else {
        format!(
            "Chain broken at seq {}: {}",
            v.broken_seq.unwrap_or_default(),
            v.reason.clone().unwrap_or_default()
        )
    }
}

#[component]
fn AuditTable(rows: Vec<AuditRow>) -> impl IntoView {
    view! {
        <table class="audit" id="audit-events">
            <thead>
                <tr>
                    <th>"Seq"</th><th>"Time (UTC)"</th><th>"Tenant"</th><th>"Session"</th>
                    <th>"Actor"</th><th>"Action"</th><th>"Params"</th><th>"Outcome"</th><th>"Hash"</th>
                </tr>
            </thead>
            <tbody>
                {rows.into_iter().map(|r| view! {
                    <tr>
                        <td>{r.seq}</td>
                        <td>{r.ts}</td>
                        <td>{r.tenant.unwrap_or_default()}</td>
                        <td>{r.session.unwrap_or_default()}</td>
                        <td>{r.actor}</td>
                        <td>{r.action}</td>
                        <td><code>{r.params}</code></td>
                        <td>{r.outcome}</td>
                        <td><code>{r.hash_prefix}</code></td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}
