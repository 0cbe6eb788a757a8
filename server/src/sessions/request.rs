//! What an agent asks for when opening a session, parsed and checked once.

use serde::{Deserialize, Serialize};

use crate::domain::pattern::{HOST_PATTERN, MAX_HOST, is_host};
use crate::recording::RecordMode;

/// Whether stored credentials are injected.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum CredentialMode {
    /// Never injected: an empty browser.
    #[default]
    Clean,
    /// Injected from the vault, with an operator grant token.
    Operator,
    /// Started by an operator from the dashboard to log in to sites and
    /// save the fresh login; never injected, never opened by an agent.
    #[serde(skip)]
    Refresh,
}

impl CredentialMode {
    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Clean => "clean",
            Self::Operator => "operator",
            Self::Refresh => "refresh",
        }
    }
}

/// Whether a session's browser may download files.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum DownloadPolicy {
    /// Refused: a navigation that turns into a download answers
    /// `download_refused`, and nothing is written.
    #[default]
    Deny,
    /// Saved in the control plane's data dir (never the profile), up to
    /// `download_max_mb` each, listed and fetched through
    /// `/api/sessions/{id}/downloads`; removed at close unless the session
    /// records for audit.
    Allow,
}

impl DownloadPolicy {
    /// Stored and audited name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Deny => "deny",
            Self::Allow => "allow",
        }
    }
}

/// The narrowest and lowest viewport.
pub const MIN_VIEWPORT: u32 = 200;
/// The widest viewport.
pub const MAX_VIEWPORT_WIDTH: u32 = 3840;
/// The tallest viewport.
pub const MAX_VIEWPORT_HEIGHT: u32 = 2160;

/// Viewport size in CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Viewport {
    /// 200–3840.
    #[schemars(range(min = MIN_VIEWPORT, max = MAX_VIEWPORT_WIDTH))]
    pub width: u32,
    /// 200–2160.
    #[schemars(range(min = MIN_VIEWPORT, max = MAX_VIEWPORT_HEIGHT))]
    pub height: u32,
}

impl Default for Viewport {
    fn default() -> Self {
        Self {
            width: 1280,
            height: 720,
        }
    }
}

/// `credential_mode`'s rules, for the schema: `clean` (or absent) takes
/// no grant token; `operator` needs one and at least one domain.
/// (`deadline_s`'s maximum is the server's `session_deadline_max_s`,
/// filled in when the document is served.)
pub fn credential_rules(schema: &mut schemars::Schema) {
    let [clean, operator] = credential_branches();
    crate::domain::schema::one_of(schema, vec![clean, operator]);
}

/// The `clean` and the `operator` branch of [`credential_rules`].
pub fn credential_branches() -> [serde_json::Value; 2] {
    [
        serde_json::json!({
            "properties": {
                "credential_mode": { "type": "string", "enum": ["clean"], "default": "clean" },
                "grant_token": { "nullable": true, "enum": [null] }
            }
        }),
        serde_json::json!({
            "required": ["credential_mode", "grant_token", "domains"],
            "properties": {
                "credential_mode": { "type": "string", "enum": ["operator"] },
                "grant_token": { "type": "string", "minLength": 1 },
                "domains": { "minItems": 1 }
            }
        }),
    ]
}

