//! The agent API's one table: every operation's method, path, summary,
//! handler, request and response schemas and declared errors, from which
//! `router` builds the routes and `openapi` the document.

use axum::extract::{DefaultBodyLimit, Path, State};
use axum::routing::{delete, get, post};
use schemars::{JsonSchema, Schema, SchemaGenerator};

use super::session_ref::SessionRef;
use super::{files, lifecycle, live_link, tools};
use crate::api::json::ApiJson;
use crate::api::openapi::{
    AUTH, BODY, BROWSER, ELEMENT, Errors, FORWARDED, OPEN_SESSION, Route, SESSION, TOTP,
};
use crate::sessions::files::{DownloadInfo, Uploaded};
use crate::sessions::tool::input::{
    DialogReq, ElementReq, NavigateReq, OpenTabReq, PressReq, ReadDomReq, ScreenshotReq, ScrollReq,
    SelectReq, SnapshotReq, TypeReq, TypeTotpReq, UploadReq, WaitForReq,
};
use crate::sessions::tool::output::{
    DialogAnswered, Dom, Done, Navigated, Pdf, Screenshot, Selected, SnapshotResult, TabClosed,
    TabInfo, TypedCode, Waited,
};
use crate::sessions::{OpenRequest, SessionInfo, Tool};
use crate::state::AppState;

fn s<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

fn list_of<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<Vec<T>>()
}

const TABS: Errors = &[(404, "tab_not_found")];
const TAB_CLOSE: Errors = &[(404, "tab_not_found"), (409, "last_tab")];
const DIALOG: Errors = &[(409, "no_dialog"), (404, "tab_not_found")];
const PRESS: Errors = &[(400, "unknown_key")];
const NAVIGATION: Errors = &[(422, "action_failed"), (422, "download_refused")];
const WAIT: Errors = &[(400, "invalid_selector")];
const LIST: Errors = &[(400, "bad_request")];
const UPLOAD: Errors = &[(400, "invalid_file_name"), (422, "not_a_file_input")];
const DOWNLOADS: Errors = &[(409, "downloads_denied")];
const DOWNLOAD: Errors = &[(400, "invalid_file_name"), (404, "download_not_found")];
const LIVE_LINK: Errors = &[
    (403, "live_links_disabled"),
    (403, "live_link_control_disabled"),
    (429, "too_many_requests"),
];

/// The one route whose body may exceed the server's default limit (its
/// own is `upload_max_mb` in base64; `startup` applies it).
pub const UPLOAD_PATH: &str = "/api/sessions/{id}/upload";

/// A tool whose JSON body becomes a call through `$parse`.
macro_rules! body_tool {
    ($t:ty, $parse:expr) => {
        |State(state): State<AppState>, r: SessionRef, body: ApiJson<$t>| {
            tools::with_body(state, r, body, $parse)
        }
    };
}

/// A tool without a body.
macro_rules! plain_tool {
    ($tool:expr) => {
        |state: State<AppState>, r: SessionRef| tools::plain(state, r, $tool)
    };
}

/// A tool on the `{tab}` path segment.
macro_rules! tab_tool {
    ($tool:expr) => {
        |state: State<AppState>, r: SessionRef, p: Path<(String, String)>| {
            tools::on_tab(state, r, p, $tool)
        }
    };
}

