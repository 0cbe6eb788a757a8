//! A session's screenshot archive. Images are served by the server at
//! `/ui/screenshots/<id>` (and `/thumb`) to logged-in operators, by id only.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use super::auth::Role;
use crate::error::UiError;

/// One screenshot in a timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShotView {
    /// Its id (`<tenant>:<session>:<seq>`), for the image URLs.
    pub id: String,
    /// Its number within the session.
    pub seq: u64,
    /// Unix ms.
    pub taken_at: i64,
    /// Bytes of the full image.
    pub bytes: u64,
}

/// A session's timeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimelineView {
    /// The session.
    pub session: String,
    /// Its tenant.
    pub tenant: String,
    /// Its recording mode (`off`, `transient`, `audit`).
    pub record: String,
    /// When its kept recordings will be removed (Unix ms), if any are kept.
    pub retained_until: Option<i64>,
    /// Screenshots, by seq.
    pub shots: Vec<ShotView>,
}

/// A session's screenshots.
#[server(prefix = "/ui/fn", endpoint = "screenshot_timeline")]
pub async fn screenshot_timeline(session: String) -> Result<TimelineView, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "see screenshots").await?;
    ctl.timeline(&op, session).await
}
