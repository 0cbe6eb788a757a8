//! Which schema changes replicas of two releases can run across, for a
//! rolling upgrade: expand, then contract.
//!
//! A migration is **expand** when a binary that does not know it keeps
//! working on the migrated database: it adds tables, indexes, nullable
//! columns or columns with a default, and backfills. Anything else
//! (dropping, renaming, retyping, tightening a column, an SQLite table
//! rebuild) is **contract**, and its file says so in its name
//! (`0021_contract_drop_x.sql`); it ships one release after the release
//! that stopped using what it removes. [`lint`] holds every migration
//! from [`FIRST_ROLLING`] on to that rule (a unit test reads the files).
//!
//! During a rollout, replicas of release N and N+1 run on one database
//! when every migration between their schemas is expand ([`rolling`]);
//! the older binary then runs on a newer schema, and the newer one
//! migrates while the older still serves. Migrations before
//! [`FIRST_ROLLING`] were written before the rule and count as contract:
//! an upgrade across them still stops every replica first.

/// The first migration written under the expand-then-contract rule.
pub const FIRST_ROLLING: i64 = 16;

/// One migration, as the binary carries it or the database recorded it.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct Migration {
    /// Its number (the file's prefix).
    pub version: i64,
    /// The file's name after the number, words apart (`vault totp`).
    pub description: String,
}

impl Migration {
    /// Whether a binary that does not know this migration may not run on
    /// a database that has it (or the other way round).
    pub fn contracts(&self) -> bool {
        self.version < FIRST_ROLLING
            || self
                .description
                .split(|c: char| !c.is_ascii_alphanumeric())
                .any(|w| w.eq_ignore_ascii_case("contract"))
    }
}

/// `Ok` when replicas on both sides of `gap` (the migrations one binary
/// knows and the other does not) may run together; else the first
/// migration that forbids it.
pub fn rolling(gap: &[Migration]) -> Result<(), &Migration> {
    gap.iter().find(|m| m.contracts()).map_or(Ok(()), Err)
}

/// Whether a binary carrying `known` may start on a database that applied
/// `applied` while replicas run whose binaries know up to `running` (name,
/// newest migration). `Ok` with a note when it runs across a rolling
/// upgrade; `Err` names the migration that forbids it.
pub fn may_join(
    known: &[Migration],
    applied: &[Migration],
    running: &[(String, i64)],
) -> Result<Option<String>, String> {
    let mine = known.last().map_or(0, |m| m.version);
    let mut notes = Vec::new();
    let newer: Vec<Migration> = applied
        .iter()
        .filter(|m| m.version > mine)
        .cloned()
        .collect();
    if let Some(last) = newer.last() {
        if let Err(m) = rolling(&newer) {
            return Err(format!(
                "schema version: the database is at migration {}, this binary knows only {mine}, \
                 and migration {} ({}) is not expand-only (run the newer binary)",
                last.version, m.version, m.description
            ));
        }
        notes.push(format!(
            "the database is at migration {}, this binary knows up to {mine}: it runs on the \
             newer release's schema (expand-only) until it is upgraded too",
            last.version
        ));
    }
    for (name, theirs) in running {
        if *theirs == mine {
            continue;
        }
        let gap: Vec<Migration> = if *theirs < mine {
            known
                .iter()
                .filter(|m| m.version > *theirs)
                .cloned()
                .collect()
        } else {
            applied
                .iter()
                .filter(|m| m.version > mine && m.version <= *theirs)
                .cloned()
                .collect()
        };
        let refused = |why: String| {
            format!(
                "schema version: running replica {name:?} has schema {theirs} and this binary \
                 {mine}; {why}: stop every replica before this upgrade"
            )
        };
        if let Err(m) = rolling(&gap) {
            return Err(refused(format!(
                "migration {} ({}) is not expand-only",
                m.version, m.description
            )));
        }
        if gap.is_empty() {
            return Err(refused("the database does not hold its migrations".into()));
        }
        notes.push(format!(
            "rolling upgrade: replica {name:?} runs schema {theirs}, this one {mine} \
             (expand-only migrations between them)"
        ));
    }
    Ok((!notes.is_empty()).then(|| notes.join("; ")))
}

