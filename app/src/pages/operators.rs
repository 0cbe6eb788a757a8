//! Admin: operators, their roles and tenant scopes, enrollment links,
//! disable / enable.

use leptos::prelude::*;

use crate::api::auth::{
    InviteOperator, OperatorInfo, Role, SetOperatorEnabled, SetOperatorTenants, list_operators,
};
use crate::api::tenants::list_tenants;
use crate::components::time::utc;
use crate::components::{ActionError, ErrorView, on_change};

/// The operators page.
#[component]
pub fn Operators() -> impl IntoView {
    let invite = ServerAction::<InviteOperator>::new();
    let toggle = ServerAction::<SetOperatorEnabled>::new();
    let scope = ServerAction::<SetOperatorTenants>::new();
    let list = Resource::new(
        move || {
            (
                invite.version().get(),
                toggle.version().get(),
                scope.version().get(),
            )
        },
        |_| list_operators(),
    );
    // The tenant ids an admin may scope to, offered under the table.
    let tenants = Resource::new(|| (), |_| list_tenants());
    on_change(&["operators"], move || list.refetch());
    on_change(&["tenants"], move || tenants.refetch());
    let error = Signal::derive(move || {
        invite
            .value()
            .get()
            .and_then(Result::err)
            .or_else(|| toggle.value().get().and_then(Result::err))
            .or_else(|| scope.value().get().and_then(Result::err))
    });
    view! {
        <section class="page">
            <h1>"Operators"</h1>
            <p class="muted">"Viewers read; operators also decide grants, manage credentials and end sessions; admins also manage operators, tenants and keys. An operator or viewer may be scoped to some tenants: they then see and act on those tenants only. Admins always see every tenant."</p>
            <ActionError error/>
            {move || invite.value().get().and_then(Result::ok).map(|inv| view! {
                <div class="secret-once" role="status" id="invite-link">
                    <p><strong>"Enrollment link for "{inv.operator.name.clone()}</strong>" — send it over a trusted channel; it works once, until "{utc(inv.expires_at)}" UTC:"</p>
                    <input readonly value=inv.link.clone() aria-label="The enrollment link" onfocus="this.select()"/>
                </div>
            })}
            <h2>"Invite an operator"</h2>
            <ActionForm action=invite attr:class="inline-form" attr:id="invite-form">
                <label>"Name "<input name="name" required maxlength="64" placeholder="alice"/></label>
                <label>"Role "
                    <select name="role">
                        {Role::ALL.iter().map(|r| view! { <option value=r.as_str() selected=*r == Role::Operator>{r.as_str()}</option> }).collect_view()}
                    </select>
                </label>
                <button type="submit" class="primary">"Create enrollment link"</button>
            </ActionForm>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || list.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(ops) => view! {
                        <table class="list" id="operators">
                            <thead><tr><th>"Name"</th><th>"Role"</th><th>"Tenants"</th><th>"Passkeys"</th><th>"Last login (UTC)"</th><th>"Status"</th><th><span class="sr-only">"Actions"</span></th></tr></thead>
                            <tbody>
                                {ops.into_iter().map(|o| {
                                    let status = if o.disabled { "disabled" } else if o.passkeys == 0 { "not enrolled" } else { "active" };
                                    view! {
                                        <tr data-operator=o.name.clone()>
                                            <td>{o.name.clone()}</td>
                                            <td><span class="role-badge" data-role=o.role.as_str()>{o.role.as_str()}</span></td>
                                            <td class="scope">{scope_cell(&o, scope)}</td>
                                            <td class="num">{o.passkeys}</td>
                                            <td>{o.last_login_at.map_or_else(|| "never".to_owned(), utc)}</td>
                                            <td><span class="badge" data-status=status>{status}</span></td>
                                            <td>
                                                <ActionForm action=toggle>
                                                    <input type="hidden" name="id" value=o.id.clone()/>
                                                    <input type="hidden" name="enabled" value=o.disabled.to_string()/>
                                                    <button type="submit" class=if o.disabled { "" } else { "danger" }>
                                                        {if o.disabled { "Enable" } else { "Disable" }}
                                                    </button>
                                                </ActionForm>
                                            </td>
                                        </tr>
                                    }
                                }).collect_view()}
                            </tbody>
                        </table>
                    }.into_any(),
                })}
            </Transition>
            <Transition fallback=|| ()>
                {move || tenants.get().map(|r| match r {
                    Ok(ts) if ts.is_empty() => view! {
                        <p class="muted small" id="scope-hint">"No tenants yet, so every operator sees everything there is. Create tenants on the Tenants page, then scope operators here."</p>
                    }.into_any(),
                    Ok(ts) => view! {
                        <p class="muted small" id="scope-hint">
                            "Scope an operator with a comma-separated list of tenants; leave it empty for every tenant. Tenants: "
                            {ts.iter().map(|t| t.id.clone()).collect::<Vec<_>>().join(", ")}
                        </p>
                    }.into_any(),
                    Err(_) => ().into_any(),
                })}
            </Transition>
        </section>
    }
}

/// An operator's scope, and for operators and viewers the form that
/// changes it (empty: every tenant).
fn scope_cell(o: &OperatorInfo, scope: ServerAction<SetOperatorTenants>) -> AnyView {
    if o.role == Role::Admin {
        return view! { <span class="muted" title="Admins always see every tenant">"all (admin)"</span> }
            .into_any();
    }
    let current = o.tenants.clone().unwrap_or_default().join(", ");
    let shown = if current.is_empty() {
        "all tenants".to_owned()
    } else {
        current.clone()
    };
    let label = format!("Tenants of {}", o.name);
    let id = o.id.clone();
    let title = format!("Now: {shown}");
    view! {
        <ActionForm action=scope attr:class="scope-form">
            <input type="hidden" name="id" value=id/>
            <input name="tenants" value=current placeholder="all tenants" aria-label=label
                size="14" maxlength="400" autocomplete="off"/>
            <button type="submit" title=title>"Save"</button>
        </ActionForm>
    }
    .into_any()
}
