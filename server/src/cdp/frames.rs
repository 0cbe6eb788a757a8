//! A click's hit test, and a key's focus, followed into out-of-process
//! frames.
//!
//! With site isolation, a cross-site `<iframe>` (a payment provider's)
//! runs in a renderer of its own: the tab's hit test stops at the
//! `<iframe>` element. The frame is a target of its own; the gate reaches
//! it over a raw CDP connection to the same browser (chromiumoxide cannot
//! send to a frame's session), attaches to it, and reads the frame as it
//! reads a tab: Chromium's hit test at the point translated into the
//! frame's viewport, the node's facts in an isolated world of its frame,
//! its names from the frame's accessibility tree.
//!
//! Anything that does not fit (a frame that is not a target, a rotated or
//! skewed frame, a point on the frame's border, a failed call) is an
//! error: the caller keeps the `<iframe>`'s own facts (unknown), never
//! something harmless. Frames inside the frame are followed the same way,
//! [`MAX_DEPTH`] deep; a frame deeper than that stays unknown.

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::accessibility::AxNode;
use chromiumoxide::cdp::browser_protocol::dom::{
    BackendNodeId, DescribeNodeParams, GetBoxModelParams,
};
use serde_json::{Value, json};

use super::CdpError;
use super::raw::RawClient as Client;

/// How many out-of-process frames deep a hit test is followed: a button
/// in a frame in a frame in a frame of the tab is judged; a fourth frame
/// stays unknown.
pub(super) const MAX_DEPTH: usize = 3;

/// Where a frame's viewport sits in another's: outer = `offset` + inner
/// · `scale` (a frame scaled by a CSS transform or `zoom` has a scale
/// other than 1), and the inner viewport's size in its own CSS pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Place {
    offset: (f64, f64),
    scale: (f64, f64),
    size: (f64, f64),
}

impl Place {
    /// The tab in itself.
    const TAB: Self = Self {
        offset: (0.0, 0.0),
        scale: (1.0, 1.0),
        size: (f64::INFINITY, f64::INFINITY),
    };

    /// Where the frame of an `<iframe>` with this content quad, border
    /// quad and untransformed border box size (all from `DOM.getBoxModel`,
    /// in its parent's viewport) sits in that parent. `None` for a frame
    /// that is not an upright rectangle (rotated, skewed, flipped, in 3D).
    fn of_box(content: &[f64], border: &[f64], size: (f64, f64)) -> Option<Self> {
        let upright = |q: &[f64]| {
            let close = |a: f64, b: f64| (a - b).abs() < 0.5;
            q.len() == 8
                && close(q[1], q[3])
                && close(q[2], q[4])
                && close(q[5], q[7])
                && close(q[0], q[6])
                && q[2] > q[0]
                && q[5] > q[1]
        };
        if !(upright(content) && upright(border) && size.0 > 0.0 && size.1 > 0.0) {
            return None;
        }
        // The border box's drawn size over its laid-out size: the frame's
        // transform and zoom (one CSS pixel of the frame is this many of
        // its parent's).
        let scale = (
            (border[2] - border[0]) / size.0,
            (border[5] - border[1]) / size.1,
        );
        let sane = |s: f64| s.is_finite() && s > 0.0;
        if !(sane(scale.0) && sane(scale.1)) {
            return None;
        }
        Some(Self {
            offset: (content[0], content[1]),
            scale,
            size: (
                (content[2] - content[0]) / scale.0,
                (content[5] - content[1]) / scale.1,
            ),
        })
    }

    /// A point of the outer viewport in the inner one, if it is inside.
    fn inside(self, (x, y): (f64, f64)) -> Option<(f64, f64)> {
        let p = (
            (x - self.offset.0) / self.scale.0,
            (y - self.offset.1) / self.scale.1,
        );
        (p.0 >= 0.0 && p.1 >= 0.0 && p.0 < self.size.0 && p.1 < self.size.1).then_some(p)
    }

