//! What the risk gate needs to know about the element a tool would act on,
//! read the way the browser sees it, out of the page script's reach:
//!
//! - the target of a click is the node Chromium's own hit test finds at
//!   the point the pointer goes down (`DOM.getNodeForLocation`), so an
//!   overlay, `pointer-events` or a closed shadow root cannot put another
//!   element under the click than the one judged; it is read once the
//!   pointer is there and the page has handled the hover, so a target
//!   that changes on hover (`:hover` rules, `mouseover` handlers) is
//!   judged as the press will find it;
//! - its name and role come from Chromium's accessibility tree
//!   (`Accessibility.getPartialAXTree`), which counts CSS generated
//!   content, shadow trees, `aria-*`, labels and images as the browser does;
//! - everything read by script (text, form, link, password) runs in an
//!   isolated world, where the page's own overrides of `innerText`,
//!   `querySelector` or `type` on the prototypes do not exist;
//! - a hit on a `::before`/`::after` pseudo-element is judged by the
//!   element it belongs to, generated content included;
//! - a hit on an `<iframe>` whose frame runs out of process (cross-site,
//!   a payment provider's) is followed into that frame through its own
//!   target (`frames.rs`), up to `frames::MAX_DEPTH` frames deep, and so
//!   is a focus held inside such a frame (what a key or typed text acts on);
//! - what cannot be seen (a frame that cannot be followed, a canvas, a
//!   plugin, a focus inside a closed shadow root) is reported as `unknown` with the reason: the gate never takes
//!   it for harmless.
//!
//! Read-only, but for the pointer: the page is neither scrolled nor
//! focused (a click's own lookup scrolls, as the click would); a press's
//! check moves the pointer to its point first, as the press would.

use std::time::Duration;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::accessibility::{AxNode, GetPartialAxTreeParams};
use chromiumoxide::cdp::browser_protocol::dom::{
    BackendNodeId, DescribeNodeParams, GetNodeForLocationParams, ResolveNodeParams,
};
use chromiumoxide::cdp::browser_protocol::page::{CreateIsolatedWorldParams, FrameId};
use chromiumoxide::cdp::js_protocol::runtime::{
    CallFunctionOnParams, EvaluateParams, ExecutionContextId, RemoteObjectId,
};
use serde_json::Value;

use super::{CdpError, Locator};

/// The isolated world the gate reads in when chromiumoxide's own utility
/// world is not there yet.
pub(super) const WORLD: &str = "__cordon_gate__";

