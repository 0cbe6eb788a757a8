//! Injection at open: vault cookies decrypted in the control plane and set
//! on the session's browser as CDP `Network.CookieParam`s.

use std::collections::BTreeMap;

use anyhow::Context;
use serde_json::json;

use super::{Inner, OpenRequest};
use crate::audit::{Actor, NewEvent};
use crate::cdp::cookie_param;
use crate::domain::SessionId;
use crate::store::api_keys::ApiKeyOwner;

/// What an injection did, for the open's answer (counts and names only).
pub(super) struct Injected {
    /// Cookies set per domain asked for: 0 where the tenant stores none
    /// (or only expired ones).
    pub counts: BTreeMap<String, usize>,
    /// Each configured smoke probe's result for the injected domains.
    pub smoke: BTreeMap<String, String>,
    /// Domains asked for that the tenant has no stored credential for.
    pub missing_credentials: Vec<String>,
}

/// Sets the tenant's stored cookies for the session's domains on its
/// browser over CDP, runs the configured smoke probes, records the
/// injection, and audits the counts (never a value). Nothing is read back
/// from the browser into the vault. When a probe ran, the page is left on
/// the probe's page: the caller resets it to `about:blank`
/// ([`reset_to_blank`]) before the agent's first tool call.
pub(super) async fn inject(
    inner: &Inner,
    owner: &ApiKeyOwner,
    id: &SessionId,
    req: &OpenRequest,
    page: &chromiumoxide::Page,
) -> anyhow::Result<Injected> {
    let domains = req.vault_domains()?;
    let selected = inner
        .vault
        .select_for_injection(&owner.tenant, &domains)
        .await
        .map_err(|e| anyhow::anyhow!("vault: {e}"))?;
    let mut counts: BTreeMap<String, usize> =
        domains.iter().map(|d| (d.as_str().to_owned(), 0)).collect();
    let mut params = Vec::new();
    for (domain, cookies) in &selected {
        for c in cookies {
            params.push(cookie_param(c)?);
        }
        counts.insert(domain.as_str().to_owned(), cookies.len());
    }
    if !params.is_empty() {
        page.execute(chromiumoxide::cdp::browser_protocol::network::SetCookiesParams::new(params))
            .await
            .context("failed to set cookies over CDP")?;
    }
    let missing_credentials: Vec<String> = domains
        .iter()
        .filter(|d| !selected.iter().any(|(stored, _)| stored == *d))
        .map(|d| d.as_str().to_owned())
        .collect();
    drop(selected);
    let injected: Vec<crate::vault::Domain> = domains
        .into_iter()
        .filter(|d| counts.get(d.as_str()).copied().unwrap_or(0) > 0)
        .collect();
    // The probes load pages; recording the injection needs only the store:
    // both at once.
    let mark = async {
        if injected.is_empty() {
            return Ok(());
        }
        inner
            .vault
            .mark_injected(&owner.tenant, &injected)
            .await
            .map(|_| ())
            .map_err(|e| anyhow::anyhow!("vault: {e}"))
    };
    let probes = async {
        let mut smoke = BTreeMap::new();
        for d in &injected {
            if let Some(probe) = inner.cfg.smoke_probes.get(d.as_str()) {
                smoke.insert(d.as_str().to_owned(), run_probe(page, probe).await);
            }
        }
        smoke
    };
    let (marked, smoke) = tokio::join!(mark, probes);
    marked?;
    inner
        .store
        .audit_append(
            NewEvent::new(Actor::System, "session.inject")
                .tenant(&owner.tenant)
                .session(id.as_str())
                .params(json!({
                    "cookies": counts,
                    "smoke": smoke,
                    "missing_credentials": missing_credentials,
                }))
                .outcome("ok"),
        )
        .await?;
    Ok(Injected {
        counts,
        smoke,
        missing_credentials,
    })
}

/// Takes the session's tab lock, then tells `locked` (so the caller can
/// hand the session out knowing every tool call waits behind this), and
/// navigates the page left on a probe's page back to `about:blank`.
pub(super) async fn reset_to_blank(
    live: std::sync::Arc<super::LiveSession>,
    locked: tokio::sync::oneshot::Sender<()>,
) {
    let mut tabs = live.tabs.lock().await;
    let _ = locked.send(());
    let Ok(page) = live.page(&mut tabs).await else {
        return;
    };
    if let Err(e) = crate::cdp::navigate(
        &page,
        "about:blank",
        crate::cdp::WaitUntil::Load,
        PROBE_TIMEOUT,
    )
    .await
    {
        tracing::warn!(session.id = %live.id, error = %e, "failed to leave the smoke probe's page");
    }
}

/// Bound on one smoke probe.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Loads the probe's URL with the injected cookies and checks status and
/// text: `ok`, or a short reason (never page content).
async fn run_probe(page: &chromiumoxide::Page, probe: &crate::config::SmokeProbe) -> String {
    let nav =
        match crate::cdp::navigate(page, &probe.url, crate::cdp::WaitUntil::Load, PROBE_TIMEOUT)
            .await
        {
            Ok(nav) => nav,
            Err(e) => return format!("failed: {e}"),
        };
    if let Some(want) = probe.expect_status
        && nav.status != Some(want)
    {
        return format!(
            "failed: status {} (expected {want})",
            nav.status.map_or("none".into(), |s| s.to_string())
        );
    }
    if let Some(text) = &probe.expect_text {
        let expr = format!(
            "!!document.body && document.body.innerText.includes({})",
            serde_json::to_string(text).unwrap_or_default()
        );
        match crate::cdp::evaluate(page, &expr).await {
            Ok(serde_json::Value::Bool(true)) => {}
            Ok(_) => return "failed: expected text not found".into(),
            Err(e) => return format!("failed: {e}"),
        }
    }
    "ok".into()
}
