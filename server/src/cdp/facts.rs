//! What the risk gate needs to know about the element a tool would act on,
//! read in one script call on it (plus one to find it): its accessible
//! name, whether it is a password field, its form, its box. Read-only: the
//! page is neither scrolled nor focused.

use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::js_protocol::runtime::{CallFunctionOnParams, EvaluateParams};

use super::{CdpError, Locator};

/// Runs on the element (`this`). The name follows the accessible-name
/// computation's main steps (aria-labelledby, aria-label, labels, a
/// button's value, text, title, alt, placeholder) on the nearest
/// interactive ancestor, so a click on a button's inner `<span>` is judged
/// by the button.
const FACTS_FN: &str = r#"function() {
  const own = this.nodeType === 1 ? this : this.parentElement;
  if (!own) return null;
  const el = own.closest('button,a[href],input,select,textarea,[role=button],[role=link],[role=menuitem],[role=tab],[role=checkbox],[role=option],summary') || own;
  const txt = (n) => (n && (n.innerText || n.textContent) || '').replace(/\s+/g, ' ').trim();
  const by = el.getAttribute('aria-labelledby');
  let name = by ? by.split(/\s+/).map(i => txt(document.getElementById(i))).join(' ').trim() : '';
  name = name || (el.getAttribute('aria-label') || '').trim();
  if (!name && el.labels && el.labels.length) name = Array.from(el.labels).map(txt).join(' ').trim();
  const type = (el.getAttribute('type') || '').toLowerCase();
  if (!name && el.tagName === 'INPUT' && ['submit', 'button', 'reset'].includes(type)) name = el.value || '';
  if (!name && !['INPUT', 'TEXTAREA', 'SELECT'].includes(el.tagName)) name = txt(el);
  name = name || el.getAttribute('title') || el.getAttribute('alt') || el.getAttribute('placeholder') || '';
  const form = el.form || el.closest('form');
  const submits = !!form && ((el.tagName === 'BUTTON' && (type === '' || type === 'submit'))
    || (el.tagName === 'INPUT' && (type === 'submit' || type === 'image')));
  const r = own.getBoundingClientRect();
  return {
    name: String(name).slice(0, 200),
    password: own.tagName === 'INPUT' && (own.type || '').toLowerCase() === 'password',
    in_form: !!form,
    submits,
    download: el.tagName === 'A' && el.hasAttribute('download'),
    rect: [r.left, r.top, r.width, r.height],
  };
}"#;

/// The page's host and, as JSON, the facts of the element at `locator`
/// (`None`: the focused element); `Null` when there is no such element.
pub async fn element_facts(
    page: &Page,
    locator: Option<&Locator>,
    timeout: Duration,
) -> Result<(String, serde_json::Value), CdpError> {
    super::tools::bounded("checking the target", timeout, async {
        let object = match locator {
            Some(Locator::Point(x, y)) => {
                handle(page, &format!("document.elementFromPoint({x}, {y})")).await?
            }
            Some(other) => super::tools::object_for(page, other).await?,
            None => {
                // Into frames: the focus may sit in a same-origin iframe.
                handle(
                    page,
                    "(() => { let e = document.activeElement; \
                     while (e && e.contentDocument && e.contentDocument.activeElement) \
                     e = e.contentDocument.activeElement; return e; })()",
                )
                .await?
            }
        };
        let host = super::tools::evaluate(page, "location.hostname")
            .await?
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let Some(object) = object else {
            return Ok((host, serde_json::Value::Null));
        };
        let res = page
            .execute(
                CallFunctionOnParams::builder()
                    .object_id(object)
                    .function_declaration(FACTS_FN)
                    .return_by_value(true)
                    .build()
                    .map_err(CdpError::Protocol)?,
            )
            .await?;
        if let Some(ex) = &res.result.exception_details {
            return Err(CdpError::Failed(format!("script error: {}", ex.text)));
        }
        Ok((
            host,
            res.result
                .result
                .value
                .clone()
                .unwrap_or(serde_json::Value::Null),
        ))
    })
    .await
}

/// A remote handle to what `expression` evaluates to, if an object.
async fn handle(
    page: &Page,
    expression: &str,
) -> Result<Option<chromiumoxide::cdp::js_protocol::runtime::RemoteObjectId>, CdpError> {
    let res = page
        .execute(
            EvaluateParams::builder()
                .expression(expression)
                .build()
                .map_err(CdpError::Protocol)?,
        )
        .await?;
    Ok(res.result.result.object_id.clone())
}
