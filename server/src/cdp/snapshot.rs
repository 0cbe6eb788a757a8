//! Accessibility snapshots (seeds/001): the page as a compact tree of
//! role / name / value with stable refs (`e1`, `e2`, …) that element tools
//! accept. Password values never leave the browser.

use std::collections::HashMap;

use chromiumoxide::Page;
use chromiumoxide::cdp::browser_protocol::accessibility::{AxNode, GetFullAxTreeParams};
use chromiumoxide::cdp::browser_protocol::dom::{BackendNodeId, DescribeNodeParams};
use serde::Serialize;

use super::CdpError;

/// One node of a snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct SnapNode {
    /// `e1`, `e2`, …: pass to click/type/hover/select as `ref`.
    #[serde(rename = "ref", skip_serializing_if = "Option::is_none")]
    pub r#ref: Option<String>,
    /// ARIA role.
    pub role: String,
    /// Accessible name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// Current value (never for password fields).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Children.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<SnapNode>,
}

/// A snapshot and what its refs point at.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// Top-level nodes.
    pub nodes: Vec<SnapNode>,
    /// Ref → DOM node.
    pub refs: HashMap<String, BackendNodeId>,
    /// Nodes were left out (depth or count limit).
    pub truncated: bool,
    /// Nodes included.
    pub count: usize,
}

/// Limits on a snapshot's size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest level kept (root = 1).
    pub max_depth: usize,
    /// Most nodes kept.
    pub max_nodes: usize,
}

/// Roles that carry no meaning of their own; their children are lifted.
const TRANSPARENT: &[&str] = &[
    "generic",
    "none",
    "presentation",
    "InlineTextBox",
    "LineBreak",
    "RootWebArea",
];

fn text(v: Option<&chromiumoxide::cdp::browser_protocol::accessibility::AxValue>) -> String {
    match v.and_then(|v| v.value.as_ref()) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Builds the compact tree from Chromium's full AX tree. `password_nodes`
/// are DOM nodes whose value must be withheld.
pub fn compact(nodes: &[AxNode], password_nodes: &[BackendNodeId], limits: Limits) -> Snapshot {
    let by_id: HashMap<&str, &AxNode> = nodes
        .iter()
        .map(|n| (n.node_id.inner().as_str(), n))
        .collect();
    let Some(root) = nodes.iter().find(|n| n.parent_id.is_none()) else {
        return Snapshot::default();
    };
    let mut snap = Snapshot::default();
    let mut walk = Walk {
        seen: std::collections::HashSet::new(),
        left: MAX_VISITS,
    };
    snap.nodes = build(
        root,
        &by_id,
        password_nodes,
        limits,
        (0, 0),
        &mut snap,
        &mut walk,
    );
    snap
}

/// The most nodes of the browser's tree visited for one snapshot, kept
/// or lifted through (a page of millions of empty `<div>`s, or a
/// renderer that answers a tree with cycles, ends here).
const MAX_VISITS: usize = 200_000;

/// The deepest the walk goes, lifted levels counted (its recursion's
/// bound: a chain of 100,000 nested `<div>`s would overflow the stack).
const MAX_WALK_DEPTH: usize = 256;

/// What the walk has done: the nodes visited (each once: a tree the
/// browser answers with a node under two parents, or under itself, is
/// walked as a tree), and how many visits are left.
struct Walk<'a> {
    seen: std::collections::HashSet<&'a str>,
    left: usize,
}

