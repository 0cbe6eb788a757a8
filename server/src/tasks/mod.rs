//! `run_task`: a whole task in one call. The service (`run.rs`, `Tasks`)
//! validates the request (`request.rs`), opens the session and spawns the
//! step loop (`runner.rs`): it takes the page's picture (`picture.rs`),
//! asks a UI-TARS-compatible model (`model.rs`, an OpenAI-compatible
//! chat-completions endpoint; `prompt.rs`, the system prompt) for the next
//! action, parses it (`uitars`), and runs it (`act.rs`) through the one
//! tool pipeline, so the risk gate and operator take-over apply; every
//! step is stored as the task's trace (`trace.rs`).

mod act;
pub mod frames;
pub mod model;
mod picture;
pub mod prompt;
pub mod request;
pub mod run;
mod runner;
pub mod settings;
mod trace;
pub mod uitars;

pub use request::{StepView, TaskDetail, TaskError, TaskRequest, TaskResult, step_view};
pub use run::{TaskSettings, Tasks};
pub use settings::TasksSection;
