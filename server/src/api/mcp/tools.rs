//! The MCP tools: a table of names, descriptions and input schemas, and how
//! each tool's arguments become a call of the engine functions the HTTP
//! handlers call. The schemas are generated from the HTTP API's own input
//! types (`sessions/tool/input.rs`, `OpenRequest`, `NewGrantRequest`), with
//! `session_id` added where the HTTP API has it in the path.

use std::sync::{Arc, LazyLock};

use rmcp::handler::server::common::schema_for_input;
use rmcp::model::{JsonObject, Tool as McpTool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::answer;
use crate::api::auth::Agent;
use crate::audit::Actor;
use crate::domain::GrantRequestId;
use crate::error::ApiError;
use crate::grants::{self, NewGrantRequest};
use crate::sessions::tool::input::{
    DialogReq, ElementReq, NavigateReq, PressReq, ReadDomReq, ScreenshotReq, ScrollReq, SelectReq,
    SnapshotReq, TabsReq, TypeReq, TypeTotpReq, UploadReq, WaitForReq,
};
use crate::sessions::{OpenRequest, Tool, ToolCall, ToolError};
use crate::state::AppState;

/// The arguments of a tool without any of its own (besides `session_id`).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// The arguments of `browser_grant_status` (the HTTP API has the id in the path).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantStatusReq {
    /// The `gr_…` id `browser_request_grant` answered.
    pub request_id: String,
}

/// What a tool does with its arguments.
#[derive(Clone, Copy)]
enum Action {
    /// A browser tool on a session: the arguments other than `session_id`
    /// become a [`ToolCall`] for `SessionManager::run_tool`.
    Session(fn(JsonObject) -> Result<ToolCall, ApiError>),
    /// `SessionManager::open`.
    Open,
    /// `SessionManager::close`.
    Close,
    /// `grants::request`.
    RequestGrant,
    /// `grants::poll`.
    GrantStatus,
    /// `Tasks::run`.
    RunTask,
}

/// One MCP tool.
struct Entry {
    name: &'static str,
    /// The HTTP operation it mirrors (its summary is the description), or
    /// the description itself for a tool the HTTP API spreads over routes.
    about: About,
    schema: fn() -> Arc<JsonObject>,
    action: Action,
}

#[derive(Clone, Copy)]
enum About {
    Route(&'static str, &'static str),
    Text(&'static str),
}

/// Parses a session tool's arguments (less `session_id`) as `T`, then into a call.
fn parse<T: DeserializeOwned>(
    args: JsonObject,
    into: fn(T) -> Result<ToolCall, ToolError>,
) -> Result<ToolCall, ApiError> {
    into(arguments(args)?).map_err(ApiError::from)
}

/// `T` from the arguments; a wrong one is `bad_request` naming the field,
/// as the HTTP API's JSON bodies are.
fn arguments<T: DeserializeOwned>(args: JsonObject) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(Value::Object(args))
        .map_err(|e| ApiError::BadRequest(format!("invalid arguments: {e}")))
}

macro_rules! session_tool {
    ($t:ty, $into:expr) => {
        Action::Session(|args| parse::<$t>(args, $into))
    };
}

/// The schema of `T` as a tool input.
fn input<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    schema_for_input::<T>().expect("every tool input is a JSON object")
}

/// The schema of `T` with a required `session_id` in front.
fn on_session<T: JsonSchema + 'static>() -> Arc<JsonObject> {
    let mut schema = input::<T>().as_ref().clone();
    let props = schema
        .entry("properties")
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .expect("properties is an object");
    props.insert(
        "session_id".into(),
        json!({ "type": "string", "description": "The session (`ses_…`) from browser_open_session." }),
    );
    let required = schema
        .entry("required")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .expect("required is an array");
    required.insert(0, json!("session_id"));
    Arc::new(schema)
}

const SESSION: &str = "/api/sessions/{id}";

