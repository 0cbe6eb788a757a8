//! What the risk gate needs to know about the element a tool would act on,
//! read in one script call: its accessible
//! name, whether it is a password field, its form, its box. Read-only: the
//! page is neither scrolled nor focused.

use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::js_protocol::runtime::CallFunctionOnParams;

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
    link_host: (el.tagName === 'A' && /^https?:/i.test(el.href || '')) ? new URL(el.href).hostname : null,
    rect: [r.left, r.top, r.width, r.height],
  };
}"#;

/// Scrolls the element into view and returns the centre of its box, its
/// size, the page's host and the element's facts: a click's own lookup
/// with what the risk gate needs, in one call.
fn center_facts_fn() -> String {
    format!(
        "function() {{ this.scrollIntoView({{block: 'center', inline: 'center', behavior: 'instant'}}); \
         const r = this.getBoundingClientRect(); \
         return [r.left + r.width / 2, r.top + r.height / 2, r.width, r.height, location.hostname, ({FACTS_FN}).call(this)]; }}"
    )
}

/// A left click whose target's facts are read in the lookup the click
/// makes anyway, and that asks `allow(host, facts)` before the button goes
/// down. An element (selector, ref) is scrolled into view and read in one
/// call, as a plain click does; for a point, the facts are read while the
/// pointer moves there. So the risk gate adds no round trip of its own.
/// `Ok(Err(e))`: `allow` stopped the click; nothing was pressed.
pub async fn click_checked<E>(
    page: &Page,
    locator: &Locator,
    timeout: Duration,
    allow: impl FnOnce(&str, serde_json::Value) -> Result<(), E>,
) -> Result<Result<(), E>, CdpError> {
    super::tools::bounded("click", timeout, async {
        let (x, y, host, facts) = match locator {
            Locator::Point(x, y) => {
                let (host, facts) = element_facts(page, Some(locator), timeout).await?;
                super::input::mouse_move(page, *x, *y).await?;
                (*x, *y, host, facts)
            }
            _ => {
                let v = super::tools::call_on(page, locator, &center_facts_fn(), timeout).await?;
                let (x, y, w, h) = (
                    v.get(0).and_then(serde_json::Value::as_f64),
                    v.get(1).and_then(serde_json::Value::as_f64),
                    v.get(2).and_then(serde_json::Value::as_f64),
                    v.get(3).and_then(serde_json::Value::as_f64),
                );
                let (Some(x), Some(y), Some(w), Some(h)) = (x, y, w, h) else {
                    return Err(CdpError::Protocol("unexpected element box".into()));
                };
                if w <= 0.0 || h <= 0.0 {
                    return Err(CdpError::Failed("the element is not visible".into()));
                }
                let host = v
                    .get(4)
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                let facts = v.get(5).cloned().unwrap_or(serde_json::Value::Null);
                super::input::mouse_move(page, x, y).await?;
                (x, y, host, facts)
            }
        };
        if let Err(e) = allow(&host, facts) {
            return Ok(Err(e));
        }
        super::input::press_release(page, x, y, 1).await?;
        Ok(Ok(()))
    })
    .await
}

/// The page's host and, as JSON, the facts of the element at `locator`
/// (`None`: the focused element); `Null` when there is no such element.
/// One CDP call (two for a snapshot ref: resolve, then read).
pub async fn element_facts(
    page: &Page,
    locator: Option<&Locator>,
    timeout: Duration,
) -> Result<(String, serde_json::Value), CdpError> {
    super::tools::bounded("checking the target", timeout, async {
        let found = match locator {
            Some(node @ Locator::Node(..)) => {
                let Some(object) = super::tools::object_for(page, node).await? else {
                    return Ok((String::new(), serde_json::Value::Null));
                };
                let res = page
                    .execute(
                        CallFunctionOnParams::builder()
                            .object_id(object)
                            .function_declaration(format!(
                                "function() {{ return [location.hostname, ({FACTS_FN}).call(this)]; }}"
                            ))
                            .return_by_value(true)
                            .build()
                            .map_err(CdpError::Protocol)?,
                    )
                    .await?;
                if let Some(ex) = &res.result.exception_details {
                    return Err(CdpError::Failed(format!("script error: {}", ex.text)));
                }
                res.result.result.value.clone()
            }
            other => {
                let element = match other {
                    Some(Locator::Point(x, y)) => format!("document.elementFromPoint({x}, {y})"),
                    Some(Locator::Selector(sel)) => format!(
                        "(() => {{ try {{ return document.querySelector({}); }} catch (_) {{ return undefined; }} }})()",
                        serde_json::to_string(sel).unwrap_or_default()
                    ),
                    // The focus, into same-origin frames.
                    _ => "(() => { let e = document.activeElement; \
                          while (e && e.contentDocument && e.contentDocument.activeElement) \
                          e = e.contentDocument.activeElement; return e; })()"
                        .to_owned(),
                };
                let expr = format!(
                    "(() => {{ const e = {element}; \
                     return [location.hostname, e === undefined ? 'invalid' : e ? ({FACTS_FN}).call(e) : null]; }})()"
                );
                let v = super::tools::evaluate(page, &expr).await?;
                if v.get(1).and_then(serde_json::Value::as_str) == Some("invalid")
                    && let Some(Locator::Selector(sel)) = other
                {
                    return Err(super::tools::invalid_selector(sel));
                }
                Some(v)
            }
        };
        let found = found.unwrap_or(serde_json::Value::Null);
        Ok((
            found
                .get(0)
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            found.get(1).cloned().unwrap_or(serde_json::Value::Null),
        ))
    })
    .await
}
