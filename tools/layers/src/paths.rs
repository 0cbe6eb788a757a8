//! The module paths a file names: `use` trees, paths written inline
//! (`crate::auth::ui_error(…)`, `super::Thing`, `child::f()`), and paths in
//! string attributes (`#[serde(default = "crate::policy::…")]`), each
//! resolved to an absolute path from the crate root.

use std::collections::BTreeSet;

use crate::lex::{Tok, Token};

/// A module path from the crate root; empty is the root itself.
pub type ModPath = Vec<String>;

/// One path a file names, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    /// The module the path is written in (inline `mod tests { … }` included).
    pub from: ModPath,
    /// The path it names, from the crate root (may end in an item's name),
    /// or from another crate's root when `external`.
    pub to: Vec<String>,
    /// `to` is in another crate (one the table lists: `axum::…`, `app::error::…`).
    pub external: bool,
    pub line: usize,
}

/// The inline modules (`mod name { … }`) a file declares, as absolute paths.
pub fn inline_modules(toks: &[Token], file_module: &ModPath) -> Vec<ModPath> {
    let mut found = Vec::new();
    walk_modules(toks, file_module, |_, current, _| {
        if !found.contains(current) && current != file_module {
            found.push(current.clone());
        }
    });
    found
}

/// The files a file places elsewhere with `#[path = "…"] mod name;`:
/// (the path as written, the module it becomes).
pub fn path_attributes(toks: &[Token], file_module: &ModPath) -> Vec<(String, ModPath)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 5 < toks.len() {
        if let (
            Tok::Punct('#'),
            Tok::Punct('['),
            Tok::Ident(p),
            Tok::Punct('='),
            Tok::Str(file),
            Tok::Punct(']'),
        ) = (
            &toks[i].tok,
            &toks[i + 1].tok,
            &toks[i + 2].tok,
            &toks[i + 3].tok,
            &toks[i + 4].tok,
            &toks[i + 5].tok,
        ) && p == "path"
        {
            // The `mod name;` it belongs to follows, after other attributes.
            let mut j = i + 6;
            while j + 2 < toks.len() {
                match (&toks[j].tok, &toks[j + 1].tok, &toks[j + 2].tok) {
                    (Tok::Ident(m), Tok::Ident(name), Tok::Punct(';')) if m == "mod" => {
                        let mut module = file_module.clone();
                        module.push(name.clone());
                        out.push((file.clone(), module));
                        break;
                    }
                    (Tok::Punct(';' | '{'), _, _) => break,
                    _ => j += 1,
                }
            }
        }
        i += 1;
    }
    out
}

/// What the crate is: which absolute paths are its modules (to tell
/// `child::f()` from `std::f()`), and which other crates the table lists.
pub struct Names<'a> {
    pub is_module: &'a dyn Fn(&[String]) -> bool,
    pub is_external: &'a dyn Fn(&str) -> bool,
}