/// `depth`: (levels kept, levels walked).
fn build<'a>(
    node: &'a AxNode,
    by_id: &HashMap<&str, &'a AxNode>,
    passwords: &[BackendNodeId],
    limits: Limits,
    (depth, walked): (usize, usize),
    snap: &mut Snapshot,
    walk: &mut Walk<'a>,
) -> Vec<SnapNode> {
    if walked >= MAX_WALK_DEPTH || walk.left == 0 || !walk.seen.insert(node.node_id.inner()) {
        if walked >= MAX_WALK_DEPTH || walk.left == 0 {
            snap.truncated = true;
        }
        return Vec::new();
    }
    walk.left -= 1;
    let role = text(node.role.as_ref());
    let name = text(node.name.as_ref());
    let children_of = |snap: &mut Snapshot, walk: &mut Walk<'a>, depth: usize| -> Vec<SnapNode> {
        let mut out = Vec::new();
        for id in node.child_ids.iter().flatten() {
            if let Some(child) = by_id.get(id.inner().as_str()) {
                out.extend(build(
                    child,
                    by_id,
                    passwords,
                    limits,
                    (depth, walked + 1),
                    snap,
                    walk,
                ));
            }
        }
        out
    };
    let transparent = node.ignored
        || TRANSPARENT.contains(&role.as_str())
        || (role == "StaticText" && name.trim().is_empty());
    if transparent {
        return children_of(snap, walk, depth);
    }
    if depth >= limits.max_depth || snap.count >= limits.max_nodes {
        snap.truncated = true;
        return Vec::new();
    }
    snap.count += 1;
    let r#ref = node
        .backend_dom_node_id
        .filter(|_| role != "StaticText")
        .map(|id| {
            let r = format!("e{}", snap.refs.len() + 1);
            snap.refs.insert(r.clone(), id);
            r
        });
    let is_password = node
        .backend_dom_node_id
        .is_some_and(|id| passwords.contains(&id));
    let value = if is_password {
        None
    } else {
        Some(text(node.value.as_ref())).filter(|v| !v.is_empty())
    };
    let mut children = if role == "StaticText" {
        Vec::new()
    } else {
        children_of(snap, walk, depth + 1)
    };
    // A single text child repeating the name adds nothing.
    if children.len() == 1 && children[0].role == "StaticText" && children[0].name == name {
        children.clear();
    }
    vec![SnapNode {
        r#ref,
        role,
        name,
        value,
        children,
    }]
}

