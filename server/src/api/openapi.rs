//! `/api/openapi.json`, generated from the same route table that builds the
//! router, with request and response schemas derived from the Rust types.

use axum::Json;
use axum::routing::MethodRouter;
use schemars::generate::SchemaSettings;
use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value, json};

use crate::state::AppState;

/// A schema for a type, registered in the generator.
pub type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// Error answers a route may give: (status, code) pairs.
pub type Errors = &'static [(u16, &'static str)];

/// Every route: no key, a wrong key, an outage.
pub const AUTH: Errors = &[(401, "unauthorized"), (500, "internal")];
/// Routes with a JSON body.
pub const BODY: Errors = &[(400, "bad_request"), (413, "payload_too_large")];
/// Routes that open a session (`POST /api/sessions`, `POST /api/tasks`):
/// limits, a browser that does not start, grant refusals.
pub const OPEN_SESSION: Errors = &[
    (429, "too_many_requests"),
    (503, "unavailable"),
    (403, "grant_required"),
    (403, "grant_unknown"),
    (403, "grant_expired"),
    (403, "grant_revoked"),
    (403, "grant_consumed"),
    (403, "grant_wrong_tenant"),
    (403, "grant_too_narrow"),
];
/// Routes of one session (`{id}`).
/// (Several replicas: the session's replica unreachable for now, or a
/// forged internal hop.)
pub const SESSION: Errors = &[
    (404, "not_found"),
    (410, "gone"),
    (503, "replica_unreachable"),
    (401, "hop_refused"),
];
/// Routes that reach the session's browser.
pub const BROWSER: Errors = &[
    (403, "denied_by_policy"),
    (403, "denied_by_operator"),
    (403, "approval_timed_out"),
    (409, "operator_has_control"),
    (409, "dialog_open"),
    (422, "browser_error"),
    (422, "tab_crashed"),
    (502, "browser_failed"),
    (504, "timeout"),
];
/// Tools that act on an element.
pub const ELEMENT: Errors = &[
    (400, "invalid_selector"),
    (422, "element_not_found"),
    (422, "action_failed"),
];

/// `type_totp`.
pub const TOTP: Errors = &[(403, "totp_not_granted")];
/// Routes served by the replica that owns the resource (several
/// replicas): it cannot be reached now, or a forged internal hop.
pub const FORWARDED: Errors = &[(503, "replica_unreachable"), (401, "hop_refused")];

/// Stateful links (OpenAPI `links`, what schemathesis follows): an
/// operation's answer names a resource that other operations take as a
/// path parameter. (source operation, parameter, JSON pointer into its
/// answer); every operation whose path has the parameter (and whose other
/// parameters the source's own path has) is linked.
const LINKS: &[(&str, &str, &str, &str)] = &[
    ("post", "/api/sessions", "id", "/session_id"),
    ("post", "/api/sessions/{id}/tabs", "tab", "/tab_id"),
    ("post", "/api/sessions/{id}/live_link", "link", "/id"),
    ("post", "/api/grants/requests", "id", "/request_id"),
    ("post", "/api/tasks", "id", "/task_id"),
];

/// One operation: how it is served and how it is documented.
pub struct Route {
    /// `get`, `post`, `delete`.
    pub method: &'static str,
    /// axum path (`/api/sessions/{id}`).
    pub path: &'static str,
    /// One line for the docs.
    pub summary: &'static str,
    /// The JSON body, if any; for a `get`, the query string's fields.
    pub request: Option<SchemaFn>,
    /// The success status.
    pub success: u16,
    /// The success answer's JSON, if typed.
    pub response: Option<SchemaFn>,
    /// Every error it may answer, declared beside its handler.
    pub errors: &'static [Errors],
    /// The handler.
    pub handler: MethodRouter<AppState>,
}

