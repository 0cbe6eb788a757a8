//! `run_task`'s settings (`model_*`, `task_*`), declared, defaulted and
//! checked here; `config` flattens them into `Settings`.

use std::time::Duration;

use anyhow::bail;
use secrecy::SecretString;
use serde::{Deserialize, Serialize};

use super::TaskSettings;
use super::model::ModelConfig;
use super::uitars::CoordinateMode;

/// The task runner's settings, as `cordon.toml` and `CORDON_*` name them.
#[derive(Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct TasksSection {
    /// `run_task`'s model: the base URL of an OpenAI-compatible
    /// chat-completions endpoint with image input (`…/v1`); unset, tasks
    /// answer 503 `model_unconfigured`.
    #[serde(default)]
    pub model_base_url: Option<String>,
    /// The model's name at that endpoint.
    #[serde(default = "d::model_name")]
    pub model_name: String,
    /// The endpoint's bearer key, if it needs one. Shown as `***`, never
    /// logged or traced.
    #[serde(default, serialize_with = "crate::setting::masked")]
    #[schemars(with = "Option<String>")]
    pub model_api_key: Option<SecretString>,
    /// Bound of one model answer, in seconds (1–600).
    #[serde(default = "d::model_timeout_s")]
    pub model_timeout_s: u64,
    /// How the model reports coordinates: `absolute` (UI-TARS 1.5: pixels of
    /// the image as the model resized it) or `relative1000` (UI-TARS 1.0).
    #[serde(default = "d::model_coordinates")]
    pub model_coordinates: String,
    /// Screenshots of earlier steps sent along with the newest (the prompt
    /// size guardrail: older steps go as text only); at most 10.
    #[serde(default = "d::task_history_images")]
    pub task_history_images: u32,
    /// The longest a task step waits, after its action, for the page's
    /// repaint to arrive as a screencast frame before it takes the newest
    /// picture there is (nothing repainted), in ms (10–10000). A page that
    /// says it has drawn since the action ends the wait sooner.
    #[serde(default = "d::task_frame_wait_ms")]
    pub task_frame_wait_ms: u32,
    /// Once the page has drawn since a step's action (two animation
    /// frames) and no repaint has arrived, how much longer the step waits
    /// for one that may still be on its way from the browser's encoder
    /// before it takes the page as unchanged, in ms (1–10000); at least as
    /// long again as the page took to draw. Lower is a faster step after an
    /// action that changes nothing; too low shows the model a picture from
    /// before its action on a busy machine.
    #[serde(default = "d::task_frame_settle_ms")]
    pub task_frame_settle_ms: u32,
    /// Largest `instruction` of a task, in bytes (256–65536).
    #[serde(default = "d::task_instruction_max_bytes")]
    pub task_instruction_max_bytes: u32,
    /// Most steps a task may ask for (1–500; a task that does not say gets
    /// 15).
    #[serde(default = "d::task_max_steps")]
    pub task_max_steps: u32,
}

/// The defaults, one function per setting that has one.
mod d {
    pub fn model_name() -> String {
        "ui-tars-1.5-7b".into()
    }
    pub fn model_timeout_s() -> u64 {
        60
    }
    pub fn model_coordinates() -> String {
        "absolute".into()
    }
    pub fn task_history_images() -> u32 {
        2
    }
    pub fn task_frame_wait_ms() -> u32 {
        100
    }
    pub fn task_frame_settle_ms() -> u32 {
        25
    }
    pub fn task_instruction_max_bytes() -> u32 {
        8192
    }
    pub fn task_max_steps() -> u32 {
        50
    }
}

impl TasksSection {
    /// The model's and the steps' rules, each error naming its setting.
    pub fn validate_model(&self) -> anyhow::Result<()> {
        if let Some(u) = &self.model_base_url {
            let parsed = url::Url::parse(u)
                .map_err(|e| anyhow::anyhow!("model_base_url: not a URL: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                bail!("model_base_url: must be http(s)");
            }
        }
        if !matches!(self.model_coordinates.as_str(), "absolute" | "relative1000") {
            bail!("model_coordinates: must be \"absolute\" or \"relative1000\"");
        }
        if !(1..=600).contains(&self.model_timeout_s) {
            bail!("model_timeout_s: must be between 1 and 600");
        }
        if self.task_history_images > 10 {
            bail!("task_history_images: at most 10");
        }
        if !(10..=10_000).contains(&self.task_frame_wait_ms) {
            bail!("task_frame_wait_ms: must be between 10 and 10000");
        }
        if !(1..=10_000).contains(&self.task_frame_settle_ms) {
            bail!("task_frame_settle_ms: must be between 1 and 10000");
        }
        Ok(())
    }

    /// The tasks' bounds' rules.
    pub fn validate_bounds(&self) -> anyhow::Result<()> {
        if !(256..=65_536).contains(&self.task_instruction_max_bytes) {
            bail!("task_instruction_max_bytes: must be between 256 and 65536");
        }
        if !(1..=500).contains(&self.task_max_steps) {
            bail!("task_max_steps: must be between 1 and 500");
        }
        Ok(())
    }

    /// The runner's settings as it reads them.
    pub fn task_settings(&self) -> TaskSettings {
        TaskSettings {
            model: self.model_base_url.as_ref().map(|base| ModelConfig {
                base_url: base.clone(),
                model: self.model_name.clone(),
                api_key: self.model_api_key.clone(),
                timeout: Duration::from_secs(self.model_timeout_s),
            }),
            coordinates: if self.model_coordinates == "relative1000" {
                CoordinateMode::Relative1000
            } else {
                CoordinateMode::Absolute
            },
            history_images: self.task_history_images as usize,
            frame_wait: Duration::from_millis(u64::from(self.task_frame_wait_ms)),
            frame_settle: Duration::from_millis(u64::from(self.task_frame_settle_ms)),
            instruction_max: self.task_instruction_max_bytes as usize,
            max_steps: self.task_max_steps,
        }
    }
}
