//! A file's name as uploads and downloads use it: never a path.

/// The longest name accepted, in bytes (common file systems' limit).
pub const MAX_FILE_NAME: usize = 255;

/// A file name: 1–255 bytes, no `/` or `\`, no control characters, not
/// `.` or `..`. Joined onto a directory, it always names an entry of that
/// directory.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct FileName(String);

/// Why a string is not a [`FileName`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileNameError {
    /// Nothing.
    #[error("a file name must not be empty")]
    Empty,
    /// Over [`MAX_FILE_NAME`] bytes.
    #[error("a file name must be at most {MAX_FILE_NAME} bytes")]
    TooLong,
    /// `/` or `\`, or `.`/`..`.
    #[error("a file name must not contain path separators or be . or ..")]
    Path,
    /// A control character (newline, NUL, …).
    #[error("a file name must not contain control characters")]
    Control,
}

impl FileName {
    /// Parses a name a caller sent.
    pub fn parse(raw: &str) -> Result<Self, FileNameError> {
        if raw.is_empty() {
            return Err(FileNameError::Empty);
        }
        if raw.len() > MAX_FILE_NAME {
            return Err(FileNameError::TooLong);
        }
        if raw.chars().any(char::is_control) {
            return Err(FileNameError::Control);
        }
        if raw.contains(['/', '\\']) || raw == "." || raw == ".." {
            return Err(FileNameError::Path);
        }
        Ok(Self(raw.to_owned()))
    }

    /// A name a site suggested, made into a [`FileName`]: separators and
    /// control characters become `_`, leading dots go (no hidden files, no
    /// `..`), long names are cut on a character boundary keeping the
    /// extension where it is short; nothing left is `download`.
    pub fn sanitize(raw: &str) -> Self {
        let cleaned: String = raw
            .chars()
            .map(|c| {
                if c.is_control() || c == '/' || c == '\\' {
                    '_'
                } else {
                    c
                }
            })
            .collect();
        let cleaned = cleaned.trim().trim_start_matches('.').to_owned();
        let cleaned = if cleaned.len() > MAX_FILE_NAME {
            let ext = cleaned
                .rsplit_once('.')
                .map(|(_, e)| e)
                .filter(|e| e.len() <= 16)
                .map(|e| format!(".{e}"))
                .unwrap_or_default();
            let mut stem = String::new();
            for c in cleaned.chars() {
                if stem.len() + c.len_utf8() + ext.len() > MAX_FILE_NAME {
                    break;
                }
                stem.push(c);
            }
            stem + &ext
        } else {
            cleaned
        };
        match Self::parse(&cleaned) {
            Ok(name) => name,
            Err(_) => Self("download".into()),
        }
    }

    /// `name (n).ext`: another name for the same file when this one is
    /// taken, a different one for every `n` (a long name's stem is cut
    /// to make room for the number, never the number cut off).
    pub fn numbered(&self, n: u32) -> Self {
        let (stem, ext) = match self.0.rsplit_once('.') {
            Some((stem, ext)) if !stem.is_empty() && ext.len() <= 16 => (stem, format!(".{ext}")),
            _ => (self.0.as_str(), String::new()),
        };
        let suffix = format!(" ({n}){ext}");
        let mut cut = String::new();
        for c in stem.chars() {
            if cut.len() + c.len_utf8() + suffix.len() > MAX_FILE_NAME {
                break;
            }
            cut.push(c);
        }
        Self::sanitize(&(cut + &suffix))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for FileName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The most other names tried for a file whose name is taken
/// ([`FileName::numbered`]); past it the file is refused.
pub const MAX_NUMBERED: u32 = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_name_parses_and_paths_or_control_characters_do_not() {
        assert_eq!(
            FileName::parse("report 2026.pdf").unwrap().as_str(),
            "report 2026.pdf"
        );
        assert_eq!(FileName::parse(".env").unwrap().as_str(), ".env");
        for (bad, why) in [
            ("", FileNameError::Empty),
            ("a/b.txt", FileNameError::Path),
            ("..\\x", FileNameError::Path),
            ("..", FileNameError::Path),
            (".", FileNameError::Path),
            ("/etc/passwd", FileNameError::Path),
            ("line\nbreak", FileNameError::Control),
            ("nul\0.txt", FileNameError::Control),
            ("esc\u{1b}[31m", FileNameError::Control),
        ] {
            assert_eq!(FileName::parse(bad), Err(why), "{bad:?}");
        }
        assert_eq!(
            FileName::parse(&"a".repeat(256)),
            Err(FileNameError::TooLong)
        );
        assert!(FileName::parse(&"é".repeat(127)).is_ok());
        assert_eq!(
            FileName::parse(&"é".repeat(128)),
            Err(FileNameError::TooLong)
        );
    }

    #[test]
    fn a_suggested_name_is_made_safe_whatever_it_holds() {
        for (raw, want) in [
            ("report.pdf", "report.pdf"),
            ("../../etc/passwd", "_.._etc_passwd"),
            ("..", "download"),
            ("", "download"),
            ("a\nb\\c.txt", "a_b_c.txt"),
            ("  .hidden  ", "hidden"),
        ] {
            assert_eq!(FileName::sanitize(raw).as_str(), want, "{raw:?}");
        }
        let long = format!("{}.tar.gz", "x".repeat(400));
        let cut = FileName::sanitize(&long);
        assert!(cut.as_str().len() <= MAX_FILE_NAME, "{cut}");
        assert!(cut.as_str().ends_with(".gz"), "{cut}");
        assert_eq!(
            FileName::parse("data.csv").unwrap().numbered(2).as_str(),
            "data (2).csv"
        );
        assert_eq!(
            FileName::parse("README").unwrap().numbered(3).as_str(),
            "README (3)"
        );
    }

    #[test]
    fn every_number_gives_a_long_name_another_name_within_the_limit() {
        for raw in [
            format!("{}.bin", "a".repeat(400)),
            "é".repeat(200),
            format!("{}.{}", "b".repeat(300), "x".repeat(40)),
            "short.txt".to_owned(),
        ] {
            let name = FileName::sanitize(&raw);
            let mut seen = std::collections::HashSet::from([name.as_str().to_owned()]);
            for n in [2, 3, 10, 999, MAX_NUMBERED, u32::MAX] {
                let other = name.numbered(n);
                assert!(
                    other.as_str().len() <= MAX_FILE_NAME,
                    "{n}: {}",
                    other.as_str().len()
                );
                assert!(other.as_str().contains(&format!("({n})")), "{n}: {other}");
                assert!(seen.insert(other.as_str().to_owned()), "{n}: {other} again");
            }
        }
        assert_eq!(
            FileName::sanitize("report.pdf").numbered(2).as_str(),
            "report (2).pdf"
        );
    }
}
