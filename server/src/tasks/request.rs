//! What a caller sends and gets back: `TaskRequest` (with its schema's
//! rules and the step count it may ask for), `TaskResult`, `StepView`,
//! `TaskDetail`, and `TaskError`, what starting or reading a task fails with.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::MAX_URL_LEN;
use crate::domain::pattern::{HOST_PATTERN, MAX_HOST, NOT_BLANK, URL_PATTERN};
use crate::recording::RecordMode;
use crate::sessions::request::MAX_DOMAINS;
use crate::sessions::{CredentialMode, SessionError};
use crate::store::tasks::{StepRow, TaskRow};

/// Steps when the request names none.
const DEFAULT_MAX_STEPS: u32 = 15;

/// The task's rules for the schema: the session's (`credential_mode`),
/// and a place to start: `start_url`, or at least one domain. (The
/// maxima of `instruction`, `max_steps` and `deadline_s` are the
/// server's settings, filled in when the document is served.)
fn task_rules(schema: &mut schemars::Schema) {
    let [clean, operator] = crate::sessions::request::credential_branches();
    // Clean: from `start_url`, or else from the first domain.
    let mut from_url = clean.clone();
    from_url["required"] = serde_json::json!(["start_url"]);
    from_url["properties"]["start_url"] = serde_json::json!({ "type": "string" });
    let mut from_domain = clean;
    from_domain["required"] = serde_json::json!(["domains"]);
    from_domain["properties"]["start_url"] =
        serde_json::json!({ "nullable": true, "enum": [null] });
    from_domain["properties"]["domains"] = serde_json::json!({ "minItems": 1 });
    crate::domain::schema::one_of(schema, vec![from_url, from_domain, operator]);
}

/// The steps a task may take: as asked (1 to `max`), else the default
/// within `max`.
pub(super) fn steps(asked: Option<u32>, max: u32) -> Result<u32, TaskError> {
    match asked {
        // A server whose `task_max_steps` is under the default still runs
        // a task that names no count (schemathesis found it refused).
        None => Ok(DEFAULT_MAX_STEPS.min(max)),
        Some(n) if (1..=max).contains(&n) => Ok(n),
        Some(_) => Err(TaskError::Invalid(format!(
            "max_steps must be between 1 and {max}"
        ))),
    }
}

/// What an agent asks for (`POST /api/tasks`, MCP `browser_run_task`).
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = task_rules)]
pub struct TaskRequest {
    /// What to do, in words (not blank; at most
    /// `task_instruction_max_bytes` bytes).
    #[schemars(length(min = 1), pattern(NOT_BLANK))]
    pub instruction: String,
    /// Where to start (default: `https://` + the first domain).
    #[serde(default)]
    #[schemars(length(min = 1, max = MAX_URL_LEN), pattern(URL_PATTERN))]
    pub start_url: Option<String>,
    /// `clean` (default) or `operator` (with `grant_token`).
    #[serde(default)]
    pub credential_mode: CredentialMode,
    /// Hosts whose logins an operator session gets.
    #[serde(default)]
    #[schemars(length(max = MAX_DOMAINS), inner(length(min = 1, max = MAX_HOST), pattern(HOST_PATTERN)))]
    pub domains: Vec<String>,
    /// The operator grant token (operator mode).
    #[serde(default)]
    pub grant_token: Option<String>,
    /// `off`, `transient` (default) or `audit`.
    #[serde(default)]
    pub record: RecordMode,
    /// Most model steps (default 15; at most `task_max_steps`).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_steps: Option<u32>,
    /// The session's lifetime, and so the task's, in seconds.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub deadline_s: Option<u64>,
}

/// The one compact result.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TaskResult {
    /// `t_…`.
    pub task_id: String,
    /// `running`, `finished`, `max_steps`, `deadline`, `error`, `aborted`,
    /// `denied`.
    pub status: String,
    /// The model's final answer, or what stopped the task.
    pub summary: Option<String>,
    /// A JSON object the model returned with `finished`, if it did.
    pub result_data: Option<Value>,
    /// Why it failed (`model_unavailable`, `bad_model_answer`, …).
    pub error: Option<String>,
    /// The session it ran on (closed when it ends).
    pub session_id: Option<String>,
    /// Steps taken.
    pub step_count: i64,
    /// The last screenshot's id (recording store), if kept.
    pub final_screenshot_id: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339, once ended.
    pub ended_at: Option<String>,
}

impl TaskResult {
    /// From a stored row.
    pub fn from_row(r: &TaskRow) -> Self {
        Self {
            task_id: r.id.clone(),
            status: r.status.clone(),
            summary: r.summary.clone(),
            result_data: r
                .result_data
                .as_deref()
                .and_then(|d| serde_json::from_str(d).ok()),
            error: r.error.clone(),
            session_id: r.session_id.clone(),
            step_count: r.step_count,
            final_screenshot_id: r.final_screenshot_id.clone(),
            created_at: crate::time::rfc3339_ms(r.created_at),
            ended_at: r.ended_at.map(crate::time::rfc3339_ms),
        }
    }
}

/// One step as the API and the dashboard show it (declared once, in the
/// dashboard crate, as the live protocol is).
pub use app::api::tasks::StepView;

/// A stored step as the API and the dashboard show it.
pub fn step_view(s: StepRow) -> StepView {
    StepView {
        n: s.n,
        thought: s.thought,
        action: s.action,
        outcome: s.outcome,
        screenshot_id: s.screenshot_id,
        model_ms: s.model_ms,
        prompt_tokens: s.prompt_tokens,
        completion_tokens: s.completion_tokens,
    }
}

/// A task with its trace.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TaskDetail {
    /// The task.
    #[serde(flatten)]
    pub task: TaskResult,
    /// What was asked.
    pub instruction: String,
    /// Its steps, in order.
    pub steps: Vec<StepView>,
}

/// What starting or reading a task can fail with (before its loop runs:
/// after that, everything is in the result).
#[derive(Debug, thiserror::Error)]
pub enum TaskError {
    /// Malformed or out-of-range input.
    #[error("{0}")]
    Invalid(String),
    /// The instruction is larger than the limit.
    #[error("the instruction is larger than {0} bytes")]
    TooLarge(usize),
    /// No model endpoint is configured.
    #[error("no model is configured (model_base_url); tasks cannot run here")]
    Unconfigured,
    /// No such task for this tenant.
    #[error("task not found")]
    NotFound,
    /// The task has ended already.
    #[error("the task has ended ({0})")]
    Ended(String),
    /// The session could not be opened (the open's own error; not `From`, so
    /// that it stays apart from a session lost later).
    #[error("{0}")]
    Open(SessionError),
    /// The session went away.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A fault.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_without_max_steps_runs_when_the_servers_limit_is_under_the_default() {
        assert_eq!(steps(None, 3).unwrap(), 3);
        assert_eq!(steps(None, 50).unwrap(), DEFAULT_MAX_STEPS);
        assert_eq!(steps(Some(3), 3).unwrap(), 3);
        assert!(matches!(steps(Some(4), 3), Err(TaskError::Invalid(_))));
        assert!(matches!(steps(Some(0), 3), Err(TaskError::Invalid(_))));
    }
}
