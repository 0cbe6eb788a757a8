//! Cordon's operator dashboard: a Leptos app rendered on the server and
//! hydrated in the browser. Pages call the control plane only through the
//! server functions in [`api`], which reach the server's domain through one
//! [`api::Dashboard`] object provided as context.

pub mod api;
mod layout;
mod pages;

use leptos::prelude::*;
use leptos_meta::{MetaTags, Stylesheet, Title, provide_meta_context};
use leptos_router::StaticSegment;
use leptos_router::components::{Route, Router, Routes};

/// The HTML document around the app, rendered on the server.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The dashboard's root component: layout and routes.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Stylesheet id="cordon" href="/pkg/cordon.css"/>
        <Title text="Cordon"/>
        <Router>
            <layout::Layout>
                <Routes fallback=|| view! { <pages::NotFound/> }>
                    <Route path=StaticSegment("") view=pages::Overview/>
                    <Route path=StaticSegment("audit") view=pages::Audit/>
                </Routes>
            </layout::Layout>
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
