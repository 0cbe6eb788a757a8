//! The risk gate (issue 12): every agent action is assessed before it
//! reaches the browser. `rules.rs` holds the settings' side (levels, word
//! lists, per-tenant rules), `assess.rs` the pure verdict, `approvals.rs`
//! the in-memory queue of actions waiting for an operator, `outline.rs` the
//! approval's screenshot. The gate itself is a step of the one tool
//! pipeline (`sessions/tool/gate.rs`).

pub mod approvals;
pub mod assess;
pub mod outline;
pub mod rules;

pub use approvals::{Approvals, DecideError, Decision, Pending, Waiting};
pub use assess::{Assessment, ElementFacts, Facts, assess};
pub use rules::{Level, Policy, RiskSettings, Rule, Rules, TenantRisk};