impl Route {
    /// The (status, code) pairs it may answer with an error.
    pub fn error_codes(&self) -> impl Iterator<Item = (u16, &'static str)> + '_ {
        self.errors.iter().flat_map(|e| e.iter().copied())
    }
}

/// The tools (`/api/sessions/{id}/…`) that act on the page, whose page
/// may open a JavaScript dialog while they run.
const OPENS_DIALOGS: &[&str] = &[
    "navigate",
    "back",
    "forward",
    "reload",
    "click",
    "hover",
    "type",
    "type_totp",
    "press",
    "scroll",
    "select",
    "upload",
];

/// What each error code means, for the document.
pub fn describe(code: &str) -> &'static str {
    match code {
        "unauthorized" => "missing or invalid API key",
        "internal" => "a bug or an outage; the cause is logged, never shown",
        "bad_request" => "malformed or invalid input (the message names the field)",
        "payload_too_large" => {
            "the body (over 1 MiB; an upload's over upload_max_mb in base64) or a field is too large"
        }
        "not_found" => "no such resource for this tenant",
        "gone" => {
            "the session has ended (close_reason replica_lost: the replica that ran it is gone)"
        }
        "replica_unreachable" => {
            "the replica that runs the session cannot be reached now (several replicas); see Retry-After"
        }
        "hop_refused" => {
            "an internal hop between replicas that does not verify (wrong secret or deployment, replayed, stale)"
        }
        "browser_error" => "the browser answered with a protocol error",
        "tab_crashed" => "the active tab's renderer crashed; the session stays open",
        "browser_failed" => "the browser exited; the session is now failed",
        "timeout" => "the call ran out of time (timeout_ms or tool_timeout_s)",
        "invalid_selector" => "the CSS selector does not parse",
        "element_not_found" => "no element matches the selector, ref or point",
        "action_failed" => "the page could not do it (navigation error, no matching option)",
        "unknown_key" => "not a KeyboardEvent.key name press can send",
        "tab_not_found" => "no tab with this id in the session",
        "download_refused" => {
            "the URL is a download and the session refuses downloads (open it with downloads: allow)"
        }
        "downloads_denied" => "the session refuses downloads, so it has none to list or fetch",
        "download_not_found" => "no completed download of this name in the session",
        "invalid_file_name" => {
            "a file name is empty, over 255 bytes, . or .., or holds a path separator or control character"
        }
        "not_a_file_input" => {
            "the upload's target is not an <input type=file>; nothing was written"
        }
        "recording_quota_full" => {
            "audit recording is at the tenant's disk quota; the screenshot was not kept"
        }
        "last_tab" => "the session's last tab cannot be closed",
        "dialog_open" => {
            "a JavaScript dialog (alert, confirm, prompt, beforeunload) is open in the tab and stops its page; answer it with POST /api/sessions/{id}/dialog first (the message quotes it)"
        }
        "no_dialog" => "dialog: no JavaScript dialog is open in the active tab",
        "task_ended" => "the task has ended already",
        "operator_has_control" => {
            "an operator has taken control of the session from the live view; retry after they hand it back"
        }
        "denied_by_policy" => {
            "the risk gate refuses this action outright (typing into a password field: credentials come only from the vault); type_totp: a clean session, a grant that also allows CDP, a field that is not a text/number/tel/one-time-code input, or a page off the seeds' domains"
        }
        "denied_by_operator" => "the action waited for approval and an operator denied it",
        "totp_not_granted" => {
            "type_totp: the session's grant did not ask for second-factor codes (request one with \"totp\": true)"
        }
        "approval_timed_out" => {
            "the action waited for approval and no operator decided within approval_timeout_s; it did not run"
        }
        "too_many_requests" => "a session limit is reached; see Retry-After",
        "unavailable" => {
            "the browser could not be started, retry later; POST /api/tasks: no model is configured on this server (model_base_url), so tasks cannot run here"
        }
        "already_decided" => "the grant request was already decided",
        "grant_required" => "operator mode needs a grant token",
        "grant_unknown" => "no such grant token",
        "grant_expired" => "the grant token has expired",
        "grant_revoked" => "the grant token was revoked",
        "grant_consumed" => "the single-use grant token was already used",
        "live_links_disabled" => {
            "the tenant's settings do not allow live links ([tenant_live_links.<tenant>])"
        }
        "live_link_control_disabled" => {
            "the tenant allows only view links (control = false in [tenant_live_links.<tenant>])"
        }
        "grant_wrong_tenant" => "the grant token belongs to another tenant",
        "grant_too_narrow" => "the grant does not cover every domain asked for",
        _ => "",
    }
}

