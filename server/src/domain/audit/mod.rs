//! The append-only, hash-chained audit log.
//!
//! Every event's `hash` is `SHA-256(prev_hash || canonical bytes)`, where the
//! canonical bytes are the JSON object `{seq, ts, tenant, session, actor,
//! action, params, outcome}` in that order, with `params` as the stored string.
//! The first event's `prev_hash` is 32 zero bytes. `params` must already be
//! redacted (see [`crate::redact`]): the log is as permanent as it is tamper-evident.
//!
//! Its types and the chain's arithmetic are core (the store writes and
//! reads them); checking a stored chain is the engine's `audit::verify`.

mod query;

use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::domain::TenantId;

pub use query::{
    AuditCursor, AuditFilter, AuditFilterInput, AuditPage, AuditQueryError, MAX_ACTION_PREFIX_LEN,
    MAX_ACTOR_LEN, MAX_PAGE_SIZE, PageSize,
};

/// The `prev_hash` of the first event: 32 zero bytes, hex.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The surface an action came through, named as `"via"` in its audit
/// row's parameters, so an operator can tell an MCP client's click from a
/// CDP client's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Surface {
    /// The agent API (`/api/sessions/{id}/…`).
    Http,
    /// The MCP endpoint.
    Mcp,
    /// `run_task`'s runner.
    Task,
    /// An operator's live view (or the dashboard acting for them).
    Live,
    /// The CDP endpoint.
    Cdp,
    /// A live link's page: an agent's own user watching or driving.
    LiveLink,
}

impl Surface {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Mcp => "mcp",
            Self::Task => "task",
            Self::Live => "live",
            Self::Cdp => "cdp",
            Self::LiveLink => "live_link",
        }
    }
}

/// Who did something.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Actor {
    /// An agent, by API key id.
    Agent(String),
    /// An operator, by operator id.
    Operator(String),
    /// The `cordon` command line on the host.
    Cli,
    /// Cordon itself (reaper, garbage collection).
    System,
}

impl Actor {
    /// The stored form: `agent:<id>`, `operator:<id>`, `cli`, `system`.
    pub fn as_stored(&self) -> String {
        match self {
            Self::Agent(id) => format!("agent:{id}"),
            Self::Operator(id) => format!("operator:{id}"),
            Self::Cli => "cli".into(),
            Self::System => "system".into(),
        }
    }
}

/// An event to append. Built by the code about to perform the action.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The tenant concerned, if any.
    pub tenant: Option<TenantId>,
    /// The browser session concerned, if any.
    pub session: Option<String>,
    /// Who acts.
    pub actor: Actor,
    /// What, as `resource.verb` (`session.open`, `tool.navigate`).
    pub action: String,
    /// Redacted parameters.
    pub params: serde_json::Value,
    /// `requested` (written before the action), `ok`, `denied`, `failed: …`.
    pub outcome: String,
}

impl NewEvent {
    /// An event with no tenant, session or params and outcome `ok`.
    pub fn new(actor: Actor, action: impl Into<String>) -> Self {
        Self {
            tenant: None,
            session: None,
            actor,
            action: action.into(),
            params: serde_json::Value::Object(Default::default()),
            outcome: "ok".into(),
        }
    }

    /// Sets the tenant.
    pub fn tenant(mut self, tenant: &TenantId) -> Self {
        self.tenant = Some(tenant.clone());
        self
    }

    /// Sets the session.
    pub fn session(mut self, session: impl Into<String>) -> Self {
        self.session = Some(session.into());
        self
    }

    /// Sets the (already redacted) params.
    pub fn params(mut self, params: serde_json::Value) -> Self {
        self.params = params;
        self
    }

    /// Sets the outcome.
    pub fn outcome(mut self, outcome: impl Into<String>) -> Self {
        self.outcome = outcome.into();
        self
    }
}

/// A stored event (read from a row of `audit_events` by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow)]
pub struct Event {
    /// Position in the chain, from 1, without gaps.
    pub seq: i64,
    /// Unix milliseconds.
    pub ts: i64,
    /// Tenant id, if any.
    #[sqlx(rename = "tenant_id")]
    pub tenant: Option<String>,
    /// Session id, if any.
    #[sqlx(rename = "session_id")]
    pub session: Option<String>,
    /// Stored actor (`agent:…`, `operator:…`, `cli`, `system`).
    pub actor: String,
    /// `resource.verb`.
    pub action: String,
    /// Redacted params, canonical JSON text.
    pub params: String,
    /// Outcome.
    pub outcome: String,
    /// Hex SHA-256 of the previous event (or [`GENESIS_HASH`]).
    pub prev_hash: String,
    /// Hex SHA-256 of `prev_hash || canonical bytes`.
    pub hash: String,
}

