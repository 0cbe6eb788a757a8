//! Tasks (`run_task`) and their traces, as operators review them.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::auth::Role;
use crate::error::UiError;

/// A task in a list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskLine {
    /// `t_…`.
    pub id: String,
    /// Tenant.
    pub tenant: String,
    /// The session it ran on.
    pub session: Option<String>,
    /// `running`, `finished`, `max_steps`, `deadline`, `error`, `aborted`, `denied`.
    pub status: String,
    /// Steps taken.
    pub steps: i64,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub ended_at: Option<i64>,
    /// The model called for an operator (`call_user()`): it waits for one
    /// to take over in the live view and hand back.
    pub waiting: bool,
}

/// Recent tasks of every tenant, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskList {
    /// At most 100.
    pub tasks: Vec<TaskLine>,
    /// The server's clock, Unix ms.
    pub now: i64,
}

// One step of a task's trace, declared once: the agent API's
// `GET /api/tasks/{id}` answers it (its OpenAPI schema is derived from this
// type, hence `JsonSchema` on the server's side, whose doc comment is the
// schema's description) and the dashboard's task page shows it.
/// One step as the API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(schemars::JsonSchema))]
pub struct StepView {
    /// From 1.
    pub n: i64,
    /// The model's thought.
    pub thought: Option<String>,
    /// The action (typed text as its length).
    pub action: Option<String>,
    /// `ok`, or what failed.
    pub outcome: String,
    /// The screenshot the model saw.
    pub screenshot_id: Option<String>,
    /// The model's answer time.
    pub model_ms: Option<i64>,
    /// Reported prompt tokens.
    pub prompt_tokens: Option<i64>,
    /// Reported completion tokens.
    pub completion_tokens: Option<i64>,
}

/// A task with its trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskTrace {
    /// The task.
    pub task: TaskLine,
    /// What the agent asked.
    pub instruction: String,
    /// The model's final answer or what stopped it.
    pub summary: Option<String>,
    /// Why it failed, if it did.
    pub error: Option<String>,
    /// The step limit.
    pub max_steps: i64,
    /// Steps in order.
    pub steps: Vec<StepView>,
}

/// A task and its trace.
#[server(prefix = "/ui/fn", endpoint = "get_task")]
pub async fn get_task(id: String) -> Result<TaskTrace, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see tasks").await?;
    ctl.task(&op, id).await
}

/// Recent tasks (newest first), those waiting for an operator marked.
#[server(prefix = "/ui/fn", endpoint = "list_tasks")]
pub async fn list_tasks() -> Result<TaskList, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see tasks").await?;
    ctl.tasks(&op).await
}

/// How many tasks wait for an operator (the navigation's badge).
#[server(prefix = "/ui/fn", endpoint = "waiting_tasks")]
pub async fn waiting_tasks() -> Result<usize, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see tasks").await?;
    ctl.waiting_tasks(&op).await
}
