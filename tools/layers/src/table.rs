//! The layer table (`layers.toml`): which layer each module belongs to.
//!
//! The file is TOML, read here by hand to keep the tool free of
//! dependencies: a `[layers]` table of `"module::path" = "layer"` lines, an
//! `[external]` table of the same for other crates (`"axum" = "web"`), `#`
//! comments, nothing else. `"crate"` is the library's root (`lib.rs`).

use std::fmt;

use crate::paths::ModPath;

/// The layers, lowest first: a module may name its own layer or one below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Layer {
    Core,
    Infra,
    Engine,
    Web,
    Top,
}

impl Layer {
    fn parse(s: &str) -> Option<Layer> {
        Some(match s {
            "core" => Layer::Core,
            "infra" => Layer::Infra,
            "engine" => Layer::Engine,
            "web" => Layer::Web,
            "top" => Layer::Top,
            _ => return None,
        })
    }
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::Core => "core",
            Layer::Infra => "infra",
            Layer::Engine => "engine",
            Layer::Web => "web",
            Layer::Top => "top",
        })
    }
}

/// One `"prefix" = "layer"` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub prefix: ModPath,
    pub layer: Layer,
    pub line: usize,
}

#[derive(Debug, Default)]
pub struct Table {
    /// The crate's own modules.
    pub entries: Vec<Entry>,
    /// Other crates (or parts of them) that belong to a layer; a crate not
    /// listed is any layer's to use.
    pub external: Vec<Entry>,
}

impl Table {
    pub fn parse(text: &str) -> Result<Table, String> {
        let mut table = Table::default();
        let mut section: Option<bool> = None; // Some(true): [external]
        for (n, raw) in text.lines().enumerate() {
            let line = n + 1;
            let content = strip_comment(raw).trim();
            if content.is_empty() {
                continue;
            }
            match content {
                "[layers]" => {
                    section = Some(false);
                    continue;
                }
                "[external]" => {
                    section = Some(true);
                    continue;
                }
                _ => {}
            }
            let Some(external) = section else {
                return Err(format!("line {line}: expected `[layers]` before any entry"));
            };
            let entries = if external {
                &mut table.external
            } else {
                &mut table.entries
            };
            let (key, value) = content
                .split_once('=')
                .ok_or_else(|| format!("line {line}: expected `\"module::path\" = \"layer\"`"))?;
            let key = unquote(key.trim())
                .ok_or_else(|| format!("line {line}: the module path must be quoted"))?;
            let value = unquote(value.trim())
                .ok_or_else(|| format!("line {line}: the layer must be quoted"))?;
            let layer = Layer::parse(value).ok_or_else(|| {
                format!("line {line}: unknown layer `{value}` (core, infra, engine, web, top)")
            })?;
            let prefix: ModPath = if key == "crate" && !external {
                Vec::new()
            } else {
                key.split("::").map(str::to_string).collect()
            };
            if prefix
                .iter()
                .any(|s| s.is_empty() || !s.chars().all(|c| c == '_' || c.is_alphanumeric()))
            {
                return Err(format!("line {line}: `{key}` is not a module path"));
            }
            if let Some(earlier) = entries.iter().find(|e| e.prefix == prefix) {
                return Err(format!(
                    "line {line}: `{key}` is already listed on line {}",
                    earlier.line
                ));
            }
            entries.push(Entry {
                prefix,
                layer,
                line,
            });
        }
        Ok(table)
    }

    /// The entry for a path into another crate: the longest listed prefix.
    pub fn lookup_external(&self, path: &[String]) -> Option<&Entry> {
        self.external
            .iter()
            .filter(|e| path.starts_with(&e.prefix))
            .max_by_key(|e| e.prefix.len())
    }

    /// Whether a crate has any entry in `[external]`.
    pub fn lists_crate(&self, name: &str) -> bool {
        self.external.iter().any(|e| e.prefix[0] == name)
    }

    /// The entry for `module`: the longest listed prefix of it. The root
    /// (`"crate"`) only matches itself, so a new top-level module must be
    /// listed.
    pub fn lookup(&self, module: &ModPath) -> Option<&Entry> {
        self.entries
            .iter()
            .filter(|e| {
                module.starts_with(&e.prefix) && (!e.prefix.is_empty() || module.is_empty())
            })
            .max_by_key(|e| e.prefix.len())
    }
}

fn strip_comment(line: &str) -> &str {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

fn unquote(s: &str) -> Option<&str> {
    s.strip_prefix('"')?.strip_suffix('"')
}

/// How a module path is written in the table and in reports. A path into
/// another crate starts with an empty segment and shows as `::axum`.
pub fn display(module: &ModPath) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(s: &str) -> ModPath {
        s.split("::").map(str::to_string).collect()
    }

    #[test]
    fn the_longest_prefix_decides_and_the_root_matches_only_itself() {
        let t = Table::parse("# a comment\n[layers]\n\"crate\" = \"top\" # the root\n\"cluster\" = \"engine\"\n\"cluster::forward\" = \"web\"\n").unwrap();
        assert_eq!(t.lookup(&m("cluster::hop")).unwrap().layer, Layer::Engine);
        assert_eq!(
            t.lookup(&m("cluster::forward::tests")).unwrap().layer,
            Layer::Web
        );
        assert_eq!(t.lookup(&Vec::new()).unwrap().layer, Layer::Top);
        assert!(t.lookup(&m("unlisted")).is_none());
    }

    #[test]
    fn other_crates_are_looked_up_in_their_own_table() {
        let t = Table::parse("[layers]\n\"app\" = \"core\"\n[external]\n\"app\" = \"core\"\n\"app::error\" = \"web\"\n").unwrap();
        assert_eq!(
            t.lookup_external(&m("app::error::UiError")).unwrap().layer,
            Layer::Web
        );
        assert_eq!(
            t.lookup_external(&m("app::api::Operator")).unwrap().layer,
            Layer::Core
        );
        assert!(t.lookup_external(&m("tokio::spawn")).is_none());
        assert!(t.lists_crate("app") && !t.lists_crate("tokio"));
    }

    #[test]
    fn layers_are_ordered_from_core_up() {
        assert!(Layer::Core < Layer::Infra && Layer::Infra < Layer::Engine);
        assert!(Layer::Engine < Layer::Web && Layer::Web < Layer::Top);
    }

    #[test]
    fn mistakes_in_the_table_name_their_line() {
        assert_eq!(
            Table::parse("\"a\" = \"core\"").unwrap_err(),
            "line 1: expected `[layers]` before any entry"
        );
        assert_eq!(
            Table::parse("[layers]\n\"a\" = \"middle\"").unwrap_err(),
            "line 2: unknown layer `middle` (core, infra, engine, web, top)"
        );
        assert_eq!(
            Table::parse("[layers]\n\"a\" = \"core\"\n\"a\" = \"web\"").unwrap_err(),
            "line 3: `a` is already listed on line 2"
        );
        assert_eq!(
            Table::parse("[layers]\na = \"core\"").unwrap_err(),
            "line 2: the module path must be quoted"
        );
    }
}
