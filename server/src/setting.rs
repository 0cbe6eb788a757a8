//! What every settings section shares: reading a TOML table or, from the
//! environment, a JSON object; a TOML list or a comma-separated string;
//! showing a secret as `***`. Each module declares its own section (its
//! settings, their defaults, their checks; `sessions::settings`,
//! `tasks::settings`, …) with these; `config` joins the sections into
//! `Settings` (ARCHITECTURE.md, "Settings with their owners").

use std::collections::BTreeMap;

use secrecy::SecretString;
use serde::Deserialize;

/// A TOML table keyed by name (tenant, domain), or, from the environment,
/// the same as a JSON object.
pub fn table_or_json<'de, D, K, V>(d: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: serde::de::DeserializeOwned + Ord,
    V: serde::de::DeserializeOwned,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either<K: Ord, V> {
        Table(BTreeMap<K, V>),
        Json(String),
    }
    match Either::<K, V>::deserialize(d)? {
        Either::Table(t) => Ok(t),
        Either::Json(s) => serde_json::from_str(&s).map_err(serde::de::Error::custom),
    }
}

/// Accepts a TOML list or a comma-separated string (for the environment).
pub fn string_or_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        List(Vec<String>),
        Text(String),
    }
    Ok(match Either::deserialize(d)? {
        Either::List(v) => v,
        Either::Text(s) => s
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

/// A secret setting serialised (`config show`, `Debug`) as `***`.
pub fn masked<S: serde::Serializer>(v: &Option<SecretString>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(_) => s.serialize_some("***"),
        None => s.serialize_none(),
    }
}
