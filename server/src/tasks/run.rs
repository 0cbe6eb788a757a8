//! The task service, `Tasks`: a request validated, its row and session
//! opened, the loop (`runner.rs`) spawned on its own tokio task, abort
//! switches, the tasks waiting for an operator, reading a task and its
//! trace, and the end written once. Every step is stored (`task_steps`);
//! screenshots stay in the recording store and only their ids are kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use tokio::sync::watch;

use super::model::{ModelClient, ModelConfig};
use super::request::{TaskDetail, TaskError, TaskRequest, TaskResult, step_view, steps};
use super::runner::Runner;
use super::uitars::CoordinateMode;
use crate::domain::pattern::is_not_blank;
use crate::domain::{SessionId, TaskId, TenantId};
use crate::sessions::{OpenRequest, SessionManager};
use crate::store::Store;
use crate::store::api_keys::ApiKeyOwner;
use crate::store::tasks::{TaskEnd, TaskRow};
use crate::time::now_ms;

pub(super) struct Inner {
    pub(super) store: Store,
    pub(super) sessions: SessionManager,
    model: Option<ModelClient>,
    /// The runner's settings, read where they are used (the model's are
    /// in `model`).
    pub(super) settings: TaskSettings,
    /// Abort switches of the tasks running here.
    running: Mutex<HashMap<String, watch::Sender<bool>>>,
    /// Tasks here whose model called for an operator (`call_user()`) and
    /// wait for one to take over and hand back.
    waiting: Mutex<std::collections::HashSet<String>>,
}

/// The task runner; cheap to clone.
#[derive(Clone)]
pub struct Tasks(pub(super) Arc<Inner>);

/// The runner's settings as it reads them, from `model_*`, `task_*`
/// ([`super::TasksSection::task_settings`]).
#[derive(Debug, Clone)]
pub struct TaskSettings {
    /// The model endpoint, if one is configured (else `run_task` answers
    /// `unconfigured`).
    pub model: Option<ModelConfig>,
    /// How the model writes coordinates (`model_coordinates`).
    pub coordinates: CoordinateMode,
    /// Screenshots of earlier steps sent again (`task_history_images`).
    pub history_images: usize,
    /// How long a step waits for the page's frame (`task_frame_wait_ms`).
    pub frame_wait: Duration,
    /// How long it waits once the page has drawn (`task_frame_settle_ms`).
    pub frame_settle: Duration,
    /// Longest instruction, bytes (`task_instruction_max_bytes`).
    pub instruction_max: usize,
    /// Most steps (`task_max_steps`).
    pub max_steps: u32,
}

impl Tasks {
    /// From the settings; ends as `aborted` the tasks a previous run of
    /// this host left running.
    pub async fn start(
        settings: &TaskSettings,
        store: Store,
        sessions: SessionManager,
    ) -> anyhow::Result<Self> {
        let model = match &settings.model {
            Some(config) => Some(ModelClient::new(config.clone())?),
            None => None,
        };
        let aborted = store.task_abort_running(sessions.host(), now_ms()).await?;
        if aborted > 0 {
            tracing::info!(
                aborted,
                "tasks: ended the tasks a previous run left running"
            );
        }
        Ok(Self(Arc::new(Inner {
            store,
            sessions,
            model,
            settings: settings.clone(),
            running: Mutex::default(),
            waiting: Mutex::default(),
        })))
    }

    /// Runs a task to its end and answers its result. The loop runs on its
    /// own task: a caller that goes away does not stop it (read it with
    /// [`Tasks::get`], stop it with [`Tasks::abort`]).
    pub async fn run(
        &self,
        owner: &ApiKeyOwner,
        req: TaskRequest,
    ) -> Result<TaskResult, TaskError> {
        if req.instruction.len() > self.0.settings.instruction_max {
            return Err(TaskError::TooLarge(self.0.settings.instruction_max));
        }
        if !is_not_blank(&req.instruction) {
            return Err(TaskError::Invalid("instruction must not be blank".into()));
        }
        let max_steps = steps(req.max_steps, self.0.settings.max_steps)?;
        let start = match (&req.start_url, req.domains.first()) {
            (Some(u), _) => u.clone(),
            (None, Some(d)) => format!("https://{d}/"),
            (None, None) => {
                return Err(TaskError::Invalid(
                    "name a start_url (or domains): the model cannot type an address".into(),
                ));
            }
        };
        let start = crate::sessions::tool::input::agent_url(&start)
            .map_err(|e| TaskError::Invalid(format!("start_url: {e}")))?;
        // Input first: a malformed request is told so even where no model is set.
        let model = self.0.model.clone().ok_or(TaskError::Unconfigured)?;
        let id = TaskId::generate();
        let row = TaskRow {
            id: id.to_string(),
            tenant_id: owner.tenant.to_string(),
            api_key_id: Some(owner.key_id.clone()),
            session_id: None,
            instruction: req.instruction.clone(),
            status: "running".into(),
            summary: None,
            result_data: None,
            error: None,
            step_count: 0,
            max_steps: i64::from(max_steps),
            final_screenshot_id: None,
            host: self.0.sessions.host().to_owned(),
            created_at: now_ms(),
            ended_at: None,
        };
        self.0.store.task_insert(&row).await?;
        // The abort switch exists from the row's first moment, so an abort
        // while the session still opens stops the loop before its first
        // step instead of ending only the row.
        let (abort, aborted) = watch::channel(false);
        self.0
            .running
            .lock()
            .expect("running lock")
            .insert(id.to_string(), abort);
        let open = OpenRequest {
            credential_mode: req.credential_mode,
            domains: req.domains.clone(),
            grant_token: req.grant_token.clone(),
            record: req.record,
            deadline_s: req.deadline_s,
            ..OpenRequest::default()
        };
        let info = match self.0.sessions.open(owner, open).await {
            Ok(info) => info,
            Err(e) => {
                // The open's own error goes back; the task records why.
                let message = e.to_string();
                let status = if e.code().starts_with("grant_") {
                    "denied"
                } else {
                    "error"
                };
                self.end(
                    &id,
                    status,
                    Some(message),
                    None,
                    Some(e.code().into()),
                    0,
                    None,
                )
                .await?;
                return Err(TaskError::Open(e));
            }
        };
        let live = async {
            let sid: SessionId = info.session_id.parse().context("the opened session's id")?;
            self.0.store.task_set_session(&id, &sid).await?;
            Ok::<_, TaskError>(self.0.sessions.get(&owner.tenant, &sid).await?)
        }
        .await
        .inspect_err(|_| {
            self.0
                .running
                .lock()
                .expect("running lock")
                .remove(id.as_str());
        })?;
        let runner = Runner {
            tasks: self.clone(),
            model,
            owner: owner.clone(),
            live,
            task_id: id.clone(),
            instruction: req.instruction,
            max_steps,
            aborted,
            frames: None,
            acted: tokio::time::Instant::now(),
            rows: Vec::new(),
            cancelled: std::sync::Mutex::default(),
        };
        let handle = tokio::spawn(runner.drive(start));
        let _ = handle.await;
        self.get_result(&owner.tenant, &id).await
    }

