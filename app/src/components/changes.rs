//! Live pages: the server's change notices (`/ui/events`, Server-Sent
//! Events) make pages refetch what they show. No polling loop: nothing
//! happens until the server says an area changed.

#[cfg(feature = "hydrate")]
use leptos::prelude::*;

/// Calls `refetch` whenever the server says one of `topics` changed (in
/// the browser only; on the server this does nothing). The stream closes
/// when the page goes away.
pub fn on_change(topics: &'static [&'static str], refetch: impl Fn() + Clone + 'static) {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        use wasm_bindgen::closure::Closure;
        Effect::new(move |_| {
            let Ok(source) = web_sys::EventSource::new("/ui/events") else {
                return;
            };
            for topic in topics {
                let refetch = refetch.clone();
                let cb = Closure::<dyn Fn(web_sys::MessageEvent)>::new(move |_| refetch());
                let _ = source.add_event_listener_with_callback(topic, cb.as_ref().unchecked_ref());
                cb.forget();
            }
            // Mark the page as live once the stream is up (tests wait for it).
            let ready = Closure::<dyn Fn(web_sys::MessageEvent)>::new(move |_| {
                if let Some(body) = document().body() {
                    let _ = body.set_attribute("data-live", "true");
                }
            });
            let _ =
                source.add_event_listener_with_callback("ready", ready.as_ref().unchecked_ref());
            ready.forget();
            let source = send_wrapper::SendWrapper::new(source);
            on_cleanup(move || source.close());
        });
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (topics, refetch);
    }
}
