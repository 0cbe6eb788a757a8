use leptos::prelude::*;

/// Shown for unknown paths (with status 404 on the server).
#[component]
pub fn NotFound() -> impl IntoView {
    view! {
        <section class="page">
            <h1>"Not found"</h1>
            <p>"There is no page here. Use the navigation to find your way."</p>
        </section>
    }
}
