//! Log in with a passkey (no passwords anywhere). The ceremony runs in
//! `public/passkey.js` against `/ui/auth/login/*`.

use leptos::prelude::*;

/// The login page.
#[component]
pub fn Login() -> impl IntoView {
    view! {
        <main class="auth-page">
            <section class="auth-card" aria-labelledby="login-title">
                <div class="auth-brand">"Cordon"</div>
                <h1 id="login-title">"Log in"</h1>
                <p class="muted">"Operators log in with a passkey: your device's screen lock or a security key."</p>
                <form data-passkey="login" id="login-form">
                    <label for="login-name">"Operator name"</label>
                    <input id="login-name" name="name" required autocomplete="username webauthn"
                        autocapitalize="none" spellcheck="false" maxlength="64"/>
                    <button type="submit" class="primary" id="login-submit">"Log in with a passkey"</button>
                    <p class="form-status" role="status" aria-live="polite" data-passkey-status></p>
                </form>
                <p class="muted small">
                    "No account yet? An admin creates one with "<code>"cordon operator invite NAME"</code>
                    " and gives you a one-time enrollment link."
                </p>
            </section>
        </main>
    }
}