    /// `inner` (placed in this place's inner viewport) placed in this
    /// place's outer viewport.
    fn then(self, inner: Self) -> Self {
        Self {
            offset: (
                self.offset.0 + inner.offset.0 * self.scale.0,
                self.offset.1 + inner.offset.1 * self.scale.1,
            ),
            scale: (self.scale.0 * inner.scale.0, self.scale.1 * inner.scale.1),
            size: inner.size,
        }
    }

    /// A box `[left, top, width, height]` of the inner viewport, in the
    /// outer one.
    fn rect_out(self, r: [f64; 4]) -> [f64; 4] {
        [
            self.offset.0 + r[0] * self.scale.0,
            self.offset.1 + r[1] * self.scale.1,
            r[2] * self.scale.0,
            r[3] * self.scale.1,
        ]
    }
}

/// The quads and size of an `<iframe>`'s box, and the id of the frame it
/// shows, from `DOM.describeNode` and `DOM.getBoxModel` answers.
struct FrameBox {
    frame_id: String,
    content: Vec<f64>,
    border: Vec<f64>,
    size: (f64, f64),
}

impl FrameBox {
    fn from_answers(described: &Value, model: &Value) -> Result<Self, CdpError> {
        let frame_id = described["node"]["frameId"]
            .as_str()
            .ok_or_else(|| CdpError::Failed("the frame element shows no frame".into()))?
            .to_owned();
        let quad = |k: &str| -> Vec<f64> {
            model[k]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_f64).collect())
                .unwrap_or_default()
        };
        let num = |k: &str| model[k].as_f64().unwrap_or(0.0);
        Ok(Self {
            frame_id,
            content: quad("content"),
            border: quad("border"),
            size: (num("width"), num("height")),
        })
    }
}

/// The box of the `<iframe>` `node` of the tab, read on chromiumoxide's
/// connection.
async fn frame_box_in_tab(page: &Page, node: BackendNodeId) -> Result<FrameBox, CdpError> {
    let (described, model) = futures::join!(
        page.execute(
            DescribeNodeParams::builder()
                .backend_node_id(node)
                .depth(0)
                .build()
        ),
        page.execute(GetBoxModelParams::builder().backend_node_id(node).build()),
    );
    let described =
        serde_json::to_value(&described?.result).map_err(|e| CdpError::Protocol(e.to_string()))?;
    let model = serde_json::to_value(&model?.result.model)
        .map_err(|e| CdpError::Protocol(e.to_string()))?;
    FrameBox::from_answers(&described, &model)
}

/// The box of the `<iframe>` `node` in the frame of `session`.
async fn frame_box_in(client: &mut Client, session: &str, node: i64) -> Result<FrameBox, CdpError> {
    let described = client
        .send(
            Some(session),
            "DOM.describeNode",
            json!({ "backendNodeId": node, "depth": 0 }),
        )
        .await?;
    let model = client
        .send(
            Some(session),
            "DOM.getBoxModel",
            json!({ "backendNodeId": node }),
        )
        .await?;
    let described = client.answer(described).await?;
    let model = client.answer(model).await?;
    FrameBox::from_answers(&described, &model["model"])
}

/// The browser's targets. The browser makes a frame's target when
/// targets are listed: listing them first makes the frames attachable.
async fn targets(client: &mut Client) -> Result<Vec<Value>, CdpError> {
    let mut listed = client.call(None, "Target.getTargets", json!({})).await?;
    Ok(match listed["targetInfos"].take() {
        Value::Array(all) => all,
        _ => Vec::new(),
    })
}

/// The gate's own connection to the browser, and the browser's targets.
async fn open_listed(ws_url: &str) -> Result<(Client, Vec<Value>), CdpError> {
    let mut client = Client::open(ws_url).await?;
    match targets(&mut client).await {
        Ok(t) => Ok((client, t)),
        Err(e) => {
            client.close().await;
            Err(e)
        }
    }
}

