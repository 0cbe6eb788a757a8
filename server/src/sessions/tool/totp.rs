//! `type_totp`: Cordon types the current code of a vault TOTP seed into a
//! field of a page on the seed's domain; the caller hears only how many
//! digits went in.
//!
//! Refused (`denied_by_policy`) in clean sessions, in sessions the agent
//! may script over CDP (its scripts could read the field), when the field
//! is not a text/number/tel/one-time-code input, and when the field's own
//! frame is not on a granted domain that has a seed; `totp_not_granted`
//! when the grant did not ask for codes. The field is drawn masked before
//! the code goes in, and until the code is worthless every tool answer
//! (snapshots, `read_dom`, tabs' and navigations' addresses and titles,
//! error messages) has it blanked out. The audit row of a typed code says
//! how many digits (`typed_digits`), never which.

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::dom::BackendNodeId;
use zeroize::Zeroizing;

use super::output::TypedCode;
use super::{ElementTarget, ToolError, ToolOutput, exec};
use crate::cdp;
use crate::cdp::snapshot::SnapNode;
use crate::sessions::{CredentialMode, RunningSession, SessionManager, Tabs};
use crate::time::now_ms;
use crate::vault::totp::{self, PickError};

/// What replaces a typed code in tool answers.
const BLANKED: &str = "••••••";

/// A code typed into a page, remembered until it is worthless.
pub(in crate::sessions) struct TypedCodeMark {
    code: Zeroizing<String>,
    node: Option<BackendNodeId>,
    until_ms: i64,
}

impl RunningSession {
    fn remember_code(&self, code: &str, node: Option<BackendNodeId>, until_ms: i64) {
        let mut marks = self.typed_codes.lock().expect("typed codes lock");
        let now = now_ms();
        marks.retain(|m| m.until_ms > now);
        marks.push(TypedCodeMark {
            code: Zeroizing::new(code.to_owned()),
            node,
            until_ms,
        });
    }

    /// Blanks out every code typed lately that `text` contains (tool
    /// answers, and the live view's addresses and titles).
    pub(crate) fn scrub_codes(&self, text: &mut String) {
        let marks = self.typed_codes.lock().expect("typed codes lock");
        let now = now_ms();
        for m in marks.iter().filter(|m| m.until_ms > now) {
            if text.contains(m.code.as_str()) {
                *text = text.replace(m.code.as_str(), BLANKED);
            }
        }
    }

    /// Blanks every code typed lately out of an answer's addresses, titles
    /// and texts, or its error's message: whatever a tool answers (the
    /// tabs' list, a navigation's `final_url` and `title`) passes here.
    pub(in crate::sessions) fn scrub_answer(&self, answer: &mut Result<ToolOutput, ToolError>) {
        if self
            .typed_codes
            .lock()
            .expect("typed codes lock")
            .is_empty()
        {
            return;
        }
        let mut scrub = |s: &mut String| self.scrub_codes(s);
        match answer {
            Ok(out) => out.scrub_texts(&mut scrub),
            Err(e) => e.scrub_message(&mut scrub),
        }
    }

    /// Withholds the value of every field a code was typed into, and
    /// blanks codes out of names and values.
    pub(in crate::sessions) fn scrub_snapshot(
        &self,
        nodes: &mut [SnapNode],
        refs: &std::collections::HashMap<String, BackendNodeId>,
    ) {
        let masked: Vec<BackendNodeId> = {
            let marks = self.typed_codes.lock().expect("typed codes lock");
            if marks.is_empty() {
                return;
            }
            marks.iter().filter_map(|m| m.node).collect()
        };
        for n in nodes {
            if n.r#ref
                .as_ref()
                .and_then(|r| refs.get(r))
                .is_some_and(|id| masked.contains(id))
            {
                n.value = None;
            }
            self.scrub_codes(&mut n.name);
            if let Some(v) = n.value.as_mut() {
                self.scrub_codes(v);
            }
            self.scrub_snapshot(&mut n.children, refs);
        }
    }
}

