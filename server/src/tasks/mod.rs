//! Whole tasks run by a vision-language model (`run_task`, issue 12): a
//! screenshot goes to a UI-TARS-compatible model over an OpenAI-compatible
//! chat-completions endpoint, its answer is parsed, checked by the risk gate
//! and executed through the one tool pipeline, until the model says it has
//! finished or needs a person.
//!
//! For now this holds only the pure part: [`uitars`], the model family's
//! action grammar and the mapping of its coordinates back onto the page.

pub mod uitars;