/// Runs on the node (`this`) in an isolated world. Names are every name
/// the element goes by (the gate matches its words against all of them)
/// (on a `::before`/`::after`, the element it belongs to):
/// aria-label, aria-labelledby, labels, a button's value, its rendered
/// text with `::before`/`::after` content, title, alt, placeholder, on the
/// nearest interactive ancestor (across shadow roots), so a click on a
/// button's inner `<span>` is judged by the button. Public for the gate
/// benchmark, which times it apart.
pub const FACTS_FN: &str = r#"function() {
  // A hit on `::before`/`::after` resolves to a `CSSPseudoElement`: it is
  // judged by the element it belongs to (whose generated content it is).
  const own = this.nodeType === 1 ? this : this.nodeType ? this.parentElement : (this.element || null);
  if (!own || own.nodeType !== 1) return null;
  const up = (n) => n.parentElement || ((n.getRootNode && n.getRootNode()) || {}).host || null;
  const SEL = 'button,a[href],area[href],input,select,textarea,summary,label,[role=button],[role=link],[role=menuitem],[role=menuitemcheckbox],[role=menuitemradio],[role=tab],[role=checkbox],[role=radio],[role=switch],[role=option],[role=treeitem]';
  let el = own;
  for (let n = own; n; n = up(n)) { if (n.matches && n.matches(SEL)) { el = n; break; } }
  // A click on a label clicks its control: judged as the control, by the
  // names of both.
  const label = el.localName === 'label' && el.control ? el : null;
  if (label) el = label.control;
  const clean = (s) => String(s || '').replace(/\s+/g, ' ').trim().slice(0, 200);
  const gen = (n) => {
    try {
      return ['::before', '::after'].map((p) => {
        const c = getComputedStyle(n, p).content;
        return c && c !== 'none' && c !== 'normal' ? c.replace(/^["']|["']$/g, '') : '';
      }).join(' ');
    } catch (_) { return ''; }
  };
  const text = (n) => n ? clean((n.innerText || n.textContent || '') + ' ' + gen(n)) : '';
  const namesOf = (e) => {
    const out = [];
    const add = (s) => { s = clean(s); if (s && !out.includes(s)) out.push(s); };
    const by = e.getAttribute('aria-labelledby');
    if (by) add(by.split(/\s+/).map((i) => text(e.ownerDocument.getElementById(i))).join(' '));
    add(e.getAttribute('aria-label'));
    if (e.labels) for (const l of Array.from(e.labels)) add(text(l));
    const t = (e.getAttribute('type') || '').toLowerCase();
    if (e.localName === 'input' && ['submit', 'button', 'reset', 'image'].includes(t)) add(e.value);
    if (!['input', 'textarea', 'select'].includes(e.localName)) add(text(e));
    add(e.getAttribute('title')); add(e.getAttribute('alt')); add(e.getAttribute('placeholder'));
    add(gen(e));
    return out;
  };
  const type = (el.getAttribute('type') || '').toLowerCase();
  const form = el.form || (el.closest && el.closest('form')) || null;
  // The form's default button: its first submit button in tree order
  // (`form.elements` leaves image inputs out; Enter uses them too).
  const submitter = form ? [...Array.from(form.elements), ...Array.from(form.querySelectorAll('input[type=image]'))]
    .filter((e) => (e.localName === 'button' || e.localName === 'input')
      && (e.type === 'submit' || e.type === 'image') && e.form === form)
    .sort((a, b) => a === b ? 0 : (a.compareDocumentPosition(b) & 4 ? -1 : 1))[0] || null : null;
  const submits = !!form && ((el.localName === 'button' && (type === '' || type === 'submit'))
    || (el.localName === 'input' && (type === 'submit' || type === 'image')));
  const ownType = own.localName === 'input' ? String(own.type || '').toLowerCase() : '';
  const TEXT = ['', 'text', 'search', 'email', 'url', 'tel', 'number', 'password'];
  const role = (el.getAttribute('role') || '').toLowerCase();
  const activates = ['button', 'summary'].includes(el.localName)
    || (['a', 'area'].includes(el.localName) && el.hasAttribute('href'))
    || (el.localName === 'input' && ['submit', 'button', 'reset', 'image', 'checkbox', 'radio'].includes(type))
    || ['button', 'link', 'menuitem', 'menuitemcheckbox', 'menuitemradio', 'tab', 'checkbox', 'radio', 'switch', 'option', 'treeitem'].includes(role);
  const tag = own.localName;
  const unknown = (tag === 'iframe' || tag === 'frame') ? 'a frame the gate cannot enter (cross-origin or out of process)'
    : (tag === 'canvas') ? 'a canvas: what it draws is not readable'
    : (tag === 'object' || tag === 'embed') ? 'an embedded object'
    : null;
  const names = label ? [...new Set([...namesOf(el), ...namesOf(label)])] : namesOf(el);
  const href = (el.localName === 'a' || el.localName === 'area') ? String(el.href || '') : '';
  const r = own.getBoundingClientRect();
  return {
    host: location.hostname,
    // What an approval is bound to besides the element's own facts (held
    // in memory only): the document's address, and the text of the row,
    // item or form the element sits in (another row's "Delete" is
    // another approval).
    url: location.href,
    context: ((c) => c ? clean(String(c.textContent || '').slice(0, 1000)) : '')(el.closest && el.closest('tr,li,[role=row],[role=listitem],article,form,fieldset,dialog,[role=dialog]')),
    scroll: [window.scrollX, window.scrollY],
    name: names[0] || '',
    names,
    password: ownType === 'password',
    text_entry: tag === 'textarea' || (tag === 'input' && TEXT.includes(ownType)) || !!own.isContentEditable,
    in_form: !!form,
    submits,
    activates,
    submitter: submitter ? namesOf(submitter) : null,
    download: el.localName === 'a' && el.hasAttribute('download'),
    link_host: /^https?:/i.test(href) ? new URL(href).hostname : null,
    unknown,
    frame: tag === 'iframe' || tag === 'frame',
    rect: [r.left, r.top, r.width, r.height],
    // A select's options (value, text): `select` is judged by the ones
    // it would choose.
    options: el.localName === 'select' ? Array.from(el.options).slice(0, 1000).map((o) => [String(o.value), clean(o.text)]) : null,
  };
}"#;

/// The focused element, followed into open shadow roots and the frames
/// this world can enter; run in an isolated world of the main frame.
pub(super) const FOCUS_EXPR: &str = "(() => { let e = document.activeElement; \
  for (let i = 0; e && i < 32; i++) { \
    if (e.shadowRoot && e.shadowRoot.activeElement) { e = e.shadowRoot.activeElement; continue; } \
    if (e.localName === 'iframe' || e.localName === 'frame') { \
      let d = null; try { d = e.contentDocument; } catch (_) {} \
      if (d && d.activeElement) { e = d.activeElement; continue; } \
    } \
    break; } \
  return e; })()";

/// Roles that act when clicked or activated: the gate judges a click by
/// the nearest of these above the node hit.
const ACTING_ROLES: &[&str] = &[
    "button",
    "link",
    "menuitem",
    "menuitemcheckbox",
    "menuitemradio",
    "tab",
    "checkbox",
    "radio",
    "switch",
    "option",
    "treeitem",
    "combobox",
    "listbox",
    "textbox",
    "searchbox",
    "spinbutton",
    "slider",
    "PopUpButton",
    "ToggleButton",
    "DisclosureTriangle",
];

/// An execution context of `frame` (the main frame if `None`) in an
/// isolated world: chromiumoxide's utility world when it exists, else one
/// made now.
pub(super) async fn isolated_context(
    page: &Page,
    frame: Option<FrameId>,
) -> Result<ExecutionContextId, CdpError> {
    let known = match &frame {
        Some(f) => page.frame_secondary_execution_context(f.clone()).await?,
        None => page.secondary_execution_context().await?,
    };
    if let Some(ctx) = known {
        return Ok(ctx);
    }
    made_isolated_context(page, frame).await
}

/// An isolated world made now in `frame`'s document (the main frame's if
/// `None`).
async fn made_isolated_context(
    page: &Page,
    frame: Option<FrameId>,
) -> Result<ExecutionContextId, CdpError> {
    let frame = match frame {
        Some(f) => f,
        None => page
            .mainframe()
            .await?
            .ok_or_else(|| CdpError::Failed("the page has no main frame".into()))?,
    };
    let made = page
        .execute(
            CreateIsolatedWorldParams::builder()
                .frame_id(frame)
                .world_name(WORLD)
                .build()
                .map_err(CdpError::Protocol)?,
        )
        .await?;
    Ok(made.result.execution_context_id)
}

/// Whether `e` says the execution context used is gone: the frame's
/// document changed between finding the context and using it (a
/// navigation committed, or failed into an error page, meanwhile).
fn context_gone(e: &CdpError) -> bool {
    let m = e.to_string();
    m.contains("Cannot find context with specified id")
        || m.contains("Execution context was destroyed")
}

/// How many times a read in the isolated world is tried again in a world
/// made anew when the document changed under it.
const CONTEXT_RETRIES: usize = 3;

/// `read` run in the main frame's isolated world; when the document
/// changed under it (chromiumoxide may still know the old document's
/// world), run again in a world made now in the document shown, a few
/// times: a read answers for what the tab shows, never with a lost context.
pub(super) async fn in_isolated_world<T, F, Fut>(page: &Page, read: F) -> Result<T, CdpError>
where
    F: Fn(ExecutionContextId) -> Fut,
    Fut: std::future::Future<Output = Result<T, CdpError>>,
{
    let mut ctx = isolated_context(page, None).await?;
    let mut tries = 0;
    loop {
        match read(ctx).await {
            Err(e) if context_gone(&e) && tries < CONTEXT_RETRIES => {
                tries += 1;
                tokio::time::sleep(std::time::Duration::from_millis(25 * tries as u64)).await;
                ctx = made_isolated_context(page, None).await?;
            }
            other => return other,
        }
    }
}

/// `expression` evaluated in the main frame's isolated world, as an object.
pub(super) async fn evaluate_isolated(
    page: &Page,
    expression: &str,
) -> Result<(Option<RemoteObjectId>, bool), CdpError> {
    in_isolated_world(page, |ctx| async move {
        let res = page
            .execute(
                EvaluateParams::builder()
                    .expression(expression)
                    .context_id(ctx)
                    .build()
                    .map_err(CdpError::Protocol)?,
            )
            .await?;
        Ok((
            res.result.result.object_id.clone(),
            res.result.exception_details.is_some(),
        ))
    })
    .await
}

async fn call_facts(page: &Page, object: RemoteObjectId) -> Result<Value, CdpError> {
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
    Ok(res.result.result.value.clone().unwrap_or(Value::Null))
}

/// The accessibility tree's role and names for `node`: the nearest acting
/// ancestor's (or the node's own), then the node's own and its text.
async fn ax_names(page: &Page, node: BackendNodeId) -> (Option<String>, Vec<String>) {
    let Ok(tree) = page
        .execute(
            GetPartialAxTreeParams::builder()
                .backend_node_id(node)
                .fetch_relatives(true)
                .build(),
        )
        .await
    else {
        return (None, Vec::new());
    };
    pick_names(&tree.result.nodes, node)
}

fn ax_str(v: &Option<chromiumoxide::cdp::browser_protocol::accessibility::AxValue>) -> String {
    v.as_ref()
        .and_then(|v| v.value.as_ref())
        .and_then(Value::as_str)
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .map(|s| s.chars().take(200).collect())
        .unwrap_or_default()
}

/// From a partial tree (the node, its ancestors, siblings and children):
/// the role of the nearest acting node at or above `node` (or the node's
/// own) and every name met on the way, that one first.
pub(super) fn pick_names(nodes: &[AxNode], node: BackendNodeId) -> (Option<String>, Vec<String>) {
    let by_id: std::collections::HashMap<&str, &AxNode> = nodes
        .iter()
        .map(|n| (n.node_id.inner().as_str(), n))
        .collect();
    let Some(start) = nodes.iter().find(|n| n.backend_dom_node_id == Some(node)) else {
        return (None, Vec::new());
    };
    let mut names = Vec::new();
    let mut push = |s: String| {
        if !s.is_empty() && !names.contains(&s) {
            names.push(s);
        }
    };
    let mut acting = None;
    let mut at = Some(start);
    let mut hops = 0;
    while let Some(n) = at {
        let role = ax_str(&n.role);
        if ACTING_ROLES.contains(&role.as_str()) {
            acting = Some((role, ax_str(&n.name)));
            break;
        }
        hops += 1;
        if hops > 64 {
            break;
        }
        at = n
            .parent_id
            .as_ref()
            .and_then(|p| by_id.get(p.inner().as_str()).copied());
    }
    let role = match acting {
        Some((role, name)) => {
            push(name);
            Some(role)
        }
        None => Some(ax_str(&start.role)).filter(|r| !r.is_empty()),
    };
    push(ax_str(&start.name));
    // The node's text children (a clickable `<div>` has no name of its
    // own; its text is what a person reads).
    for child in start.child_ids.iter().flatten() {
        if let Some(c) = by_id.get(child.inner().as_str())
            && ax_str(&c.role) == "StaticText"
        {
            push(ax_str(&c.name));
        }
    }
    (role, names)
}

/// The script facts and the accessibility tree's names of `node`, merged:
/// the AX name leads (it is what the browser would announce), the
/// script's names follow.
pub(super) fn merge(mut facts: Value, role: Option<String>, ax: Vec<String>) -> Value {
    let Some(obj) = facts.as_object_mut() else {
        return facts;
    };
    let mut names: Vec<String> = ax;
    if let Some(script) = obj.get("names").and_then(Value::as_array) {
        for n in script.iter().filter_map(Value::as_str) {
            if !names.iter().any(|m| m == n) {
                names.push(n.to_owned());
            }
        }
    }
    if let Some(first) = names.first() {
        obj.insert("name".into(), Value::String(first.clone()));
    }
    obj.insert("names".into(), serde_json::json!(names));
    if let Some(role) = role {
        obj.insert("role".into(), Value::String(role));
    }
    facts
}

/// Where a hit test may follow a click into out-of-process frames: the
/// browser's CDP URL (`Sandbox::cdp_url`, for a connection of the gate's
/// own) and how long the follow may take. Without a URL such a frame
/// stays unknown.
#[derive(Debug, Clone, Copy)]
pub(super) struct Reach<'a> {
    /// The browser-level CDP WebSocket URL.
    browser: Option<&'a str>,
    /// The bound of the follow; past it the frame stays unknown.
    bound: Duration,
}

