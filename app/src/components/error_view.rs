//! The one way a [`UiError`] is shown: what happened and what to do.

use leptos::prelude::*;

use crate::error::UiError;

/// An error, with the step the operator can take.
#[component]
pub fn ErrorView(error: UiError) -> impl IntoView {
    let (title, hint): (&str, Option<AnyView>) = match &error {
        UiError::Unauthorized => (
            "Logged out",
            Some(view! { <a href="/login">"Log in again"</a> }.into_any()),
        ),
        UiError::Forbidden { .. } => (
            "Not allowed",
            Some(view! { <span>"Ask an admin if you need this."</span> }.into_any()),
        ),
        UiError::NotFound { .. } => ("Not found", None),
        UiError::Invalid { .. } => ("Check your input", None),
        UiError::Conflict { .. } => (
            "Already changed",
            Some(view! { <span>"The list below shows where it stands now."</span> }.into_any()),
        ),
        UiError::Unavailable { .. } => (
            "Unavailable",
            Some(view! { <span>"Try again in a moment."</span> }.into_any()),
        ),
        UiError::Internal { .. } => ("Something went wrong", None),
    };
    view! {
        <div class="alert" role="alert" data-error=error.code()>
            <strong>{title}": "</strong>
            <span class="alert-text">{error.to_string()}</span>
            {hint.map(|h| view! { <span class="alert-hint">" "{h}</span> })}
        </div>
    }
}

/// An optional error from an action, shown when present.
#[component]
pub fn ActionError(#[prop(into)] error: Signal<Option<UiError>>) -> impl IntoView {
    move || error.get().map(|e| view! { <ErrorView error=e/> })
}
