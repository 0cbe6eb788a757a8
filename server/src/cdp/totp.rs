//! Typing a one-time code into a field: the field is read first (its
//! frame's host, what kind of input it is); the call that focuses it checks
//! the host again and draws it masked (`-webkit-text-security: disc`)
//! before a digit goes in, so no picture of the page (a screencast frame
//! of the live view, a `run_task` step) ever shows the digits, not even
//! one taken between typing and masking.

use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::dom::{BackendNodeId, DescribeNodeParams};
use chromiumoxide::cdp::js_protocol::runtime::{CallFunctionOnParams, RemoteObjectId};
use serde_json::Value;

use super::CdpError;
use super::tools::{Locator, bounded, object_for};

/// What a code would be typed into.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct CodeField {
    /// The host of the field's own frame.
    pub host: String,
    /// Its tag (`input`, `textarea`, `div`…).
    pub tag: String,
    /// An input's type (lower case).
    #[serde(default)]
    pub input_type: String,
    /// Its `autocomplete` attribute (lower case).
    #[serde(default)]
    pub autocomplete: String,
    /// Disabled or read-only.
    #[serde(default)]
    pub locked: bool,
}

impl CodeField {
    /// Whether a code may go there: an enabled `<input>` of type text,
    /// number or tel, or any text input marked
    /// `autocomplete="one-time-code"`.
    pub fn takes_a_code(&self) -> bool {
        if self.tag != "input" || self.locked {
            return false;
        }
        matches!(self.input_type.as_str(), "text" | "number" | "tel")
            || (self
                .autocomplete
                .split_whitespace()
                .any(|t| t == "one-time-code")
                && matches!(self.input_type.as_str(), "password" | "search"))
    }

    /// How the field is described in a refusal.
    pub fn describe(&self) -> String {
        match (self.tag.as_str(), self.input_type.as_str()) {
            ("input", t) => format!("an <input type={t}>"),
            (tag, _) => format!("a <{tag}>"),
        }
    }
}

const FIELD_FN: &str = r#"function() {
  const t = this.localName === 'input' ? String(this.type || 'text').toLowerCase() : '';
  return {
    host: location.hostname,
    tag: this.localName || '',
    input_type: t,
    autocomplete: String(this.getAttribute && this.getAttribute('autocomplete') || '').toLowerCase(),
    locked: !!(this.disabled || this.readOnly),
  };
}"#;

/// Types `code` into the field if its frame is still on `host`: draws it
/// masked and keeps its text from being copied, cut or dragged out (into
/// a field that is not masked), focuses it, selects what it holds (so the
/// code replaces it), checks that it has the focus and inserts the code,
/// all in one task of the page's: no script runs between the check and
/// the insertion, so a frame of another site that takes the focus back
/// without end never receives the code (`Input.insertText`, a call of
/// its own, typed into whatever had the focus by then). The mask is on
/// before the code goes in: the next frame the compositor draws already
/// shows discs. Listeners added from this isolated world run whatever the
/// page's own scripts do. Answers `typed`, or what stopped it.
const MASK_FOCUS_AND_TYPE_FN: &str = r#"function(host, code) {
  if (location.hostname !== host) return 'moved';
  this.style.setProperty('-webkit-text-security', 'disc', 'important');
  const stop = (e) => { e.preventDefault(); e.stopImmediatePropagation(); };
  for (const t of ['copy', 'cut', 'dragstart']) this.addEventListener(t, stop, true);
  this.scrollIntoView({block: 'center'});
  this.focus();
  try { this.select(); } catch (_) {}
  const root = this.getRootNode && this.getRootNode();
  if (document.activeElement !== this && !(root && root.activeElement === this)) return 'unfocused';
  return document.execCommand('insertText', false, code) ? 'typed' : 'refused';
}"#;

