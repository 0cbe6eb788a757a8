//! Stored credentials per tenant and domain: metadata only, never a value.

use leptos::prelude::*;

use crate::api::auth::Role;
use crate::api::credentials::{
    CredentialView, DeleteCredential, DeleteTotp, TotpView, list_credentials, list_totp,
};
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
            <Seeds may=Signal::derive(move || me.may(Role::Operator))/>
        </section>
    }
}

/// Second-factor seeds: add (link, secret or QR image: `totp.js` posts
/// the form), list, export, delete. Never a secret or a code.
#[component]
fn Seeds(may: Signal<bool>) -> impl IntoView {
    let delete = ServerAction::<DeleteTotp>::new();
    let list = Resource::new(move || delete.version().get(), |_| list_totp());
    on_change(&["credentials"], move || list.refetch());
    // An add (in totp.js) says when it is done.
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        use wasm_bindgen::closure::Closure;
        let cb = Closure::<dyn Fn()>::new(move || list.refetch());
        let _ = document()
            .add_event_listener_with_callback("cordon:totp-changed", cb.as_ref().unchecked_ref());
        cb.forget();
    }
    let error = Signal::derive(move || delete.value().get().and_then(Result::err));
    view! {
        <h2 id="totp-title">"Second-factor codes (TOTP)"</h2>
        <p class="muted">"Seeds of authenticator-app codes, sealed like cookies. Cordon types the current code into a page of the seed's domain — for an agent whose grant asks for codes, or for you in a refresh session's live view. Nobody sees a seed or a code here."</p>
        <ActionError error/>
        <details class="new-login" id="add-totp">
            <summary>"Add a seed"</summary>
            <form data-totp-add class="totp-form" aria-labelledby="totp-title">
                <div class="inline-form">
                    <label>"Tenant "<input name="tenant" required placeholder="acme" autocomplete="off"/></label>
                    <label>"Domain "<input name="domain" required placeholder="app.example.com" autocomplete="off"/></label>
                    <label>"Label "<input name="label" required maxlength="100" placeholder="admin account" autocomplete="off"/></label>
                </div>
                <p class="muted">"Give one of: the set-up link, the secret, or a picture of the QR code (choose a file, or paste a screenshot here)."</p>
                <label class="wide">"Set-up link "<input name="uri" type="password" placeholder="otpauth://totp/…" autocomplete="off" spellcheck="false"/></label>
                <fieldset class="secret">
                    <legend>"or the secret"</legend>
                    <label>"Secret (base32) "<input name="secret" type="password" placeholder="JBSW Y3DP …" autocomplete="off" spellcheck="false"/></label>
                    <label>"Algorithm "<select name="algorithm"><option>"SHA1"</option><option>"SHA256"</option><option>"SHA512"</option></select></label>
                    <label>"Digits "<select name="digits"><option>"6"</option><option>"7"</option><option>"8"</option></select></label>
                    <label>"Period (s) "<input name="period" type="number" min="10" max="300" value="30"/></label>
                </fieldset>
                <label class="wide">"or a QR code image "<input name="image" type="file" accept="image/png,image/jpeg"/></label>
                <p class="paste-note muted" data-totp-pasted hidden></p>
                <div class="toolbar">
                    <button type="submit" class="primary" disabled=move || !may.get()>"Store the seed"</button>
                    <span class="form-status" role="status" aria-live="polite" data-totp-status></span>
                </div>
            </form>
        </details>
        <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
            {move || list.get().map(|r| match r {
                Err(e) => view! { <ErrorView error=e/> }.into_any(),
                Ok(rows) if rows.is_empty() => view! {
                    <p class="empty" id="no-totp">"No second-factor seeds yet. On the site's two-factor set-up page, copy the link or take a screenshot of the QR code, and add it above (or use "<code>"cordon creds totp add"</code>")."</p>
                }.into_any(),
                Ok(rows) => view! { <SeedTable rows delete may/> }.into_any(),
            })}
        </Transition>
    }
}

#[component]
fn SeedTable(
    rows: Vec<TotpView>,
    delete: ServerAction<DeleteTotp>,
    may: Signal<bool>,
) -> impl IntoView {
    view! {
        <table class="list" id="totp-seeds">
            <thead><tr>
                <th>"Tenant"</th><th>"Domain"</th><th>"Label"</th><th>"Algorithm"</th><th>"Digits"</th>
                <th>"Period"</th><th>"Added"</th><th>"Last used"</th><th><span class="sr-only">"Actions"</span></th>
            </tr></thead>
            <tbody>
                {rows.into_iter().map(|t| {
                    let delete_label = format!("Delete the seed {} of {} for {}", t.label, t.tenant, t.domain);
                    let export_label = format!("Export the seed {} of {} (asks for your passkey)", t.label, t.tenant);
                    let (row_id, export_tenant, export_id) = (t.id.clone(), t.tenant.clone(), t.id.clone());
                    let (del_tenant, del_id) = (t.tenant.clone(), t.id.clone());
                    view! {
                        <tr data-totp=row_id>
                            <td>{t.tenant.clone()}</td>
                            <td><code>{t.domain.clone()}</code></td>
                            <td>{t.label.clone()}</td>
                            <td>{t.algorithm.clone()}</td>
                            <td class="num">{t.digits}</td>
                            <td class="num">{format!("{} s", t.period)}</td>
                            <td>{utc(t.created_at)}</td>
                            <td>{t.last_used_at.map_or_else(|| "never".to_owned(), utc)}</td>
                            <td><div class="row-actions">
                                <form data-passkey="export-totp" class="export">
                                    <input type="hidden" name="tenant" value=export_tenant/>
                                    <input type="hidden" name="id" value=export_id/>
                                    <button type="submit" disabled=move || !may.get() aria-label=export_label>"Export"</button>
                                    <span class="form-status" role="status" aria-live="polite" data-passkey-status></span>
                                </form>
                                <ActionForm action=delete>
                                    <input type="hidden" name="tenant" value=del_tenant/>
                                    <input type="hidden" name="id" value=del_id/>
                                    <button type="submit" class="danger" disabled=move || !may.get()
                                        aria-label=delete_label>"Delete"</button>
                                </ActionForm>
                            </div></td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
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
