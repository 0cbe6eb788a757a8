//! Tasks and their step traces (both backends).

use anyhow::Context;

use super::Store;
use super::column::ReadContext;
use crate::domain::{SessionId, TaskId};

/// One task.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct TaskRow {
    /// `t_…`.
    pub id: String,
    /// Owner.
    pub tenant_id: String,
    /// The agent's key.
    pub api_key_id: Option<String>,
    /// The session it runs on (set once opened).
    pub session_id: Option<String>,
    /// What the agent asked for.
    pub instruction: String,
    /// `running`, `finished`, `max_steps`, `deadline`, `error`, `aborted`, `denied`.
    pub status: String,
    /// The model's final answer or what went wrong, for people.
    pub summary: Option<String>,
    /// JSON the model returned with `finished`, if any.
    pub result_data: Option<String>,
    /// A failure's code (`model_unavailable`, `bad_model_answer`, …).
    pub error: Option<String>,
    /// Steps taken.
    pub step_count: i64,
    /// The step limit.
    pub max_steps: i64,
    /// The last screenshot's id.
    pub final_screenshot_id: Option<String>,
    /// The control plane that runs it.
    pub host: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub ended_at: Option<i64>,
}

/// One step of a task's trace.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct StepRow {
    /// The task.
    pub task_id: String,
    /// From 1.
    pub n: i64,
    /// The model's thought.
    pub thought: Option<String>,
    /// The parsed action, in the grammar's text form (typed text redacted).
    pub action: Option<String>,
    /// `ok`, or what failed.
    pub outcome: String,
    /// The screenshot the model saw.
    pub screenshot_id: Option<String>,
    /// The model's answer time.
    pub model_ms: Option<i64>,
    /// Reported by the endpoint, if it does.
    pub prompt_tokens: Option<i64>,
    /// Reported by the endpoint, if it does.
    pub completion_tokens: Option<i64>,
    /// Unix ms.
    pub created_at: i64,
}

/// How a task ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnd {
    /// Final status.
    pub status: String,
    /// For people.
    pub summary: Option<String>,
    /// JSON.
    pub result_data: Option<String>,
    /// A failure's code.
    pub error: Option<String>,
    /// Steps taken.
    pub step_count: i64,
    /// The last screenshot's id.
    pub final_screenshot_id: Option<String>,
    /// Unix ms.
    pub ended_at: i64,
}

const TASK_COLUMNS: &str = "id, tenant_id, api_key_id, session_id, instruction, status, summary, \
     result_data, error, step_count, max_steps, final_screenshot_id, host, created_at, ended_at";
const STEP_COLUMNS: &str = "task_id, n, thought, action, outcome, screenshot_id, model_ms, \
     prompt_tokens, completion_tokens, created_at";

impl Store {
    /// Records a new (running) task.
    pub async fn task_insert(&self, t: &TaskRow) -> anyhow::Result<()> {
        sqlx::query(&format!(
            "INSERT INTO tasks ({TASK_COLUMNS}) VALUES \
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15)"
        ))
        .bind(t.id.clone())
        .bind(t.tenant_id.clone())
        .bind(t.api_key_id.clone())
        .bind(t.session_id.clone())
        .bind(t.instruction.clone())
        .bind(t.status.clone())
        .bind(t.summary.clone())
        .bind(t.result_data.clone())
        .bind(t.error.clone())
        .bind(t.step_count)
        .bind(t.max_steps)
        .bind(t.final_screenshot_id.clone())
        .bind(t.host.clone())
        .bind(t.created_at)
        .bind(t.ended_at)
        .execute(self.pool())
        .await
        .context("failed to record the task")?;
        self.changes().publish(crate::events::Topic::Sessions);
        Ok(())
    }

    /// Names the session a task runs on.
    pub async fn task_set_session(&self, id: &TaskId, session: &SessionId) -> anyhow::Result<()> {
        sqlx::query("UPDATE tasks SET session_id = $1 WHERE id = $2")
            .bind(session.to_string())
            .bind(id.to_string())
            .execute(self.pool())
            .await
            .context("failed to record the task's session")?;
        Ok(())
    }

