//! A request that arrived over the hop, as the web layer reads it: its
//! parts, its body and the claims its signature carries ([`super::hop`]
//! checks them).

use super::Cluster;
use super::hop::{Claims, HEADER, Refusal};

/// A request that arrived over the hop, read and checked: its parts, its
/// body (to put back) and the claims, or why it was refused (already
/// logged, with the reason only). `max` bounds the body read here.
pub(crate) struct Arrived {
    /// The request's head.
    pub parts: axum::http::request::Parts,
    /// Its body.
    pub body: axum::body::Bytes,
    /// What the hop asserts, or why it is refused.
    pub claims: Result<Claims, Refusal>,
}

impl Arrived {
    /// Reads `req`'s hop header and body and checks them.
    pub(crate) async fn read(cluster: &Cluster, req: axum::extract::Request, max: usize) -> Self {
        let value = req
            .headers()
            .get(HEADER)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let (parts, body) = req.into_parts();
        let Ok(body) = axum::body::to_bytes(body, max).await else {
            return Self {
                parts,
                body: axum::body::Bytes::new(),
                claims: Err(Refusal::Malformed),
            };
        };
        let path = path_of(&parts.uri);
        let claims = cluster.accept(&value, parts.method.as_str(), &path, &body);
        if let Err(refusal) = &claims {
            tracing::warn!(reason = %refusal, path = %parts.uri.path(), "internal hop refused");
            metrics::counter!("cordon_hops_refused_total").increment(1);
        }
        Self {
            parts,
            body,
            claims,
        }
    }

    /// The request again, for the next layer.
    pub(crate) fn request(self) -> axum::extract::Request {
        axum::extract::Request::from_parts(self.parts, axum::body::Body::from(self.body))
    }
}

/// A request's path and query, as the hop signs it.
pub(crate) fn path_of(uri: &axum::http::Uri) -> String {
    uri.path_and_query()
        .map_or_else(|| uri.path().to_owned(), |p| p.as_str().to_owned())
}