impl<'a> Reach<'a> {
    /// Follows into frames through `browser` (an empty URL: not at all),
    /// within half the call's bound (the other half is left for the rest
    /// of the call, so a slow frame ends as unknown, not as a timeout).
    pub(super) fn new(browser: &'a str, timeout: Duration) -> Self {
        Self {
            browser: Some(browser).filter(|u| !u.is_empty()),
            bound: timeout / 2,
        }
    }
}

/// The facts of the node Chromium's hit test finds at (x, y) (what a
/// click there would press), and the host of its frame. Read as the page
/// is now: a caller that judges a press sends the pointer there first and
/// waits for the move's answer (`click_checked`, `facts_under_pointer`),
/// so what the page shows on hover is what is read. A hit on an
/// `<iframe>` whose frame runs out of process is followed into the frame
/// (`frames.rs`) as far as `reach` allows; what cannot be followed stays
/// unknown.
pub(super) async fn hit_facts(
    page: &Page,
    reach: Reach<'_>,
    x: f64,
    y: f64,
    scroll: Option<(f64, f64)>,
) -> Result<(String, Value), CdpError> {
    // The hit test takes the point in the document (it subtracts the
    // scroll itself), the pointer's point is in the viewport: on a page
    // scrolled by S, the viewport's point is the document's point + S.
    // Read at that point, the gate judged what sat S pixels above the
    // press. `scroll` ([`scroll_of`]) may be read alongside the pointer's
    // move (off the path): the facts script reports the scroll as the
    // node is read, and a page that scrolled since (on the hover, say) is
    // unknown. A zoomed-in page (pinch, `None`) is not placed: unknown.
    let Some(scroll) = scroll else {
        return Ok((
            String::new(),
            unknown_at("the page is zoomed in: the gate cannot place the point"),
        ));
    };
    #[expect(
        clippy::cast_possible_truncation,
        reason = "viewport pixels plus the scroll, checked in range"
    )]
    let (px, py) = ((x + scroll.0).floor() as i64, (y + scroll.1).floor() as i64);
    let hit = page
        .execute(
            GetNodeForLocationParams::builder()
                .x(px)
                .y(py)
                .include_user_agent_shadow_dom(false)
                .ignore_pointer_events_none(false)
                .build()
                .map_err(CdpError::Protocol)?,
        )
        .await;
    let hit = match hit {
        Ok(h) => h.result.clone(),
        // Nothing there the browser could name.
        Err(_) => {
            return Ok((
                String::new(),
                unknown_at("nothing the gate can read at that point"),
            ));
        }
    };
    let ctx = isolated_context(page, Some(hit.frame_id.clone())).await?;
    let script =
        async {
            let object = page
                .execute(
                    ResolveNodeParams::builder()
                        .backend_node_id(hit.backend_node_id)
                        .execution_context_id(ctx)
                        .build(),
                )
                .await
                .map_err(CdpError::from)
                .and_then(|r| {
                    r.result.object.object_id.clone().ok_or_else(|| {
                        CdpError::Failed("the node at that point cannot be read".into())
                    })
                })?;
            call_facts(page, object).await
        };
    // The accessibility query needs only the node: it runs alongside the
    // node's resolution and the facts script.
    let (facts, (role, ax)) = futures::join!(script, ax_names(page, hit.backend_node_id));
    let facts = match facts {
        // The scroll read is the main frame's: a node in a frame inside
        // it has a scroll of its own.
        Ok(f) if !f.is_null() => {
            if page.mainframe().await?.as_ref() == Some(&hit.frame_id) {
                moved_since(f, scroll)
            } else {
                f
            }
        }
        Ok(_) | Err(_) => unknown_at("the node at that point cannot be read"),
    };
    if facts["frame"].as_bool().unwrap_or(false)
        && let Some(browser) = reach.browser
    {
        let follow = super::frames::facts_in_frame(page, browser, hit.backend_node_id, (x, y));
        match tokio::time::timeout(reach.bound, follow).await {
            Ok(Ok(inside)) => return Ok(inside),
            // The `<iframe>`'s own facts stay: unknown.
            Ok(Err(e)) => tracing::debug!(error = %e, "cannot follow a click into its frame"),
            Err(_) => tracing::debug!("following a click into its frame timed out"),
        }
    }
    let host = facts
        .get("host")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Ok((host, merge(facts, role, ax)))
}

