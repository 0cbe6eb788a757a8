//! `run_task`: one instruction, one session, the loop screenshot → model →
//! parse → (risk gate, inside `run_tool`) → execute → repeat, and one
//! compact result. Every step is stored (`task_steps`); screenshots stay in
//! the recording store and only their ids are kept.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use super::model::{Answer, Message, ModelClient, ModelConfig, ModelError};
use super::uitars::{self, Action, CoordinateMode, ImageSpace, ScrollDirection};
use crate::audit::Actor;
use crate::cdp::{Button, ImageFormat, MouseKind};
use crate::domain::pattern::{HOST_PATTERN, MAX_HOST, NOT_BLANK, URL_PATTERN, is_not_blank};
use crate::domain::{MAX_URL_LEN, TenantId, random_id};
use crate::recording::RecordMode;
use crate::sessions::request::MAX_DOMAINS;
use crate::sessions::tool::ElementTarget;
use crate::sessions::{
    CredentialMode, LiveInput, LiveSession, OpenRequest, SessionError, SessionManager, Tool,
    ToolCall, ToolOutput,
};
use crate::store::Store;
use crate::store::api_keys::ApiKeyOwner;
use crate::store::tasks::{StepRow, TaskEnd, TaskRow};
use crate::time::now_ms;

/// Steps when the request names none.
const DEFAULT_MAX_STEPS: u32 = 15;
/// How long `wait()` waits.
const WAIT: Duration = Duration::from_secs(2);
/// How long a step waits for the first frame of a new screencast before it
/// asks for a capture instead.
const FIRST_FRAME_WAIT: Duration = Duration::from_secs(1);
/// JPEG quality of the step's picture.
const QUALITY: u8 = 80;

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
fn steps(asked: Option<u32>, max: u32) -> Result<u32, TaskError> {
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

/// One step as the API shows it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
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

impl StepView {
    /// From a stored row.
    pub fn from_row(s: &StepRow) -> Self {
        Self {
            n: s.n,
            thought: s.thought.clone(),
            action: s.action.clone(),
            outcome: s.outcome.clone(),
            screenshot_id: s.screenshot_id.clone(),
            model_ms: s.model_ms,
            prompt_tokens: s.prompt_tokens,
            completion_tokens: s.completion_tokens,
        }
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

struct Inner {
    store: Store,
    sessions: SessionManager,
    model: Option<ModelClient>,
    coordinates: CoordinateMode,
    history_images: usize,
    /// How long a step waits for the repaint after its action
    /// (`task_frame_wait_ms`).
    frame_wait: Duration,
    instruction_max: usize,
    max_steps: u32,
    /// Abort switches of the tasks running here.
    running: Mutex<HashMap<String, watch::Sender<bool>>>,
    /// Tasks here whose model called for an operator (`call_user()`) and
    /// wait for one to take over and hand back.
    waiting: Mutex<std::collections::HashSet<String>>,
}

/// The task runner; cheap to clone.
#[derive(Clone)]
pub struct Tasks(Arc<Inner>);

/// The runner's settings (`model_*`, `task_*`), built by `config`.
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
            coordinates: settings.coordinates,
            history_images: settings.history_images,
            frame_wait: settings.frame_wait,
            instruction_max: settings.instruction_max,
            max_steps: settings.max_steps,
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
        if req.instruction.len() > self.0.instruction_max {
            return Err(TaskError::TooLarge(self.0.instruction_max));
        }
        if !is_not_blank(&req.instruction) {
            return Err(TaskError::Invalid("instruction must not be blank".into()));
        }
        let max_steps = steps(req.max_steps, self.0.max_steps)?;
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
        let id = random_id("t_");
        let row = TaskRow {
            id: id.clone(),
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
            .insert(id.clone(), abort);
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
            self.0.store.task_set_session(&id, &info.session_id).await?;
            Ok::<_, TaskError>(self.0.sessions.get(&owner.tenant, &info.session_id).await?)
        }
        .await
        .inspect_err(|_| {
            self.0.running.lock().expect("running lock").remove(&id);
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
        };
        let handle = tokio::spawn(runner.drive(start));
        let _ = handle.await;
        self.get_result(&owner.tenant, &id).await
    }

    async fn get_result(&self, tenant: &TenantId, id: &str) -> Result<TaskResult, TaskError> {
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
    fn set_waiting(&self, id: &str, waiting: bool) {
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
    pub async fn get(&self, tenant: &TenantId, id: &str) -> Result<TaskDetail, TaskError> {
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
            steps: steps.iter().map(StepView::from_row).collect(),
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
    pub async fn abort(&self, tenant: &TenantId, id: &str) -> Result<TaskResult, TaskError> {
        let current = self.get_result(tenant, id).await?;
        if current.status != "running" {
            return Err(TaskError::Ended(current.status));
        }
        let switch = self
            .0
            .running
            .lock()
            .expect("running lock")
            .get(id)
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
    async fn end(
        &self,
        id: &str,
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
        self.0.running.lock().expect("running lock").remove(id);
        Ok(())
    }
}

/// How the loop ended.
struct Outcome {
    status: &'static str,
    summary: Option<String>,
    result_data: Option<String>,
    error: Option<String>,
}

impl Outcome {
    fn new(status: &'static str, summary: impl Into<String>) -> Self {
        Self {
            status,
            summary: Some(summary.into()),
            result_data: None,
            error: None,
        }
    }

    fn failed(status: &'static str, code: &str, summary: impl Into<String>) -> Self {
        Self {
            error: Some(code.to_owned()),
            ..Self::new(status, summary)
        }
    }
}

/// One task's loop.
struct Runner {
    tasks: Tasks,
    model: ModelClient,
    owner: ApiKeyOwner,
    live: Arc<LiveSession>,
    task_id: String,
    instruction: String,
    max_steps: u32,
    aborted: watch::Receiver<bool>,
    /// The screencast the steps' pictures come from.
    frames: Option<super::frames::Frames>,
    /// When the last action ended.
    acted: tokio::time::Instant,
    /// Trace rows being written.
    rows: Vec<tokio::task::JoinHandle<()>>,
}

/// A screenshot the model saw.
struct Shot {
    jpeg: Vec<u8>,
    space: ImageSpace,
    id: Option<String>,
}

impl Runner {
    async fn drive(mut self, start: crate::domain::TargetUrl) {
        let mut steps = 0i64;
        let mut last_shot: Option<String> = None;
        let outcome = self.run(start, &mut steps, &mut last_shot).await;
        if let Some(frames) = self.frames.take() {
            frames.stop();
        }
        for row in std::mem::take(&mut self.rows) {
            let _ = row.await;
        }
        let sessions = &self.tasks.0.sessions;
        // The task owns its session: it goes with it.
        let _ = sessions.close(&self.owner, self.live.id.as_str()).await;
        if let Err(e) = self
            .tasks
            .end(
                &self.task_id,
                outcome.status,
                outcome.summary,
                outcome.result_data,
                outcome.error,
                steps,
                last_shot,
            )
            .await
        {
            tracing::error!(error = %format!("{e:#}"), task.id = %self.task_id, "failed to record a task's end");
        }
    }

    fn actor(&self) -> Actor {
        Actor::Agent(self.owner.key_id.clone())
    }

    async fn tool(&self, tool: Tool) -> Result<ToolOutput, StepError> {
        let sessions = &self.tasks.0.sessions;
        loop {
            match sessions
                .run_tool(
                    &self.live,
                    self.actor(),
                    crate::audit::Surface::Task,
                    ToolCall::new(tool.clone()),
                )
                .await
            {
                // An operator drives: wait until they hand back.
                Err(crate::sessions::ToolError::OperatorHasControl(_)) => {
                    if !self.wait_for_operator().await {
                        return Err(StepError::from(crate::sessions::ToolError::Timeout(
                            "the session ended while an operator had control".into(),
                        )));
                    }
                }
                other => return other.map_err(StepError::from),
            }
        }
    }

    /// Waits until no operator holds control; false if the session ended or
    /// the task was aborted first.
    async fn wait_for_operator(&self) -> bool {
        let mut control = self.live.watch_control();
        let mut aborted = self.aborted.clone();
        loop {
            if control.borrow().is_none() {
                return true;
            }
            tokio::select! {
                changed = control.changed() => if changed.is_err() { return false },
                _ = aborted.changed() => return false,
                () = tokio::time::sleep(Duration::from_secs(1)) => {
                    if self.live.browser_gone() || now_ms() > self.live.deadline_at {
                        return false;
                    }
                }
            }
        }
    }

    /// The step's picture: a screencast frame made after the last action
    /// (see `frames.rs`), or a capture when there is none.
    async fn screenshot(&mut self) -> Result<Shot, StepError> {
        if let Some(shot) = self.frame().await {
            metrics::counter!("cordon_task_pictures_total", "source" => "screencast").increment(1);
            return Ok(shot);
        }
        metrics::counter!("cordon_task_pictures_total", "source" => "capture").increment(1);
        self.capture().await
    }

    async fn frame(&mut self) -> Option<Shot> {
        let page = {
            let mut tabs = self.live.tabs.lock().await;
            self.live.page(&mut tabs).await.ok()?
        };
        let target = page.target_id().inner().clone();
        let (mut since, mut wait) = (self.acted, self.tasks.0.frame_wait);
        if !self
            .frames
            .as_ref()
            .is_some_and(|f| f.shows(&self.live, &target))
        {
            if let Some(old) = self.frames.take() {
                old.stop();
            }
            since = tokio::time::Instant::now();
            wait = FIRST_FRAME_WAIT;
            self.frames = Some(
                super::frames::Frames::start(&self.live, page.clone(), QUALITY)
                    .await
                    .ok()?,
            );
        }
        let frame = self.frames.as_mut()?.after(since, wait).await?;
        let scale = f64::from(frame.width) / frame.css_width;
        let space =
            ImageSpace::new(frame.width, frame.height, scale, self.tasks.0.coordinates).ok()?;
        // Kept like a screenshot tool's picture; when the recorder refuses
        // (a full audit quota), the capture's path says so.
        let seq = self.live.next_screenshot_seq();
        let saved = self
            .tasks
            .0
            .sessions
            .recorder()
            .save(
                self.live.record,
                self.live.tenant.as_str(),
                self.live.id.as_str(),
                seq,
                "jpg",
                &frame.jpeg,
            )
            .await
            .ok()?;
        let id = saved.map(|_| {
            crate::recording::ScreenshotId::new(self.live.tenant.clone(), self.live.id.clone(), seq)
                .to_string()
        });
        Some(Shot {
            jpeg: frame.jpeg.clone(),
            space,
            id,
        })
    }

    /// A capture through the tool pipeline.
    async fn capture(&self) -> Result<Shot, StepError> {
        // Right after a click or an Enter the page may be between two
        // documents, and the capture fails: try again a little later.
        let mut tries = 0;
        let out = loop {
            tries += 1;
            match self
                .tool(Tool::Screenshot {
                    full_page: false,
                    format: ImageFormat::Jpeg,
                    quality: Some(80),
                })
                .await
            {
                Err(e) if tries < 4 && matches!(e.code(), "timeout" | "browser_error") => {
                    tokio::time::sleep(Duration::from_millis(250 * tries)).await;
                }
                other => break other?,
            }
        };
        let ToolOutput::Screenshot(s) = out else {
            return Err(StepError::internal(anyhow::anyhow!(
                "a screenshot that is not one"
            )));
        };
        let space = ImageSpace::new(s.width, s.height, 1.0, self.tasks.0.coordinates)
            .map_err(|e| StepError::internal(anyhow::anyhow!("{e}")))?;
        // The recorder names the file by its number (`000003.jpg`).
        let id = s.persisted_path.as_deref().and_then(|p| {
            let seq: u64 = std::path::Path::new(p)
                .file_stem()?
                .to_str()?
                .parse()
                .ok()?;
            let id = crate::recording::ScreenshotId::new(
                self.live.tenant.clone(),
                self.live.id.clone(),
                seq,
            );
            Some(id.to_string())
        });
        Ok(Shot {
            jpeg: s.bytes,
            space,
            id,
        })
    }

    async fn run(
        &mut self,
        start: crate::domain::TargetUrl,
        steps: &mut i64,
        last_shot: &mut Option<String>,
    ) -> Outcome {
        if let Err(e) = self
            .tool(Tool::Navigate {
                url: start,
                wait: crate::cdp::WaitUntil::Load,
            })
            .await
        {
            return Outcome::failed(
                "error",
                e.code(),
                format!("the start page did not load: {e}"),
            );
        }
        self.acted = tokio::time::Instant::now();
        let system = super::prompt::system(&self.instruction, self.live.totp_granted);
        // (answer text, screenshot) of earlier steps.
        let mut history: Vec<(String, Vec<u8>)> = Vec::new();
        for n in 1..=i64::from(self.max_steps) {
            if *self.aborted.borrow() {
                return Outcome::failed("aborted", "aborted", "aborted by the agent");
            }
            if now_ms() > self.live.deadline_at {
                return Outcome::failed("deadline", "deadline", "the task ran out of time");
            }
            let looked = std::time::Instant::now();
            let shot = self.screenshot().await;
            metrics::histogram!("cordon_task_step_picture_seconds")
                .record(looked.elapsed().as_secs_f64());
            let shot = match shot {
                Ok(s) => s,
                Err(e) => return self.tool_failure(e),
            };
            *last_shot = shot.id.clone();
            let messages = self.messages(&system, &history, &shot.jpeg);
            let mut aborted = self.aborted.clone();
            let left =
                Duration::from_millis(u64::try_from(self.live.deadline_at - now_ms()).unwrap_or(0));
            let answer = tokio::select! {
                a = self.model.complete(&messages) => a,
                _ = aborted.changed() => {
                    return Outcome::failed("aborted", "aborted", "aborted by the agent");
                }
                () = tokio::time::sleep(left) => {
                    return Outcome::failed("deadline", "deadline", "the task ran out of time while the model thought");
                }
            };
            let answer: Answer = match answer {
                Ok(a) => a,
                Err(e) => {
                    self.record(n, None, None, &format!("{}: {e}", e.code()), &shot, None);
                    *steps = n;
                    return model_failure(&e);
                }
            };
            *steps = n;
            let parsed = match uitars::parse(&answer.text) {
                Ok(p) => p,
                Err(e) => {
                    self.record(
                        n,
                        None,
                        None,
                        &format!("bad_model_answer: {}", e.code()),
                        &shot,
                        Some(&answer),
                    );
                    return Outcome::failed(
                        "error",
                        "bad_model_answer",
                        format!("the model's answer could not be parsed: {e}"),
                    );
                }
            };
            let shown = describe(&parsed.action);
            let thought = parsed.thought.clone();
            match parsed.action {
                Action::Finished { content } => {
                    self.record(n, thought, Some(shown), "finished", &shot, Some(&answer));
                    let data = serde_json::from_str::<Value>(&content)
                        .ok()
                        .filter(Value::is_object)
                        .map(|v| v.to_string());
                    return Outcome {
                        status: "finished",
                        summary: Some(content),
                        result_data: data,
                        error: None,
                    };
                }
                Action::CallUser => {
                    self.record(
                        n,
                        thought,
                        Some(shown),
                        "waiting for an operator",
                        &shot,
                        Some(&answer),
                    );
                    if !self.wait_for_call_user().await {
                        return Outcome::failed(
                            "deadline",
                            "call_user",
                            "the model asked for an operator and none took over in time",
                        );
                    }
                    self.acted = tokio::time::Instant::now();
                }
                action => {
                    let acting = std::time::Instant::now();
                    let result = self.execute(&action, &shot.space).await;
                    metrics::histogram!("cordon_task_step_action_seconds")
                        .record(acting.elapsed().as_secs_f64());
                    self.acted = tokio::time::Instant::now();
                    let outcome = match &result {
                        Ok(()) => "ok".to_owned(),
                        Err(e) => format!("{}: {e}", e.code()),
                    };
                    self.record(n, thought, Some(shown), &outcome, &shot, Some(&answer));
                    if let Err(e) = result {
                        match e.code() {
                            "denied_by_operator" | "approval_timed_out" | "denied_by_policy" => {
                                return Outcome::failed("denied", e.code(), e.to_string());
                            }
                            "browser_failed" | "gone" | "not_found" => {
                                return Outcome::failed("error", e.code(), e.to_string());
                            }
                            // The page refused: the model sees the next screenshot.
                            _ => {}
                        }
                    }
                }
            }
            history.push((answer.text, shot.jpeg));
        }
        Outcome::new(
            "max_steps",
            format!(
                "the task took its {} steps without finishing",
                self.max_steps
            ),
        )
    }

    fn tool_failure(&self, e: StepError) -> Outcome {
        Outcome::failed("error", e.code(), e.to_string())
    }

    /// After `call_user()`: waits for an operator to take control and hand
    /// it back (the live view), until the deadline.
    async fn wait_for_call_user(&self) -> bool {
        self.tasks.set_waiting(&self.task_id, true);
        let done = self.call_user_answered().await;
        self.tasks.set_waiting(&self.task_id, false);
        done
    }

    async fn call_user_answered(&self) -> bool {
        let mut control = self.live.watch_control();
        let mut aborted = self.aborted.clone();
        let before = self.live.control_changes();
        loop {
            // Taken and handed back since the model asked (however fast).
            if control.borrow_and_update().is_none() && self.live.control_changes() >= before + 2 {
                return true;
            }
            tokio::select! {
                changed = control.changed() => if changed.is_err() { return false },
                _ = aborted.changed() => return false,
                () = tokio::time::sleep(Duration::from_secs(1)) => {
                    if self.live.browser_gone() || now_ms() > self.live.deadline_at {
                        return false;
                    }
                }
            }
        }
    }

    /// The messages for one step: the prompt, the earlier answers (their
    /// screenshots only for the newest few: the prompt size guardrail), and
    /// the screenshot now.
    fn messages(&self, system: &str, history: &[(String, Vec<u8>)], now: &[u8]) -> Vec<Message> {
        let keep_from = history.len().saturating_sub(self.tasks.0.history_images);
        let mut out = vec![Message::System(system.to_owned())];
        for (i, (answer, jpeg)) in history.iter().enumerate() {
            if i >= keep_from {
                out.push(Message::User {
                    text: None,
                    images: vec![("image/jpeg", jpeg.clone())],
                });
            }
            out.push(Message::Assistant(answer.clone()));
        }
        out.push(Message::User {
            text: None,
            images: vec![("image/jpeg", now.to_vec())],
        });
        out
    }

    /// Stores a step's trace row, written while the next step goes on
    /// (`drive` waits for every row before the task ends).
    fn record(
        &mut self,
        n: i64,
        thought: Option<String>,
        action: Option<String>,
        outcome: &str,
        shot: &Shot,
        answer: Option<&Answer>,
    ) {
        let row = StepRow {
            task_id: self.task_id.clone(),
            n,
            thought: thought.map(|t| t.chars().take(4000).collect()),
            action,
            outcome: outcome.chars().take(500).collect(),
            screenshot_id: shot.id.clone(),
            model_ms: answer.map(|a| a.ms),
            prompt_tokens: answer.and_then(|a| a.prompt_tokens),
            completion_tokens: answer.and_then(|a| a.completion_tokens),
            created_at: now_ms(),
        };
        let store = self.tasks.0.store.clone();
        self.rows.push(tokio::spawn(async move {
            if let Err(e) = store.task_step_insert(&row).await {
                tracing::error!(error = %format!("{e:#}"), "failed to record a task step");
            }
        }));
    }

    /// Runs one action as browser tools, mapped from the model's image to
    /// the page.
    async fn execute(&self, action: &Action, space: &ImageSpace) -> Result<(), StepError> {
        let at = |x: f64, y: f64| {
            space.to_page(x, y).map_err(|e| {
                StepError::from(crate::sessions::ToolError::Invalid(format!(
                    "the model pointed outside the page: {e}"
                )))
            })
        };
        let mouse = |kind, x, y, button, buttons, clicks| {
            Tool::Input(LiveInput::Mouse {
                kind,
                x,
                y,
                button,
                buttons,
                click_count: clicks,
                modifiers: 0,
            })
        };
        match action {
            Action::Click { x, y } => {
                let (x, y) = at(*x, *y)?;
                self.tool(Tool::Click(ElementTarget::Point(x, y))).await?;
            }
            Action::DoubleClick { x, y } => {
                let (x, y) = at(*x, *y)?;
                for clicks in [1, 2] {
                    self.tool(mouse(MouseKind::Down, x, y, Button::Left, 1, clicks))
                        .await?;
                    self.tool(mouse(MouseKind::Up, x, y, Button::Left, 0, clicks))
                        .await?;
                }
            }
            Action::RightClick { x, y } => {
                let (x, y) = at(*x, *y)?;
                self.tool(mouse(MouseKind::Down, x, y, Button::Right, 2, 1))
                    .await?;
                self.tool(mouse(MouseKind::Up, x, y, Button::Right, 0, 1))
                    .await?;
            }
            Action::Drag { from, to } => {
                let (fx, fy) = at(from.x, from.y)?;
                let (tx, ty) = at(to.x, to.y)?;
                self.tool(mouse(MouseKind::Move, fx, fy, Button::None, 0, 0))
                    .await?;
                self.tool(mouse(MouseKind::Down, fx, fy, Button::Left, 1, 1))
                    .await?;
                for i in 1..=8 {
                    let t = f64::from(i) / 8.0;
                    self.tool(mouse(
                        MouseKind::Move,
                        fx + (tx - fx) * t,
                        fy + (ty - fy) * t,
                        Button::Left,
                        1,
                        0,
                    ))
                    .await?;
                }
                self.tool(mouse(MouseKind::Up, tx, ty, Button::Left, 0, 1))
                    .await?;
            }
            Action::Hotkey { keys } => {
                let names: Vec<String> = keys.iter().map(|k| key_name(k)).collect();
                let modifiers = names.iter().fold(0i64, |m, k| m | modifier_bit(k));
                for (i, k) in names.iter().enumerate() {
                    let held = names[..i].iter().fold(0i64, |m, k| m | modifier_bit(k));
                    self.tool(Tool::Input(LiveInput::Key {
                        down: true,
                        key: k.clone(),
                        code: String::new(),
                        modifiers: held,
                    }))
                    .await?;
                }
                for k in names.iter().rev() {
                    self.tool(Tool::Input(LiveInput::Key {
                        down: false,
                        key: k.clone(),
                        code: String::new(),
                        modifiers: modifiers & !modifier_bit(k),
                    }))
                    .await?;
                }
            }
            // `{{totp}}` / `{{totp:label}}`: Cordon types the code of the
            // vault's seed into the focused field; the model never sees it.
            Action::Type { content, submit } => {
                let tool = match super::prompt::totp_placeholder(content) {
                    Some(label) => Tool::TypeTotp {
                        target: None,
                        label,
                    },
                    None => Tool::Type {
                        text: content.clone(),
                        target: None,
                        submit: *submit,
                    },
                };
                let totp = matches!(tool, Tool::TypeTotp { .. });
                self.tool(tool).await?;
                if totp && *submit {
                    self.tool(Tool::Press {
                        key: "Enter".into(),
                    })
                    .await?;
                }
            }
            Action::Scroll { x, y, direction } => {
                let (x, y) = at(*x, *y)?;
                let (dx, dy) = match direction {
                    ScrollDirection::Up => (0.0, -400.0),
                    ScrollDirection::Down => (0.0, 400.0),
                    ScrollDirection::Left => (-400.0, 0.0),
                    ScrollDirection::Right => (400.0, 0.0),
                };
                self.tool(Tool::Scroll {
                    dx,
                    dy,
                    target: Some(ElementTarget::Point(x, y)),
                })
                .await?;
            }
            Action::Wait => tokio::time::sleep(WAIT).await,
            Action::Finished { .. } | Action::CallUser => {}
        }
        Ok(())
    }
}

/// The trace's text of an action: the grammar, typed text as its length.
fn describe(action: &Action) -> String {
    match action {
        Action::Type { content, submit } if super::prompt::totp_placeholder(content).is_some() => {
            format!(
                "type(content='{}'){}",
                content.trim(),
                if *submit { " + Enter" } else { "" }
            )
        }
        Action::Type { content, submit } => format!(
            "type(content=<{} characters>{})",
            content.chars().count(),
            if *submit { " + Enter" } else { "" }
        ),
        other => other.to_string(),
    }
}

/// A tool call's failure as the task's trace and result show it: the code
/// and the message the agent API answers the same failure with (an internal
/// cause hidden).
#[derive(Debug)]
struct StepError {
    code: &'static str,
    message: String,
}

impl StepError {
    fn internal(cause: anyhow::Error) -> Self {
        crate::sessions::ToolError::Internal(cause).into()
    }

    fn code(&self) -> &'static str {
        self.code
    }
}

impl From<crate::sessions::ToolError> for StepError {
    fn from(e: crate::sessions::ToolError) -> Self {
        Self {
            code: e.code(),
            message: e.public_message(),
        }
    }
}

impl std::fmt::Display for StepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// A model failure as the task's end.
fn model_failure(e: &ModelError) -> Outcome {
    Outcome::failed("error", e.code(), e.to_string())
}

/// A UI-TARS key name as `KeyboardEvent.key`.
fn key_name(k: &str) -> String {
    match k {
        "ctrl" | "control" => "Control".into(),
        "shift" => "Shift".into(),
        "alt" | "option" => "Alt".into(),
        "cmd" | "command" | "meta" | "win" | "super" => "Meta".into(),
        "enter" | "return" => "Enter".into(),
        "tab" => "Tab".into(),
        "esc" | "escape" => "Escape".into(),
        "space" => " ".into(),
        "backspace" => "Backspace".into(),
        "delete" | "del" => "Delete".into(),
        "up" | "arrowup" => "ArrowUp".into(),
        "down" | "arrowdown" => "ArrowDown".into(),
        "left" | "arrowleft" => "ArrowLeft".into(),
        "right" | "arrowright" => "ArrowRight".into(),
        "home" => "Home".into(),
        "end" => "End".into(),
        "pageup" => "PageUp".into(),
        "pagedown" => "PageDown".into(),
        other if other.len() > 1 && other.starts_with('f') && other[1..].parse::<u8>().is_ok() => {
            other.to_uppercase()
        }
        other => other.to_owned(),
    }
}

/// CDP's modifier bit of a key (Alt 1, Ctrl 2, Meta 4, Shift 8), 0 for others.
fn modifier_bit(k: &str) -> i64 {
    match k {
        "Alt" => 1,
        "Control" => 2,
        "Meta" => 4,
        "Shift" => 8,
        _ => 0,
    }
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

    #[test]
    fn hotkey_names_become_keyboard_event_keys() {
        assert_eq!(key_name("ctrl"), "Control");
        assert_eq!(key_name("enter"), "Enter");
        assert_eq!(key_name("f5"), "F5");
        assert_eq!(key_name("c"), "c");
        assert_eq!(modifier_bit("Control") | modifier_bit("Shift"), 10);
    }

    #[test]
    fn typed_text_shows_in_the_trace_as_its_length() {
        let t = describe(&Action::Type {
            content: "hunter2".into(),
            submit: true,
        });
        assert!(!t.contains("hunter2"), "{t}");
        assert!(t.contains("7 characters") && t.contains("Enter"), "{t}");
    }
}