/// The body of `POST /api/sessions`. `Debug` never shows the grant token.
#[derive(Clone, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(transform = credential_rules)]
pub struct OpenRequest {
    /// `clean` (default) or `operator`.
    #[serde(default)]
    pub credential_mode: CredentialMode,
    /// Hosts whose credentials an operator session wants (host names or
    /// IPv4 addresses).
    #[serde(default)]
    #[schemars(length(max = MAX_DOMAINS), inner(length(min = 1, max = MAX_HOST), pattern(HOST_PATTERN)))]
    pub domains: Vec<String>,
    /// `off`, `transient` (default) or `audit`.
    #[serde(default)]
    pub record: RecordMode,
    /// Lifetime in seconds (default from settings; at most
    /// `session_deadline_max_s`).
    #[schemars(range(min = 1))]
    pub deadline_s: Option<u64>,
    /// Viewport (default 1280×720).
    #[serde(default)]
    pub viewport: Viewport,
    /// The operator grant token (operator mode only).
    pub grant_token: Option<String>,
    /// `deny` (default) or `allow`.
    #[serde(default)]
    pub downloads: DownloadPolicy,
    /// Set by Cordon, never by the body: the grant redeemed for an
    /// operator-mode session allows CDP (`cdp: true` on its request).
    #[serde(skip)]
    #[schemars(skip)]
    pub cdp_granted: bool,
    /// Set by Cordon, never by the body: the grant redeemed for an
    /// operator-mode session allows typing TOTP codes (`totp: true`).
    #[serde(skip)]
    #[schemars(skip)]
    pub totp_granted: bool,
    /// A refresh session: the operator who started it, whose alone it is
    /// (never from the request body).
    #[serde(skip)]
    pub refresh_operator: Option<String>,
    /// Set by Cordon, never by the body: the grant token an operator-mode
    /// session was opened with, and when it expires (Unix ms): the session
    /// ends when it is revoked or expires.
    #[serde(skip)]
    #[schemars(skip)]
    pub grant: Option<(crate::domain::GrantTokenId, i64)>,
}

impl std::fmt::Debug for OpenRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenRequest")
            .field("credential_mode", &self.credential_mode)
            .field("domains", &self.domains)
            .field("record", &self.record)
            .field("deadline_s", &self.deadline_s)
            .field("viewport", &self.viewport)
            .field("grant_token", &self.grant_token.as_ref().map(|_| "***"))
            .field("downloads", &self.downloads)
            .finish()
    }
}

/// The most domains one session may name.
pub const MAX_DOMAINS: usize = 32;

/// Why an open request is refused before anything starts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenRequestError {
    /// Viewport out of range.
    #[error("viewport must be 200–3840 × 200–2160 pixels")]
    Viewport,
    /// Deadline out of range.
    #[error("deadline_s must be between 1 and {0}")]
    Deadline(u64),
    /// Too many or malformed domains.
    #[error("domains: {0}")]
    Domains(String),
    /// Operator mode needs a grant.
    #[error("credential_mode \"operator\" requires a valid operator grant token")]
    GrantRequired,
    /// This control plane's sandbox driver shares no directory with the
    /// browser (kube), so it cannot keep downloads.
    #[error(
        "downloads: \"allow\" is not available with the kube sandbox driver (a browser pod shares no directory with the control plane)"
    )]
    DownloadsUnsupported,
}

impl OpenRequest {
    /// Checks ranges; returns the deadline in seconds to use.
    pub fn validate(
        &self,
        default_deadline: u64,
        max_deadline: u64,
    ) -> Result<u64, OpenRequestError> {
        let Viewport { width, height } = self.viewport;
        if !(MIN_VIEWPORT..=MAX_VIEWPORT_WIDTH).contains(&width)
            || !(MIN_VIEWPORT..=MAX_VIEWPORT_HEIGHT).contains(&height)
        {
            return Err(OpenRequestError::Viewport);
        }
        let deadline = self.deadline_s.unwrap_or(default_deadline);
        if deadline == 0 || deadline > max_deadline {
            return Err(OpenRequestError::Deadline(max_deadline));
        }
        if self.domains.len() > MAX_DOMAINS {
            return Err(OpenRequestError::Domains(format!("at most {MAX_DOMAINS}")));
        }
        for d in &self.domains {
            if !is_host(d) {
                return Err(OpenRequestError::Domains(format!(
                    "{:?} is not a host name",
                    d.chars().take(64).collect::<String>()
                )));
            }
        }
        match self.credential_mode {
            CredentialMode::Operator => {
                if self.grant_token.as_deref().is_none_or(str::is_empty) {
                    return Err(OpenRequestError::GrantRequired);
                }
                if self.domains.is_empty() {
                    return Err(OpenRequestError::Domains(
                        "operator mode needs at least one domain".into(),
                    ));
                }
                self.vault_domains()?;
            }
            CredentialMode::Refresh => {
                if self.grant_token.is_some() {
                    return Err(OpenRequestError::Domains(
                        "a refresh session takes no grant token".into(),
                    ));
                }
                if self.domains.is_empty() {
                    return Err(OpenRequestError::Domains(
                        "name at least one domain to log in to".into(),
                    ));
                }
                self.vault_domains()?;
            }
            CredentialMode::Clean => {
                if self.grant_token.is_some() {
                    return Err(OpenRequestError::Domains(
                        "grant_token is only for credential_mode \"operator\"".into(),
                    ));
                }
            }
        }
        Ok(deadline)
    }