fn table() -> Vec<Entry> {
    let e = |name, about, schema, action| Entry {
        name,
        about,
        schema,
        action,
    };
    let tool = |t: &'static str| About::Route("post", t);
    vec![
        e(
            "browser_open_session",
            About::Route("post", "/api/sessions"),
            input::<OpenRequest>,
            Action::Open,
        ),
        e(
            "browser_navigate",
            tool("/api/sessions/{id}/navigate"),
            on_session::<NavigateReq>,
            session_tool!(NavigateReq, NavigateReq::into_call),
        ),
        e(
            "browser_snapshot",
            tool("/api/sessions/{id}/snapshot"),
            on_session::<SnapshotReq>,
            session_tool!(SnapshotReq, SnapshotReq::into_call),
        ),
        e(
            "browser_screenshot",
            tool("/api/sessions/{id}/screenshot"),
            on_session::<ScreenshotReq>,
            session_tool!(ScreenshotReq, ScreenshotReq::into_call),
        ),
        e(
            "browser_click",
            tool("/api/sessions/{id}/click"),
            on_session::<ElementReq>,
            session_tool!(ElementReq, ElementReq::into_click),
        ),
        e(
            "browser_type",
            tool("/api/sessions/{id}/type"),
            on_session::<TypeReq>,
            session_tool!(TypeReq, TypeReq::into_call),
        ),
        e(
            "browser_type_totp",
            tool("/api/sessions/{id}/type_totp"),
            on_session::<TypeTotpReq>,
            session_tool!(TypeTotpReq, TypeTotpReq::into_call),
        ),
        e(
            "browser_press",
            tool("/api/sessions/{id}/press"),
            on_session::<PressReq>,
            session_tool!(PressReq, PressReq::into_call),
        ),
        e(
            "browser_dialog",
            tool("/api/sessions/{id}/dialog"),
            on_session::<DialogReq>,
            session_tool!(DialogReq, DialogReq::into_call),
        ),
        e(
            "browser_scroll",
            tool("/api/sessions/{id}/scroll"),
            on_session::<ScrollReq>,
            session_tool!(ScrollReq, ScrollReq::into_call),
        ),
        e(
            "browser_hover",
            tool("/api/sessions/{id}/hover"),
            on_session::<ElementReq>,
            session_tool!(ElementReq, ElementReq::into_hover),
        ),
        e(
            "browser_select",
            tool("/api/sessions/{id}/select"),
            on_session::<SelectReq>,
            session_tool!(SelectReq, SelectReq::into_call),
        ),
        e(
            "browser_upload",
            tool("/api/sessions/{id}/upload"),
            on_session::<UploadReq>,
            session_tool!(UploadReq, UploadReq::into_call),
        ),
        e(
            "browser_wait_for",
            tool("/api/sessions/{id}/wait_for"),
            on_session::<WaitForReq>,
            session_tool!(WaitForReq, WaitForReq::into_call),
        ),
        e(
            "browser_read_dom",
            tool("/api/sessions/{id}/read_dom"),
            on_session::<ReadDomReq>,
            session_tool!(ReadDomReq, ReadDomReq::into_call),
        ),
        e(
            "browser_tabs",
            About::Text(
                "List the session's tabs (action list, the default), open one and make it \
                 active (open, optionally at url), make one active (focus, tab_id) or close one \
                 that is not the last (close, tab_id)",
            ),
            on_session::<TabsReq>,
            session_tool!(TabsReq, TabsReq::into_call),
        ),
        e(
            "browser_back",
            tool("/api/sessions/{id}/back"),
            on_session::<NoArgs>,
            session_tool!(NoArgs, |_| Ok(ToolCall::new(Tool::Back))),
        ),
        e(
            "browser_forward",
            tool("/api/sessions/{id}/forward"),
            on_session::<NoArgs>,
            session_tool!(NoArgs, |_| Ok(ToolCall::new(Tool::Forward))),
        ),
        e(
            "browser_close_session",
            About::Route("delete", SESSION),
            on_session::<NoArgs>,
            Action::Close,
        ),
        e(
            "browser_request_grant",
            About::Text(
                "Ask an operator for the credentials of some domains; poll browser_grant_status \
                 for the decision and the one-time grant token, then open a session with \
                 credential_mode operator and that grant_token",
            ),
            input::<NewGrantRequest>,
            Action::RequestGrant,
        ),
        e(
            "browser_grant_status",
            About::Route("get", "/api/grants/requests/{id}"),
            input::<GrantStatusReq>,
            Action::GrantStatus,
        ),
        e(
            "browser_run_task",
            About::Route("post", "/api/tasks"),
            input::<crate::tasks::TaskRequest>,
            Action::RunTask,
        ),
    ]
}

/// The tools as `tools/list` shows them (built once).
pub fn listed() -> &'static [McpTool] {
    static LISTED: LazyLock<Vec<McpTool>> = LazyLock::new(|| {
        let routes = crate::api::sessions::routes();
        table()
            .into_iter()
            .map(|t| {
                let description = match t.about {
                    About::Text(text) => text,
                    About::Route(method, path) => routes
                        .iter()
                        .find(|r| r.method == method && r.path == path)
                        .map(|r| r.summary)
                        .expect("an MCP tool mirrors an HTTP route"),
                };
                McpTool::new(t.name, description, (t.schema)())
            })
            .collect()
    });
    &LISTED
}