/// Every module path the file names.
pub fn collect(toks: &[Token], file_module: &ModPath, names: &Names) -> Vec<Ref> {
    let mut refs = Vec::new();
    let mut skip_until = 0;
    walk_modules(toks, file_module, |i, current, _| {
        if i < skip_until {
            return;
        }
        let prev = i.checked_sub(1).map(|p| &toks[p].tok);
        let after_sep_or_dot = matches!(prev, Some(Tok::PathSep | Tok::Punct('.')));
        match &toks[i].tok {
            Tok::Ident(kw) if kw == "use" && !after_sep_or_dot => {
                let mut j = i + 1;
                let mut leaves = Vec::new();
                use_tree(toks, &mut j, &mut Vec::new(), &mut leaves);
                for (segments, line) in leaves {
                    if let Some((to, external)) = resolve(&segments, current, names) {
                        refs.push(Ref {
                            from: current.clone(),
                            to,
                            external,
                            line,
                        });
                    }
                }
                skip_until = j;
            }
            Tok::Ident(first)
                if !after_sep_or_dot
                    && matches!(toks.get(i + 1).map(|t| &t.tok), Some(Tok::PathSep)) =>
            {
                let mut segments = vec![first.clone()];
                let mut j = i + 1;
                while let (Some(Tok::PathSep), Some(Tok::Ident(s))) =
                    (toks.get(j).map(|t| &t.tok), toks.get(j + 1).map(|t| &t.tok))
                {
                    segments.push(s.clone());
                    j += 2;
                }
                if let Some((to, external)) = resolve(&segments, current, names) {
                    refs.push(Ref {
                        from: current.clone(),
                        to,
                        external,
                        line: toks[i].line,
                    });
                }
                skip_until = j;
            }
            Tok::Str(text) => {
                let segments: Vec<String> = text.split("::").map(str::to_string).collect();
                let is_path = segments.len() > 1
                    && segments.iter().all(|s| {
                        !s.is_empty() && s.chars().all(|c| c == '_' || c.is_alphanumeric())
                    });
                if is_path
                    && matches!(segments[0].as_str(), "crate" | "super" | "self")
                    && let Some((to, external)) = resolve(&segments, current, names)
                {
                    refs.push(Ref {
                        from: current.clone(),
                        to,
                        external,
                        line: toks[i].line,
                    });
                }
            }
            _ => {}
        }
    });
    refs
}

fn child(module: &ModPath, name: &str) -> ModPath {
    let mut m = module.clone();
    m.push(name.to_string());
    m
}

/// A relative path (as written) made absolute, and whether it is in a
/// listed crate; `None` when it names something else (`std::…`, an unlisted
/// crate, a local item). `cordon::…` is the binary's name for the library.
fn resolve(segments: &[String], current: &ModPath, names: &Names) -> Option<(Vec<String>, bool)> {
    let (first, rest) = segments.split_first()?;
    let external = |path: &[String]| (names.is_external)(&path[0]).then(|| (path.to_vec(), true));
    let mut base = match first.as_str() {
        "crate" | "cordon" => Vec::new(),
        "self" => current.clone(),
        "super" => parent(current),
        "::" => return rest.first().and_then(|_| external(rest)),
        name if (names.is_module)(&child(current, name)) => child(current, name),
        _ => return external(segments),
    };
    let mut rest = rest.iter().peekable();
    while rest.peek().is_some_and(|s| *s == "super") {
        rest.next();
        base = parent(&base);
    }
    base.extend(rest.cloned());
    Some((base, false))
}

fn parent(module: &ModPath) -> ModPath {
    module[..module.len().saturating_sub(1)].to_vec()
}

/// Parses one use tree from `toks[*i]`, pushing each leaf as (the segments
/// from the statement's start, the line of its last segment); leaves `*i`
/// after the tree. `use a::{b, c::*, d as e, self};` gives `a::b`, `a::c`,
/// `a::d` and `a`.
fn use_tree(
    toks: &[Token],
    i: &mut usize,
    prefix: &mut Vec<String>,
    leaves: &mut Vec<(Vec<String>, usize)>,
) {
    let depth = prefix.len();
    let mut leaf_line = None;
    if matches!(toks.get(*i).map(|t| &t.tok), Some(Tok::PathSep)) {
        *i += 1; // `use ::std::…`: an extern crate, never ours.
        prefix.push("::".to_string());
    }
    loop {
        match toks.get(*i).map(|t| &t.tok) {
            // `a::{self}` names `a` itself; a leading `self::` is the current module.
            Some(Tok::Ident(s)) if s == "self" && !prefix.is_empty() => {
                leaf_line = Some(toks[*i].line)
            }
            Some(Tok::Ident(s)) => {
                prefix.push(s.clone());
                leaf_line = Some(toks[*i].line);
            }
            // A glob names the module it reads.
            Some(Tok::Punct('*')) => leaf_line = Some(toks[*i].line),
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    match toks.get(*i).map(|t| &t.tok) {
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            break;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        None => break,
                        _ => {
                            let before = *i;
                            use_tree(toks, i, prefix, leaves);
                            if *i == before {
                                *i += 1; // not a tree: skip the token
                            }
                        }
                    }
                }
                prefix.truncate(depth);
                return;
            }
            _ => break,
        }
        *i += 1;
        if matches!(toks.get(*i).map(|t| &t.tok), Some(Tok::PathSep)) {
            *i += 1;
            continue;
        }
        break;
    }
    // `as name` renames the leaf; the path stays what it names.
    if matches!(toks.get(*i).map(|t| &t.tok), Some(Tok::Ident(s)) if s == "as") {
        *i += 2;
    }
    if let Some(line) = leaf_line {
        leaves.push((prefix.clone(), line));
    }
    prefix.truncate(depth);
}

