//! The frame around every page: header, navigation, main area.

use leptos::prelude::*;
use leptos_router::components::A;

/// Header, navigation and the page.
#[component]
pub fn Layout(children: Children) -> impl IntoView {
    // Set once the wasm bundle has taken over the page; end-to-end tests and
    // people alike can tell a hydrated page from a static one.
    Effect::new(move |_| {
        if let Some(body) = document().body() {
            let _ = body.set_attribute("data-hydrated", "true");
        }
    });
    let (nav_open, set_nav_open) = signal(true);
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
            </header>
            <nav class="sidebar" aria-label="Main">
                <A href="/">"Overview"</A>
                <A href="/audit">"Audit log"</A>
            </nav>
            <main class="content">{children()}</main>
        </div>
    }
}
