//! The task's trace: one `task_steps` row per step, written while the
//! next step goes on, and the text an action shows there (typed text as
//! its length).

use super::model::Answer;
use super::picture::Shot;
use super::runner::Runner;
use super::uitars::Action;
use crate::store::tasks::StepRow;
use crate::time::now_ms;

impl Runner {
    /// Stores a step's trace row, written while the next step goes on
    /// (`drive` waits for every row before the task ends).
    pub(super) fn record(
        &mut self,
        n: i64,
        thought: Option<String>,
        action: Option<String>,
        outcome: &str,
        shot: &Shot,
        answer: Option<&Answer>,
    ) {
        let row = StepRow {
            task_id: self.task_id.to_string(),
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
}

/// The trace's text of an action: the grammar, typed text as its length.
pub(super) fn describe(action: &Action) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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
