//! Tabs: list, open, focus, close.

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::target::{SessionRef, begin, finish};
use crate::api::auth::Agent;
use crate::api::json::ApiJson;
use crate::audit::redact;
use crate::cdp::CdpError;
use crate::domain::TargetUrl;
use crate::error::ApiError;
use crate::state::AppState;

/// One tab.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TabInfo {
    /// Id to focus or close it with.
    tab_id: String,
    /// Current URL.
    url: String,
    /// Title.
    title: String,
    /// Whether tools act on it.
    active: bool,
}

async fn describe(
    pages: Vec<chromiumoxide::Page>,
    active: Option<&str>,
) -> Result<Vec<TabInfo>, CdpError> {
    let mut out = Vec::with_capacity(pages.len());
    for p in pages {
        let id = p.target_id().inner().clone();
        // A tab that is closing answers with errors; it is not listed.
        let (Ok(url), Ok(title)) = (p.url().await, crate::cdp::title(&p).await) else {
            continue;
        };
        out.push(TabInfo {
            active: active == Some(id.as_str()),
            url: url.unwrap_or_default(),
            title,
            tab_id: id,
        });
    }
    Ok(out)
}

/// `GET /api/sessions/{id}/tabs`
pub async fn list(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
) -> Result<Json<Vec<TabInfo>>, ApiError> {
    let session = begin(&state, &agent.0, &session, "tool.tabs.list", json!({})).await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let active = session.page(&mut tabs).await?.target_id().inner().clone();
        describe(session.pages().await?, Some(&active)).await
    }
    .await;
    Ok(Json(finish(&state, &session, res).await?))
}

/// Body of tab open.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenTabReq {
    url: Option<String>,
}

/// `POST /api/sessions/{id}/tabs` → the new, now active tab
pub async fn open(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    ApiJson(req): ApiJson<OpenTabReq>,
) -> Result<Json<TabInfo>, ApiError> {
    let url = req
        .url
        .as_deref()
        .map(TargetUrl::parse)
        .transpose()
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let params = json!({ "url": url.as_ref().map(|u| redact::url(u.as_str())) });
    let session = begin(&state, &agent.0, &session, "tool.tabs.open", params).await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session
            .open_tab(&mut tabs, url.as_ref().map(TargetUrl::as_str))
            .await?;
        let id = page.target_id().inner().clone();
        describe(vec![page], Some(&id))
            .await?
            .pop()
            .ok_or_else(|| CdpError::Failed("the new tab closed at once".into()))
    }
    .await;
    Ok(Json(finish(&state, &session, res).await?))
}

/// `POST /api/sessions/{id}/tabs/{tab}/focus`
pub async fn focus(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    Path((_, tab)): Path<(String, String)>,
) -> Result<Json<TabInfo>, ApiError> {
    let session = begin(
        &state,
        &agent.0,
        &session,
        "tool.tabs.focus",
        json!({ "tab": tab }),
    )
    .await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let page = session
            .pages()
            .await?
            .into_iter()
            .find(|p| p.target_id().inner() == &tab)
            .ok_or_else(|| CdpError::NotFound("no such tab".into()))?;
        page.bring_to_front().await?;
        tabs.active = Some(page.target_id().clone());
        tabs.refs.clear();
        describe(vec![page], Some(&tab))
            .await?
            .pop()
            .ok_or_else(|| CdpError::NotFound("no such tab".into()))
    }
    .await;
    Ok(Json(finish(&state, &session, res).await?))
}

/// `DELETE /api/sessions/{id}/tabs/{tab}`
pub async fn close(
    agent: Agent,
    State(state): State<AppState>,
    SessionRef(session): SessionRef,
    Path((_, tab)): Path<(String, String)>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let session = begin(
        &state,
        &agent.0,
        &session,
        "tool.tabs.close",
        json!({ "tab": tab }),
    )
    .await?;
    let mut tabs = session.tabs.lock().await;
    let res = async {
        let pages = session.pages().await?;
        if pages.len() <= 1 {
            return Err(CdpError::Failed(
                "cannot close the last tab; close the session instead".into(),
            ));
        }
        let page = pages
            .into_iter()
            .find(|p| p.target_id().inner() == &tab)
            .ok_or_else(|| CdpError::NotFound("no such tab".into()))?;
        page.close().await?;
        // Wait (briefly) until the browser no longer lists it.
        for _ in 0..100 {
            if !session
                .pages()
                .await?
                .iter()
                .any(|p| p.target_id().inner() == &tab)
            {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        if tabs.active.as_ref().is_some_and(|a| a.inner() == &tab) {
            tabs.active = None;
            tabs.refs.clear();
        }
        Ok(())
    }
    .await;
    finish(&state, &session, res).await?;
    Ok(Json(json!({ "closed": tab })))
}