/// A session attached to the out-of-process frame `frame_id`, one of
/// `targets` (its frame id is its target id; a frame in its parent's
/// process is not a target).
async fn attach(
    client: &mut Client,
    targets: &[Value],
    frame_id: &str,
) -> Result<String, CdpError> {
    if !targets
        .iter()
        .any(|t| t["type"] == "iframe" && t["targetId"] == frame_id)
    {
        return Err(CdpError::Failed(
            "the frame is not a target of its own".into(),
        ));
    }
    let attached = client
        .call(
            None,
            "Target.attachToTarget",
            json!({ "targetId": frame_id, "flatten": true }),
        )
        .await?;
    attached["sessionId"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| CdpError::Failed("no session for the frame".into()))
}

/// The facts of the node at (x, y) (tab viewport) inside the
/// out-of-process frame of the tab's `<iframe>` `iframe`, and the host
/// of its frame, as `hit_facts` reads them in the tab. Frames inside
/// are followed [`MAX_DEPTH`] deep. Errors leave the caller's facts
/// (unknown) as they were.
pub(super) async fn facts_in_frame(
    page: &Page,
    ws_url: &str,
    iframe: BackendNodeId,
    point: (f64, f64),
) -> Result<(String, Value), CdpError> {
    let started = std::time::Instant::now();
    // The `<iframe>`'s box on the tab's connection while the gate's own
    // connection opens and lists the targets.
    let (first, opened) = futures::join!(frame_box_in_tab(page, iframe), open_listed(ws_url));
    let (mut client, targets) = opened?;
    let res = match first {
        Ok(first) => follow(&mut client, &targets, first, point).await,
        Err(e) => Err(e),
    };
    client.close().await;
    tracing::debug!(
        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        followed = res.is_ok(),
        "a click's hit test followed into its frame"
    );
    res
}

/// The focused element inside the out-of-process frame of the tab's
/// `<iframe>` `iframe` (the element that holds the tab's focus), followed
/// into frames in it [`MAX_DEPTH`] deep, with the host of its frame: what
/// a key pressed or text typed now acts on. Errors leave the caller's
/// facts (the `<iframe>`'s: unknown) as they were.
pub(super) async fn focus_in_frame(
    page: &Page,
    ws_url: &str,
    iframe: BackendNodeId,
) -> Result<(String, Value), CdpError> {
    let (described, opened) = futures::join!(
        page.execute(
            DescribeNodeParams::builder()
                .backend_node_id(iframe)
                .depth(0)
                .build()
        ),
        open_listed(ws_url)
    );
    let (mut client, targets) = opened?;
    let res = async {
        let described = serde_json::to_value(&described?.result)
            .map_err(|e| CdpError::Protocol(e.to_string()))?;
        let mut frame_id = frame_of(&described)?;
        let mut depth = 1;
        loop {
            let session = attach(&mut client, &targets, &frame_id).await?;
            let (facts, node) = focus_at(&mut client, &session, &frame_id).await?;
            if facts["frame"].as_bool().unwrap_or(false) && depth < MAX_DEPTH {
                let inner = client
                    .call(
                        Some(&session),
                        "DOM.describeNode",
                        json!({ "backendNodeId": node, "depth": 0 }),
                    )
                    .await?;
                frame_id = frame_of(&inner)?;
                depth += 1;
                continue;
            }
            let host = facts["host"].as_str().unwrap_or_default().to_owned();
            return Ok((host, facts));
        }
    }
    .await;
    client.close().await;
    res
}

/// The id of the frame a described `<iframe>` shows.
fn frame_of(described: &Value) -> Result<String, CdpError> {
    described["node"]["frameId"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| CdpError::Failed("the frame element shows no frame".into()))
}