/// The main frame's scroll (CSS pixels: where the viewport's top left is
/// in the document), `None` when the page is zoomed in (pinch), where
/// the viewport's points are not the document's plus the scroll.
pub(super) async fn scroll_of(page: &Page) -> Result<Option<(f64, f64)>, CdpError> {
    use chromiumoxide::cdp::browser_protocol::page::GetLayoutMetricsParams;
    let m = page.execute(GetLayoutMetricsParams::default()).await?;
    let v = &m.result.css_visual_viewport;
    if (v.scale - 1.0).abs() > 1e-3 {
        return Ok(None);
    }
    Ok(Some((v.page_x, v.page_y)))
}

/// `facts` as read, or unknown when the frame scrolled between the
/// scroll's read and the facts' (the facts script reports its frame's
/// scroll): the hit test then judged another point than the press's.
pub(super) fn moved_since(facts: Value, scroll: (f64, f64)) -> Value {
    let at = facts["scroll"]
        .as_array()
        .and_then(|s| Some((s.first()?.as_f64()?, s.get(1)?.as_f64()?)));
    match at {
        Some((sx, sy)) if (sx - scroll.0).abs() > 0.5 || (sy - scroll.1).abs() > 0.5 => {
            unknown_at("the page scrolled while the gate read it")
        }
        _ => facts,
    }
}