/// Builds the OpenAPI 3.0 document for `routes`.
pub fn document(routes: &[Route]) -> Value {
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
    // Answers are what the server serializes: a field it skips when empty
    // (`skip_serializing_if`) is optional there, though required in a body.
    let mut answers = SchemaGenerator::new(
        SchemaSettings::openapi3().with(|s| s.contract = schemars::generate::Contract::Serialize),
    );
    let error = json!({
        "type": "object",
        "required": ["error"],
        "properties": { "error": { "type": "object", "required": ["code", "message"], "properties": {
            "code": { "type": "string" }, "message": { "type": "string" } } } }
    });
    let mut paths = Map::new();
    for r in routes {
        let mut op = Map::new();
        op.insert("summary".into(), json!(r.summary));
        op.insert("operationId".into(), json!(operation_id(r)));
        op.insert("security".into(), json!([{ "bearer": [] }]));
        let mut params: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect();
        match r.request {
            Some(req) if r.method == "get" => params.extend(query_parameters(&mut generator, req)),
            Some(req) => {
                let schema = req(&mut generator);
                op.insert("requestBody".into(), json!({ "required": true, "content": { "application/json": { "schema": schema } } }));
            }
            None => {}
        }
        if !params.is_empty() {
            op.insert("parameters".into(), Value::Array(params));
        }
        let mut responses = Map::new();
        let ok = match r.response {
            // An action whose page opens a JavaScript dialog answers with
            // the dialog instead.
            Some(res)
                if OPENS_DIALOGS
                    .iter()
                    .any(|t| r.path.strip_prefix("/api/sessions/{id}/") == Some(t)) =>
            {
                let schema = json!({ "anyOf": [
                    res(&mut answers),
                    answers.subschema_for::<crate::sessions::tool::output::DialogOpened>(),
                ] });
                json!({ "description": "success; or, when the page opened a JavaScript dialog (which stops it until answered with dialog), dialog_opened", "content": { "application/json": { "schema": schema } } })
            }
            Some(res) => {
                json!({ "description": "success", "content": { "application/json": { "schema": res(&mut answers) } } })
            }
            None => json!({ "description": "success" }),
        };
        responses.insert(r.success.to_string(), ok);
        let mut by_status: std::collections::BTreeMap<u16, Vec<&str>> = Default::default();
        for (status, code) in r.error_codes() {
            let codes = by_status.entry(status).or_default();
            if !codes.contains(&code) {
                codes.push(code);
            }
        }
        for (status, codes) in by_status {
            let text = codes
                .iter()
                .map(|c| format!("`{c}`: {}", describe(c)))
                .collect::<Vec<_>>()
                .join("; ");
            responses.insert(
                status.to_string(),
                json!({
                    "description": text,
                    "content": { "application/json": { "schema": {
                        "type": "object",
                        "required": ["error"],
                        "properties": { "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {
                                "code": { "type": "string", "enum": codes },
                                "message": { "type": "string" }
                            }
                        } }
                    } } }
                }),
            );
        }
        for (status, res) in responses.iter_mut() {
            let h = headers(status.parse().unwrap_or_default());
            if h.as_object().is_some_and(|h| !h.is_empty()) {
                res["headers"] = h;
            }
        }
        op.insert("responses".into(), Value::Object(responses));
        paths
            .entry(r.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .expect("path item")
            .insert(r.method.into(), Value::Object(op));
    }
    add_links(&mut paths, routes);
    let mut schemas = generator.take_definitions(true);
    for (name, schema) in answers.take_definitions(true) {
        // A type both read and written has one schema under its name; the
        // unit tests build this document, so a difference fails there.
        if let Some(read) = schemas.get(&name) {
            assert_eq!(
                read, &schema,
                "{name} reads and writes differently; give the answer its own type"
            );
        }
        schemas.insert(name, schema);
    }
    schemas.insert("Error".into(), error);
    json!({
        "openapi": "3.0.3",
        "info": {
            "title": "Cordon agent API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Open, drive and close sandboxed browser sessions. Every call is audited before it runs."
        },
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer", "description": "a per-tenant API key (`cordon apikey create`)" } }
        }
    })
}