/// The focused element of the frame of `session` (its own document's
/// focus, followed into open shadow roots and frames of its process), its
/// facts with the accessibility tree's names, and its node.
async fn focus_at(
    client: &mut Client,
    session: &str,
    frame_id: &str,
) -> Result<(Value, i64), CdpError> {
    let s = Some(session);
    let ctx = gate_world(client, s, frame_id).await?;
    let focused = client
        .call(
            s,
            "Runtime.evaluate",
            json!({ "expression": super::facts::FOCUS_EXPR, "contextId": ctx }),
        )
        .await?;
    if focused.get("exceptionDetails").is_some() {
        return Err(CdpError::Failed("script error".into()));
    }
    let object = focused["result"]["objectId"]
        .as_str()
        .ok_or_else(|| CdpError::Failed("nothing has the frame's focus".into()))?
        .to_owned();
    let described = client
        .call(
            s,
            "DOM.describeNode",
            json!({ "objectId": object, "depth": 0, "pierce": true }),
        )
        .await?;
    let node = described["node"]["backendNodeId"]
        .as_i64()
        .ok_or_else(|| CdpError::Failed("the focused node cannot be read".into()))?;
    let closed = described["node"]["shadowRoots"]
        .as_array()
        .is_some_and(|roots| roots.iter().any(|r| r["shadowRootType"] == "closed"));
    let tree = ask_names(client, s, node).await?;
    let mut facts = with_names(
        client,
        s,
        Ok(object),
        (node, tree),
        "the focused element cannot be read",
    )
    .await;
    if closed && let Some(obj) = facts.as_object_mut() {
        obj.insert(
            "unknown".into(),
            Value::String("inside a closed shadow root the gate cannot enter".into()),
        );
    }
    Ok((facts, node))
}

async fn follow(
    client: &mut Client,
    targets: &[Value],
    mut frame: FrameBox,
    point: (f64, f64),
) -> Result<(String, Value), CdpError> {
    // The frame's place in the tab, and the point in the frame's parent.
    let mut in_tab = Place::TAB;
    let mut at = point;
    let mut depth = 1;
    loop {
        let place = Place::of_box(&frame.content, &frame.border, frame.size)
            .ok_or_else(|| CdpError::Failed("the frame is rotated or skewed".into()))?;
        at = place
            .inside(at)
            .ok_or_else(|| CdpError::Failed("the point is on the frame's border".into()))?;
        in_tab = in_tab.then(place);
        let session = attach(client, targets, &frame.frame_id).await?;
        let (mut facts, hit) = read_at(client, &session, frame.frame_id.as_str(), at).await?;
        // A frame in this one: followed, up to the depth's bound (the
        // last one's `<iframe>` stays unknown).
        if facts["frame"].as_bool().unwrap_or(false) && depth < MAX_DEPTH {
            frame = frame_box_in(client, &session, hit).await?;
            depth += 1;
            continue;
        }
        if let Some(r) = facts["rect"].as_array().and_then(|r| {
            let v: Vec<f64> = r.iter().filter_map(Value::as_f64).collect();
            <[f64; 4]>::try_from(v).ok()
        }) {
            facts["rect"] = json!(in_tab.rect_out(r));
        }
        let host = facts["host"].as_str().unwrap_or_default().to_owned();
        return Ok((host, facts));
    }
}