/// Walks the tokens calling `visit(index, current module, brace depth)`,
/// tracking inline `mod name { … }` blocks.
fn walk_modules(
    toks: &[Token],
    file_module: &ModPath,
    mut visit: impl FnMut(usize, &ModPath, usize),
) {
    let mut current = file_module.clone();
    // (brace depth inside the block, for each open inline module)
    let mut open: Vec<usize> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if open.last() == Some(&depth) {
                    open.pop();
                    current.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(m) if m == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Punct('{'))) = (
                    toks.get(i + 1).map(|t| &t.tok),
                    toks.get(i + 2).map(|t| &t.tok),
                ) {
                    current.push(name.clone());
                    depth += 1;
                    open.push(depth);
                    visit(i, &current, depth);
                    i += 3;
                    continue;
                }
            }
            _ => {}
        }
        visit(i, &current, depth);
        i += 1;
    }
}

/// The module that owns a file under `src/`: `a/b.rs` and `a/b/mod.rs` are
/// `a::b`; `lib.rs` is the root; `main.rs` is the binary, `main`.
pub fn file_module(rel: &str) -> ModPath {
    let rel = rel.strip_suffix(".rs").unwrap_or(rel);
    let mut parts: Vec<String> = rel.split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts == ["lib"] {
        parts.clear();
    }
    parts
}