/// The field at `locator` (`None`: the focused element, followed into
/// frames and open shadow roots), read in an isolated world.
pub async fn code_field(
    page: &Page,
    locator: Option<&Locator>,
    timeout: Duration,
) -> Result<(CodeField, RemoteObjectId), CdpError> {
    bounded("reading the field", timeout, async {
        let object = match locator {
            Some(l @ (Locator::Selector(_) | Locator::Node(..))) => object_for(page, l).await?,
            Some(Locator::Point(..)) => {
                return Err(CdpError::Failed(
                    "a code is typed into a field named by selector or ref, not a point".into(),
                ));
            }
            None => {
                super::facts::evaluate_isolated(page, super::facts::FOCUS_EXPR)
                    .await?
                    .0
            }
        };
        let object = object.ok_or_else(|| match locator {
            None => CdpError::NotFound("no element has the focus".into()),
            Some(Locator::Selector(s)) => {
                CdpError::NotFound(format!("no element matches selector {s:?}"))
            }
            Some(Locator::Node(_, r)) => {
                CdpError::NotFound(format!("ref {r} no longer exists; take a new snapshot"))
            }
            Some(Locator::Point(..)) => CdpError::NotFound("no element".into()),
        })?;
        let v = call(page, &object, FIELD_FN, &[]).await?;
        let field: CodeField = serde_json::from_value(v)
            .map_err(|_| CdpError::NotFound("the target is not an element".into()))?;
        Ok((field, object))
    })
    .await
}

/// Masks the field read by [`code_field`] and types `code` into it if its
/// frame is still on `host`. Returns the field's node (for the
/// snapshot to withhold its value).
pub async fn type_code(
    page: &Page,
    field: &RemoteObjectId,
    host: &str,
    code: &str,
    timeout: Duration,
) -> Result<Option<BackendNodeId>, CdpError> {
    bounded("typing the code", timeout, async {
        let typed = call(
            page,
            field,
            MASK_FOCUS_AND_TYPE_FN,
            &[Value::String(host.into()), Value::String(code.into())],
        )
        .await?;
        match typed.as_str() {
            Some("typed") => {}
            Some("refused") => {
                return Err(CdpError::Failed(
                    "the field took no text; nothing was typed".into(),
                ));
            }
            _ => {
                return Err(CdpError::Failed(
                    "the field lost its page or could not take the focus; nothing was typed".into(),
                ));
            }
        }
        let node = page
            .execute(
                DescribeNodeParams::builder()
                    .object_id(field.clone())
                    .depth(0)
                    .build(),
            )
            .await
            .ok()
            .map(|d| d.result.node.backend_node_id);
        Ok(node)
    })
    .await
}

async fn call(
    page: &Page,
    object: &RemoteObjectId,
    function: &str,
    args: &[Value],
) -> Result<Value, CdpError> {
    let mut b = CallFunctionOnParams::builder()
        .object_id(object.clone())
        .function_declaration(function)
        .return_by_value(true);
    for arg in args {
        b = b.argument(
            chromiumoxide::cdp::js_protocol::runtime::CallArgument::builder()
                .value(arg.clone())
                .build(),
        );
    }
    let res = page.execute(b.build().map_err(CdpError::Protocol)?).await?;
    if let Some(ex) = &res.result.exception_details {
        return Err(CdpError::Failed(format!("script error: {}", ex.text)));
    }
    Ok(res.result.result.value.clone().unwrap_or(Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(tag: &str, t: &str, ac: &str) -> CodeField {
        CodeField {
            host: "example.com".into(),
            tag: tag.into(),
            input_type: t.into(),
            autocomplete: ac.into(),
            locked: false,
        }
    }

    #[test]
    fn only_text_number_tel_and_one_time_code_inputs_take_a_code() {
        assert!(field("input", "text", "").takes_a_code());
        assert!(field("input", "number", "").takes_a_code());
        assert!(field("input", "tel", "").takes_a_code());
        assert!(field("input", "password", "one-time-code").takes_a_code());
        assert!(!field("input", "password", "").takes_a_code());
        assert!(!field("input", "email", "").takes_a_code());
        assert!(!field("input", "hidden", "one-time-code").takes_a_code());
        assert!(!field("textarea", "", "one-time-code").takes_a_code());
        assert!(!field("div", "", "").takes_a_code());
        let mut locked = field("input", "text", "");
        locked.locked = true;
        assert!(!locked.takes_a_code());
    }
}
