//! `/api/sessions`: open, inspect and close sessions, and drive them with
//! tools. One table drives both the router and the OpenAPI document.

mod lifecycle;
mod tabs;
mod target;
mod tools;

use axum::Router;
use axum::routing::{delete, get, post};
use schemars::{JsonSchema, Schema, SchemaGenerator};

use crate::api::openapi::{self, Route};
use crate::cdp::Navigation;
use crate::sessions::{OpenRequest, SessionInfo};
use crate::state::AppState;

fn s<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

fn list_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<Vec<T>>()
}

/// Every agent API operation.
pub fn routes() -> Vec<Route> {
    macro_rules! route {
        ($m:ident, $path:literal, $summary:literal, $handler:expr, $req:expr, $res:expr) => {
            Route {
                method: stringify!($m),
                path: $path,
                summary: $summary,
                request: $req,
                response: $res,
                handler: $m($handler),
            }
        };
    }
    let mut routes = vec![
        route!(
            post,
            "/api/sessions",
            "Open a session (clean, from the warm pool when one is ready)",
            lifecycle::open,
            Some(s::<OpenRequest>),
            Some(s::<SessionInfo>)
        ),
        route!(
            get,
            "/api/sessions",
            "List this tenant's sessions, newest first (?limit=1..500)",
            lifecycle::list,
            None,
            Some(list_of::<SessionInfo>)
        ),
        route!(
            get,
            "/api/sessions/{id}",
            "A session's state",
            lifecycle::show,
            None,
            Some(s::<SessionInfo>)
        ),
        route!(
            delete,
            "/api/sessions/{id}",
            "Close a session: its browser and profile are destroyed",
            lifecycle::close,
            None,
            Some(s::<SessionInfo>)
        ),
        route!(
            post,
            "/api/sessions/{id}/navigate",
            "Load a URL (http/https only) and wait for load, domcontentloaded or networkidle",
            tools::navigate,
            Some(s::<tools::NavigateReq>),
            Some(s::<Navigation>)
        ),
        route!(
            post,
            "/api/sessions/{id}/screenshot",
            "Capture the viewport or the full page as PNG or JPEG",
            tools::screenshot,
            Some(s::<tools::ScreenshotReq>),
            Some(s::<tools::ScreenshotRes>)
        ),
        route!(
            post,
            "/api/sessions/{id}/click",
            "Click a point, a CSS selector or a snapshot ref",
            tools::click,
            Some(s::<tools::ElementReq>),
            Some(s::<tools::Done>)
        ),
        route!(
            post,
            "/api/sessions/{id}/hover",
            "Move the mouse over a point, selector or ref",
            tools::hover,
            Some(s::<tools::ElementReq>),
            Some(s::<tools::Done>)
        ),
        route!(
            post,
            "/api/sessions/{id}/type",
            "Type text into the focus, a selector or a ref (audited as its length only)",
            tools::type_text,
            Some(s::<tools::TypeReq>),
            Some(s::<tools::Done>)
        ),
        route!(
            post,
            "/api/sessions/{id}/press",
            "Press one key (KeyboardEvent.key name)",
            tools::press,
            Some(s::<tools::PressReq>),
            Some(s::<tools::Done>)
        ),
        route!(
            post,
            "/api/sessions/{id}/scroll",
            "Wheel-scroll at the viewport centre or an element",
            tools::scroll,
            Some(s::<tools::ScrollReq>),
            Some(s::<tools::Done>)
        ),
        route!(
            post,
            "/api/sessions/{id}/select",
            "Choose options of a <select> by value or text",
            tools::select,
            Some(s::<tools::SelectReq>),
            None
        ),
        route!(
            post,
            "/api/sessions/{id}/wait_for",
            "Wait until text or a selector is present",
            tools::wait_for,
            Some(s::<tools::WaitForReq>),
            None
        ),
        route!(
            post,
            "/api/sessions/{id}/read_dom",
            "The page's HTML, truncated to max_chars",
            tools::read_dom,
            Some(s::<tools::ReadDomReq>),
            None
        ),
        route!(
            post,
            "/api/sessions/{id}/snapshot",
            "Accessibility snapshot with refs (password values never included)",
            tools::snapshot,
            Some(s::<tools::SnapshotReq>),
            None
        ),
        route!(
            post,
            "/api/sessions/{id}/back",
            "Go back in the tab's history",
            tools::back,
            None,
            None
        ),
        route!(
            post,
            "/api/sessions/{id}/forward",
            "Go forward in the tab's history",
            tools::forward,
            None,
            None
        ),
        route!(
            post,
            "/api/sessions/{id}/reload",
            "Reload the tab",
            tools::reload,
            None,
            Some(s::<tools::Done>)
        ),
        route!(
            post,
            "/api/sessions/{id}/pdf",
            "Print the tab to PDF (base64)",
            tools::pdf,
            None,
            None
        ),
        route!(
            get,
            "/api/sessions/{id}/tabs",
            "List tabs",
            tabs::list,
            None,
            Some(list_of::<tabs::TabInfo>)
        ),
        route!(
            post,
            "/api/sessions/{id}/tabs",
            "Open a tab (optionally at a URL) and make it active",
            tabs::open,
            Some(s::<tabs::OpenTabReq>),
            Some(s::<tabs::TabInfo>)
        ),
        route!(
            post,
            "/api/sessions/{id}/tabs/{tab}/focus",
            "Make a tab the one tools act on",
            tabs::focus,
            None,
            Some(s::<tabs::TabInfo>)
        ),
        route!(
            delete,
            "/api/sessions/{id}/tabs/{tab}",
            "Close a tab (not the last)",
            tabs::close,
            None,
            None
        ),
    ];
    routes.extend(crate::api::grants::routes());
    routes
}

/// The session routes and `/api/openapi.json`.
pub fn router() -> Router<AppState> {
    let routes = routes();
    let doc = openapi::document(&routes);
    let mut router = Router::new().route("/api/openapi.json", openapi::serve(doc));
    for r in routes {
        router = router.route(r.path, r.handler);
    }
    router
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_document_describes_every_route_with_its_schemas() {
        let routes = routes();
        let doc = openapi::document(&routes);
        for r in &routes {
            let op = &doc["paths"][r.path][r.method];
            assert!(op.is_object(), "{} {} missing", r.method, r.path);
            assert_eq!(
                op["requestBody"].is_object(),
                r.request.is_some(),
                "{} {}",
                r.method,
                r.path
            );
        }
        let schemas = &doc["components"]["schemas"];
        assert!(
            schemas["NavigateReq"]["properties"]["url"].is_object(),
            "{schemas}"
        );
        assert!(schemas["OpenRequest"]["properties"]["credential_mode"].is_object());
        assert!(
            doc["paths"]["/api/sessions/{id}/navigate"]["post"]["responses"]["401"].is_object()
        );
    }
}
