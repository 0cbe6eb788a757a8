//! Enroll through a one-time link: register a passkey, then you are logged
//! in. The link's secret is in the URL fragment, so it never reaches a log.

use leptos::prelude::*;

/// The enrollment page.
#[component]
pub fn Enroll() -> impl IntoView {
    view! {
        <main class="auth-page">
            <section class="auth-card" aria-labelledby="enroll-title">
                <div class="auth-brand">"Cordon"</div>
                <h1 id="enroll-title">"Create your passkey"</h1>
                <p class="muted">
                    "This one-time link sets up your operator account. Your browser will ask "
                    "to create a passkey (screen lock, phone or security key); no password is involved."
                </p>
                <form data-passkey="enroll" id="enroll-form">
                    <label for="passkey-name">"Name this passkey"</label>
                    <input id="passkey-name" name="passkey_name" required maxlength="64" value="This device"/>
                    <button type="submit" class="primary" id="enroll-submit">"Create passkey and log in"</button>
                    <p class="form-status" role="status" aria-live="polite" data-passkey-status></p>
                </form>
                <p class="muted small">"The link works once and for one hour. Lost it? Ask an admin for a new one."</p>
            </section>
        </main>
    }
}