/// Facts that say only that the gate could not see.
pub(super) fn unknown_at(why: &str) -> Value {
    serde_json::json!({ "unknown": why })
}

/// The facts of `object` (in the isolated world), with the accessibility
/// tree's names, and its node; `Null` for no object.
async fn object_facts(
    page: &Page,
    object: Option<RemoteObjectId>,
) -> Result<(Value, Option<BackendNodeId>), CdpError> {
    let Some(object) = object else {
        return Ok((Value::Null, None));
    };
    let described = page
        .execute(
            DescribeNodeParams::builder()
                .object_id(object.clone())
                .depth(0)
                .pierce(true)
                .build(),
        )
        .await?;
    let node = &described.result.node;
    let closed = node.shadow_roots.iter().flatten().any(|r| {
        matches!(
            r.shadow_root_type,
            Some(chromiumoxide::cdp::browser_protocol::dom::ShadowRootType::Closed)
        )
    });
    let backend = node.backend_node_id;
    let (facts, (role, ax)) = futures::join!(call_facts(page, object), ax_names(page, backend));
    let mut facts = merge(facts?, role, ax);
    if closed && let Some(obj) = facts.as_object_mut() {
        obj.insert(
            "unknown".into(),
            Value::String("inside a closed shadow root the gate cannot enter".into()),
        );
    }
    Ok((facts, Some(backend)))
}