/// The headers an error answer of `status` carries.
fn headers(status: u16) -> Value {
    let retry = |required: bool| {
        json!({ "Retry-After": {
            "description": "seconds until a retry may succeed",
            "required": required,
            "schema": { "type": "integer", "minimum": 0 }
        } })
    };
    match status {
        429 => retry(true),
        // `replica_unreachable` says when to retry; `unavailable` does not.
        503 => retry(false),
        401 => json!({ "WWW-Authenticate": {
            "description": "`Bearer` (for `unauthorized`)",
            "schema": { "type": "string" }
        } }),
        _ => json!({}),
    }
}

/// A `get`'s query parameters: the fields of its query type, optional.
fn query_parameters(generator: &mut SchemaGenerator, query: SchemaFn) -> Vec<Value> {
    let schema = query(generator);
    let name = schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .unwrap_or_default()
        .to_owned();
    let resolved = generator
        .definitions()
        .get(&name)
        .cloned()
        .unwrap_or_else(|| schema.as_value().clone());
    let required: Vec<&str> = resolved["required"]
        .as_array()
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    resolved["properties"]
        .as_object()
        .map(|props| {
            props
                .iter()
                .map(|(field, s)| {
                    let mut s = s.clone();
                    let description = s
                        .as_object_mut()
                        .and_then(|o| o.remove("description"))
                        .unwrap_or(Value::Null);
                    // A query string has no null: absent is the default.
                    if let Some(o) = s.as_object_mut() {
                        o.remove("nullable");
                        if let Some(Value::Array(types)) = o.get("type") {
                            let types: Vec<Value> =
                                types.iter().filter(|t| *t != "null").cloned().collect();
                            if let [one] = types.as_slice() {
                                o.insert("type".into(), one.clone());
                            }
                        }
                    }
                    json!({
                        "name": field,
                        "in": "query",
                        "required": required.contains(&field.as_str()),
                        "description": description,
                        "schema": s
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Adds [`LINKS`] to the success answers of their source operations.
fn add_links(paths: &mut Map<String, Value>, routes: &[Route]) {
    let params = |path: &str| -> Vec<String> {
        path.split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(str::to_owned)
            .collect()
    };
    for (method, source, param, pointer) in LINKS {
        let Some(from) = routes
            .iter()
            .find(|r| r.method == *method && r.path == *source)
        else {
            continue;
        };
        let known = params(source);
        let mut links = Map::new();
        for to in routes {
            let wanted = params(to.path);
            if !wanted.iter().any(|p| p == param)
                || !wanted.iter().all(|p| p == param || known.contains(p))
            {
                continue;
            }
            let op_id = operation_id(to);
            let mut parameters = Map::new();
            for p in wanted {
                let value = if p == *param {
                    format!("$response.body#{pointer}")
                } else {
                    format!("$request.path.{p}")
                };
                parameters.insert(p, json!(value));
            }
            links.insert(
                op_id.clone(),
                json!({ "operationId": op_id, "parameters": parameters }),
            );
        }
        if let Some(ok) = paths
            .get_mut(from.path)
            .and_then(|item| item.get_mut(from.method))
            .and_then(|op| op.get_mut("responses"))
            .and_then(|res| res.get_mut(from.success.to_string()))
            .and_then(Value::as_object_mut)
        {
            ok.insert("links".into(), Value::Object(links));
        }
    }
}

/// The operation's id: method and path (`post_sessions__id__navigate`).
fn operation_id(r: &Route) -> String {
    format!(
        "{}_{}",
        r.method,
        r.path
            .trim_start_matches("/api/")
            .replace(['/', '{', '}'], "_")
    )
}

/// Fills in limits that are settings rather than constants: for each
/// (schema, property, keyword, value), the property's keyword.
pub fn set_limits(doc: &mut Value, limits: &[(&str, &str, &str, u64)]) {
    for (schema, property, keyword, value) in limits {
        if let Some(p) = doc["components"]["schemas"][*schema]["properties"]
            .get_mut(*property)
            .and_then(Value::as_object_mut)
        {
            p.insert((*keyword).into(), json!(value));
        }
    }
}

/// The handler serving a prebuilt document.
pub fn serve(doc: Value) -> MethodRouter<AppState> {
    axum::routing::get(move || {
        let doc = doc.clone();
        async move { Json(doc) }
    })
}