/// Takes a snapshot of `page`.
pub async fn take(page: &Page, limits: Limits) -> Result<Snapshot, CdpError> {
    let tree = page.execute(GetFullAxTreeParams::default()).await?;
    let nodes = &tree.result.nodes;
    // Password inputs: check the DOM type of every text field that has a value.
    let mut passwords = Vec::new();
    for n in nodes {
        let role = text(n.role.as_ref());
        if matches!(role.as_str(), "textbox" | "searchbox")
            && let Some(id) = n.backend_dom_node_id
        {
            let desc = page
                .execute(DescribeNodeParams::builder().backend_node_id(id).build())
                .await?;
            let attrs = desc.result.node.attributes.clone().unwrap_or_default();
            let is_password = attrs.chunks(2).any(|kv| {
                kv.len() == 2
                    && kv[0].eq_ignore_ascii_case("type")
                    && kv[1].eq_ignore_ascii_case("password")
            });
            if is_password {
                passwords.push(id);
            }
        }
    }
    Ok(compact(nodes, &passwords, limits))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chromiumoxide::cdp::browser_protocol::accessibility::{AxNodeId, AxValue, AxValueType};

    fn node(
        id: &str,
        parent: Option<&str>,
        children: &[&str],
        role: &str,
        name: &str,
        value: Option<&str>,
        dom: Option<i64>,
    ) -> AxNode {
        let v = |s: &str| {
            let mut v = AxValue::new(AxValueType::String);
            v.value = Some(serde_json::Value::String(s.into()));
            v
        };
        let mut n = AxNode::new(AxNodeId::new(id), false);
        n.parent_id = parent.map(AxNodeId::new);
        n.child_ids = Some(children.iter().map(|c| AxNodeId::new(*c)).collect());
        n.role = Some(v(role));
        n.name = Some(v(name));
        n.value = value.map(v);
        n.backend_dom_node_id = dom.map(BackendNodeId::new);
        n
    }

    fn page() -> Vec<AxNode> {
        vec![
            node("1", None, &["2"], "RootWebArea", "Login", None, Some(1)),
            node(
                "2",
                Some("1"),
                &["3", "4", "5", "7"],
                "generic",
                "",
                None,
                Some(2),
            ),
            node(
                "3",
                Some("2"),
                &[],
                "textbox",
                "User",
                Some("alice"),
                Some(3),
            ),
            node(
                "4",
                Some("2"),
                &[],
                "textbox",
                "Password",
                Some("hunter2"),
                Some(4),
            ),
            node("5", Some("2"), &["6"], "button", "Sign in", None, Some(5)),
            node("6", Some("5"), &[], "StaticText", "Sign in", None, Some(6)),
            node("7", Some("2"), &[], "link", "Help", None, Some(7)),
        ]
    }

    const WIDE: Limits = Limits {
        max_depth: 10,
        max_nodes: 100,
    };

    #[test]
    fn generic_wrappers_are_flattened_and_refs_are_numbered_in_order() {
        let snap = compact(&page(), &[], WIDE);
        let roles: Vec<_> = snap
            .nodes
            .iter()
            .map(|n| (n.r#ref.clone().unwrap(), n.role.clone()))
            .collect();
        assert_eq!(
            roles,
            vec![
                ("e1".into(), "textbox".into()),
                ("e2".into(), "textbox".into()),
                ("e3".into(), "button".into()),
                ("e4".into(), "link".into()),
            ]
        );
        assert_eq!(snap.refs["e3"], BackendNodeId::new(5));
        assert!(
            snap.nodes[2].children.is_empty(),
            "text repeating the name is dropped"
        );
        assert!(!snap.truncated);
    }

    #[test]
    fn password_values_are_never_included() {
        let snap = compact(&page(), &[BackendNodeId::new(4)], WIDE);
        assert_eq!(snap.nodes[0].value.as_deref(), Some("alice"));
        assert_eq!(snap.nodes[1].value, None);
        let json = serde_json::to_string(&snap.nodes).unwrap();
        assert!(!json.contains("hunter2"));
    }

    #[test]
    fn node_limits_truncate_and_say_so() {
        let snap = compact(
            &page(),
            &[],
            Limits {
                max_depth: 10,
                max_nodes: 2,
            },
        );
        assert_eq!(snap.count, 2);
        assert!(snap.truncated);
    }

    #[test]
    fn an_empty_tree_gives_an_empty_snapshot() {
        let snap = compact(&[], &[], WIDE);
        assert!(snap.nodes.is_empty() && snap.refs.is_empty());
    }

    /// A renderer that answers a tree with a cycle, a chain deeper than
    /// any stack, or a node under many parents (each listing the next
    /// twice: 2^N paths): the walk ends, within its bounds, and says the
    /// snapshot was cut.
    #[test]
    fn a_hostile_tree_is_walked_within_bounds() {
        let limits = Limits {
            max_depth: 1000,
            max_nodes: 1_000_000,
        };
        // A cycle: the root's child lists the root again.
        let cycle = vec![
            node("1", None, &["2"], "RootWebArea", "r", None, None),
            node("2", Some("1"), &["1", "2"], "button", "b", None, Some(2)),
        ];
        let snap = compact(&cycle, &[], limits);
        assert_eq!(snap.count, 1, "{:?}", snap.nodes);
        // A chain of 200,000 lifted levels.
        let n = 200_000;
        let mut chain = vec![node("0", None, &["1"], "RootWebArea", "r", None, None)];
        for i in 1..n {
            let (id, parent, child) = (i.to_string(), (i - 1).to_string(), (i + 1).to_string());
            chain.push(node(
                &id,
                Some(&parent),
                &[&child],
                "generic",
                "",
                None,
                None,
            ));
        }
        let snap = compact(&chain, &[], limits);
        assert!(snap.truncated);
        // A diamond: each level's two children are the same node.
        let mut diamond = vec![node("0", None, &["1", "1"], "RootWebArea", "r", None, None)];
        for i in 1..64 {
            let (id, parent, child) = (i.to_string(), (i - 1).to_string(), (i + 1).to_string());
            diamond.push(node(
                &id,
                Some(&parent),
                &[&child, &child],
                "generic",
                "",
                None,
                None,
            ));
        }
        diamond.push(node(
            "64",
            Some("63"),
            &[],
            "button",
            "Delete",
            None,
            Some(64),
        ));
        let t = std::time::Instant::now();
        let snap = compact(&diamond, &[], limits);
        assert!(
            t.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            t.elapsed()
        );
        assert_eq!(snap.count, 1, "the button once: {:?}", snap.nodes);
    }
}