    /// Appends a step to a task's trace (and counts it).
    pub async fn task_step_insert(&self, s: &StepRow) -> anyhow::Result<()> {
        let mut tx = self.pool().begin().await.context("begin")?;
        sqlx::query(&format!(
            "INSERT INTO task_steps ({STEP_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        ))
        .bind(s.task_id.clone())
        .bind(s.n)
        .bind(s.thought.clone())
        .bind(s.action.clone())
        .bind(s.outcome.clone())
        .bind(s.screenshot_id.clone())
        .bind(s.model_ms)
        .bind(s.prompt_tokens)
        .bind(s.completion_tokens)
        .bind(s.created_at)
        .execute(&mut *tx)
        .await
        .context("failed to record a task step")?;
        sqlx::query("UPDATE tasks SET step_count = $1 WHERE id = $2")
            .bind(s.n)
            .bind(s.task_id.clone())
            .execute(&mut *tx)
            .await
            .context("failed to count a task step")?;
        tx.commit().await.context("commit")?;
        Ok(())
    }

    /// Ends a running task; false if it had ended already.
    pub async fn task_end(&self, id: &TaskId, end: &TaskEnd) -> anyhow::Result<bool> {
        let done = sqlx::query(
            "UPDATE tasks SET status = $1, summary = $2, result_data = $3, error = $4, \
             step_count = $5, final_screenshot_id = $6, ended_at = $7 \
             WHERE id = $8 AND status = 'running'",
        )
        .bind(end.status.clone())
        .bind(end.summary.clone())
        .bind(end.result_data.clone())
        .bind(end.error.clone())
        .bind(end.step_count)
        .bind(end.final_screenshot_id.clone())
        .bind(end.ended_at)
        .bind(id.to_string())
        .execute(self.pool())
        .await
        .context("failed to end the task")?
        .rows_affected()
            == 1;
        if done {
            self.changes().publish(crate::events::Topic::Sessions);
        }
        Ok(done)
    }

    /// One task, of `tenant` if given.
    pub async fn task_get(
        &self,
        tenant: Option<&str>,
        id: &TaskId,
    ) -> anyhow::Result<Option<TaskRow>> {
        let with_tenant =
            format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1 AND tenant_id = $2");
        let any_tenant = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE id = $1");
        match tenant {
            Some(t) => sqlx::query_as(&with_tenant)
                .bind(id.to_string())
                .bind(t.to_owned()),
            None => sqlx::query_as(&any_tenant).bind(id.to_string()),
        }
        .fetch_optional(self.pool())
        .await
        .read("failed to read the task", "malformed task row")
    }

    /// The newest tasks, of `tenant` if given, or of one session.
    pub async fn task_list(
        &self,
        tenant: Option<&str>,
        session: Option<&SessionId>,
        limit: i64,
    ) -> anyhow::Result<Vec<TaskRow>> {
        let tenant = tenant.map(|t| vec![t.to_owned()]);
        self.task_list_in(tenant.as_deref(), session, limit).await
    }

    /// Like [`Store::task_list`], for a set of tenants (`None`: every
    /// tenant; the dashboard's scoped operators).
    pub async fn task_list_in(
        &self,
        tenants: Option<&[String]>,
        session: Option<&SessionId>,
        limit: i64,
    ) -> anyhow::Result<Vec<TaskRow>> {
        let mut sql = format!("SELECT {TASK_COLUMNS} FROM tasks WHERE 1 = 1");
        let mut binds = Vec::new();
        if let Some(ts) = tenants {
            sql.push_str(" AND ");
            sql.push_str(&super::tenant_in(ts, 0, &mut binds));
        }
        if let Some(v) = session {
            binds.push(v.to_string());
            sql.push_str(&format!(" AND session_id = ${}", binds.len()));
        }
        sql.push_str(&format!(
            " ORDER BY created_at DESC, id LIMIT ${}",
            binds.len() + 1
        ));
        let mut q = sqlx::query_as(&sql);
        for b in binds {
            q = q.bind(b);
        }
        q.bind(limit)
            .fetch_all(self.pool())
            .await
            .read("failed to list tasks", "malformed task row")
    }

    /// A task's trace, in order.
    pub async fn task_steps(&self, id: &TaskId) -> anyhow::Result<Vec<StepRow>> {
        sqlx::query_as(&format!(
            "SELECT {STEP_COLUMNS} FROM task_steps WHERE task_id = $1 ORDER BY n"
        ))
        .bind(id.to_string())
        .fetch_all(self.pool())
        .await
        .read("failed to read a task's trace", "malformed task step row")
    }

    /// Ends as `aborted` every task of `host` still running (a control
    /// plane that stopped does not resume them); answers how many.
    pub async fn task_abort_running(&self, host: &str, now: i64) -> anyhow::Result<u64> {
        Ok(sqlx::query(
            "UPDATE tasks SET status = 'aborted', error = 'restarted', \
             summary = 'the control plane restarted while the task ran', ended_at = $1 \
             WHERE host = $2 AND status = 'running'",
        )
        .bind(now)
        .bind(host.to_owned())
        .execute(self.pool())
        .await
        .context("failed to abort stale tasks")?
        .rows_affected())
    }
}