/// Every agent API operation.
pub fn routes() -> Vec<Route> {
    macro_rules! route {
        ($m:ident, $path:literal, $summary:literal, $handler:expr, $req:expr, $ok:literal, $res:expr, $errors:expr) => {
            Route {
                method: stringify!($m),
                path: $path,
                summary: $summary,
                request: $req,
                success: $ok,
                response: $res,
                errors: $errors,
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
            201,
            Some(s::<SessionInfo>),
            &[AUTH, BODY, OPEN_SESSION]
        ),
        route!(
            get,
            "/api/sessions",
            "List this tenant's sessions, newest first (?limit=1..500)",
            lifecycle::list,
            Some(s::<lifecycle::ListQuery>),
            200,
            Some(list_of::<SessionInfo>),
            &[AUTH, LIST]
        ),
        route!(
            get,
            "/api/sessions/{id}",
            "A session's state",
            lifecycle::show,
            None,
            200,
            Some(s::<SessionInfo>),
            &[AUTH, &[(404, "not_found")], FORWARDED]
        ),
        route!(
            delete,
            "/api/sessions/{id}",
            "Close a session: its browser and profile are destroyed",
            lifecycle::close,
            None,
            200,
            Some(s::<SessionInfo>),
            &[AUTH, SESSION]
        ),
        route!(
            post,
            "/api/sessions/{id}/cdp_token",
            "A single-use CDP WebSocket URL (valid 30 s, for this session and key) for clients that cannot send Authorization; GET /cdp/{id} with the key as Bearer works without one",
            lifecycle::cdp_token,
            None,
            201,
            Some(s::<lifecycle::CdpToken>),
            &[AUTH, SESSION]
        ),
        route!(
            post,
            "/api/sessions/{id}/live_link",
            "A live link: a page showing this session's browser (and, in control mode, taking the pointer and keyboard as this agent) for the agent's own user, to open or put in an <iframe> on the tenant's allowed origins; off unless the tenant's settings allow it",
            live_link::create,
            Some(s::<live_link::LiveLinkReq>),
            201,
            Some(s::<live_link::LiveLink>),
            &[AUTH, BODY, SESSION, LIVE_LINK]
        ),
        route!(
            get,
            "/api/sessions/{id}/live_link",
            "This session's live links, newest first (their URLs are shown only when made)",
            live_link::list,
            None,
            200,
            Some(list_of::<live_link::LiveLink>),
            &[AUTH, SESSION]
        ),
        route!(
            delete,
            "/api/sessions/{id}/live_link/{link}",
            "Revoke a live link of this session: its open views end within a second",
            live_link::revoke,
            None,
            204,
            None,
            &[AUTH, SESSION, &[(404, "not_found")]]
        ),
        route!(
            post,
            "/api/sessions/{id}/navigate",
            "Load a URL (http/https only) and wait for load, domcontentloaded or networkidle; a main frame the egress guard refused is named in egress_refused",
            body_tool!(NavigateReq, NavigateReq::into_call),
            Some(s::<NavigateReq>),
            200,
            Some(s::<Navigated>),
            &[AUTH, BODY, SESSION, BROWSER, NAVIGATION]
        ),
        route!(
            post,
            "/api/sessions/{id}/screenshot",
            "Capture the viewport or the full page as PNG or JPEG",
            body_tool!(ScreenshotReq, ScreenshotReq::into_call),
            Some(s::<ScreenshotReq>),
            200,
            Some(s::<Screenshot>),
            &[
                AUTH,
                BODY,
                SESSION,
                BROWSER,
                &[(507, "recording_quota_full")]
            ]
        ),
        route!(
            post,
            "/api/sessions/{id}/click",
            "Click a point, a CSS selector or a snapshot ref",
            body_tool!(ElementReq, ElementReq::into_click),
            Some(s::<ElementReq>),
            200,
            Some(s::<Done>),
            &[AUTH, BODY, SESSION, BROWSER, ELEMENT]
        ),
        route!(
            post,
            "/api/sessions/{id}/hover",
            "Move the mouse over a point, selector or ref",
            body_tool!(ElementReq, ElementReq::into_hover),
            Some(s::<ElementReq>),
            200,
            Some(s::<Done>),
            &[AUTH, BODY, SESSION, BROWSER, ELEMENT]
        ),
        route!(
            post,
            "/api/sessions/{id}/type",
            "Type text into the focus, a selector or a ref (audited as its length only)",
            body_tool!(TypeReq, TypeReq::into_call),
            Some(s::<TypeReq>),
            200,
            Some(s::<Done>),
            &[AUTH, BODY, SESSION, BROWSER, ELEMENT]
        ),
        route!(
            post,
            "/api/sessions/{id}/type_totp",
            "Type the current code of a vault TOTP seed into a field (operator-mode sessions whose grant has totp: true); the answer says how many digits, never which",
            body_tool!(TypeTotpReq, TypeTotpReq::into_call),
            Some(s::<TypeTotpReq>),
            200,
            Some(s::<TypedCode>),
            &[AUTH, BODY, SESSION, BROWSER, ELEMENT, TOTP]
        ),
        route!(
            post,
            "/api/sessions/{id}/press",
            "Press one key (KeyboardEvent.key name)",
            body_tool!(PressReq, PressReq::into_call),
            Some(s::<PressReq>),
            200,
            Some(s::<Done>),
            &[AUTH, BODY, SESSION, BROWSER, PRESS]
        ),
        route!(
            post,
            "/api/sessions/{id}/dialog",
            "Answer the JavaScript dialog open in the active tab (or in tab_id's: a popup's dialog stops its opener too): OK (accept: true, with text for a prompt) or Cancel; OK on a confirm or prompt is judged by the risk gate by its message",
            body_tool!(DialogReq, DialogReq::into_call),
            Some(s::<DialogReq>),
            200,
            Some(s::<DialogAnswered>),
            &[AUTH, BODY, SESSION, BROWSER, DIALOG]
        ),
        route!(
            post,
            "/api/sessions/{id}/scroll",
            "Wheel-scroll at the viewport centre or an element",
            body_tool!(ScrollReq, ScrollReq::into_call),
            Some(s::<ScrollReq>),
            200,
            Some(s::<Done>),
            &[AUTH, BODY, SESSION, BROWSER, ELEMENT]
        ),
        route!(
            post,
            "/api/sessions/{id}/select",
            "Choose options of a <select> by value or text",
            body_tool!(SelectReq, SelectReq::into_call),
            Some(s::<SelectReq>),
            200,
            Some(s::<Selected>),
            &[AUTH, BODY, SESSION, BROWSER, ELEMENT]
        ),
        route!(
            post,
            "/api/sessions/{id}/wait_for",
            "Wait until text or a selector is present",
            body_tool!(WaitForReq, WaitForReq::into_call),
            Some(s::<WaitForReq>),
            200,
            Some(s::<Waited>),
            &[AUTH, BODY, SESSION, BROWSER, WAIT]
        ),
        route!(
            post,
            "/api/sessions/{id}/read_dom",
            "The page's HTML, truncated to max_chars",
            body_tool!(ReadDomReq, ReadDomReq::into_call),
            Some(s::<ReadDomReq>),
            200,
            Some(s::<Dom>),
            &[AUTH, BODY, SESSION, BROWSER]
        ),
        route!(
            post,
            "/api/sessions/{id}/snapshot",
            "Accessibility snapshot with refs (password values never included)",
            body_tool!(SnapshotReq, SnapshotReq::into_call),
            Some(s::<SnapshotReq>),
            200,
            Some(s::<SnapshotResult>),
            &[AUTH, BODY, SESSION, BROWSER]
        ),
        route!(
            post,
            "/api/sessions/{id}/back",
            "Go back in the tab's history (moved: false at its start)",
            plain_tool!(Tool::Back),
            None,
            200,
            Some(s::<Navigated>),
            &[AUTH, SESSION, BROWSER, NAVIGATION]
        ),
        route!(
            post,
            "/api/sessions/{id}/forward",
            "Go forward in the tab's history (moved: false at its end)",
            plain_tool!(Tool::Forward),
            None,
            200,
            Some(s::<Navigated>),
            &[AUTH, SESSION, BROWSER, NAVIGATION]
        ),
        route!(
            post,
            "/api/sessions/{id}/reload",
            "Reload the tab",
            plain_tool!(Tool::Reload),
            None,
            200,
            Some(s::<Navigated>),
            &[AUTH, SESSION, BROWSER, NAVIGATION]
        ),
        route!(
            post,
            "/api/sessions/{id}/pdf",
            "Print the tab to PDF (base64)",
            plain_tool!(Tool::Pdf),
            None,
            200,
            Some(s::<Pdf>),
            &[AUTH, SESSION, BROWSER]
        ),
        route!(
            get,
            "/api/sessions/{id}/tabs",
            "List tabs",
            plain_tool!(Tool::TabsList),
            None,
            200,
            Some(list_of::<TabInfo>),
            &[AUTH, SESSION, BROWSER]
        ),
        route!(
            post,
            "/api/sessions/{id}/tabs",
            "Open a tab (optionally at a URL) and make it active",
            body_tool!(OpenTabReq, OpenTabReq::into_call),
            Some(s::<OpenTabReq>),
            200,
            Some(s::<TabInfo>),
            &[AUTH, BODY, SESSION, BROWSER, NAVIGATION]
        ),
        route!(
            post,
            "/api/sessions/{id}/tabs/{tab}/focus",
            "Make a tab the one tools act on",
            tab_tool!(|tab| Tool::TabFocus { tab }),
            None,
            200,
            Some(s::<TabInfo>),
            &[AUTH, SESSION, BROWSER, TABS]
        ),
        route!(
            delete,
            "/api/sessions/{id}/tabs/{tab}",
            "Close a tab (not the last)",
            tab_tool!(|tab| Tool::TabClose { tab }),
            None,
            200,
            Some(s::<TabClosed>),
            &[AUTH, SESSION, BROWSER, TAB_CLOSE]
        ),
    ];
    routes.push(Route {
        method: "post",
        path: UPLOAD_PATH,
        summary: "Set files on an <input type=file> (selector or ref) from base64 contents; \
                  at most upload_max_mb in all, audited by name, size and SHA-256, never content",
        request: Some(s::<UploadReq>),
        success: 200,
        response: Some(s::<Uploaded>),
        errors: &[AUTH, BODY, SESSION, BROWSER, ELEMENT, UPLOAD],
        // Bounded by `startup`'s per-route body limit instead of axum's 2 MiB.
        handler: post(body_tool!(UploadReq, UploadReq::into_call))
            .layer(DefaultBodyLimit::disable()),
    });
    routes.extend([
        route!(
            get,
            "/api/sessions/{id}/downloads",
            "The session's downloads (name, size, sha256, state, created_at); only for a session opened with downloads: allow",
            files::list,
            None,
            200,
            Some(list_of::<DownloadInfo>),
            &[AUTH, SESSION, DOWNLOADS]
        ),
        route!(
            get,
            "/api/sessions/{id}/downloads/{name}",
            "A completed download's bytes (Content-Disposition: attachment)",
            files::fetch,
            None,
            200,
            None,
            &[AUTH, SESSION, DOWNLOADS, DOWNLOAD]
        ),
    ]);
    routes.extend(crate::api::grants::routes());
    routes.extend(crate::api::tasks::routes());
    routes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::openapi;

    #[test]
    fn the_document_describes_every_route_with_its_schemas() {
        let routes = routes();
        let doc = openapi::document(&routes);
        for r in &routes {
            let op = &doc["paths"][r.path][r.method];
            assert!(op.is_object(), "{} {} missing", r.method, r.path);
            assert_eq!(
                op["requestBody"].is_object(),
                r.request.is_some() && r.method != "get",
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
        assert!(
            doc["paths"]["/api/grants/requests"]["post"]["responses"]["201"].is_object(),
            "creating a grant request answers 201"
        );
        let forbidden = &doc["paths"]["/api/sessions"]["post"]["responses"]["403"];
        let codes = &forbidden["content"]["application/json"]["schema"]["properties"]["error"]["properties"]
            ["code"]["enum"];
        assert!(
            codes.as_array().is_some_and(|c| c.len() == 7),
            "{forbidden}"
        );
    }

    #[test]
    fn every_declared_error_code_is_described() {
        for r in routes() {
            for (status, code) in r.error_codes() {
                assert!(
                    !openapi::describe(code).is_empty(),
                    "{} {}: {status} {code} has no description",
                    r.method,
                    r.path
                );
            }
        }
    }
}
