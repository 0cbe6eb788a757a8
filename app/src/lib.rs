//! Cordon's operator dashboard: a Leptos app rendered on the server and
//! hydrated in the browser. Pages (`pages/`, one file each) call the
//! control plane only through the server functions in [`api`] (by area),
//! which check the caller's role and reach the server's domain through the
//! per-area traits of `api::backend`. Every failure is one [`error::UiError`],
//! shown by one component.

pub mod api;
mod components;
pub mod error;
mod pages;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Title, provide_meta_context};
use leptos_router::components::{ParentRoute, Route, Router, Routes};
use leptos_router::{ParamSegment, StaticSegment};

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <link rel="icon" href="/favicon.svg"/>
                // The build's assets are linked under its version (cached
                // for good; see the server's `dashboard::assets`).
                <link rel="stylesheet" id="cordon" href=format!("/{}/cordon.css", options.site_pkg_dir)/>
                <script type="module" src="/passkey.js"></script>
                <script type="module" src="/live.js"></script>
                <script type="module" src="/totp.js"></script>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The dashboard's root component: routes. The login and enrollment pages
/// stand alone; every other page sits in the [`components::Shell`].
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Title text="Cordon"/>
        <Router>
            <Routes fallback=|| view! { <pages::NotFound/> }>
                <Route path=StaticSegment("login") view=pages::Login/>
                <Route path=StaticSegment("enroll") view=pages::Enroll/>
                <ParentRoute path=StaticSegment("") view=components::Shell>
                    <Route path=StaticSegment("") view=pages::Overview/>
                    <Route path=StaticSegment("sessions") view=pages::Sessions/>
                    <Route path=(StaticSegment("sessions"), ParamSegment("id")) view=pages::Session/>
                    <Route path=(StaticSegment("sessions"), ParamSegment("id"), StaticSegment("screenshots")) view=pages::Screenshots/>
                    <Route path=(StaticSegment("sessions"), ParamSegment("id"), StaticSegment("live")) view=pages::Live/>
                    <Route path=StaticSegment("tasks") view=pages::Tasks/>
                    <Route path=(StaticSegment("tasks"), ParamSegment("id")) view=pages::Task/>
                    <Route path=StaticSegment("grants") view=pages::Grants/>
                    <Route path=StaticSegment("approvals") view=pages::Approvals/>
                    <Route path=StaticSegment("credentials") view=pages::Credentials/>
                    <Route path=StaticSegment("audit") view=pages::Audit/>
                    <Route path=StaticSegment("tenants") view=pages::Tenants/>
                    <Route path=StaticSegment("operators") view=pages::Operators/>
                    <Route path=StaticSegment("account") view=pages::Account/>
                </ParentRoute>
            </Routes>
        </Router>
    }
}

/// Entry point of the wasm bundle: hydrates the server-rendered page.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(App);
}
