//! The check: every path a file under `server/src` names, mapped to layers,
//! compared with the allowlist of upward edges that still exist.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use crate::lex::{Token, lex};
use crate::paths::{self, ModPath};
use crate::table::{Layer, Table, display};

/// Where the checked sources live, relative to the repository's root.
pub const SOURCES: &str = "server/src";
pub const TABLE: &str = "tools/layers/layers.toml";
pub const ALLOWLIST: &str = "tools/layers/allowlist.txt";

/// One path that runs up a layer, where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub file: String,
    pub line: usize,
    pub from: ModPath,
    pub from_layer: Layer,
    pub to: ModPath,
    pub to_layer: Layer,
}

impl Edge {
    /// The edge as the allowlist writes it: the file and both modules, no
    /// line (lines move with every edit; the edge does not).
    pub fn key(&self) -> String {
        format!(
            "{}: {} ({}) -> {} ({})",
            self.file,
            display(&self.from),
            self.from_layer,
            display(&self.to),
            self.to_layer
        )
    }

    pub fn located(&self) -> String {
        format!(
            "{}:{}: {} ({}) -> {} ({})",
            self.file,
            self.line,
            display(&self.from),
            self.from_layer,
            display(&self.to),
            self.to_layer
        )
    }
}

/// What the sources hold: every upward edge, and mistakes in the table.
#[derive(Debug, Default)]
pub struct Scan {
    pub files: usize,
    pub paths: usize,
    pub upward: Vec<Edge>,
    pub problems: Vec<String>,
}

/// The sources of one crate: (path relative to the repository, text).
pub fn read_sources(root: &Path) -> Result<Vec<(String, String)>, String> {
    let mut files = Vec::new();
    walk(&root.join(SOURCES), &mut files).map_err(|e| format!("cannot read {SOURCES}: {e}"))?;
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = fs::read_to_string(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let rel = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .replace('\\', "/");
            Ok((rel, text))
        })
        .collect()
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Maps every file to its module and every path it names to a layer.
/// `sources` are (path relative to the repository, text) under [`SOURCES`].
pub fn scan(sources: &[(String, String)], table: &Table) -> Scan {
    let prefix = format!("{SOURCES}/");
    let lexed: Vec<(&str, Vec<Token>)> = sources
        .iter()
        .map(|(f, text)| (f.as_str(), lex(text)))
        .collect();

    // Each file's module: from its path, unless a `#[path]` attribute put it elsewhere.
    let mut module_of_file: BTreeMap<&str, ModPath> = lexed
        .iter()
        .map(|(f, _)| (*f, paths::file_module(f.strip_prefix(&prefix).unwrap_or(f))))
        .collect();
    let mut placed = Vec::new();
    for (f, toks) in &lexed {
        let dir = f.rsplit_once('/').map_or("", |(d, _)| d);
        for (file, module) in paths::path_attributes(toks, &module_of_file[f]) {
            placed.push((format!("{dir}/{file}"), module));
        }
    }
    for (file, module) in placed {
        if let Some(m) = module_of_file.get_mut(file.as_str()) {
            *m = module;
        }
    }
    let mut modules: BTreeSet<ModPath> = module_of_file.values().cloned().collect();
    for (f, toks) in &lexed {
        modules.extend(paths::inline_modules(toks, &module_of_file[f]));
    }
    // A module's ancestors are modules too (`a/b.rs` with no `a.rs` never compiles, but be sure).
    for m in modules.clone() {
        for n in 0..m.len() {
            modules.insert(m[..n].to_vec());
        }
    }

    let mut out = Scan {
        files: lexed.len(),
        ..Scan::default()
    };
    let mut unplaced = BTreeSet::new();
    let mut layer_of = |module: &ModPath, file: &str| -> Option<Layer> {
        let found = table.lookup(module).map(|e| e.layer);
        if found.is_none() && unplaced.insert(module.clone()) {
            out.problems.push(format!(
                "{file}: module `{}` has no layer in {TABLE}",
                display(module)
            ));
        }
        found
    };
    // Every module needs a layer, whether or not it imports anything.
    for (f, m) in &module_of_file {
        layer_of(m, f);
    }
    let is_module = |p: &[String]| modules.contains(p);
    let is_external = |name: &str| table.lists_crate(name);
    let names = paths::Names {
        is_module: &is_module,
        is_external: &is_external,
    };
    let mut upward = Vec::new();
    let mut count = 0;
    for (f, toks) in &lexed {
        for r in paths::collect(toks, &module_of_file[f], &names) {
            count += 1;
            let (to, to_layer) = if r.external {
                // Another crate: only its listed parts have a layer.
                let Some(e) = table.lookup_external(&r.to) else {
                    continue;
                };
                (
                    std::iter::once(String::new())
                        .chain(e.prefix.iter().cloned())
                        .collect(),
                    Some(e.layer),
                )
            } else {
                let to = paths::module_of(&r.to, &modules);
                let layer = layer_of(&to, f);
                (to, layer)
            };
            let (Some(from_layer), Some(to_layer)) = (layer_of(&r.from, f), to_layer) else {
                continue;
            };
            if to_layer > from_layer {
                upward.push(Edge {
                    file: f.to_string(),
                    line: r.line,
                    from: r.from,
                    from_layer,
                    to,
                    to_layer,
                });
            }
        }
    }
    out.paths = count;
    out.upward = upward;
    for e in &table.entries {
        if !modules.iter().any(|m| m.starts_with(&e.prefix)) {
            out.problems.push(format!(
                "{TABLE}:{}: `{}` matches no module",
                e.line,
                display(&e.prefix)
            ));
        }
    }
    out
}

