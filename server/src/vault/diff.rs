//! What replacing a credential's cookies changes, by cookie name: computed
//! in memory from decrypted cookies, it holds names only, never values.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::Cookie;

/// How a new cookie set differs from the stored one. Cookies are matched
/// on (name, domain, path), as browsers key them; each is shown by its name,
/// or as `name (domain path)` when two compared cookies share a name.
/// Lists are sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct CredentialDiff {
    /// Whether a stored credential was replaced (false: a first save).
    pub replaced: bool,
    /// Cookies that are new.
    pub added: Vec<String>,
    /// Stored cookies that are gone.
    pub removed: Vec<String>,
    /// Cookies kept with a new value or a new expiry.
    pub changed: Vec<String>,
    /// Of `changed`, those whose expiry changed.
    pub expiry_changed: Vec<String>,
}

/// The difference between `old` (the stored cookies, `None` if there were
/// none) and `new`.
pub fn diff(old: Option<&[Cookie]>, new: &[Cookie]) -> CredentialDiff {
    let index = |cookies: &'_ [Cookie]| -> BTreeMap<(String, String, String), usize> {
        cookies
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (n, d, p) = c.identity();
                ((n.to_owned(), d.to_owned(), p.to_owned()), i)
            })
            .collect()
    };
    let old_cookies = old.unwrap_or_default();
    let (before, after) = (index(old_cookies), index(new));
    // A name is ambiguous if two distinct identities carry it.
    let mut seen: BTreeMap<&str, BTreeSet<(&str, &str)>> = BTreeMap::new();
    for (n, d, p) in before.keys().chain(after.keys()) {
        seen.entry(n).or_default().insert((d, p));
    }
    let label = |(n, d, p): &(String, String, String)| {
        if seen.get(n.as_str()).is_some_and(|ids| ids.len() > 1) {
            format!("{n} ({d} {p})")
        } else {
            n.clone()
        }
    };
    let mut out = CredentialDiff {
        replaced: old.is_some(),
        ..CredentialDiff::default()
    };
    for (id, &i) in &after {
        match before.get(id) {
            None => out.added.push(label(id)),
            Some(&j) => {
                let (was, is) = (&old_cookies[j], &new[i]);
                let expiry = was.expires_ms() != is.expires_ms();
                if expiry || was.value != is.value {
                    out.changed.push(label(id));
                }
                if expiry {
                    out.expiry_changed.push(label(id));
                }
            }
        }
    }
    out.removed = before
        .keys()
        .filter(|id| !after.contains_key(*id))
        .map(label)
        .collect();
    for list in [
        &mut out.added,
        &mut out.removed,
        &mut out.changed,
        &mut out.expiry_changed,
    ] {
        list.sort();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const CANARY: &str = "canary-d1ff-value";

    fn c(name: &str, domain: &str, value: &str, expires: f64) -> Cookie {
        Cookie {
            name: name.into(),
            value: value.into(),
            domain: domain.into(),
            path: "/".into(),
            expires,
            http_only: true,
            secure: false,
            same_site: None,
            partition_key: None,
        }
    }

    #[test]
    fn a_first_save_adds_every_cookie() {
        let d = diff(
            None,
            &[
                c("sid", "a.com", CANARY, -1.0),
                c("pref", "a.com", "1", 5.0),
            ],
        );
        assert!(!d.replaced);
        assert_eq!(d.added, ["pref", "sid"]);
        assert!(d.removed.is_empty() && d.changed.is_empty() && d.expiry_changed.is_empty());
    }

    #[test]
    fn values_and_expiries_that_change_are_named_and_never_shown() {
        let old = [
            c("sid", "a.com", CANARY, -1.0),
            c("pref", "a.com", "1", 5.0),
            c("same", "a.com", "x", 7.0),
            c("gone", "a.com", "g", -1.0),
        ];
        let new = [
            c("sid", "a.com", "fresh", -1.0),
            c("pref", "a.com", "1", 9.0),
            c("same", "a.com", "x", 7.0),
            c("new", "a.com", "n", -1.0),
        ];
        let d = diff(Some(&old), &new);
        assert!(d.replaced);
        assert_eq!(d.added, ["new"]);
        assert_eq!(d.removed, ["gone"]);
        assert_eq!(d.changed, ["pref", "sid"]);
        assert_eq!(d.expiry_changed, ["pref"]);
        let shown = format!("{d:?} {}", serde_json::to_string(&d).unwrap());
        assert!(
            !shown.contains(CANARY) && !shown.contains("fresh"),
            "{shown}"
        );
    }

    #[test]
    fn a_name_on_two_domains_is_shown_with_its_domain_and_path() {
        let old = [c("sid", "a.com", "1", -1.0)];
        let new = [c("sid", "a.com", "1", -1.0), c("sid", ".a.com", "2", -1.0)];
        let d = diff(Some(&old), &new);
        assert_eq!(d.added, ["sid (.a.com /)"]);
        assert!(d.changed.is_empty() && d.removed.is_empty());
    }
}
