//! Grants: agents ask for operator-mode sessions on some domains; an
//! operator approves (with expiry and single/multi use) or denies, and
//! revokes issued tokens. Live: new requests appear without a reload.

use leptos::prelude::*;

use crate::api::auth::Role;
use crate::api::grants::{
    ApproveGrant, DenyGrant, GrantRequestView, GrantTokenView, RevokeGrant, list_grants,
};
use crate::components::layout::Me;
use crate::components::time::{ago, utc};
use crate::components::{ActionError, ErrorView, on_change};

/// The grants page.
#[component]
pub fn Grants() -> impl IntoView {
    let approve = ServerAction::<ApproveGrant>::new();
    let deny = ServerAction::<DenyGrant>::new();
    let revoke = ServerAction::<RevokeGrant>::new();
    let data = Resource::new(
        move || {
            (
                approve.version().get(),
                deny.version().get(),
                revoke.version().get(),
            )
        },
        |_| list_grants(),
    );
    on_change(&["grants"], move || data.refetch());
    let error = Signal::derive(move || {
        approve
            .value()
            .get()
            .and_then(|r| r.err())
            .or_else(|| deny.value().get().and_then(Result::err))
            .or_else(|| revoke.value().get().and_then(Result::err))
    });
    let me = expect_context::<Me>();
    let can_decide = Signal::derive(move || me.may(Role::Operator));
    view! {
        <section class="page">
            <h1>"Grants"</h1>
            <p class="muted">"An approved request gives its agent one token for operator-mode sessions on exactly those domains; the agent collects it by polling its request."</p>
            <ActionError error/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || data.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(g) => view! {
                        <h2>"Waiting for a decision "<span class="count" id="pending-count">{g.pending.len()}</span></h2>
                        {if g.pending.is_empty() {
                            view! { <p class="empty" id="no-pending">"No request is waiting. New ones appear here as agents ask."</p> }.into_any()
                        } else {
                            view! {
                                <div class="cards" id="pending">
                                    {g.pending.into_iter().map(|req| view! {
                                        <PendingCard req now=g.now approve deny can_decide/>
                                    }).collect_view()}
                                </div>
                            }.into_any()
                        }}
                        <h2>"Tokens"</h2>
                        {if g.tokens.is_empty() {
                            view! { <p class="empty">"No token has been issued yet."</p> }.into_any()
                        } else {
                            view! { <TokenTable tokens=g.tokens revoke can_decide/> }.into_any()
                        }}
                        <h2>"Decided recently"</h2>
                        {if g.decided.is_empty() {
                            view! { <p class="empty">"Nothing decided yet."</p> }.into_any()
                        } else {
                            view! { <DecidedTable rows=g.decided now=g.now/> }.into_any()
                        }}
                    }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn PendingCard(
    req: GrantRequestView,
    now: i64,
    approve: ServerAction<ApproveGrant>,
    deny: ServerAction<DenyGrant>,
    can_decide: Signal<bool>,
) -> impl IntoView {
    let (id, id2) = (req.id.clone(), req.id.clone());
    view! {
        <article class="card pending" data-request=req.id.clone()>
            <header>
                <strong>{req.tenant.clone()}</strong>
                <span class="muted">" · asked by "{req.requested_by.clone()}" · "{ago(req.created_at, now)}</span>
            </header>
            <p class="domains">{req.domains.iter().map(|d| view! { <code class="domain">{d.clone()}</code>" " }).collect_view()}</p>
            <p class="reason">{if req.reason.is_empty() { "(no reason given)".to_owned() } else { req.reason.clone() }}</p>
            {req.cdp.then(|| view! {
                <p class="cdp-ask" data-cdp="true">
                    <strong>"Also asks for CDP access."</strong>
                    " The agent's scripts could read what these sites' pages can (localStorage, cookies without HttpOnly); cookie reads over CDP stay refused."
                </p>
            })}
            {req.totp.then(|| view! {
                <p class="cdp-ask" data-totp="true">
                    <strong>"Also asks for second-factor codes."</strong>
                    " Cordon would type the current code of these sites' TOTP seeds into their pages when the agent asks; the agent never sees a code or a seed."
                </p>
            })}
            <div class="decide">
                <ActionForm action=approve attr:class="inline-form">
                    <input type="hidden" name="id" value=id.clone()/>
                    <label>"Expires in "
                        <select name="expires_min" aria-label="Expiry">
                            <option value="15">"15 minutes"</option>
                            <option value="60" selected>"1 hour"</option>
                            <option value="480">"8 hours"</option>
                            <option value="1440">"1 day"</option>
                            <option value="10080">"7 days"</option>
                        </select>
                    </label>
                    <label>" "
                        <select name="multi_use" aria-label="Uses">
                            <option value="false" selected>"single use"</option>
                            <option value="true">"multi use"</option>
                        </select>
                    </label>
                    <button type="submit" class="primary approve" disabled=move || !can_decide.get()>"Approve"</button>
                </ActionForm>
                <ActionForm action=deny attr:class="inline-form">
                    <input type="hidden" name="id" value=id2/>
                    <button type="submit" class="danger deny" disabled=move || !can_decide.get()>"Deny"</button>
                </ActionForm>
            </div>
        </article>
    }
}

#[component]
fn TokenTable(
    tokens: Vec<GrantTokenView>,
    revoke: ServerAction<RevokeGrant>,
    can_decide: Signal<bool>,
) -> impl IntoView {
    view! {
        <table class="list" id="tokens">
            <thead><tr>
                <th>"Token id"</th><th>"Tenant"</th><th>"Domains"</th><th>"Status"</th>
                <th>"Uses"</th><th>"Expires (UTC)"</th><th><span class="sr-only">"Actions"</span></th>
            </tr></thead>
            <tbody>
                {tokens.into_iter().map(|t| {
                    let live = matches!(t.status.as_str(), "active" | "awaiting pickup" | "in use");
                    let jti = t.jti.clone();
                    view! {
                        <tr data-jti=t.jti.clone()>
                            <td><code>{t.jti.clone()}</code></td>
                            <td>{t.tenant.clone()}</td>
                            <td>{t.domains.join(", ")}</td>
                            <td><span class="badge" data-status=t.status.clone()>{t.status.clone()}</span></td>
                            <td>{if t.single_use { "single" } else { "multi" }}</td>
                            <td>{utc(t.expires_at)}</td>
                            <td>
                                {live.then(|| view! {
                                    <ActionForm action=revoke>
                                        <input type="hidden" name="jti" value=jti/>
                                        <button type="submit" class="danger revoke" disabled=move || !can_decide.get()>"Revoke"</button>
                                    </ActionForm>
                                })}
                            </td>
                        </tr>
                    }
                }).collect_view()}
            </tbody>
        </table>
    }
}

#[component]
fn DecidedTable(rows: Vec<GrantRequestView>, now: i64) -> impl IntoView {
    view! {
        <table class="list" id="decided">
            <thead><tr><th>"Request"</th><th>"Tenant"</th><th>"Domains"</th><th>"Decision"</th><th>"By"</th><th>"Asked"</th></tr></thead>
            <tbody>
                {rows.into_iter().map(|r| view! {
                    <tr data-request=r.id.clone()>
                        <td><code>{r.id.clone()}</code></td>
                        <td>{r.tenant.clone()}</td>
                        <td>{r.domains.join(", ")}</td>
                        <td><span class="badge" data-status=r.state.clone()>{r.state.clone()}</span></td>
                        <td>{r.decided_by.clone().unwrap_or_default()}</td>
                        <td>{ago(r.created_at, now)}</td>
                    </tr>
                }).collect_view()}
            </tbody>
        </table>
    }
}