/// The longest prefix of `path` that is a module (the root if none).
pub fn module_of(path: &[String], modules: &BTreeSet<ModPath>) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| p.is_empty() || modules.contains(p))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lex::lex;

    fn m(s: &str) -> ModPath {
        if s.is_empty() {
            Vec::new()
        } else {
            s.split("::").map(str::to_string).collect()
        }
    }

    /// The modules of a small crate: a, a::b, a::b::c, d, sandbox, sandbox::kube.
    fn is_module(p: &[String]) -> bool {
        ["a", "a::b", "a::b::c", "d", "sandbox", "sandbox::kube"].contains(&p.join("::").as_str())
    }

    fn is_external(name: &str) -> bool {
        name == "axum"
    }

    fn refs(src: &str, module: &str) -> Vec<(String, String, usize)> {
        collect(
            &lex(src),
            &m(module),
            &Names {
                is_module: &is_module,
                is_external: &is_external,
            },
        )
        .into_iter()
        .map(|r| {
            (
                r.from.join("::"),
                if r.external {
                    format!("::{}", r.to.join("::"))
                } else {
                    r.to.join("::")
                },
                r.line,
            )
        })
        .collect()
    }

    fn to(src: &str, module: &str) -> Vec<String> {
        refs(src, module).into_iter().map(|(_, t, _)| t).collect()
    }

    #[test]
    fn use_trees_expand_to_one_path_per_leaf() {
        let src = "use crate::{a::{self, b::c as cc, b::*}, d::X};\nuse std::{a::b, d};";
        assert_eq!(to(src, "a::b"), ["a", "a::b::c", "a::b", "d::X"]);
    }

    #[test]
    fn super_and_self_resolve_to_their_module() {
        let src = "use super::super::d::Y;\nuse super::*;\nuse self::c::Z;\nfn f() { super::g(); self::c::h(); }";
        assert_eq!(
            to(src, "a::b"),
            ["d::Y", "a", "a::b::c::Z", "a::g", "a::b::c::h"]
        );
    }

    #[test]
    fn inline_paths_are_found_and_external_ones_ignored() {
        let src = "fn f() -> crate::d::E { let x = crate::a::b::ui_error(1); std::a::b(); x.a::b(); Foo::a() }";
        assert_eq!(to(src, "d"), ["d::E", "a::b::ui_error"]);
    }

    #[test]
    fn child_modules_named_without_a_prefix_resolve_but_extern_crates_do_not() {
        // In `sandbox`, `kube::` is the child module; in `sandbox::kube`, the kube crate.
        assert_eq!(
            to("use kube::KubeDriver; fn f() { kube::new(); }", "sandbox"),
            ["sandbox::kube::KubeDriver", "sandbox::kube::new"]
        );
        assert!(
            to(
                "use kube::Api; fn f() { kube::Api::all(); }",
                "sandbox::kube"
            )
            .is_empty()
        );
    }

    #[test]
    fn listed_crates_are_found_in_use_trees_and_inline() {
        let src = "use axum::{extract::State, Json};\nuse ::axum::body;\nuse tokio::x;\nfn f() -> axum::response::Response { tokio::spawn(axum::g()) }";
        assert_eq!(
            to(src, "a"),
            [
                "::axum::extract::State",
                "::axum::Json",
                "::axum::body",
                "::axum::response::Response",
                "::axum::g"
            ]
        );
    }

    #[test]
    fn inline_modules_are_their_own_module_for_super() {
        let src = "use crate::d;\n#[cfg(test)]\nmod tests {\n    use super::*;\n    use super::super::d::Z;\n}\nfn after() { super::q(); }";
        assert_eq!(
            refs(src, "a::b"),
            [
                ("a::b".into(), "d".into(), 1),
                ("a::b::tests".into(), "a::b".into(), 4),
                ("a::b::tests".into(), "a::d::Z".into(), 5),
                ("a::b".into(), "a::q".into(), 7),
            ]
        );
    }

    #[test]
    fn a_multiline_use_reports_each_leaf_on_its_own_line() {
        let src = "use crate::{\n    a::X,\n    d::{\n        Y,\n    },\n};";
        assert_eq!(
            refs(src, "")
                .into_iter()
                .map(|(_, t, l)| (t, l))
                .collect::<Vec<_>>(),
            [("a::X".into(), 2), ("d::Y".into(), 4)]
        );
    }

    #[test]
    fn paths_in_attribute_strings_count_and_prose_does_not() {
        let src =
            "#[serde(default = \"crate::d::defaults::n\")]\nconst S: &str = \"crate:: is a word\";";
        assert_eq!(to(src, "a"), ["d::defaults::n"]);
    }

    #[test]
    fn the_binary_names_the_library_cordon_and_macros_name_it_dollar_crate() {
        assert_eq!(to("fn main() { cordon::a::run(); }", "main"), ["a::run"]);
        assert_eq!(
            to("macro_rules! m { () => { $crate::d::f() } }", "a"),
            ["d::f"]
        );
    }

    #[test]
    fn path_attributes_place_their_file_under_the_declaring_module() {
        let src = "#[cfg(test)]\n#[path = \"policy_tests.rs\"]\nmod tests;";
        assert_eq!(
            path_attributes(&lex(src), &m("egress::policy")),
            [("policy_tests.rs".to_string(), m("egress::policy::tests"))]
        );
    }

    #[test]
    fn files_map_to_modules() {
        assert_eq!(file_module("a/b.rs"), m("a::b"));
        assert_eq!(file_module("a/mod.rs"), m("a"));
        assert_eq!(file_module("lib.rs"), m(""));
        assert_eq!(file_module("main.rs"), m("main"));
    }

    #[test]
    fn a_path_belongs_to_its_longest_module_prefix() {
        let modules: BTreeSet<ModPath> = [m("a"), m("a::b")].into_iter().collect();
        assert_eq!(module_of(&m("a::b::Thing"), &modules), m("a::b"));
        assert_eq!(module_of(&m("a::thing"), &modules), m("a"));
        assert_eq!(module_of(&m("nowhere"), &modules), m(""));
    }
}