/// A left click whose target is judged where the button will go down:
/// an element (selector, ref) is scrolled into view as a plain click does;
/// then Chromium's hit test names the node at the click's point, its facts
/// are read, and `allow(host, facts)` is asked before the button goes
/// down. `browser`: the browser's CDP URL, to follow the hit test into an
/// out-of-process frame (empty: such a frame is unknown). `Ok(Err(e))`:
/// `allow` stopped the click; nothing was pressed.
pub async fn click_checked<E>(
    page: &Page,
    locator: &Locator,
    timeout: Duration,
    browser: &str,
    allow: impl FnOnce(&str, Value) -> Result<(), E>,
) -> Result<Result<(), E>, CdpError> {
    super::tools::bounded("click", timeout, async {
        let (x, y) = super::tools::point_of(page, locator, timeout).await?;
        // The pointer first, then the reads, then (allowed) the button. The
        // move is answered once the tab has handled it (its `:hover`
        // rules and its `mouseover`/`pointerover`/`pointerenter`
        // handlers have run), so the hit test and the facts see what the
        // page shows under the pointer, which is what the press will act
        // on. Reads sent before that answer would see the page before the
        // hover (Chromium holds the tab's commands sent after a pending
        // move, but runs the ones sent before it first): a button reading
        // "Next" that turns into "Delete repository" on hover was judged
        // as "Next". A click that is held has moved the pointer there, as
        // a hover would. Boxed: the reads make a future too large for the
        // stack of a tool call in a debug build.
        let (moved, scroll) = futures::join!(super::input::mouse_move(page, x, y), scroll_of(page));
        moved?;
        let reach = Reach::new(browser, timeout);
        let (host, facts) = Box::pin(hit_facts(page, reach, x, y, scroll?)).await?;
        if let Err(e) = allow(&host, facts) {
            return Ok(Err(e));
        }
        super::input::press_release(page, x, y, 1).await?;
        Ok(Ok(()))
    })
    .await
}