    async fn get_result(&self, tenant: &TenantId, id: &TaskId) -> Result<TaskResult, TaskError> {
        let row = self
            .0
            .store
            .task_get(Some(tenant.as_str()), id)
            .await?
            .ok_or(TaskError::NotFound)?;
        Ok(TaskResult::from_row(&row))
    }

    /// The tasks on this host that wait for an operator (`call_user()`).
    /// Whether task `id`'s loop runs on this replica.
    pub fn is_local(&self, id: &str) -> bool {
        self.0
            .running
            .lock()
            .expect("running lock")
            .contains_key(id)
    }

    /// The tasks that wait for an operator, by id.
    pub fn waiting(&self) -> std::collections::HashSet<String> {
        self.0.waiting.lock().expect("waiting lock").clone()
    }

    /// Marks a task as waiting for an operator, or not; dashboards hear it.
    pub(super) fn set_waiting(&self, id: &str, waiting: bool) {
        let changed = {
            let mut set = self.0.waiting.lock().expect("waiting lock");
            if waiting {
                set.insert(id.to_owned())
            } else {
                set.remove(id)
            }
        };
        if changed {
            self.0
                .store
                .changes()
                .publish(crate::events::Topic::Sessions);
        }
    }

    /// A task of `tenant` with its trace.
    pub async fn get(&self, tenant: &TenantId, id: &TaskId) -> Result<TaskDetail, TaskError> {
        let row = self
            .0
            .store
            .task_get(Some(tenant.as_str()), id)
            .await?
            .ok_or(TaskError::NotFound)?;
        let steps = self.0.store.task_steps(id).await?;
        Ok(TaskDetail {
            task: TaskResult::from_row(&row),
            instruction: row.instruction,
            steps: steps.into_iter().map(step_view).collect(),
        })
    }

    /// The tenant's newest tasks.
    pub async fn list(&self, tenant: &TenantId, limit: i64) -> Result<Vec<TaskResult>, TaskError> {
        Ok(self
            .0
            .store
            .task_list(Some(tenant.as_str()), None, limit)
            .await?
            .iter()
            .map(TaskResult::from_row)
            .collect())
    }

    /// Stops a running task of `tenant` (its session is closed); answers
    /// its result once it has stopped.
    pub async fn abort(&self, tenant: &TenantId, id: &TaskId) -> Result<TaskResult, TaskError> {
        let current = self.get_result(tenant, id).await?;
        if current.status != "running" {
            return Err(TaskError::Ended(current.status));
        }
        let switch = self
            .0
            .running
            .lock()
            .expect("running lock")
            .get(id.as_str())
            .cloned();
        match switch {
            Some(s) => {
                let _ = s.send(true);
                // The loop ends the task; wait for it (bounded).
                for _ in 0..200 {
                    let now = self.get_result(tenant, id).await?;
                    if now.status != "running" {
                        return Ok(now);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                self.get_result(tenant, id).await
            }
            // Running on another control plane, or its loop is gone.
            None => {
                self.end(
                    id,
                    "aborted",
                    Some("aborted".into()),
                    None,
                    None,
                    current.step_count,
                    None,
                )
                .await?;
                self.get_result(tenant, id).await
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn end(
        &self,
        id: &TaskId,
        status: &str,
        summary: Option<String>,
        result_data: Option<String>,
        error: Option<String>,
        step_count: i64,
        final_screenshot_id: Option<String>,
    ) -> anyhow::Result<()> {
        self.0
            .store
            .task_end(
                id,
                &TaskEnd {
                    status: status.into(),
                    summary,
                    result_data,
                    error,
                    step_count,
                    final_screenshot_id,
                    ended_at: now_ms(),
                },
            )
            .await?;
        self.0
            .running
            .lock()
            .expect("running lock")
            .remove(id.as_str());
        Ok(())
    }
}
