//! `run_task`: a whole task in one call. The loop (`run.rs`) asks a
//! UI-TARS-compatible model (`model.rs`, an OpenAI-compatible
//! chat-completions endpoint; `prompt.rs`, the system prompt) for the next
//! action on a screenshot, parses it (`uitars`), and runs it through the
//! one tool pipeline, so the risk gate and operator take-over apply; every
//! step is stored as the task's trace.

pub mod frames;
pub mod model;
pub mod prompt;
pub mod run;
pub mod uitars;

pub use run::{StepView, TaskDetail, TaskError, TaskRequest, TaskResult, TaskSettings, Tasks};
