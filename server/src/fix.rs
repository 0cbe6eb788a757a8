//! What a person can do about a failure: an error made [`Fixed`] carries
//! its remedy, and the command line prints it on its own line after the
//! cause, so a first start that fails says why and what to change. The
//! error reads as before everywhere else (`to_string`, `{:#}`, logs).

use std::fmt;

/// An error with its remedy. Displays as the error (its source chain
/// unchanged); the remedy is read with [`render`] or [`fix_of`].
pub struct Fixed {
    cause: anyhow::Error,
    fix: String,
}

impl Fixed {
    /// `cause`, carrying `fix`.
    pub fn error(cause: impl Into<anyhow::Error>, fix: impl Into<String>) -> anyhow::Error {
        anyhow::Error::new(Self {
            cause: cause.into(),
            fix: fix.into(),
        })
    }
}

impl fmt::Display for Fixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.cause, f)
    }
}

impl fmt::Debug for Fixed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} (fix: {})", self.cause, self.fix)
    }
}

impl std::error::Error for Fixed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.source()
    }
}

/// Attaches a remedy to an error.
pub trait WithFix<T> {
    /// The error, with `fix` as what to do about it.
    fn fix(self, fix: impl Into<String>) -> anyhow::Result<T>;
}

impl<T, E: Into<anyhow::Error>> WithFix<T> for Result<T, E> {
    fn fix(self, fix: impl Into<String>) -> anyhow::Result<T> {
        self.map_err(|e| Fixed::error(e, fix))
    }
}

/// The remedy an error carries, wherever in its chain.
pub fn fix_of(e: &anyhow::Error) -> Option<&str> {
    e.downcast_ref::<Fixed>().map(|f| f.fix.as_str())
}

/// The error as the command line prints it: the cause chain on one line
/// (`a: b: c`), then `fix: …` on the next when the error carries one.
pub fn render(e: &anyhow::Error) -> String {
    match fix_of(e) {
        Some(f) => format!("{e:#}\nfix: {f}"),
        None => format!("{e:#}"),
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
        let e = e.unwrap_err();
        assert_eq!(
            render(&e),
            "bind: cannot listen on 127.0.0.1:8080: Address already in use\n\
             fix: stop the other process, or set bind to another port"
        );
        // Everywhere else the error reads as before.
        assert_eq!(e.to_string(), "bind: cannot listen on 127.0.0.1:8080");
        assert_eq!(
            format!("{e:#}"),
            "bind: cannot listen on 127.0.0.1:8080: Address already in use"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(render(&plain), "outer: inner");
    }

    #[test]
    fn a_fix_inside_a_chain_is_found_and_printed_last() {
        let e: anyhow::Result<()> = Err(anyhow::anyhow!("root cause")).fix("do this");
        let e = e.context("while starting").unwrap_err();
        assert_eq!(render(&e), "while starting: root cause\nfix: do this");
        assert_eq!(fix_of(&e), Some("do this"));
    }
}
