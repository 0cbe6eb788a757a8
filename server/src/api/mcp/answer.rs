//! Tool results as MCP shows them: the HTTP API's JSON answer as text (and
//! as structured content), a screenshot as image content, and every error
//! as a tool error whose text starts with the HTTP API's machine code.

use base64::Engine;
use rmcp::model::{CallToolResult, ContentBlock};
use serde::Serialize;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::sessions::ToolOutput;

/// A success: the JSON the HTTP API would answer.
pub fn value<T: Serialize>(v: &T) -> CallToolResult {
    let v = serde_json::to_value(v).unwrap_or(Value::Null);
    let mut result = CallToolResult::success(vec![ContentBlock::text(v.to_string())]);
    if v.is_object() {
        result.structured_content = Some(v);
    }
    result
}

/// A tool's output. A screenshot is an image plus its metadata; a
/// navigation whose main frame the egress guard refused is a tool error
/// `egress_refused` (the HTTP API answers it as a 200 with the field set,
/// which a model reading only the text could take for the site).
pub fn output(out: ToolOutput) -> CallToolResult {
    match out {
        ToolOutput::Screenshot(shot) => {
            let mime = match shot.format {
                crate::cdp::ImageFormat::Png => "image/png",
                crate::cdp::ImageFormat::Jpeg => "image/jpeg",
            };
            let data = base64::engine::general_purpose::STANDARD.encode(&shot.bytes);
            let meta = json!({
                "format": shot.format,
                "width": shot.width,
                "height": shot.height,
                "captured_at": shot.captured_at,
                "persisted_path": shot.persisted_path,
                "screenshot_id": shot.screenshot_id,
            });
            let mut result = CallToolResult::success(vec![
                ContentBlock::image(data, mime),
                ContentBlock::text(meta.to_string()),
            ]);
            result.structured_content = Some(meta);
            result
        }
        ToolOutput::Navigated(nav) if nav.egress_refused.is_some() => {
            let refused = nav.egress_refused.as_ref().expect("checked");
            let text = format!(
                "egress_refused: the egress guard refused {}:{} ({}); the page shown is its refusal, not the site",
                refused.host, refused.port, refused.reason
            );
            let mut result = CallToolResult::error(vec![ContentBlock::text(text)]);
            result.structured_content = serde_json::to_value(&nav).ok();
            result
        }
        ToolOutput::Tabs(tabs) => value(&json!({ "tabs": tabs })),
        other => value(&other),
    }
}

/// A failure as a tool error: `<code>: <message>`, the same code and safe
/// message the HTTP API answers (both come from [`ApiError`], so they
/// cannot drift), and `{error: {code, message, status}}` as structured
/// content. An internal cause is logged here, once.
pub fn error(e: ApiError) -> CallToolResult {
    if let ApiError::Internal(cause) = &e {
        tracing::error!(error = %format!("{cause:#}"), "MCP tool call failed");
    }
    let code = e.code();
    let message = e.to_string();
    let mut error = json!({ "code": code, "message": message, "status": e.status().as_u16() });
    if let ApiError::TooManyRequests { retry_after_s, .. } = &e {
        error["retry_after_s"] = json!(retry_after_s);
    }
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!("{code}: {message}"))]);
    result.structured_content = Some(json!({ "error": error }));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_starts_with_the_http_apis_code_and_hides_internals() {
        let r = error(ApiError::NotFound("session"));
        assert_eq!(r.is_error, Some(true));
        let text = &r.content[0].as_text().unwrap().text;
        assert_eq!(text, "not_found: session not found");
        let r = error(ApiError::Internal(anyhow::anyhow!("db password=hunter2")));
        let text = &r.content[0].as_text().unwrap().text;
        assert_eq!(text, "internal: internal error");
    }

    #[test]
    fn a_limit_carries_its_retry_time() {
        let r = error(ApiError::TooManyRequests {
            message: "too many sessions".into(),
            retry_after_s: 5,
        });
        let s = r.structured_content.unwrap();
        assert_eq!(s["error"]["code"], "too_many_requests");
        assert_eq!(s["error"]["retry_after_s"], 5);
    }
}
