//! The operator's own passkeys: add another, remove one (never the last).

use leptos::prelude::*;

use crate::api::auth::my_passkeys;
use crate::components::ErrorView;
use crate::components::time::utc;

/// My passkeys.
#[component]
pub fn Account() -> impl IntoView {
    let keys = Resource::new(|| (), |_| my_passkeys());
    // Adding and removing run in passkey.js (each asks for a passkey
    // check first); it says when one is done.
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        use wasm_bindgen::closure::Closure;
        let cb = Closure::<dyn Fn()>::new(move || keys.refetch());
        let _ = document().add_event_listener_with_callback(
            "cordon:passkeys-changed",
            cb.as_ref().unchecked_ref(),
        );
        cb.forget();
    }
    view! {
        <section class="page">
            <h1>"My passkeys"</h1>
            <p class="muted">"Each passkey can log you in. Keep at least two (say, a laptop and a phone) so losing one does not lock you out. Adding or removing one asks for a passkey you have first."</p>
            <Transition fallback=|| view! { <p class="muted">"Loading…"</p> }>
                {move || keys.get().map(|r| match r {
                    Err(e) => view! { <ErrorView error=e/> }.into_any(),
                    Ok(list) => {
                        let last = list.len() <= 1;
                        view! {
                            <table class="list" id="passkeys">
                                <thead><tr><th>"Name"</th><th>"Added (UTC)"</th><th>"Last used (UTC)"</th><th><span class="sr-only">"Actions"</span></th></tr></thead>
                                <tbody>
                                    {list.into_iter().map(|k| view! {
                                        <tr>
                                            <td>{k.name.clone()}</td>
                                            <td>{utc(k.created_at)}</td>
                                            <td>{k.last_used_at.map_or_else(|| "never".to_owned(), utc)}</td>
                                            <td>
                                                <form data-passkey="remove" class="remove-passkey">
                                                    <input type="hidden" name="id" value=k.id.clone()/>
                                                    <button type="submit" class="danger" disabled=last
                                                        title=if last { "Your last passkey cannot be removed" } else { "" }
                                                        aria-label=format!("Remove passkey {}", k.name)>
                                                        "Remove"
                                                    </button>
                                                    <span class="form-status" role="status" aria-live="polite" data-passkey-status></span>
                                                </form>
                                            </td>
                                        </tr>
                                    }).collect_view()}
                                </tbody>
                            </table>
                        }.into_any()
                    }
                })}
            </Transition>
            <h2>"Add a passkey"</h2>
            <form data-passkey="add" id="add-passkey" class="inline-form">
                <label for="new-passkey-name">"Name"</label>
                <input id="new-passkey-name" name="passkey_name" required maxlength="64" placeholder="Work phone"/>
                <button type="submit" class="primary">"Add passkey"</button>
                <span class="form-status" role="status" aria-live="polite" data-passkey-status></span>
            </form>
        </section>
    }
}
