//! The dashboard pages' Content Security Policy: scripts only from Cordon
//! itself and the inline scripts Leptos renders with this response's nonce
//! (hydration, resources), WebAssembly compiled, nothing framed, no
//! plugins, forms and connections to Cordon only. A page's text shown in
//! the dashboard (a title, an address, a dialog's message) that slipped
//! past escaping still could not run.

use axum::http::{HeaderValue, header};

/// The policy for a page rendered with `nonce`.
pub fn policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'; \
         style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; connect-src 'self'; \
         font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
         frame-ancestors 'none'"
    )
}

/// Sets the policy on the page being rendered (called in the shell, where
/// Leptos has made this response's nonce). Without a nonce (a page not
/// rendered by the router) the edge's `frame-ancestors 'none'` stays.
pub fn set_on_page() {
    use leptos::prelude::use_context;
    let (Some(nonce), Some(res)) = (
        leptos::nonce::use_nonce(),
        use_context::<leptos_axum::ResponseOptions>(),
    ) else {
        return;
    };
    if let Ok(v) = HeaderValue::from_str(&policy(&nonce)) {
        res.insert_header(header::CONTENT_SECURITY_POLICY, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_allows_only_the_pages_own_nonce_and_cordons_own_scripts() {
        let p = policy("abc");
        assert!(
            p.contains("script-src 'self' 'nonce-abc' 'wasm-unsafe-eval';"),
            "{p}"
        );
        for word in [
            "'unsafe-eval'",
            "'unsafe-inline' 'nonce",
            "*",
            "http:",
            "https:",
        ] {
            assert!(!p.contains(&format!("script-src {word}")), "{p}");
        }
        assert!(p.contains("object-src 'none'") && p.contains("frame-ancestors 'none'"));
        assert!(p.contains("base-uri 'none'") && p.contains("form-action 'self'"));
    }
}
