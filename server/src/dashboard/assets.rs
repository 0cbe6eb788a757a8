//! The dashboard's built assets (`site_root/pkg`: the wasm bundle, its JS
//! glue, the stylesheet), served compressed and cached.
//!
//! `infra/scripts/build-site.sh` writes each file beside a `.br` and a
//! `.gz` and names the build in `pkg/version` (a hash of the files). Pages
//! link the assets under that version (`/pkg/<version>/cordon.js`), which
//! are answered with `Cache-Control: public, max-age=31536000, immutable`:
//! a browser fetches a build's bundle once. The same files without the
//! version (or under another build's) are answered `no-cache`, so a stale
//! name is never cached as if it were the new build's. The encoding is
//! the best the client accepts among the precompressed files (brotli,
//! gzip, none); nothing is compressed per request.

use std::path::Path;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tower::ServiceExt;
use tower_http::services::ServeDir;

/// A year: what a versioned asset may be cached for.
const IMMUTABLE: &str = "public, max-age=31536000, immutable";

/// The built assets and the build's version.
#[derive(Clone)]
pub struct Assets {
    dir: ServeDir,
    version: Option<String>,
}

impl Assets {
    /// The assets under `site_root/pkg`, and the build's version from its
    /// `version` file (none when the site was built without one: then
    /// nothing is served as immutable).
    pub fn new(site_root: &Path) -> Self {
        let pkg = site_root.join("pkg");
        let version = std::fs::read_to_string(pkg.join("version"))
            .ok()
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty() && v.len() <= 64 && v.bytes().all(|b| b.is_ascii_hexdigit()));
        Self {
            dir: ServeDir::new(pkg)
                .precompressed_br()
                .precompressed_gzip()
                .append_index_html_on_directories(false),
            version,
        }
    }

    /// Where pages link the assets from: `pkg/<version>`, or `pkg`.
    pub fn pkg_dir(&self) -> String {
        match &self.version {
            Some(v) => format!("pkg/{v}"),
            None => "pkg".to_owned(),
        }
    }
}

/// `GET /pkg/{*path}`: a versioned asset (cached for good), or an
/// unversioned one (revalidated every time).
pub async fn serve(assets: Assets, req: Request) -> Response {
    let rest = req
        .uri()
        .path()
        .strip_prefix("/pkg/")
        .unwrap_or_default()
        .to_owned();
    let (file, immutable) = match (rest.split_once('/'), &assets.version) {
        (Some((v, file)), Some(current)) if v == current => (file.to_owned(), true),
        // Another build's version (a page loaded before an upgrade): the
        // current file, never cached as that build's.
        (Some((v, file)), _) if v.len() <= 64 && v.bytes().all(|b| b.is_ascii_hexdigit()) => {
            (file.to_owned(), false)
        }
        _ => (rest, false),
    };
    // The precompressed files and the version file are not assets of
    // their own.
    if file.is_empty()
        || file.contains('/')
        || file.ends_with(".br")
        || file.ends_with(".gz")
        || file == "version"
    {
        return StatusCode::NOT_FOUND.into_response();
    }
    let (mut parts, body) = req.into_parts();
    parts.uri = match format!("/{file}").parse::<Uri>() {
        Ok(u) => u,
        Err(_) => return StatusCode::NOT_FOUND.into_response(),
    };
    let res = match assets.dir.oneshot(Request::from_parts(parts, body)).await {
        Ok(r) => r.map(Body::new),
        Err(never) => match never {},
    };
    let mut res = res.into_response();
    if res.status().is_success() || res.status() == StatusCode::NOT_MODIFIED {
        let cache = if immutable { IMMUTABLE } else { "no-cache" };
        res.headers_mut()
            .insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
        res.headers_mut()
            .insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    res
}
