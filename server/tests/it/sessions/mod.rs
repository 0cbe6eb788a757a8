//! The session engine end to end: agent API → audit → real Chromium through
//! the egress guard → database state, on pages served on 127.0.0.1.

mod bad_input;
mod contract;
mod flow;
mod isolation;
mod lifecycle;

/// `(action, params)` of the audit rows of session `sid`, oldest first.
pub(super) async fn audit_actions(
    app: &crate::helpers::TestApp,
    sid: &str,
) -> Vec<(String, String)> {
    let mut rows = app.state.store.audit_page(0, 10_000).await.unwrap();
    rows.retain(|e| e.session.as_deref() == Some(sid));
    rows.into_iter().map(|e| (e.action, e.params)).collect()
}