/// Sends a key that acts on the focus (Enter or Space), judged where it
/// acts: `allow(host, facts)` is asked of the focus (read as
/// [`element_facts`] reads it) before the key goes down when `before`,
/// and again once the page has handled the keydown, before the key's
/// character. A keydown handler may move the focus, and the character (the
/// `keypress`, on which Enter presses the focused button or submits a
/// form) acts on the new one: stopped there, the key goes up without it.
/// `browser` as for [`click_checked`]. `Ok(Err(e))`: `allow` stopped the
/// key.
pub async fn press_checked<E>(
    page: &Page,
    key: super::input::KeyDown<'_>,
    timeout: Duration,
    browser: &str,
    before: bool,
    allow: impl Fn(&str, Value) -> Result<(), E>,
) -> Result<Result<(), E>, CdpError> {
    super::tools::bounded("press", timeout, async {
        if before {
            let (host, facts) = Box::pin(element_facts(page, None, timeout, browser)).await?;
            if let Err(e) = allow(&host, facts) {
                return Ok(Err(e));
            }
        }
        let held = super::input::key_down_raw(page, key).await?;
        let allowed = match Box::pin(element_facts(page, None, timeout, browser)).await {
            Ok((host, facts)) => allow(&host, facts),
            // The document that handled the keydown is gone (a link is
            // followed at Enter's keydown; a handler navigated): its
            // character has nothing left to act on, as in a single
            // `keyDown`, whose keypress would go to that document. The key
            // goes up; it was pressed.
            Err(CdpError::Protocol(_) | CdpError::Failed(_) | CdpError::NotFound(_)) => {
                held.release(page).await?;
                return Ok(Ok(()));
            }
            // Not read in time: the key goes up, having done nothing.
            Err(e) => {
                let _ = held.release(page).await;
                return Err(e);
            }
        };
        if let Err(e) = allowed {
            held.release(page).await?;
            return Ok(Err(e));
        }
        held.finish(page).await?;
        Ok(Ok(()))
    })
    .await
}

/// The facts at (x, y) once the pointer is there (`Input` moved with
/// `buttons` held, `button` the one of them that drags, `Button::None`
/// when none is): what a raw button going down or up there acts on,
/// after the page handled the hover. The move's answer comes once the tab
/// handled it. `browser` as for [`click_checked`].
pub async fn facts_under_pointer(
    page: &Page,
    (x, y): (f64, f64),
    (button, buttons, modifiers): (super::Button, i64, i64),
    timeout: Duration,
    browser: &str,
) -> Result<(String, Value), CdpError> {
    super::tools::bounded("checking the target", timeout, async {
        let (moved, scroll) = futures::join!(
            super::input::mouse_event(
                page,
                super::MouseKind::Move,
                x,
                y,
                button,
                buttons,
                0,
                modifiers,
            ),
            scroll_of(page)
        );
        moved?;
        Box::pin(hit_facts(page, Reach::new(browser, timeout), x, y, scroll?)).await
    })
    .await
}

