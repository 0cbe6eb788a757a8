//! Approvals: agent actions the risk gate holds until an operator decides
//! (high and critical levels), each with the page as it was and the target
//! outlined. Live: new requests, decisions and timeouts show without a
//! reload.

use leptos::prelude::*;

use crate::api::approvals::{ApprovalView, DecideApproval, list_approvals};
use crate::api::auth::Role;
use crate::components::layout::Me;
use crate::components::time::{ago, span};
use crate::components::{ActionError, ErrorView, on_change};

/// The approvals page.
#[component]
pub fn Approvals() -> impl IntoView {
    let decide = ServerAction::<DecideApproval>::new();
    let data = Resource::new(move || decide.version().get(), |_| list_approvals());
    on_change(&["approvals"], move || data.refetch());
    let error = Signal::derive(move || decide.value().get().and_then(Result::err));
    let me = expect_context::<Me>();
    let can_decide = Signal::derive(move || me.may(Role::Operator));
    view! {
        <section class="page">
            <h1>"Approvals"</h1>
            <p class="muted">"The risk gate holds an agent's high and critical actions here until an operator approves or denies them; one nobody decides is denied when its time runs out."</p>
            <ActionError error/>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || data.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(v) if v.pending.is_empty() => view! {
                        <p class="empty" id="no-approvals">"No action is waiting. Risky agent actions appear here as they happen."</p>
                    }.into_any(),
                    Ok(v) => view! {
                        <div class="cards" id="approvals">
                            {v.pending.into_iter().map(|a| view! {
                                <ApprovalCard a now=v.now decide can_decide/>
                            }).collect_view()}
                        </div>
                    }.into_any(),
                })}
            </Transition>
        </section>
    }
}

#[component]
fn ApprovalCard(
    a: ApprovalView,
    now: i64,
    decide: ServerAction<DecideApproval>,
    can_decide: Signal<bool>,
) -> impl IntoView {
    let (id, id2) = (a.id.clone(), a.id.clone());
    let shot = a
        .has_screenshot
        .then(|| format!("/ui/approvals/{}/screenshot", a.id));
    view! {
        <article class="card pending approval" data-approval=a.id.clone() data-level=a.level.clone()>
            <header>
                <span class="badge level" data-level=a.level.clone()>{a.level.clone()}</span>" "
                <code class="action">{a.action.clone()}</code>
                <span class="muted">" · "{a.tenant.clone()}" · "
                    <a href=format!("/sessions/{}", a.session)>{a.session.clone()}</a>
                    " · "{a.actor.clone()}" · "{ago(a.created_at, now)}
                    " · denied in "<span class="time-left">{span(a.expires_at - now)}</span>
                </span>
            </header>
            <ul class="reasons">
                {a.reasons.iter().map(|r| view! { <li>{r.clone()}</li> }).collect_view()}
            </ul>
            <pre class="params">{a.params.clone()}</pre>
            {match shot {
                Some(src) => view! {
                    <a href=src.clone() target="_blank" rel="noopener" class="shot">
                        <img src=src.clone() alt="The page when the agent asked, with the target outlined in red" loading="lazy"/>
                    </a>
                }.into_any(),
                None => view! { <p class="muted">"No screenshot: the page could not be captured."</p> }.into_any(),
            }}
            <div class="decide">
                <ActionForm action=decide attr:class="inline-form">
                    <input type="hidden" name="id" value=id/>
                    <input type="hidden" name="approve" value="true"/>
                    <button type="submit" class="primary approve" disabled=move || !can_decide.get()>"Approve"</button>
                </ActionForm>
                <ActionForm action=decide attr:class="inline-form">
                    <input type="hidden" name="id" value=id2/>
                    <input type="hidden" name="approve" value="false"/>
                    <button type="submit" class="danger deny" disabled=move || !can_decide.get()>"Deny"</button>
                </ActionForm>
            </div>
        </article>
    }
}
