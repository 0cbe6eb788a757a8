//! Live pages: the server's change notices (`/ui/events`, Server-Sent
//! Events) make pages refetch what they show. No polling loop: nothing
//! happens until the server says an area changed.
//!
//! One stream per page, however many parts of it listen (the layout's
//! badges and the page's lists): a browser keeps at most six HTTP/1.1
//! connections to a host, and a stream per listener (three or four a page)
//! left a second dashboard tab, or the next page load while the old
//! page's streams were still open, waiting for a free connection.

#[cfg(feature = "hydrate")]
use leptos::prelude::*;

#[cfg(feature = "hydrate")]
mod shared {
    use std::cell::RefCell;

    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;

    /// The page's one stream and how many listeners hold it.
    struct Stream {
        source: web_sys::EventSource,
        holders: usize,
        _ready: Closure<dyn Fn(web_sys::MessageEvent)>,
    }

    thread_local! {
        static STREAM: RefCell<Option<Stream>> = const { RefCell::new(None) };
    }

    /// The page's stream, opened by its first holder.
    pub fn hold() -> Option<web_sys::EventSource> {
        STREAM.with(|s| {
            let mut s = s.borrow_mut();
            if let Some(stream) = s.as_mut() {
                stream.holders += 1;
                return Some(stream.source.clone());
            }
            let source = web_sys::EventSource::new("/ui/events").ok()?;
            // Mark the page as live once the stream is up (tests wait for it).
            let ready = Closure::<dyn Fn(web_sys::MessageEvent)>::new(move |_| {
                if let Some(body) = leptos::prelude::document().body() {
                    let _ = body.set_attribute("data-live", "true");
                }
            });
            let _ =
                source.add_event_listener_with_callback("ready", ready.as_ref().unchecked_ref());
            *s = Some(Stream {
                source: source.clone(),
                holders: 1,
                _ready: ready,
            });
            Some(source)
        })
    }

    /// One holder lets go; the last closes the stream.
    pub fn release() {
        STREAM.with(|s| {
            let mut s = s.borrow_mut();
            let last = s.as_mut().is_some_and(|stream| {
                stream.holders = stream.holders.saturating_sub(1);
                stream.holders == 0
            });
            if last && let Some(stream) = s.take() {
                stream.source.close();
            }
        });
    }
}

/// Calls `refetch` whenever the server says one of `topics` changed (in
/// the browser only; on the server this does nothing). The listener goes,
/// and the page's stream closes with its last listener, when the
/// component does.
pub fn on_change(topics: &'static [&'static str], refetch: impl Fn() + Clone + 'static) {
    #[cfg(feature = "hydrate")]
    {
        use wasm_bindgen::JsCast;
        use wasm_bindgen::closure::Closure;
        Effect::new(move |_| {
            let Some(source) = shared::hold() else {
                return;
            };
            let mut listeners = Vec::new();
            for topic in topics {
                let refetch = refetch.clone();
                let cb = Closure::<dyn Fn(web_sys::MessageEvent)>::new(move |_| refetch());
                let _ = source.add_event_listener_with_callback(topic, cb.as_ref().unchecked_ref());
                listeners.push((*topic, cb));
            }
            let held = send_wrapper::SendWrapper::new((source, listeners));
            on_cleanup(move || {
                let (source, listeners) = held.take();
                for (topic, cb) in &listeners {
                    let _ = source
                        .remove_event_listener_with_callback(topic, cb.as_ref().unchecked_ref());
                }
                shared::release();
            });
        });
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = (topics, refetch);
    }
}
