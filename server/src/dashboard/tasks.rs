//! Tasks and their traces for the dashboard (any tenant's).

use std::collections::HashSet;

use app::api::auth::Operator;
use app::api::backend::{TasksBackend, UiResult};
use app::api::tasks::{TaskLine, TaskList, TaskTrace};
use app::error::UiError;

use super::internal;
use crate::domain::TaskId;
use crate::state::AppState;
use crate::store::tasks::TaskRow;

/// A task as the lists show it; `waiting`: the tasks waiting for an
/// operator ([`crate::tasks::Tasks::waiting`]).
pub(super) fn line(t: &TaskRow, waiting: &HashSet<String>) -> TaskLine {
    TaskLine {
        waiting: waiting.contains(&t.id),
        id: t.id.clone(),
        tenant: t.tenant_id.clone(),
        session: t.session_id.clone(),
        status: t.status.clone(),
        steps: t.step_count,
        created_at: t.created_at,
        ended_at: t.ended_at,
    }
}

#[async_trait::async_trait]
impl TasksBackend for AppState {
    async fn task(&self, op: &Operator, id: String) -> UiResult<TaskTrace> {
        let not_found = || UiError::not_found(format!("task {id:?}"));
        let tid: TaskId = id.parse().map_err(|_| not_found())?;
        let row = self
            .store
            .task_get(None, &tid)
            .await
            .map_err(|e| internal("reading the task", e))?
            .ok_or_else(not_found)?;
        super::in_scope(self, op, "read a task", &row.tenant_id, not_found).await?;
        let steps = self
            .store
            .task_steps(&tid)
            .await
            .map_err(|e| internal("reading the trace", e))?;
        Ok(TaskTrace {
            task: line(&row, &every_waiting(self, op).await),
            instruction: row.instruction,
            summary: row.summary,
            error: row.error,
            max_steps: row.max_steps,
            steps: steps.into_iter().map(crate::tasks::step_view).collect(),
        })
    }

    async fn tasks(&self, op: &Operator) -> UiResult<TaskList> {
        let rows = self
            .store
            .task_list_in(op.tenants.as_deref(), None, 100)
            .await
            .map_err(|e| internal("listing tasks", e))?;
        let waiting = every_waiting(self, op).await;
        Ok(TaskList {
            tasks: rows.iter().map(|r| line(r, &waiting)).collect(),
            now: crate::time::now_ms(),
        })
    }

    async fn waiting_tasks(&self, op: &Operator) -> UiResult<usize> {
        let waiting = every_waiting(self, op).await;
        if op.global() {
            return Ok(waiting.len());
        }
        // Count only the scoped operator's tenants' tasks.
        let mut n = 0;
        for id in waiting.iter().filter_map(|id| id.parse::<TaskId>().ok()) {
            if let Ok(Some(t)) = self.store.task_get(None, &id).await
                && op.sees(&t.tenant_id)
            {
                n += 1;
            }
        }
        Ok(n)
    }
}

/// The tasks waiting for an operator on this replica and every other.
pub(super) async fn every_waiting(state: &AppState, op: &Operator) -> HashSet<String> {
    let mut all = state.tasks.waiting();
    all.extend(
        state
            .cluster
            .peers(&op.id)
            .get_all::<String>("/api/internal/tasks/waiting")
            .await,
    );
    all
}
