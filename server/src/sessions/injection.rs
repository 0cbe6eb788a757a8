//! Injection at open: vault cookies decrypted in the control plane and set
//! on the session's browser as CDP `Network.CookieParam`s, and the vault's
//! localStorage installed as scripts that run before any page script.

use std::collections::BTreeMap;

use anyhow::Context;
use chromiumoxide::cdp::browser_protocol::page::AddScriptToEvaluateOnNewDocumentParams;
use serde_json::json;
use zeroize::Zeroize;

use super::{Inner, OpenRequest};
use crate::audit::{Actor, NewEvent};
use crate::cdp::cookie_param;
use crate::domain::SessionId;
use crate::store::api_keys::ApiKeyOwner;
use crate::vault::Origin;

/// A check run after injecting a domain's cookies: load `url` and expect a
/// status and/or a text, to tell fresh credentials from expired ones.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct SmokeProbe {
    /// An http(s) URL on the domain.
    pub url: String,
    /// The main document's expected HTTP status.
    pub expect_status: Option<i64>,
    /// Text the page must show.
    pub expect_text: Option<String>,
}

/// A script that restores one origin's stored localStorage in every new
/// document of that origin. It holds secrets: no `Debug`, never logged,
/// wiped on drop.
pub(crate) struct InitScript(String);

impl InitScript {
    /// The script for `origin`: guarded by `location.origin`, it sets each
    /// stored item the page does not hold yet, before any page script runs.
    /// Items already present are left alone, so what the site writes later
    /// (a refreshed token) survives its next navigation.
    pub(crate) fn for_origin(origin: &Origin) -> anyhow::Result<Self> {
        let items: Vec<[&str; 2]> = origin
            .local_storage
            .iter()
            .map(|i| [i.name.as_str(), i.value.as_str()])
            .collect();
        // serde_json's escaping makes each string a valid JS string literal.
        let mut items = serde_json::to_string(&items).context("cannot encode localStorage")?;
        let origin = serde_json::to_string(&origin.origin).context("cannot encode an origin")?;
        let source = format!(
            "(() => {{ if (location.origin !== {origin}) return; try {{ \
             const s = window.localStorage; \
             for (const [k, v] of {items}) {{ if (s.getItem(k) === null) s.setItem(k, v); }} \
             }} catch (e) {{}} }})();"
        );
        items.zeroize();
        Ok(Self(source))
    }

    /// The CDP command that installs it on a tab.
    pub(crate) fn params(&self) -> AddScriptToEvaluateOnNewDocumentParams {
        AddScriptToEvaluateOnNewDocumentParams::new(self.0.clone())
    }

    /// Installs it on `page` (`Page.addScriptToEvaluateOnNewDocument`).
    pub(crate) async fn install(
        &self,
        page: &chromiumoxide::Page,
    ) -> Result<(), crate::cdp::CdpError> {
        page.execute(self.params()).await?;
        Ok(())
    }
}

impl Drop for InitScript {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

/// What an injection did, for the open's answer (counts and names only).
pub(super) struct Injected {
    /// Cookies set per domain asked for: 0 where the tenant stores none
    /// (or only expired ones).
    pub counts: BTreeMap<String, usize>,
    /// localStorage items installed per domain asked for.
    pub storage: BTreeMap<String, usize>,
    /// The scripts installed on the first tab, for the tabs opened later.
    pub scripts: Vec<InitScript>,
    /// Each configured smoke probe's result for the injected domains.
    pub smoke: BTreeMap<String, String>,
    /// Domains asked for that the tenant has no stored credential for.
    pub missing_credentials: Vec<String>,
}

/// Sets the tenant's stored cookies for the session's domains on its
/// browser over CDP, installs their localStorage on `page`, runs the configured smoke probes, records the
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
        .context("vault")?;
    let mut counts: BTreeMap<String, usize> =
        domains.iter().map(|d| (d.as_str().to_owned(), 0)).collect();
    let mut storage = counts.clone();
    let mut params = Vec::new();
    let mut scripts = Vec::new();
    for sel in &selected {
        for c in &sel.cookies {
            params.push(cookie_param(c)?);
        }
        counts.insert(sel.domain.as_str().to_owned(), sel.cookies.len());
        for origin in sel.origins.iter().filter(|o| !o.local_storage.is_empty()) {
            scripts.push(InitScript::for_origin(origin)?);
        }
        storage.insert(
            sel.domain.as_str().to_owned(),
            crate::vault::storage_items(&sel.origins),
        );
    }
    if !params.is_empty() {
        page.execute(chromiumoxide::cdp::browser_protocol::network::SetCookiesParams::new(params))
            .await
            .context("failed to set cookies over CDP")?;
    }
    for script in &scripts {
        script
            .install(page)
            .await
            .context("failed to install localStorage over CDP")?;
    }
    let missing_credentials: Vec<String> = domains
        .iter()
        .filter(|d| !selected.iter().any(|sel| &sel.domain == *d))
        .map(|d| d.as_str().to_owned())
        .collect();
    drop(selected);
    let injected: Vec<crate::vault::Domain> = domains
        .into_iter()
        .filter(|d| {
            counts.get(d.as_str()).copied().unwrap_or(0)
                + storage.get(d.as_str()).copied().unwrap_or(0)
                > 0
        })
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
            .context("vault")
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
                    "local_storage": storage,
                    "smoke": smoke,
                    "missing_credentials": missing_credentials,
                }))
                .outcome("ok"),
        )
        .await?;
    Ok(Injected {
        counts,
        storage,
        scripts,
        smoke,
        missing_credentials,
    })
}

/// Takes the session's tab lock, then tells `locked` (so the caller can
/// hand the session out knowing every tool call waits behind this), and
/// navigates the page left on a probe's page back to `about:blank`.
pub(super) async fn reset_to_blank(
    live: std::sync::Arc<super::RunningSession>,
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
async fn run_probe(page: &chromiumoxide::Page, probe: &SmokeProbe) -> String {
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
