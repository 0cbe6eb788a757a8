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

/// One operation: how it is served and how it is documented.
pub struct Route {
    /// `get`, `post`, `delete`.
    pub method: &'static str,
    /// axum path (`/api/sessions/{id}`).
    pub path: &'static str,
    /// One line for the docs.
    pub summary: &'static str,
    /// The JSON body, if any.
    pub request: Option<SchemaFn>,
    /// The 2xx JSON answer, if typed.
    pub response: Option<SchemaFn>,
    /// The handler.
    pub handler: MethodRouter<AppState>,
}

/// Errors every authenticated operation may answer, with the shared shape.
const ERRORS: &[(&str, &str)] = &[
    ("400", "malformed or invalid input"),
    ("401", "missing or invalid API key"),
    ("404", "no such session for this tenant"),
    ("410", "the session has ended"),
    ("413", "body or field too large"),
    (
        "422",
        "the page could not do it (no such element, navigation failed)",
    ),
    ("429", "a session limit is reached; see Retry-After"),
    ("502", "the browser failed; the session is now failed"),
    ("504", "the call ran out of time"),
];

/// Builds the OpenAPI 3.0 document for `routes`.
pub fn document(routes: &[Route]) -> Value {
    let mut generator = SchemaGenerator::new(SchemaSettings::openapi3());
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
        op.insert(
            "operationId".into(),
            json!(format!(
                "{}_{}",
                r.method,
                r.path
                    .trim_start_matches("/api/")
                    .replace(['/', '{', '}'], "_")
            )),
        );
        op.insert("security".into(), json!([{ "bearer": [] }]));
        let params: Vec<Value> = r
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({ "name": name, "in": "path", "required": true, "schema": { "type": "string" } }))
            .collect();
        if !params.is_empty() {
            op.insert("parameters".into(), Value::Array(params));
        }
        if let Some(req) = r.request {
            let schema = req(&mut generator);
            op.insert("requestBody".into(), json!({ "required": true, "content": { "application/json": { "schema": schema } } }));
        }
        let mut responses = Map::new();
        let ok = match r.response {
            Some(res) => {
                json!({ "description": "success", "content": { "application/json": { "schema": res(&mut generator) } } })
            }
            None => json!({ "description": "success" }),
        };
        responses.insert(
            if r.method == "post" && r.path == "/api/sessions" {
                "201"
            } else {
                "200"
            }
            .into(),
            ok,
        );
        for (code, text) in ERRORS {
            responses.insert((*code).into(), json!({ "description": text, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }));
        }
        op.insert("responses".into(), Value::Object(responses));
        paths
            .entry(r.path.to_owned())
            .or_insert_with(|| Value::Object(Map::new()))
            .as_object_mut()
            .expect("path item")
            .insert(r.method.into(), Value::Object(op));
    }
    let mut schemas = generator.take_definitions(true);
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

/// The handler serving a prebuilt document.
pub fn serve(doc: Value) -> MethodRouter<AppState> {
    axum::routing::get(move || {
        let doc = doc.clone();
        async move { Json(doc) }
    })
}
