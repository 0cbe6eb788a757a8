//! A session's downloads: listed and fetched (the `upload` tool is an
//! ordinary tool route).

use axum::Json;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::session_ref::SessionRef;
use crate::audit::Actor;
use crate::domain::FileName;
use crate::error::ApiError;
use crate::sessions::files::{DownloadInfo, content_type};
use crate::state::AppState;

/// `GET /api/sessions/{id}/downloads`
pub async fn list(
    State(state): State<AppState>,
    r: SessionRef,
) -> Result<Json<Vec<DownloadInfo>>, ApiError> {
    Ok(Json(state.sessions.downloads(&r.session)?))
}

/// `GET /api/sessions/{id}/downloads/{name}`: the bytes, as an attachment
/// no browser runs (`nosniff`, a sandboxing CSP, inert content types).
pub async fn fetch(
    State(state): State<AppState>,
    r: SessionRef,
    Path((_, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    let name = FileName::parse(&name)?;
    let actor = Actor::Agent(r.owner.key_id.clone());
    let (info, file) = state
        .sessions
        .fetch_download(&r.session, actor, &name)
        .await?;
    let mut res = Body::from_stream(chunks(file)).into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(info.size));
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(&info.name)),
    );
    if let Ok(v) = HeaderValue::from_str(&disposition(&info.name)) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    Ok(res)
}

/// The file in 64 KiB chunks: a download may be far larger than a
/// request should hold in memory.
fn chunks(
    file: tokio::fs::File,
) -> impl futures::Stream<Item = std::io::Result<axum::body::Bytes>> + Send {
    use tokio::io::AsyncReadExt;
    futures::stream::try_unfold(file, |mut file| async move {
        let mut buf = vec![0u8; 64 * 1024];
        let n = file.read(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.truncate(n);
        Ok(Some((axum::body::Bytes::from(buf), file)))
    })
}

/// `attachment` with an ASCII fallback name and the exact name in
/// RFC 5987 form.
fn disposition(name: &str) -> String {
    let ascii: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let mut encoded = String::with_capacity(name.len() * 3);
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            encoded.push(char::from(b));
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    format!("attachment; filename=\"{ascii}\"; filename*=UTF-8''{encoded}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disposition_quotes_nothing_it_should_not() {
        assert_eq!(
            disposition("a b.txt"),
            "attachment; filename=\"a b.txt\"; filename*=UTF-8''a%20b.txt"
        );
        assert_eq!(
            disposition("é\"x.pdf"),
            "attachment; filename=\"__x.pdf\"; filename*=UTF-8''%C3%A9%22x.pdf"
        );
    }
}