/// What `hit_facts` reads at a point, in the frame of `session` (its own
/// viewport's point): the facts, with the accessibility tree's names, and
/// the node hit.
async fn read_at(
    client: &mut Client,
    session: &str,
    frame: &str,
    (x, y): (f64, f64),
) -> Result<(Value, i64), CdpError> {
    let s = Some(session);
    // The hit test takes a point of the frame's document: the point in its
    // viewport plus its scroll, read in the gate's world (the page cannot
    // redefine `scrollX` there).
    let scroll = frame_scroll(client, s, frame).await?;
    let hit = client
        .call(
            s,
            "DOM.getNodeForLocation",
            json!({
                "x": (x + scroll.0).floor(),
                "y": (y + scroll.1).floor(),
                "includeUserAgentShadowDOM": false,
                "ignorePointerEventsNone": false,
            }),
        )
        .await?;
    let (Some(node), Some(frame_id)) = (hit["backendNodeId"].as_i64(), hit["frameId"].as_str())
    else {
        return Err(CdpError::Failed("nothing at that point".into()));
    };
    // The world and the accessibility tree at once; then the node in the
    // world and its facts.
    let world = client
        .send(
            s,
            "Page.createIsolatedWorld",
            json!({ "frameId": frame_id, "worldName": super::facts::WORLD }),
        )
        .await?;
    let tree = ask_names(client, s, node).await?;
    let world = client.answer(world).await?;
    let object = async {
        let ctx = world["executionContextId"]
            .as_i64()
            .ok_or_else(|| CdpError::Failed("no isolated world in the frame".into()))?;
        let object = client
            .call(
                s,
                "DOM.resolveNode",
                json!({ "backendNodeId": node, "executionContextId": ctx }),
            )
            .await?;
        object["object"]["objectId"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| CdpError::Failed("the node at that point cannot be read".into()))
    }
    .await;
    let facts = with_names(
        client,
        s,
        object,
        (node, tree),
        "the node at that point cannot be read",
    )
    .await;
    let facts = if frame_id == frame {
        super::facts::moved_since(facts, scroll)
    } else {
        facts
    };
    Ok((facts, node))
}

/// An execution context of the gate's isolated world in `frame` (a frame
/// of the document of `s`).
async fn gate_world(client: &mut Client, s: Option<&str>, frame: &str) -> Result<i64, CdpError> {
    let world = client
        .call(
            s,
            "Page.createIsolatedWorld",
            json!({ "frameId": frame, "worldName": super::facts::WORLD }),
        )
        .await?;
    world["executionContextId"]
        .as_i64()
        .ok_or_else(|| CdpError::Failed("no isolated world in the frame".into()))
}

/// The scroll of the frame `frame` (the document of `s`), read in the
/// gate's isolated world.
async fn frame_scroll(
    client: &mut Client,
    s: Option<&str>,
    frame: &str,
) -> Result<(f64, f64), CdpError> {
    let ctx = gate_world(client, s, frame).await?;
    let res = client
        .call(
            s,
            "Runtime.evaluate",
            json!({
                "expression": "[window.scrollX, window.scrollY]",
                "contextId": ctx,
                "returnByValue": true,
            }),
        )
        .await?;
    let v = &res["result"]["value"];
    match (v[0].as_f64(), v[1].as_f64()) {
        (Some(x), Some(y)) => Ok((x, y)),
        _ => Err(CdpError::Failed("the frame's scroll cannot be read".into())),
    }
}

/// Asks the frame's accessibility tree around `node` (answered later, by
/// [`with_names`]).
async fn ask_names(client: &mut Client, s: Option<&str>, node: i64) -> Result<i64, CdpError> {
    client
        .send(
            s,
            "Accessibility.getPartialAXTree",
            json!({ "backendNodeId": node, "fetchRelatives": true }),
        )
        .await
}