/// The allowlist: a `count: N` line and one edge key per line, `#` comments.
#[derive(Debug, Default)]
pub struct Allowlist {
    pub count: Option<usize>,
    pub edges: Vec<(String, usize)>,
}

impl Allowlist {
    pub fn parse(text: &str) -> Allowlist {
        let mut list = Allowlist::default();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if let Some(n) = line.strip_prefix("count:") {
                list.count = n.trim().parse().ok();
                continue;
            }
            list.edges.push((line.to_string(), n + 1));
        }
        list
    }

    /// The file's text for the edges that exist now (for `--print-allowlist`).
    pub fn render(upward: &[Edge]) -> String {
        let keys: BTreeSet<String> = upward.iter().map(Edge::key).collect();
        let mut out = String::from(HEADER);
        out.push_str(&format!("count: {}\n", keys.len()));
        for k in keys {
            out.push_str(&k);
            out.push('\n');
        }
        out
    }
}

const HEADER: &str = "\
# Upward imports that existed when the layer check came in (issue 21).
# This list only shrinks: remove an edge from the code, then its line here
# (the check fails on a line that no longer occurs), and lower the count.
# A new upward import is never added here; put the code in the right layer.
# One line per (file, importing module, imported module); see ARCHITECTURE.md, \"Layers\".
";

