//! Every main-frame navigation of a browser, held until a decision: the
//! `Fetch` domain enabled on the browser target pauses each document
//! request of every tab (popups included) before it leaves; a tab's own
//! document (its main frame's id is its target id) whose host is refused
//! fails with `BlockedByClient`, everything else continues at once.
//!
//! This is what stops a page's own script (`location = …`), an open
//! redirect on an allowed site, a meta refresh or a form posting off-site
//! from taking an operator-mode session, with its injected logins, off the
//! session's domains: the risk gate only sees the agent's own actions.

use std::collections::HashSet;

use chromiumoxide::Browser;
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EnableParams, EventRequestPaused, FailRequestParams, RequestPattern,
    RequestStage,
};
use chromiumoxide::cdp::browser_protocol::network::{ErrorReason, ResourceType};
use futures::StreamExt;

use super::CdpError;

/// A document request the browser holds until [`release`] is called.
#[derive(Debug, Clone)]
pub struct Paused {
    id: chromiumoxide::cdp::browser_protocol::fetch::RequestId,
    /// The host of an http(s) URL (`None`: data:, blob:, about:, nothing
    /// leaves the browser).
    pub host: Option<String>,
    /// The frame that asked; a tab's main frame has the tab's target id.
    pub frame: String,
}

impl From<&EventRequestPaused> for Paused {
    fn from(ev: &EventRequestPaused) -> Self {
        Self {
            id: ev.request_id.clone(),
            host: host_of(&ev.request.url),
            frame: ev.frame_id.inner().clone(),
        }
    }
}

/// Starts holding every document request of `browser` (every tab and
/// popup, every hop of a redirect); each arrives on the stream and waits
/// for [`release`].
pub async fn hold_documents(
    browser: &Browser,
) -> Result<impl futures::Stream<Item = Paused> + Send + Unpin + use<>, CdpError> {
    let paused = browser.event_listener::<EventRequestPaused>().await?;
    browser
        .execute(EnableParams {
            patterns: Some(vec![
                RequestPattern::builder()
                    .url_pattern("*")
                    .resource_type(ResourceType::Document)
                    .request_stage(RequestStage::Request)
                    .build(),
            ]),
            handle_auth_requests: None,
        })
        .await?;
    Ok(paused.map(|ev| Paused::from(&*ev)))
}

/// Lets a held request go on (`load`) or fails it as blocked by the client.
pub async fn release(browser: &Browser, paused: Paused, load: bool) {
    let res = if load {
        browser
            .execute(ContinueRequestParams::new(paused.id))
            .await
            .map(drop)
    } else {
        browser
            .execute(FailRequestParams::new(
                paused.id,
                ErrorReason::BlockedByClient,
            ))
            .await
            .map(drop)
    };
    if let Err(e) = res {
        tracing::debug!(error = %e, "a held navigation could not be released");
    }
}

/// The ids of the browser's tabs (a tab's main frame has its id).
pub async fn tab_ids(browser: &Browser) -> HashSet<String> {
    use chromiumoxide::cdp::browser_protocol::target::GetTargetsParams;
    browser
        .execute(GetTargetsParams::default())
        .await
        .map(|r| {
            r.result
                .target_infos
                .iter()
                .filter(|t| t.r#type == "page")
                .map(|t| t.target_id.inner().clone())
                .collect()
        })
        .unwrap_or_default()
}

/// The host of an http(s) URL, lower-cased.
fn host_of(url: &str) -> Option<String> {
    let u = url::Url::parse(url).ok()?;
    if !matches!(u.scheme(), "http" | "https") {
        return None;
    }
    u.host_str()
        .map(|h| h.trim_matches(['[', ']']).to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_web_addresses_have_a_host_to_judge() {
        assert_eq!(
            host_of("https://Bank.Example:8443/x?y").as_deref(),
            Some("bank.example")
        );
        assert_eq!(host_of("http://[::1]:9/").as_deref(), Some("::1"));
        assert_eq!(host_of("data:text/html,hi"), None);
        assert_eq!(host_of("about:blank"), None);
        assert_eq!(host_of("not a url"), None);
    }
}
