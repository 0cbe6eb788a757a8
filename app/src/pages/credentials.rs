//! Stored credentials per tenant and domain: metadata only, never a value.

use leptos::prelude::*;

use crate::api::auth::Role;
use crate::api::credentials::{CredentialView, DeleteCredential, list_credentials};
use crate::api::live::StartRefresh;
use crate::components::layout::Me;
use crate::components::time::{now_ms, span, utc};
use crate::components::{ActionError, ErrorView, on_change};

/// The credentials page.
#[component]
pub fn Credentials() -> impl IntoView {
    let delete = ServerAction::<DeleteCredential>::new();
    let refresh = ServerAction::<StartRefresh>::new();
    // A started refresh session opens in the live view.
    Effect::new(move |_| {
        if let Some(Ok(id)) = refresh.value().get() {
            leptos_router::hooks::use_navigate()(
                &format!("/sessions/{id}/live"),
                Default::default(),
            );
        }
    });
    let refresh_error = Signal::derive(move || refresh.value().get().and_then(Result::err));
    let list = Resource::new(move || delete.version().get(), |_| list_credentials());
    on_change(&["credentials"], move || list.refetch());
    let error = Signal::derive(move || delete.value().get().and_then(Result::err));
    let me = expect_context::<Me>();
    view! {
        <section class="page">
            <h1>"Credentials"</h1>
            <p class="muted">"Cookies live encrypted in the vault and reach a browser only through an approved grant. Values are never shown."</p>
            <ActionError error/>
            <ActionError error=refresh_error/>
            <details class="new-login" open=move || false>
                <summary>"Log in to a site through a live browser"</summary>
                <ActionForm action=refresh attr:class="inline-form" attr:id="start-refresh">
                    <label>"Tenant "<input name="tenant" required placeholder="acme" autocomplete="off"/></label>
                    <label>"Domains "<input name="domains" required placeholder="app.example.com" autocomplete="off"/></label>
                    <label>"Start at "<input name="start_url" placeholder="https://app.example.com/login (optional)" autocomplete="off"/></label>
                    <button type="submit" class="primary" disabled=move || !me.may(Role::Operator) || refresh.pending().get()>
                        {move || if refresh.pending().get() { "Starting a browser…" } else { "Start" }}
                    </button>
                </ActionForm>
                <p class="muted">"A clean browser in its own sandbox opens here, streamed; log in as usual, then save: the cookies and localStorage of those domains go into the vault, encrypted. It ends after 15 minutes."</p>
            </details>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || list.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(rows) if rows.is_empty() => view! {
                        <p class="empty" id="no-credentials">"The vault is empty. Log in to a site through a live browser above, or import cookies with "<code>"cordon creds import"</code>"."</p>
                    }.into_any(),
                    Ok(rows) => view! { <Table rows delete refresh may=Signal::derive(move || me.may(Role::Operator))/> }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn Table(
    rows: Vec<CredentialView>,
    delete: ServerAction<DeleteCredential>,
    refresh: ServerAction<StartRefresh>,
    may: Signal<bool>,
) -> impl IntoView {
    let now = now_ms();
    view! {
        <table class="list" id="credentials">
            <thead><tr>
                <th>"Tenant"</th><th>"Domain"</th><th>"Cookies"</th><th>"Storage"</th><th>"First expiry"</th>
                <th>"Refreshed"</th><th>"Last injected"</th><th>"Source"</th><th><span class="sr-only">"Actions"</span></th>
            </tr></thead>
            <tbody>
                {rows.into_iter().map(|c| {
                    let expiry = match c.earliest_expiry {
                        None => "session cookies only".to_owned(),
                        Some(e) if e <= now => format!("expired {}", utc(e)),
                        Some(e) => format!("in {} ({})", span(e - now), utc(e)),
                    };
                    let soon = c.earliest_expiry.is_some_and(|e| e - now < 7 * 86_400_000);
                    let label = format!("Delete the credential of {} for {}", c.tenant, c.domain);
                    let (form_tenant, form_domain) = (c.tenant.clone(), c.domain.clone());
                    let (refresh_tenant, refresh_domain) = (c.tenant.clone(), c.domain.clone());
                    let refresh_label = format!("Log in again to {} for {} through a live browser", c.domain, c.tenant);
                    let export_label = format!("Export the credential of {} for {} (asks for your passkey)", c.tenant, c.domain);
                    view! {
                        <tr data-domain=c.domain.clone()>
                            <td>{c.tenant.clone()}</td>
                            <td><code>{c.domain.clone()}</code></td>
                            <td class="num">{c.cookies}</td>
                            <td class="num">{c.storage}</td>
                            <td class:warn=soon>{expiry}</td>
                            <td>{utc(c.refreshed_at)}</td>
                            <td>{c.last_injected_at.map_or_else(|| "never".to_owned(), utc)}</td>
                            <td>{c.source.clone()}</td>
                            <td><div class="row-actions">
                                <ActionForm action=refresh>
                                    <input type="hidden" name="tenant" value=refresh_tenant/>
                                    <input type="hidden" name="domains" value=refresh_domain/>
                                    <button type="submit" disabled=move || !may.get()
                                        aria-label=refresh_label>"Refresh"</button>
                                </ActionForm>
                                <form data-passkey="export" class="export">
                                    <input type="hidden" name="tenant" value=c.tenant.clone()/>
                                    <input type="hidden" name="domain" value=c.domain.clone()/>
                                    <button type="submit" disabled=move || !may.get() aria-label=export_label>"Export"</button>
                                    <span class="form-status" role="status" aria-live="polite" data-passkey-status></span>
                                </form>
                                <ActionForm action=delete>
                                    <input type="hidden" name="tenant" value=form_tenant/>
                                    <input type="hidden" name="domain" value=form_domain/>
                                    <button type="submit" class="danger" disabled=move || !may.get()
                                        aria-label=label>"Delete"</button>
                                </ActionForm>
                            </div></td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}