/// The verdict: problems to print (empty when the check passes).
pub fn compare(scan: &Scan, allow: &Allowlist) -> Vec<String> {
    let mut problems = scan.problems.clone();
    let allowed: BTreeMap<&str, usize> =
        allow.edges.iter().map(|(k, l)| (k.as_str(), *l)).collect();
    for e in &scan.upward {
        if !allowed.contains_key(e.key().as_str()) {
            problems.push(format!("{} (upward, not in the allowlist)", e.located()));
        }
    }
    let present: BTreeSet<String> = scan.upward.iter().map(Edge::key).collect();
    let mut seen = BTreeSet::new();
    for (k, line) in &allow.edges {
        if !seen.insert(k.as_str()) {
            problems.push(format!("{ALLOWLIST}:{line}: listed twice: {k}"));
        } else if !present.contains(k) {
            problems.push(format!(
                "{ALLOWLIST}:{line}: no longer occurs, remove it: {k}"
            ));
        }
    }
    match allow.count {
        Some(n) if n == allow.edges.len() => {}
        Some(n) => problems.push(format!(
            "{ALLOWLIST}: says `count: {n}` but lists {}",
            allow.edges.len()
        )),
        None => problems.push(format!("{ALLOWLIST}: no `count: N` line")),
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE_TEXT: &str = "[layers]\n\"crate\" = \"top\"\n\"time\" = \"core\"\n\"tasks\" = \"engine\"\n\"error\" = \"web\"\n";

    fn sources(files: &[(&str, &str)]) -> Vec<(String, String)> {
        files
            .iter()
            .map(|(f, t)| (format!("{SOURCES}/{f}"), t.to_string()))
            .collect()
    }

    fn crate_with(tasks: &str) -> Vec<(String, String)> {
        sources(&[
            ("lib.rs", "pub mod error;\npub mod tasks;\npub mod time;"),
            ("time.rs", "pub fn now() {}"),
            ("error.rs", "use crate::tasks::Task;\npub struct ApiError;"),
            ("tasks/mod.rs", tasks),
        ])
    }

    #[test]
    fn a_clean_crate_passes_with_an_empty_allowlist() {
        let scan = scan(
            &crate_with("use crate::time::now;"),
            &Table::parse(TABLE_TEXT).unwrap(),
        );
        assert!(scan.upward.is_empty());
        assert!(compare(&scan, &Allowlist::parse("count: 0")).is_empty());
    }

    #[test]
    fn an_upward_import_fails_naming_file_and_line_until_it_is_allowed() {
        let scan = scan(
            &crate_with(
                "use crate::time::now;\nfn f() -> Result<(), crate::error::ApiError> { todo!() }",
            ),
            &Table::parse(TABLE_TEXT).unwrap(),
        );
        assert_eq!(
            compare(&scan, &Allowlist::parse("count: 0")),
            [
                "server/src/tasks/mod.rs:2: tasks (engine) -> error (web) (upward, not in the allowlist)"
            ]
        );
        let allow =
            Allowlist::parse("count: 1\nserver/src/tasks/mod.rs: tasks (engine) -> error (web)\n");
        assert!(compare(&scan, &allow).is_empty());
        assert_eq!(
            Allowlist::render(&scan.upward).lines().last(),
            Some("server/src/tasks/mod.rs: tasks (engine) -> error (web)")
        );
    }

    #[test]
    fn an_allowed_edge_that_no_longer_occurs_fails() {
        let scan = scan(&crate_with(""), &Table::parse(TABLE_TEXT).unwrap());
        let allow =
            Allowlist::parse("count: 1\nserver/src/tasks/mod.rs: tasks (engine) -> error (web)\n");
        assert_eq!(
            compare(&scan, &allow),
            [
                "tools/layers/allowlist.txt:2: no longer occurs, remove it: server/src/tasks/mod.rs: tasks (engine) -> error (web)"
            ]
        );
    }

    #[test]
    fn a_wrong_count_fails() {
        let scan = scan(&crate_with(""), &Table::parse(TABLE_TEXT).unwrap());
        assert_eq!(
            compare(&scan, &Allowlist::parse("count: 2")),
            ["tools/layers/allowlist.txt: says `count: 2` but lists 0"]
        );
    }

    #[test]
    fn a_module_without_a_layer_and_a_table_entry_without_a_module_fail() {
        let mut files = crate_with("");
        files.push((format!("{SOURCES}/extra.rs"), String::new()));
        let table = Table::parse(&format!("{TABLE_TEXT}\"gone\" = \"infra\"\n")).unwrap();
        let scan = scan(&files, &table);
        assert_eq!(
            scan.problems,
            [
                "server/src/extra.rs: module `extra` has no layer in tools/layers/layers.toml",
                "tools/layers/layers.toml:6: `gone` matches no module",
            ]
        );
    }

    #[test]
    fn super_from_a_path_attribute_file_is_the_declaring_module() {
        let files = sources(&[
            ("lib.rs", "pub mod tasks;"),
            ("tasks/mod.rs", "pub mod run;"),
            (
                "tasks/run.rs",
                "#[cfg(test)]\n#[path = \"run_tests.rs\"]\nmod tests;",
            ),
            (
                "tasks/run_tests.rs",
                "use super::Thing;\nuse super::super::super::error::E;",
            ),
            ("error.rs", ""),
        ]);
        let scan = scan(
            &files,
            &Table::parse(
                "[layers]\n\"crate\" = \"top\"\n\"tasks\" = \"engine\"\n\"error\" = \"web\"\n",
            )
            .unwrap(),
        );
        let found: Vec<String> = scan.upward.iter().map(Edge::located).collect();
        assert_eq!(
            found,
            ["server/src/tasks/run_tests.rs:2: tasks::run::tests (engine) -> error (web)"]
        );
    }
}