/// Runs tool `name` for `agent`. `None` for a tool that does not exist;
/// otherwise what the engine answered, as a tool result.
pub async fn call(
    state: &AppState,
    agent: &Agent,
    name: &str,
    args: JsonObject,
) -> Option<rmcp::model::CallToolResult> {
    let action = table().into_iter().find(|t| t.name == name)?.action;
    Some(match run(state, agent, action, args).await {
        Ok(result) => result,
        Err(e) => answer::error(e),
    })
}

async fn run(
    state: &AppState,
    Agent(owner): &Agent,
    action: Action,
    mut args: JsonObject,
) -> Result<rmcp::model::CallToolResult, ApiError> {
    match action {
        Action::Open => {
            let req: OpenRequest = arguments(args)?;
            let mut info = state.sessions.open(owner, req).await?;
            info.cdp_url = Some(crate::api::cdp::cdp_url_public(state, &info.session_id));
            Ok(answer::value(&info))
        }
        Action::RequestGrant => {
            let req: NewGrantRequest = arguments(args)?;
            Ok(answer::value(
                &grants::request(&state.store, owner, &req).await?,
            ))
        }
        Action::GrantStatus => {
            let req: GrantStatusReq = arguments(args)?;
            // An id that cannot exist is as unknown as one that does not.
            let id: GrantRequestId = req
                .request_id
                .parse()
                .map_err(|_| ApiError::NotFound("grant request"))?;
            Ok(answer::value(
                &grants::poll(&state.store, owner, &id).await?,
            ))
        }
        Action::RunTask => {
            let req: crate::tasks::TaskRequest = arguments(args)?;
            Ok(answer::value(&state.tasks.run(owner, req).await?))
        }
        Action::Close => {
            let id = session_id(&mut args)?;
            let NoArgs {} = arguments(args)?;
            // A malformed id is as unknown as one that does not exist.
            let id = crate::sessions::session_id(&id)?;
            Ok(answer::value(&state.sessions.close(owner, &id).await?))
        }
        Action::Session(parse) => {
            let id = session_id(&mut args)?;
            // Like the HTTP API: the session is resolved (another tenant's
            // is `not_found`) before the arguments are looked at.
            let id = crate::sessions::session_id(&id)?;
            let session = state.sessions.get(&owner.tenant, &id).await?;
            let call = parse(args)?;
            let actor = Actor::Agent(owner.key_id.clone());
            let out = state
                .sessions
                .run_tool(&session, actor, crate::audit::Surface::Mcp, call)
                .await?;
            Ok(answer::output(out))
        }
    }
}

/// Takes the `session_id` argument out of `args`.
fn session_id(args: &mut JsonObject) -> Result<String, ApiError> {
    match args.remove("session_id") {
        Some(Value::String(id)) => Ok(id),
        Some(_) => Err(ApiError::BadRequest(
            "invalid arguments: session_id: expected a string".into(),
        )),
        None => Err(ApiError::BadRequest(
            "invalid arguments: missing field `session_id`".into(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_has_an_object_schema_and_a_description() {
        let tools = listed();
        assert_eq!(tools.len(), table().len());
        for t in tools {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            assert!(
                t.description.as_deref().is_some_and(|d| !d.is_empty()),
                "{}",
                t.name
            );
        }
        let navigate = tools.iter().find(|t| t.name == "browser_navigate").unwrap();
        assert_eq!(
            navigate.input_schema["required"],
            json!(["session_id", "url"])
        );
        assert!(navigate.input_schema["properties"]["wait"].is_object());
    }

    #[test]
    fn a_wrong_argument_is_named() {
        let args = json!({ "url": 5 }).as_object().unwrap().clone();
        let err = parse::<NavigateReq>(args, NavigateReq::into_call).unwrap_err();
        assert_eq!(err.code(), "bad_request");
        assert!(err.to_string().contains("url"), "{err}");
        let args = json!({ "url": "http://x.test/", "bogus": 1 })
            .as_object()
            .unwrap()
            .clone();
        let err = parse::<NavigateReq>(args, NavigateReq::into_call).unwrap_err();
        assert!(err.to_string().contains("bogus"), "{err}");
    }

    #[test]
    fn session_id_is_required_and_a_string() {
        let mut none = JsonObject::new();
        assert!(
            session_id(&mut none)
                .unwrap_err()
                .to_string()
                .contains("session_id")
        );
        let mut number = json!({ "session_id": 3 }).as_object().unwrap().clone();
        assert_eq!(session_id(&mut number).unwrap_err().code(), "bad_request");
    }
}
