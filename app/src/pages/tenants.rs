//! Admin: tenants and their agent API keys (a new key is shown once).

use leptos::prelude::*;

use crate::api::tenants::{CreateApiKey, CreateTenant, RevokeApiKey, TenantView, list_tenants};
use crate::components::time::utc;
use crate::components::{ActionError, ErrorView, on_change};

/// The tenants page.
#[component]
pub fn Tenants() -> impl IntoView {
    let create = ServerAction::<CreateTenant>::new();
    let new_key = ServerAction::<CreateApiKey>::new();
    let revoke = ServerAction::<RevokeApiKey>::new();
    let list = Resource::new(
        move || {
            (
                create.version().get(),
                new_key.version().get(),
                revoke.version().get(),
            )
        },
        |_| list_tenants(),
    );
    on_change(&["tenants"], move || list.refetch());
    let error = Signal::derive(move || {
        create
            .value()
            .get()
            .and_then(Result::err)
            .or_else(|| new_key.value().get().and_then(Result::err))
            .or_else(|| revoke.value().get().and_then(Result::err))
    });
    view! {
        <section class="page">
            <h1>"Tenants & API keys"</h1>
            <ActionError error/>
            {move || new_key.value().get().and_then(Result::ok).map(|k| view! {
                <div class="secret-once" role="status" id="new-key">
                    <p><strong>"New API key "<code>{k.id.clone()}</code></strong>" — copy it now; it is never shown again:"</p>
                    <input readonly value=k.key.clone() aria-label="The new API key" onfocus="this.select()"/>
                </div>
            })}
            <h2>"New tenant"</h2>
            <ActionForm action=create attr:class="inline-form" attr:id="create-tenant">
                <label>"Id "<input name="id" required maxlength="64" placeholder="acme" pattern="[a-z0-9][a-z0-9-]*"/></label>
                <label>"Name "<input name="name" maxlength="100" placeholder="Acme Inc."/></label>
                <button type="submit" class="primary">"Create tenant"</button>
            </ActionForm>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || list.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(ts) if ts.is_empty() => view! { <p class="empty">"No tenant yet. Create one above; agents act for a tenant with its API keys."</p> }.into_any(),
                    Ok(ts) => ts.into_iter().map(|t| view! { <TenantCard t new_key revoke/> }).collect_view().into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn TenantCard(
    t: TenantView,
    new_key: ServerAction<CreateApiKey>,
    revoke: ServerAction<RevokeApiKey>,
) -> impl IntoView {
    let form_tenant = t.id.clone();
    view! {
        <article class="card" data-tenant=t.id.clone()>
            <header><strong>{t.name.clone()}</strong>" "<code class="muted">{t.id.clone()}</code></header>
            {if t.keys.is_empty() {
                view! { <p class="empty">"No API key."</p> }.into_any()
            } else {
                view! {
                    <table class="list keys">
                        <thead><tr><th>"Key id"</th><th>"Label"</th><th>"Created (UTC)"</th><th>"Last used (UTC)"</th><th>"Status"</th><th><span class="sr-only">"Actions"</span></th></tr></thead>
                        <tbody>
                            {t.keys.into_iter().map(|k| {
                                let active = k.revoked_at.is_none();
                                let kid = k.id.clone();
                                view! {
                                    <tr data-key=k.id.clone()>
                                        <td><code>{k.id.clone()}</code></td>
                                        <td>{k.label.clone()}</td>
                                        <td>{utc(k.created_at)}</td>
                                        <td>{k.last_used_at.map_or_else(|| "never".to_owned(), utc)}</td>
                                        <td><span class="badge" data-status=if active { "active" } else { "revoked" }>{if active { "active" } else { "revoked" }}</span></td>
                                        <td>
                                            {active.then(|| view! {
                                                <ActionForm action=revoke>
                                                    <input type="hidden" name="id" value=kid/>
                                                    <button type="submit" class="danger">"Revoke"</button>
                                                </ActionForm>
                                            })}
                                        </td>
                                    </tr>
                                }
                            }).collect_view()}
                        </tbody>
                    </table>
                }.into_any()
            }}
            <ActionForm action=new_key attr:class="inline-form">
                <input type="hidden" name="tenant" value=form_tenant/>
                <label>"Label "<input name="label" maxlength="100" placeholder="ci bot"/></label>
                <button type="submit">"Create API key"</button>
            </ActionForm>
        </article>
    }
}