/// The statements of `sql` that a binary which does not know the
/// migration could not live with (empty: the migration is expand). Read
/// statement by statement, comments dropped; what is not known to be
/// safe is reported.
pub fn lint(sql: &str) -> Vec<String> {
    let text: String = sql
        .lines()
        .map(|l| l.split("--").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    text.split(';')
        .map(|s| s.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|s| !s.is_empty())
        .filter(|s| !expands(&s.to_ascii_uppercase()))
        .collect()
}

fn expands(s: &str) -> bool {
    const SAFE: &[&str] = &[
        "CREATE TABLE ",
        "CREATE INDEX ",
        "CREATE UNIQUE INDEX ",
        "CREATE VIEW ",
        "INSERT ",
        "UPDATE ",
    ];
    if SAFE.iter().any(|p| s.starts_with(p)) {
        // A rebuild's copy is safe; the DROP and RENAME that follow are not.
        return true;
    }
    // `ALTER TABLE t ADD [COLUMN] c …`: safe unless it is NOT NULL with
    // no default (an older binary's inserts would fail).
    let Some(rest) = s.strip_prefix("ALTER TABLE ") else {
        return false;
    };
    let mut words = rest.split(' ').skip(1);
    if words.next() != Some("ADD") {
        return false;
    }
    let column: Vec<&str> = words.collect();
    if column.first() == Some(&"CONSTRAINT") {
        return false;
    }
    let has = |w: &str| column.windows(2).any(|p| p.join(" ") == w);
    !has("NOT NULL") || column.contains(&"DEFAULT")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(version: i64, description: &str) -> Migration {
        Migration {
            version,
            description: description.to_owned(),
        }
    }

    #[test]
    fn a_gap_of_expand_migrations_rolls_and_a_contract_or_an_old_one_does_not() {
        assert_eq!(rolling(&[]), Ok(()));
        assert_eq!(
            rolling(&[m(16, "task notes"), m(17, "egress index")]),
            Ok(())
        );
        assert_eq!(
            rolling(&[m(16, "task notes"), m(17, "contract drop x")]),
            Err(&m(17, "contract drop x"))
        );
        assert!(m(18, "drop x contract").contracts());
        assert!(
            !m(18, "contractor names").contracts(),
            "a word, not a prefix"
        );
        assert_eq!(rolling(&[m(15, "vault totp")]), Err(&m(15, "vault totp")));
    }

    #[test]
    fn a_replica_joins_across_expand_migrations_only() {
        let n: Vec<Migration> = (1..=16).map(|v| m(v, &format!("step {v}"))).collect();
        let n1: Vec<Migration> = n.iter().cloned().chain([m(17, "notes")]).collect();
        let n1c: Vec<Migration> = n
            .iter()
            .cloned()
            .chain([m(17, "contract drop x")])
            .collect();
        let none: Vec<(String, i64)> = Vec::new();
        // Same schema, nothing running: no note.
        assert_eq!(may_join(&n, &n, &none), Ok(None));
        // An older binary on a newer, expand-only schema runs (with a note);
        // across a contract it is refused.
        assert!(may_join(&n, &n1, &none).unwrap().is_some());
        let err = may_join(&n, &n1c, &none).unwrap_err();
        assert!(
            err.contains("migration 17 (contract drop x) is not expand-only"),
            "{err}"
        );
        // The newer binary joins an older replica across expand only.
        let old = vec![("a".to_owned(), 16)];
        assert!(
            may_join(&n1, &n, &old)
                .unwrap()
                .unwrap()
                .contains("rolling upgrade")
        );
        assert!(
            may_join(&n1c, &n, &old)
                .unwrap_err()
                .contains("running replica \"a\"")
        );
        // The older binary restarts while a newer replica runs.
        let new = vec![("b".to_owned(), 17)];
        let both = may_join(&n, &n1, &new).unwrap().unwrap();
        assert!(
            both.contains("knows up to 16") && both.contains("replica \"b\""),
            "{both}"
        );
        assert!(may_join(&n, &n1c, &new).is_err());
        // A running replica's migrations missing from the database: refused.
        assert!(
            may_join(&n, &n, &new)
                .unwrap_err()
                .contains("does not hold")
        );
        // Across migrations older than the rule: refused, as before it.
        assert!(may_join(&n[..15], &n[..14], &[("a".to_owned(), 14)]).is_err());
        assert!(may_join(&n[..14], &n[..15], &none).is_err());
    }

    #[test]
    fn the_linter_passes_additions_and_names_what_would_break_an_older_binary() {
        let ok = "-- notes\nCREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL);\n\
                  CREATE INDEX notes_body ON notes(body);\n\
                  ALTER TABLE tasks ADD COLUMN note TEXT;\n\
                  ALTER TABLE tasks ADD COLUMN flag BIGINT NOT NULL DEFAULT 0 CHECK (flag IN (0, 1));\n\
                  UPDATE tasks SET flag = 1 WHERE note IS NOT NULL;";
        assert_eq!(lint(ok), Vec::<String>::new());
        let bad = "ALTER TABLE tasks ADD COLUMN must BIGINT NOT NULL;\n\
                   ALTER TABLE tasks DROP COLUMN note;\n\
                   ALTER TABLE tasks RENAME COLUMN a TO b;\n\
                   ALTER TABLE audit_events ALTER COLUMN action TYPE TEXT;\n\
                   ALTER TABLE tasks ADD CONSTRAINT c CHECK (x > 0);\n\
                   DROP TABLE notes;\n\
                   DELETE FROM tasks;";
        assert_eq!(lint(bad).len(), 7, "{:?}", lint(bad));
    }

    /// Every migration from [`FIRST_ROLLING`] on, on both backends, is
    /// expand unless its name says contract; and both backends hold the
    /// same migrations.
    #[test]
    fn every_migration_under_the_rule_is_expand_or_named_contract() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../migrations");
        let mut names: Vec<Vec<String>> = Vec::new();
        for backend in ["sqlite", "postgres"] {
            let mut files: Vec<String> = std::fs::read_dir(root.join(backend))
                .expect("the migrations folder")
                .map(|e| {
                    e.expect("an entry")
                        .file_name()
                        .to_string_lossy()
                        .into_owned()
                })
                .filter(|n| n.ends_with(".sql"))
                .collect();
            files.sort();
            for name in &files {
                let (version, rest) = name.split_once('_').expect("NNNN_name.sql");
                let migration = m(
                    version.parse().expect("a numbered migration"),
                    &rest.trim_end_matches(".sql").replace('_', " "),
                );
                if migration.version < FIRST_ROLLING || migration.contracts() {
                    continue;
                }
                let sql = std::fs::read_to_string(root.join(backend).join(name)).unwrap();
                let breaking = lint(&sql);
                assert!(
                    breaking.is_empty(),
                    "{backend}/{name} is not expand-only (name it `_contract_` and ship it a release \
                     after the code stopped using what it removes): {breaking:?}"
                );
            }
            names.push(files);
        }
        assert_eq!(
            names[0], names[1],
            "sqlite and postgres hold other migrations"
        );
    }
}
