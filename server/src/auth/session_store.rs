//! tower-sessions records kept in Cordon's own database (both backends).
//! The row key is the SHA-256 of the session id, so a read of the
//! database does not yield a usable cookie; the operator id is kept in its
//! own column so disabling an operator can end their sessions at once.

use std::collections::HashMap;

use time::OffsetDateTime;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, SessionStore};

use crate::domain::OperatorId;
use crate::ids::token_hash;
use crate::store::Store;
use crate::time::now_ms;

/// The session key that holds the logged-in operator's id.
pub const OPERATOR_KEY: &str = "op";

/// [`SessionStore`] over [`Store`].
#[derive(Clone)]
pub struct DbSessionStore(pub Store);

impl std::fmt::Debug for DbSessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DbSessionStore")
    }
}

fn backend(e: anyhow::Error) -> session_store::Error {
    session_store::Error::Backend(format!("{e:#}"))
}

fn expiry_ms(record: &Record) -> i64 {
    i64::try_from(record.expiry_date.unix_timestamp_nanos() / 1_000_000).unwrap_or(i64::MAX)
}

#[async_trait::async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        // 128 random bits collide only in theory; check anyway.
        while self
            .0
            .dashboard_session_exists(&token_hash(&record.id.to_string()))
            .await
            .map_err(backend)?
        {
            record.id = Id::default();
        }
        self.save(record).await
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        let data = serde_json::to_string(&record.data)
            .map_err(|e| session_store::Error::Encode(e.to_string()))?;
        // The operator's id, as the login put it there.
        let operator = record
            .data
            .get(OPERATOR_KEY)
            .and_then(|v| v.as_str())
            .and_then(|id| id.parse::<OperatorId>().ok());
        self.0
            .dashboard_session_save(
                &token_hash(&record.id.to_string()),
                operator.as_ref(),
                &data,
                expiry_ms(record),
            )
            .await
            .map_err(backend)
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let Some((data, expires_at)) = self
            .0
            .dashboard_session_load(&token_hash(&id.to_string()), now_ms())
            .await
            .map_err(backend)?
        else {
            return Ok(None);
        };
        let data: HashMap<String, serde_json::Value> =
            serde_json::from_str(&data).map_err(|e| session_store::Error::Decode(e.to_string()))?;
        let expiry_date =
            OffsetDateTime::from_unix_timestamp_nanos(i128::from(expires_at) * 1_000_000)
                .map_err(|e| session_store::Error::Decode(e.to_string()))?;
        Ok(Some(Record {
            id: *id,
            data,
            expiry_date,
        }))
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        self.0
            .dashboard_session_delete(&token_hash(&id.to_string()))
            .await
            .map_err(backend)
    }
}