#[derive(Serialize)]
struct Canonical<'a> {
    seq: i64,
    ts: i64,
    tenant: Option<&'a str>,
    session: Option<&'a str>,
    actor: &'a str,
    action: &'a str,
    params: &'a str,
    outcome: &'a str,
}

impl Event {
    /// The bytes the hash covers (besides `prev_hash`).
    pub fn canonical_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&Canonical {
            seq: self.seq,
            ts: self.ts,
            tenant: self.tenant.as_deref(),
            session: self.session.as_deref(),
            actor: &self.actor,
            action: &self.action,
            params: &self.params,
            outcome: &self.outcome,
        })
        .expect("serialising plain fields cannot fail")
    }

    /// Recomputes this event's hash from `prev_hash` and its fields.
    pub fn compute_hash(&self) -> String {
        chain_hash(&self.prev_hash, &self.canonical_bytes())
    }
}

/// `hex(SHA-256(bytes(prev_hash_hex) || canonical))`. A malformed stored
/// `prev_hash` hashes as given, so the mismatch shows up in verification.
pub fn chain_hash(prev_hash_hex: &str, canonical: &[u8]) -> String {
    let mut h = Sha256::new();
    match hex::decode(prev_hash_hex) {
        Ok(prev) => h.update(prev),
        Err(_) => h.update(prev_hash_hex.as_bytes()),
    }
    h.update(canonical);
    hex::encode(h.finalize())
}

/// Canonical JSON text for params: keys sorted, no whitespace.
pub fn canonical_params(params: &serde_json::Value) -> String {
    fn sort(v: &serde_json::Value) -> serde_json::Value {
        match v {
            serde_json::Value::Object(map) => {
                let sorted: std::collections::BTreeMap<_, _> =
                    map.iter().map(|(k, v)| (k.clone(), sort(v))).collect();
                serde_json::to_value(sorted).expect("map of values")
            }
            serde_json::Value::Array(items) => {
                serde_json::Value::Array(items.iter().map(sort).collect())
            }
            other => other.clone(),
        }
    }
    sort(params).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        let mut e = Event {
            seq: 1,
            ts: 1_700_000_000_000,
            tenant: Some("acme".into()),
            session: None,
            actor: "cli".into(),
            action: "tenant.create".into(),
            params: r#"{"name":"Acme"}"#.into(),
            outcome: "ok".into(),
            prev_hash: GENESIS_HASH.into(),
            hash: String::new(),
        };
        e.hash = e.compute_hash();
        e
    }

    #[test]
    fn the_hash_is_sha256_of_prev_and_canonical_bytes() {
        let e = event();
        let mut h = Sha256::new();
        h.update([0u8; 32]);
        h.update(br#"{"seq":1,"ts":1700000000000,"tenant":"acme","session":null,"actor":"cli","action":"tenant.create","params":"{\"name\":\"Acme\"}","outcome":"ok"}"#);
        assert_eq!(e.hash, hex::encode(h.finalize()));
    }

    #[test]
    fn every_field_is_covered_by_the_hash() {
        let base = event();
        let mutations: [fn(&mut Event); 9] = [
            |e| e.seq = 2,
            |e| e.ts += 1,
            |e| e.tenant = None,
            |e| e.session = Some("s".into()),
            |e| e.actor = "system".into(),
            |e| e.action = "tenant.delete".into(),
            |e| e.params = "{}".into(),
            |e| e.outcome = "denied".into(),
            |e| e.prev_hash = "11".repeat(32),
        ];
        for m in mutations {
            let mut e = base.clone();
            m(&mut e);
            assert_ne!(e.compute_hash(), base.hash);
        }
    }

    #[test]
    fn field_boundaries_cannot_be_shifted() {
        // Moving text between adjacent fields must change the hash.
        let mut a = event();
        a.actor = "ab".into();
        a.action = "c".into();
        let mut b = event();
        b.actor = "a".into();
        b.action = "bc".into();
        assert_ne!(a.compute_hash(), b.compute_hash());
    }

    #[test]
    fn canonical_params_sort_keys_recursively() {
        let v = serde_json::json!({"b": 1, "a": {"d": [{"z": 1, "y": 2}], "c": null}});
        assert_eq!(
            canonical_params(&v),
            r#"{"a":{"c":null,"d":[{"y":2,"z":1}]},"b":1}"#
        );
    }

    #[test]
    fn actors_have_stable_stored_forms() {
        assert_eq!(Actor::Agent("k1".into()).as_stored(), "agent:k1");
        assert_eq!(Actor::Operator("o1".into()).as_stored(), "operator:o1");
        assert_eq!(Actor::Cli.as_stored(), "cli");
        assert_eq!(Actor::System.as_stored(), "system");
    }
}