/// The host of the active page's frame and, as JSON, the facts of the
/// element at `locator` (`None`: the focused element, followed into
/// frames and open shadow roots); `Null` when there is no such element. A
/// point is judged by the hit test, an element by itself. `browser` as
/// for [`click_checked`].
pub async fn element_facts(
    page: &Page,
    locator: Option<&Locator>,
    timeout: Duration,
    browser: &str,
) -> Result<(String, Value), CdpError> {
    super::tools::bounded("checking the target", timeout, async {
        let facts = match locator {
            Some(Locator::Point(x, y)) => {
                let scroll = scroll_of(page).await?;
                return hit_facts(page, Reach::new(browser, timeout), *x, *y, scroll).await;
            }
            Some(other) => {
                let object = super::tools::object_for(page, other).await?;
                object_facts(page, object).await?.0
            }
            None => {
                let (object, _) = evaluate_isolated(page, FOCUS_EXPR).await?;
                let (facts, node) = object_facts(page, object).await?;
                // The focus is in a frame this world cannot enter (out of
                // process): read it there, through the frame's own target.
                let reach = Reach::new(browser, timeout);
                if facts["frame"].as_bool().unwrap_or(false)
                    && let (Some(browser), Some(node)) = (reach.browser, node)
                {
                    let follow = super::frames::focus_in_frame(page, browser, node);
                    match tokio::time::timeout(reach.bound, follow).await {
                        Ok(Ok(inside)) => return Ok(inside),
                        // The `<iframe>`'s own facts stay: unknown.
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, "cannot follow the focus into its frame");
                        }
                        Err(_) => tracing::debug!("following the focus into its frame timed out"),
                    }
                }
                facts
            }
        };
        let host = facts
            .get("host")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        Ok((host, facts))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use chromiumoxide::cdp::browser_protocol::accessibility::{AxNodeId, AxValue, AxValueType};

    fn node(id: &str, role: &str, name: &str, parent: Option<&str>, backend: i64) -> AxNode {
        let mut n = AxNode::new(AxNodeId::new(id), false);
        let mut r = AxValue::new(AxValueType::Role);
        r.value = Some(Value::String(role.into()));
        n.role = Some(r);
        let mut v = AxValue::new(AxValueType::ComputedString);
        v.value = Some(Value::String(name.into()));
        n.name = Some(v);
        n.parent_id = parent.map(AxNodeId::new);
        n.backend_dom_node_id = Some(BackendNodeId::new(backend));
        n
    }

    #[test]
    fn a_click_inside_a_button_is_named_by_the_button_and_its_own_text() {
        let mut span = node("3", "generic", "", Some("2"), 30);
        span.child_ids = Some(vec![AxNodeId::new("4")]);
        let nodes = vec![
            node("1", "RootWebArea", "page", None, 10),
            node("2", "button", "Delete repository", Some("1"), 20),
            span,
            node("4", "StaticText", "Delete", Some("3"), 40),
        ];
        let (role, names) = pick_names(&nodes, BackendNodeId::new(30));
        assert_eq!(role.as_deref(), Some("button"));
        assert_eq!(names, vec!["Delete repository", "Delete"]);
    }

    #[test]
    fn a_plain_clickable_block_is_named_by_its_text() {
        let mut div = node("2", "generic", "", Some("1"), 20);
        div.child_ids = Some(vec![AxNodeId::new("3")]);
        let nodes = vec![
            node("1", "RootWebArea", "page", None, 10),
            div,
            node("3", "StaticText", "Delete   organization", Some("2"), 30),
        ];
        let (role, names) = pick_names(&nodes, BackendNodeId::new(20));
        assert_eq!(role.as_deref(), Some("generic"));
        assert_eq!(names, vec!["Delete organization"]);
        // A node the tree does not hold: nothing is made up.
        assert_eq!(pick_names(&nodes, BackendNodeId::new(99)), (None, vec![]));
    }

    #[test]
    fn merged_names_lead_with_the_browsers_and_keep_the_scripts() {
        let facts = serde_json::json!({ "name": "Next", "names": ["Next", "Delete organization"] });
        let merged = merge(
            facts,
            Some("button".into()),
            vec!["Delete organization".into()],
        );
        assert_eq!(merged["name"], "Delete organization");
        assert_eq!(
            merged["names"],
            serde_json::json!(["Delete organization", "Next"])
        );
        assert_eq!(merged["role"], "button");
    }
}
