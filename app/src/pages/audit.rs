//! The audit log: filters (tenant, session, actor, action prefix, time
//! range) and keyset pages (newest, older, newer, oldest) from the URL, so
//! a view can be bookmarked; each row expands to its redacted params;
//! "Verify chain" names the first broken seq.

use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

use crate::api::audit::{
    AuditCursor, AuditQuery, AuditRow, AuditVerification, VerifyAudit, query_audit,
};
use crate::api::auth::Role;
use crate::components::layout::Me;
use crate::components::{ErrorView, on_change};

/// Rows per page.
const PAGE: i64 = 50;
const FIELDS: [(&str, &str, &str); 6] = [
    ("tenant", "Tenant", "any"),
    ("session", "Session", "s_…"),
    ("actor", "Actor", "operator:op_…, agent:k_…, cli"),
    ("action", "Action starts with", "grant., tool.navigate"),
    ("from", "From (UTC)", "2026-11-23T09:00"),
    ("to", "Until (UTC)", "2026-11-23T18:00"),
];

/// The audit page.
#[component]
pub fn Audit() -> impl IntoView {
    let q = use_query_map();
    let query = move || {
        let q = q.get();
        let get = |k: &str| q.get(k).filter(|v| !v.trim().is_empty());
        let num = |k: &str| get(k).and_then(|v| v.parse::<i64>().ok());
        AuditQuery {
            tenant: get("tenant"),
            session: get("session"),
            actor: get("actor"),
            action: get("action"),
            from: get("from"),
            to: get("to"),
            cursor: match (num("before"), num("after"), get("page").as_deref()) {
                (Some(b), _, _) => AuditCursor::Before(b),
                (_, Some(a), _) => AuditCursor::After(a),
                (_, _, Some("oldest")) => AuditCursor::Oldest,
                _ => AuditCursor::Newest,
            },
            limit: num("limit").unwrap_or(PAGE),
        }
    };
    let page = Resource::new(query, query_audit);
    let verify = ServerAction::<VerifyAudit>::new();
    let me = expect_context::<Me>();
    let (fresh, set_fresh) = signal(false);
    on_change(&["audit"], move || set_fresh.set(true));
    // A link to a page of the same filters.
    let link = move |cursor: &str| {
        let q = query();
        let mut parts: Vec<String> = [
            ("tenant", q.tenant),
            ("session", q.session),
            ("actor", q.actor),
            ("action", q.action),
            ("from", q.from),
            ("to", q.to),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k}={}", urlencode(&v))))
        .collect();
        if q.limit != PAGE {
            parts.push(format!("limit={}", q.limit));
        }
        if !cursor.is_empty() {
            parts.push(cursor.to_owned());
        }
        if parts.is_empty() {
            "/audit".to_owned()
        } else {
            format!("/audit?{}", parts.join("&"))
        }
    };
    view! {
        <section class="page">
            <h1>"Audit log"</h1>
            <div class="toolbar">
                <ActionForm action=verify>
                    <button type="submit" class="primary" id="verify">"Verify chain"</button>
                </ActionForm>
                {move || me.may(Role::Admin).then(|| {
                    let q = query();
                    let href = match q.tenant.filter(|t| !t.is_empty()) {
                        Some(t) => format!("/ui/audit/export?tenant={}", urlencode(&t)),
                        None => "/ui/audit/export".to_owned(),
                    };
                    view! {
                        <a class="button" id="audit-export" href=href download
                            title="Every event (or this tenant's) as JSON Lines with its chain hashes; cordon audit verify --file checks it offline">
                            "Export (JSON Lines)"
                        </a>
                    }
                })}
                <span id="verify-result" role="status">
                    {move || verify.value().get().map(|res| match res {
                        Ok(v) => view! { <span class:ok=v.intact class:bad=!v.intact>{verification_text(&v)}</span> }.into_any(),
                        Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    })}
                </span>
            </div>
            <form method="get" class="filters" id="audit-filters">
                {FIELDS.iter().map(|(name, label, hint)| {
                    let name = *name;
                    view! {
                        <label>{*label}" "
                            <input name=name placeholder=*hint maxlength="200"
                                value=move || q.get().get(name).unwrap_or_default()/>
                        </label>
                    }
                }).collect_view()}
                <button type="submit">"Filter"</button>
                <a href="/audit" class="reset">"Clear"</a>
            </form>
            <Show when=move || fresh.get()>
                <p class="notice" role="status"><a href=move || link("")>"New events were written: show the newest"</a></p>
            </Show>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || page.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(p) if p.rows.is_empty() => view! { <p class="empty" id="no-events">"No event matches these filters."</p> }.into_any(),
                    Ok(p) => {
                        let first = p.rows.first().map_or(0, |r| r.seq);
                        let last = p.rows.last().map_or(0, |r| r.seq);
                        let pager = view! {
                            <nav class="pager" aria-label="Pages">
                                <a href=link("") class:disabled=!p.has_newer aria-disabled=(!p.has_newer).to_string() id="page-newest">"« Newest"</a>
                                <a href=link(&format!("after={first}")) class:disabled=!p.has_newer aria-disabled=(!p.has_newer).to_string() id="page-newer">"‹ Newer"</a>
                                <a href=link(&format!("before={last}")) class:disabled=!p.has_older aria-disabled=(!p.has_older).to_string() id="page-older">"Older ›"</a>
                                <a href=link("page=oldest") class:disabled=!p.has_older aria-disabled=(!p.has_older).to_string() id="page-oldest">"Oldest »"</a>
                            </nav>
                        };
                        view! { {pager}<AuditTable rows=p.rows/> }.into_any()
                    }
                })}
            </Transition>
        </section>
    }
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
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
        <table class="list audit" id="audit-events">
            <thead>
                <tr>
                    <th>"Seq"</th><th>"Time (UTC)"</th><th>"Tenant"</th><th>"Session"</th>
                    <th>"Actor"</th><th>"Action"</th><th>"Outcome"</th><th>"Details"</th>
                </tr>
            </thead>
            <tbody>
                {rows.into_iter().map(|r| view! {
                    <tr data-seq=r.seq>
                        <td class="num">{r.seq}</td>
                        <td>{r.ts.replace('T', " ").trim_end_matches('Z').to_owned()}</td>
                        <td>{r.tenant.unwrap_or_default()}</td>
                        <td>{r.session.map(|s| view! { <a href=format!("/sessions/{s}")><code>{s.clone()}</code></a> })}</td>
                        <td>{r.actor}</td>
                        <td>{r.action}</td>
                        <td>{r.outcome}</td>
                        <td>
                            <details>
                                <summary>"params"</summary>
                                <pre><code>{r.params}</code></pre>
                                <p class="muted small">"hash "<code>{r.hash_prefix}</code>"…"</p>
                            </details>
                        </td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}
