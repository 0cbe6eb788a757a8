//! What the row structs need to be read with `sqlx::query_as`: the
//! domain types stored as text decode themselves through `Any`, a 0/1
//! INTEGER reads as a `bool` (`Any` cannot decode SQLite's BOOLEAN), and a
//! read that fails says whether the database or the row was at fault.

use sqlx::any::{Any, AnyTypeInfo, AnyValueRef};
use sqlx::error::BoxDynError;
use sqlx::{Decode, Type};

/// Lets a type stored as its text name (`FromStr`) be a row struct's field,
/// `Option` included. An unknown name is a decode error naming its column
/// (a row written by a newer version, say), never a silent default.
macro_rules! stored_as_text {
    ($($t:ty),* $(,)?) => {$(
        impl Type<Any> for $t {
            fn type_info() -> AnyTypeInfo {
                <String as Type<Any>>::type_info()
            }

            fn compatible(ty: &AnyTypeInfo) -> bool {
                <String as Type<Any>>::compatible(ty)
            }
        }

        impl<'r> Decode<'r, Any> for $t {
            fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
                Ok(<String as Decode<'r, Any>>::decode(value)?.parse::<$t>()?)
            }
        }
    )*};
}

stored_as_text!(
    crate::domain::SessionState,
    crate::domain::CloseReason,
    crate::domain::EnrollmentId,
    crate::domain::GrantState,
    crate::domain::OperatorId,
    crate::domain::PasskeyId,
    crate::domain::SandboxId,
    crate::domain::TenantId,
    crate::crypto::KeyId,
    super::egress::Decision,
);

/// A 0/1 INTEGER column, for `#[sqlx(try_from = "Flag")]` on a `bool`.
pub(super) struct Flag(i64);

impl Type<Any> for Flag {
    fn type_info() -> AnyTypeInfo {
        <i64 as Type<Any>>::type_info()
    }

    fn compatible(ty: &AnyTypeInfo) -> bool {
        <i64 as Type<Any>>::compatible(ty)
    }
}

impl<'r> Decode<'r, Any> for Flag {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        Ok(Self(<i64 as Decode<'r, Any>>::decode(value)?))
    }
}

impl From<Flag> for bool {
    fn from(f: Flag) -> Self {
        f.0 != 0
    }
}

/// The operator's role, stored as its name (`Role` is the app crate's).
pub(super) struct StoredRole(app::api::auth::Role);

impl Type<Any> for StoredRole {
    fn type_info() -> AnyTypeInfo {
        <String as Type<Any>>::type_info()
    }

    fn compatible(ty: &AnyTypeInfo) -> bool {
        <String as Type<Any>>::compatible(ty)
    }
}

impl<'r> Decode<'r, Any> for StoredRole {
    fn decode(value: AnyValueRef<'r>) -> Result<Self, BoxDynError> {
        let name = <String as Decode<'r, Any>>::decode(value)?;
        Ok(Self(name.parse::<app::api::auth::Role>()?))
    }
}

impl From<StoredRole> for app::api::auth::Role {
    fn from(r: StoredRole) -> Self {
        r.0
    }
}

/// Context for a read through `query_as`, which fetches and decodes in one
/// step: a row that does not decode is `malformed` (naming the row), any
/// other error is the database's, under `failed`.
pub(super) trait ReadContext<T> {
    /// `failed` on a database error, `malformed` on a row that does not decode.
    fn read(self, failed: &'static str, malformed: &'static str) -> anyhow::Result<T>;
}

fn is_decode(e: &sqlx::Error) -> bool {
    matches!(
        e,
        sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::ColumnIndexOutOfBounds { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::TypeNotFound { .. }
    )
}

impl<T> ReadContext<T> for Result<T, sqlx::Error> {
    fn read(self, failed: &'static str, malformed: &'static str) -> anyhow::Result<T> {
        self.map_err(|e| {
            let what = if is_decode(&e) { malformed } else { failed };
            anyhow::Error::new(e).context(what)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{CloseReason, SessionState};
    use crate::store::Store;

    #[derive(Debug, sqlx::FromRow)]
    struct Probe {
        state: SessionState,
        reason: Option<CloseReason>,
        #[sqlx(try_from = "Flag")]
        flag: bool,
    }

    async fn store() -> Store {
        Store::connect(&secrecy::SecretString::from("sqlite::memory:".to_owned()))
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn stored_names_and_flags_decode_into_their_types() {
        let store = store().await;
        let p: Probe = sqlx::query_as("SELECT 'ready' AS state, NULL AS reason, 1 AS flag")
            .fetch_one(store.pool())
            .await
            .read("failed", "malformed probe row")
            .unwrap();
        assert_eq!(p.state, SessionState::Ready);
        assert_eq!(p.reason, None);
        assert!(p.flag);
        let p: Probe = sqlx::query_as("SELECT 'closed' AS state, 'orphaned' AS reason, 0 AS flag")
            .fetch_one(store.pool())
            .await
            .read("failed", "malformed probe row")
            .unwrap();
        assert_eq!(p.reason, Some(CloseReason::Orphaned));
        assert!(!p.flag);
    }

    #[tokio::test]
    async fn a_row_that_does_not_decode_is_named_and_a_database_error_is_not() {
        let store = store().await;
        let e = sqlx::query_as::<_, Probe>("SELECT 'sideways' AS state, NULL AS reason, 1 AS flag")
            .fetch_one(store.pool())
            .await
            .read("failed to probe", "malformed probe row")
            .unwrap_err();
        let text = format!("{e:#}");
        assert_eq!(e.to_string(), "malformed probe row");
        assert!(
            text.contains("state") && text.contains("sideways"),
            "{text}"
        );

        let e = sqlx::query_as::<_, Probe>("SELECT state FROM no_such_table")
            .fetch_one(store.pool())
            .await
            .read("failed to probe", "malformed probe row")
            .unwrap_err();
        assert_eq!(e.to_string(), "failed to probe");
    }
}