    /// The requested domains as vault domains (exact hosts), deduplicated.
    pub fn vault_domains(&self) -> Result<Vec<crate::vault::Domain>, OpenRequestError> {
        let mut out = self
            .domains
            .iter()
            .map(|d| {
                d.parse::<crate::vault::Domain>()
                    .map_err(|e| OpenRequestError::Domains(format!("{d:?}: {e}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        out.sort();
        out.dedup();
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<OpenRequest, serde_json::Error> {
        serde_json::from_str(json)
    }

    #[test]
    fn an_empty_body_opens_a_clean_transient_session() {
        let r = parse("{}").unwrap();
        assert_eq!(r.credential_mode, CredentialMode::Clean);
        assert_eq!(r.record, RecordMode::Transient);
        assert_eq!(r.viewport, Viewport::default());
        assert_eq!(r.validate(600, 3600), Ok(600));
    }

    #[test]
    fn unknown_fields_and_modes_are_refused() {
        assert!(parse(r#"{"credentials": "x"}"#).is_err());
        assert!(parse(r#"{"credential_mode": "root"}"#).is_err());
        assert!(parse(r#"{"record": "forever"}"#).is_err());
        assert!(parse(r#"{"viewport": {"width": -1, "height": 2}}"#).is_err());
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let mut r = parse("{}").unwrap();
        r.viewport = Viewport {
            width: 100,
            height: 720,
        };
        assert_eq!(r.validate(600, 3600), Err(OpenRequestError::Viewport));
        r.viewport = Viewport::default();
        r.deadline_s = Some(0);
        assert_eq!(r.validate(600, 3600), Err(OpenRequestError::Deadline(3600)));
        r.deadline_s = Some(3601);
        assert_eq!(r.validate(600, 3600), Err(OpenRequestError::Deadline(3600)));
        r.deadline_s = None;
        r.domains = vec!["exa mple.com".into()];
        assert!(matches!(
            r.validate(600, 3600),
            Err(OpenRequestError::Domains(_))
        ));
        r.domains = vec!["a.example".into(); MAX_DOMAINS + 1];
        assert!(matches!(
            r.validate(600, 3600),
            Err(OpenRequestError::Domains(_))
        ));
    }

    #[test]
    fn operator_mode_requires_a_grant_token() {
        let r = parse(r#"{"credential_mode": "operator", "domains": ["github.com"]}"#).unwrap();
        assert_eq!(r.validate(600, 3600), Err(OpenRequestError::GrantRequired));
        let r = parse(
            r#"{"credential_mode": "operator", "domains": ["github.com"], "grant_token": "x"}"#,
        )
        .unwrap();
        assert_eq!(r.validate(600, 3600), Ok(600));
        let r = parse(r#"{"credential_mode": "operator", "grant_token": "x"}"#).unwrap();
        assert!(matches!(
            r.validate(600, 3600),
            Err(OpenRequestError::Domains(_))
        ));
        let r = parse(r#"{"grant_token": "x"}"#).unwrap();
        assert!(matches!(
            r.validate(600, 3600),
            Err(OpenRequestError::Domains(_))
        ));
    }
}
