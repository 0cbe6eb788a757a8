//! Redaction of secrets before anything reaches a log, an audit row or an
//! error message. Audit params are built from these helpers, never from raw
//! input.

use url::Url;

/// What every redacted secret is shown as.
pub const MASK: &str = "***";

/// Query parameters whose values are treated as credentials.
const SENSITIVE_QUERY_KEYS: &[&str] = &[
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "code",
    "key",
    "api_key",
    "apikey",
    "password",
    "passwd",
    "pwd",
    "secret",
    "client_secret",
    "auth",
    "authorization",
    "session",
    "sessionid",
    "sid",
    "sig",
    "signature",
    "jwt",
    "grant",
    "otp",
];

/// Typed text: only its length survives (`[typed 12 chars]`).
pub fn typed_text(text: &str) -> String {
    format!("[typed {} chars]", text.chars().count())
}

/// A cookie value, token, password or key: always `***`.
pub fn secret(_value: &str) -> &'static str {
    MASK
}

/// A cookie shown by name only: `name=***`.
pub fn cookie(name: &str, _value: &str) -> String {
    format!("{name}={MASK}")
}

/// A URL with user info and credential-like query values masked. Input that
/// is not a URL is masked whole, since it cannot be shown to be harmless.
pub fn url(raw: &str) -> String {
    let Ok(mut parsed) = Url::parse(raw) else {
        return MASK.to_string();
    };
    if !parsed.username().is_empty() && parsed.password().is_none() {
        // A lone user name in a URL is often a token (`https://TOKEN@host`).
        let _ = parsed.set_username(MASK);
    }
    if parsed.password().is_some() {
        let _ = parsed.set_password(Some(MASK));
    }
    if parsed.query().is_some() {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let sensitive = SENSITIVE_QUERY_KEYS.contains(&k.to_ascii_lowercase().as_str());
                (
                    k.into_owned(),
                    if sensitive {
                        MASK.to_string()
                    } else {
                        v.into_owned()
                    },
                )
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    if parsed.fragment().is_some_and(|f| f.contains('=')) {
        // OAuth implicit flows put tokens in the fragment.
        parsed.set_fragment(Some(MASK));
    }
    // `set_password` percent-encodes the mask; show it plainly.
    parsed.to_string().replace("%2A%2A%2A", MASK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_text_keeps_only_its_length() {
        let out = typed_text("correct horse battery");
        assert_eq!(out, "[typed 21 chars]");
        assert!(!out.contains("horse"));
    }

    #[test]
    fn typed_text_counts_characters_not_bytes() {
        assert_eq!(typed_text("żółw"), "[typed 4 chars]");
    }

    #[test]
    fn secrets_and_cookie_values_are_masked() {
        assert_eq!(secret("tok_abc"), "***");
        assert_eq!(cookie("sid", "s3cr3t"), "sid=***");
    }

    #[test]
    fn url_passwords_are_masked() {
        assert_eq!(
            url("postgres://cordon:hunter2@db.internal:5432/cordon"),
            "postgres://cordon:***@db.internal:5432/cordon"
        );
    }

    #[test]
    fn a_lone_user_name_is_masked_as_it_may_be_a_token() {
        let out = url("https://ghp_abcdef@github.example/repo");
        assert!(!out.contains("ghp_abcdef"), "{out}");
    }

    #[test]
    fn credential_query_values_are_masked_and_others_kept() {
        let out = url("https://example.com/cb?code=xyz&state=ok&Access_Token=abc");
        assert!(!out.contains("xyz") && !out.contains("abc"), "{out}");
        assert!(out.contains("state=ok"), "{out}");
    }

    #[test]
    fn token_fragments_are_masked() {
        let out = url("https://example.com/#access_token=abc&expires=1");
        assert!(!out.contains("abc"), "{out}");
    }

    #[test]
    fn plain_urls_are_unchanged() {
        assert_eq!(
            url("https://example.com/a/b?q=rust#top"),
            "https://example.com/a/b?q=rust#top"
        );
    }

    #[test]
    fn non_urls_are_masked_whole() {
        assert_eq!(url("not a url hunter2"), "***");
    }
}
