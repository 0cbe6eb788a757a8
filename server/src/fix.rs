//! What a person can do about a failure: a [`Fix`] attached to an error
//! (outermost) travels with it and is printed on its own line after the
//! cause, so a first start that fails says why and what to change.

use std::fmt;

/// The remedy of a failure, for a person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fix(pub String);

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Fix {}

/// Attaches a [`Fix`] to an error.
pub trait WithFix<T> {
    /// The error, with `fix` as what to do about it.
    fn fix(self, fix: impl Into<String>) -> anyhow::Result<T>;
}

impl<T, E: Into<anyhow::Error>> WithFix<T> for Result<T, E> {
    fn fix(self, fix: impl Into<String>) -> anyhow::Result<T> {
        self.map_err(|e| e.into().context(Fix(fix.into())))
    }
}

/// The error as the command line prints it: the cause chain on one line
/// (`a: b: c`), then `fix: …` on the next when the error carries one.
pub fn render(e: &anyhow::Error) -> String {
    let fix = e.downcast_ref::<Fix>().map(|f| f.0.clone());
    let chain: Vec<String> = e
        .chain()
        .map(ToString::to_string)
        .filter(|s| Some(s) != fix.as_ref())
        .collect();
    match fix {
        Some(f) => format!("{}\nfix: {f}", chain.join(": ")),
        None => chain.join(": "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn the_fix_follows_the_whole_cause_on_its_own_line() {
        let e: anyhow::Result<()> = Err(std::io::Error::other("Address already in use"))
            .context("bind: cannot listen on 127.0.0.1:8080")
            .fix("stop the other process, or set bind to another port");
        assert_eq!(
            render(&e.unwrap_err()),
            "bind: cannot listen on 127.0.0.1:8080: Address already in use\n\
             fix: stop the other process, or set bind to another port"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(render(&plain), "outer: inner");
    }

    #[test]
    fn a_fix_inside_a_chain_is_found_and_printed_last() {
        let e: anyhow::Result<()> = Err(anyhow::anyhow!("root cause")).fix("do this");
        let e = e.context("while starting").unwrap_err();
        assert_eq!(render(&e), "while starting: root cause\nfix: do this");
    }
}
