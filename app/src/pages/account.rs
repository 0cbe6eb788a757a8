//! The operator's own passkeys: add another, remove one (never the last).

use leptos::prelude::*;

use crate::api::auth::{RemovePasskey, my_passkeys};
use crate::components::time::utc;
use crate::components::{ActionError, ErrorView};

/// My passkeys.
#[component]
pub fn Account() -> impl IntoView {
    let remove = ServerAction::<RemovePasskey>::new();
    let keys = Resource::new(move || remove.version().get(), |_| my_passkeys());
    // The add ceremony runs in passkey.js; it says when it is done.
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
    let error = Signal::derive(move || remove.value().get().and_then(Result::err));
    view! {
        <section class="page">
            <h1>"My passkeys"</h1>
            <p class="muted">"Each passkey can log you in. Keep at least two (say, a laptop and a phone) so losing one does not lock you out."</p>
            <ActionError error/>
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
                                                <ActionForm action=remove>
                                                    <input type="hidden" name="id" value=k.id.clone()/>
                                                    <button type="submit" class="danger" disabled=last
                                                        title=if last { "Your last passkey cannot be removed" } else { "" }
                                                        aria-label=format!("Remove passkey {}", k.name)>
                                                        "Remove"
                                                    </button>
                                                </ActionForm>
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