/// The facts script's answer on `object` in the isolated world, merged
/// with the names of the tree [`ask_names`] asked for (`tree`, the
/// request's id, about `node`); `unknown` saying `unreadable` when the
/// object or the script failed.
async fn with_names(
    client: &mut Client,
    s: Option<&str>,
    object: Result<String, CdpError>,
    (node, tree): (i64, i64),
    unreadable: &str,
) -> Value {
    let facts = match object {
        Ok(object) => client
            .call(
                s,
                "Runtime.callFunctionOn",
                json!({
                    "objectId": object,
                    "functionDeclaration": super::facts::FACTS_FN,
                    "returnByValue": true,
                }),
            )
            .await
            .ok()
            .filter(|res| res.get("exceptionDetails").is_none())
            .map(|res| res["result"]["value"].clone())
            .filter(Value::is_object),
        Err(_) => None,
    };
    let facts = facts.unwrap_or_else(|| super::facts::unknown_at(unreadable));
    let nodes: Vec<AxNode> = client
        .answer(tree)
        .await
        .ok()
        .and_then(|mut t| serde_json::from_value(t["nodes"].take()).ok())
        .unwrap_or_default();
    let (role, ax) = super::facts::pick_names(&nodes, BackendNodeId::new(node));
    super::facts::merge(facts, role, ax)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rect(l: f64, t: f64, w: f64, h: f64) -> Vec<f64> {
        vec![l, t, l + w, t, l + w, t + h, l, t + h]
    }

    #[test]
    fn a_plain_frame_is_its_content_box_offset() {
        // border 5, padding 7 around 400×300, at (50, 60).
        let p = Place::of_box(
            &rect(62.0, 72.0, 400.0, 300.0),
            &rect(50.0, 60.0, 424.0, 324.0),
            (424.0, 324.0),
        )
        .unwrap();
        assert_eq!(p.inside((100.0, 100.0)), Some((38.0, 28.0)));
        // On the border or the padding: not inside the frame.
        assert_eq!(p.inside((55.0, 100.0)), None);
        assert_eq!(p.inside((462.0, 100.0)), None);
        assert_eq!(
            p.rect_out([0.0, 0.0, 300.0, 100.0]),
            [62.0, 72.0, 300.0, 100.0]
        );
    }

    #[test]
    fn a_scaled_or_zoomed_frame_maps_points_by_its_scale() {
        // `transform: scale(0.5)` from the top left.
        let p = Place::of_box(
            &rect(506.0, 66.0, 200.0, 150.0),
            &rect(500.0, 60.0, 212.0, 162.0),
            (424.0, 324.0),
        )
        .unwrap();
        assert_eq!(p.size, (400.0, 300.0));
        assert_eq!(p.inside((556.0, 116.0)), Some((100.0, 100.0)));
        // `zoom: 2` on an ancestor: laid out 200×100, drawn 400×200.
        let z = Place::of_box(
            &rect(0.0, 800.0, 400.0, 200.0),
            &rect(0.0, 800.0, 400.0, 200.0),
            (200.0, 100.0),
        )
        .unwrap();
        assert_eq!(z.inside((100.0, 900.0)), Some((50.0, 50.0)));
        // Nested: the inner frame's box in the outer frame's pixels.
        let both = p.then(z);
        assert_eq!(
            both.rect_out([50.0, 50.0, 10.0, 10.0]),
            [
                506.0 + 0.5 * 100.0,
                66.0 + 0.5 * (800.0 + 100.0),
                10.0,
                10.0
            ]
        );
    }

    #[test]
    fn a_rotated_skewed_or_flipped_frame_is_not_placed() {
        let ok = rect(0.0, 0.0, 100.0, 100.0);
        // Rotated 45°.
        let turned = vec![50.0, 0.0, 100.0, 50.0, 50.0, 100.0, 0.0, 50.0];
        assert_eq!(Place::of_box(&turned, &turned, (100.0, 100.0)), None);
        // Flipped horizontally.
        let flipped = vec![100.0, 0.0, 0.0, 0.0, 0.0, 100.0, 100.0, 100.0];
        assert_eq!(Place::of_box(&flipped, &flipped, (100.0, 100.0)), None);
        // No size, or a short quad.
        assert_eq!(Place::of_box(&ok, &ok, (0.0, 100.0)), None);
        assert_eq!(Place::of_box(&ok[..6], &ok, (100.0, 100.0)), None);
        assert!(Place::of_box(&ok, &ok, (100.0, 100.0)).is_some());
    }
}