impl SessionManager {
    /// Runs `type_totp` on the active tab (the tab lock held).
    pub(super) async fn type_totp(
        &self,
        session: &RunningSession,
        tabs: &mut Tabs,
        target: Option<&ElementTarget>,
        label: Option<&str>,
        timeout: Duration,
    ) -> Result<ToolOutput, ToolError> {
        match session.mode {
            // Its operator's alone (`run_tool` refuses anyone else).
            CredentialMode::Refresh => {}
            CredentialMode::Operator if !session.totp_granted => {
                return Err(ToolError::TotpNotGranted(
                    "this session's grant did not ask for second-factor codes: request a grant with \"totp\": true".into(),
                ));
            }
            CredentialMode::Operator if session.cdp_granted => {
                return Err(ToolError::DeniedByPolicy(
                    "this session's grant also allows CDP, whose scripts could read a typed code from the page; request a grant with totp and without cdp".into(),
                ));
            }
            CredentialMode::Operator => {}
            CredentialMode::Clean => {
                return Err(ToolError::DeniedByPolicy(
                    "type_totp types codes only in operator-mode sessions opened with a grant that has totp: true; this session is clean".into(),
                ));
            }
        }
        let v = session.viewport();
        let locator = target
            .map(|t| exec::locate(t, tabs, (v.width, v.height)))
            .transpose()?;
        let page = session.page(tabs).await?;
        // The tab's own address, as the browser process knows it (a
        // renderer cannot make it up): on a granted domain, or nothing is
        // typed whatever the field's frame says.
        let top = page
            .url()
            .await
            .ok()
            .flatten()
            .and_then(|u| url::Url::parse(&u).ok())
            .and_then(|u| u.host_str().map(str::to_owned))
            .unwrap_or_default();
        if !session.domains.iter().any(|d| totp::covers(d, &top)) {
            return Err(ToolError::DeniedByPolicy(format!(
                "the tab is on {top:?}, not on one of the session's domains ({})",
                session.domains.join(", ")
            )));
        }
        let (field, object) = cdp::code_field(&page, locator.as_ref(), timeout).await?;
        if !field.takes_a_code() {
            return Err(ToolError::DeniedByPolicy(format!(
                "a code is typed only into a text, number or tel input (or one marked autocomplete=one-time-code); the target is {}",
                field.describe()
            )));
        }
        let picked = self
            .0
            .vault
            .totp_pick(&session.tenant, &session.domains, &field.host, label)
            .await
            .map_err(|e| match e {
                PickError::NoSeed { .. } => ToolError::DeniedByPolicy(format!(
                    "the field's page is on {:?}, which is not a granted domain with a TOTP seed (session domains: {})",
                    field.host,
                    session.domains.join(", ")
                )),
                PickError::Ambiguous { .. } | PickError::UnknownLabel { .. } => {
                    ToolError::Invalid(e.to_string())
                }
                PickError::Vault(v) => ToolError::Internal(anyhow::anyhow!("vault: {v}")),
            })?;
        let now = u64::try_from(now_ms()).unwrap_or_default();
        let plan = totp::plan(picked.seed.params.period, now);
        if plan.wait_ms > 0 {
            tokio::time::sleep(Duration::from_millis(plan.wait_ms)).await;
        }
        let code = totp::code_at(&picked.seed, plan.at_s);
        let node = cdp::type_code(&page, &object, &field.host, code.digits(), timeout).await?;
        // Worthless two periods after its own ends (sites accept a step of
        // drift at most).
        let period_ms = i64::from(picked.seed.params.period) * 1000;
        let at_ms = i64::try_from(plan.at_s).unwrap_or_default() * 1000;
        let until = (at_ms / period_ms + 3) * period_ms;
        session.remember_code(code.digits(), node, until);
        let used: crate::domain::TotpId = picked.info.id.parse().map_err(|e| {
            ToolError::Internal(anyhow::Error::new(e).context("malformed TOTP seed row"))
        })?;
        self.0
            .vault
            .totp_mark_used(&used)
            .await
            .map_err(|e| ToolError::Internal(anyhow::Error::new(e).context("vault")))?;
        Ok(ToolOutput::TypedCode(TypedCode {
            ok: true,
            typed_digits: code.len(),
            label: picked.info.label,
            domain: picked.info.domain,
        }))
    }
}
