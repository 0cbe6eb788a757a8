//! The frame around every page an operator sees once logged in: top bar
//! with who is logged in and "Log out", navigation by role, the page.

use leptos::prelude::*;
use leptos_router::components::{A, Outlet};

use crate::api::approvals::pending_approvals;
use crate::api::auth::{Operator, Role, whoami};
use crate::api::tasks::waiting_tasks;
use crate::components::{ErrorView, on_change};

/// The logged-in operator, for pages that adapt to the role.
#[derive(Clone, Copy)]
pub struct Me(pub Signal<Option<Operator>>);

impl Me {
    /// Whether the operator's role allows `needed` (false until known).
    pub fn may(&self, needed: Role) -> bool {
        self.0.get().is_some_and(|o| o.role.allows(needed))
    }
}

/// Header, navigation and the routed page.
#[component]
pub fn Shell() -> impl IntoView {
    // Set once the wasm bundle has taken over the page; end-to-end tests and
    // people alike can tell a hydrated page from a static one.
    Effect::new(move |_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
    let me = Resource::new(|| (), |_| whoami());
    let operator = Signal::derive(move || me.get().and_then(Result::ok));
    provide_context(Me(operator));
    let (nav_open, set_nav_open) = signal(true);
    // The pending approvals' count, on every page: an agent may be waiting.
    let waiting = Resource::new(|| (), |_| pending_approvals());
    on_change(&["approvals"], move || waiting.refetch());
    // Tasks whose model asked for a person.
    let called = Resource::new(|| (), |_| waiting_tasks());
    on_change(&["sessions"], move || called.refetch());
    let admin = move || operator.get().is_some_and(|o| o.role.allows(Role::Admin));
    view! {
        <div class="frame" class:nav-collapsed=move || !nav_open.get()>
            <header class="topbar">
                <button
                    class="nav-toggle"
                    aria-label="Toggle navigation"
                    aria-expanded=move || nav_open.get().to_string()
                    on:click=move |_| set_nav_open.update(|open| *open = !*open)
                >
                    "☰"
                </button>
                <span class="brand">"Cordon"</span>
                <span class="tagline">"sandboxed browsers for agents"</span>
                <span class="spacer"></span>
                <Transition fallback=|| ()>
                    {move || me.get().map(|r| match r {
                        Ok(op) => view! {
                            <span class="whoami" id="whoami">
                                <A href="/account">{op.name.clone()}</A>
                                <span class="role-badge" data-role=op.role.as_str()>{op.role.as_str()}</span>
                                {op.tenants.clone().map(|ts| view! {
                                    <span class="scope-badge" id="my-tenants" title="You see and act on these tenants only">{ts.join(", ")}</span>
                                })}
                            </span>
                            <form method="post" action="/ui/auth/logout" class="logout">
                                <button type="submit" id="logout">"Log out"</button>
                            </form>
                        }.into_any(),
                        Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    })}
                </Transition>
            </header>
            <nav class="sidebar" aria-label="Main">
                <A href="/" exact=true>"Overview"</A>
                <A href="/sessions">"Sessions"</A>
                <A href="/tasks">
                    "Tasks"
                    <Transition fallback=|| ()>
                        {move || called.get().and_then(Result::ok).filter(|n| *n > 0).map(|n| view! {
                            " "<span class="nav-badge" id="tasks-badge" aria-label=format!("{n} waiting for an operator")>{n}</span>
                        })}
                    </Transition>
                </A>
                <A href="/grants">"Grants"</A>
                <A href="/approvals">
                    "Approvals"
                    <Transition fallback=|| ()>
                        {move || waiting.get().and_then(Result::ok).filter(|n| *n > 0).map(|n| view! {
                            " "<span class="nav-badge" id="approvals-badge" aria-label=format!("{n} waiting")>{n}</span>
                        })}
                    </Transition>
                </A>
                <A href="/credentials">"Credentials"</A>
                <A href="/audit">"Audit log"</A>
                <Transition fallback=|| ()>
                    <Show when=admin>
                        <A href="/tenants">"Tenants & keys"</A>
                        <A href="/operators">"Operators"</A>
                    </Show>
                </Transition>
                <A href="/account">"My passkeys"</A>
            </nav>
            <main class="content"><Outlet/></main>
        </div>
    }
}
