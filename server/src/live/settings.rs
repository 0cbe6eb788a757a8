//! The live view's settings (`live_*`, `tenant_live_links`), declared,
//! defaulted and checked here; `config` flattens them into `Settings`.

use std::collections::BTreeMap;

use anyhow::bail;
use serde::{Deserialize, Serialize};

use super::link::LinkPolicy;

/// The live view's settings, as `cordon.toml` and `CORDON_*` name them.
#[derive(Clone, Deserialize, Serialize, schemars::JsonSchema)]
pub struct LiveSection {
    /// JPEG quality of the live view's frames, 1–100.
    #[serde(default = "d::live_jpeg_quality")]
    pub live_jpeg_quality: u8,
    /// Largest width of a live view frame, in pixels (200–3840; larger
    /// viewports are scaled down).
    #[serde(default = "d::live_max_width")]
    pub live_max_width: u32,
    /// Largest height of a live view frame, in pixels (200–2160).
    #[serde(default = "d::live_max_height")]
    pub live_max_height: u32,
    /// Live links: the tenants whose agents may hand out short-lived links
    /// to a session's live view for their own users
    /// (`[tenant_live_links.acme] frame_ancestors = ["https://app.acme.example"]`):
    /// `frame_ancestors` (origins that may frame the link's page), `control`
    /// (allow `control` links; else only `view`) and `max_ttl_s` (30–86400,
    /// default 3600). A tenant not listed may not.
    #[serde(default, deserialize_with = "crate::setting::table_or_json")]
    pub tenant_live_links: BTreeMap<String, LinkPolicy>,
}

/// The defaults, one function per setting that has one.
mod d {
    pub fn live_jpeg_quality() -> u8 {
        70
    }
    pub fn live_max_width() -> u32 {
        1920
    }
    pub fn live_max_height() -> u32 {
        1080
    }
}

impl LiveSection {
    /// The frames' rules, each error naming its setting.
    pub fn validate_frames(&self) -> anyhow::Result<()> {
        if !(1..=100).contains(&self.live_jpeg_quality) {
            bail!("live_jpeg_quality: must be between 1 and 100");
        }
        if !(200..=3840).contains(&self.live_max_width)
            || !(200..=2160).contains(&self.live_max_height)
        {
            bail!("live_max_width / live_max_height: must be 200–3840 × 200–2160");
        }
        Ok(())
    }

    /// The live links' rules (`LinkPolicy::check` for each tenant's).
    pub fn validate_links(&self) -> anyhow::Result<()> {
        for (tenant, p) in &self.tenant_live_links {
            if tenant.parse::<crate::domain::TenantId>().is_err() {
                bail!("tenant_live_links: {tenant:?} is not a tenant id");
            }
            if let Err(why) = p.check() {
                bail!("tenant_live_links.{tenant}: {why}");
            }
        }
        Ok(())
    }
}
