//! Operators, passkeys, enrollment links and dashboard sessions (both
//! backends). Enrollment secrets and session ids are stored only as their
//! SHA-256; passkeys hold public keys only.

use anyhow::Context;
use app::api::auth::Role;
use sqlx::Row;

use super::Store;
use super::column::{ReadContext, StoredRole};
use crate::domain::{EnrollmentId, OperatorId, PasskeyId};

/// An operator as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct OperatorRow {
    /// `op_…`.
    pub id: OperatorId,
    /// Login name, unique.
    pub name: String,
    /// Role.
    #[sqlx(try_from = "StoredRole")]
    pub role: Role,
    /// WebAuthn user handle (a UUID).
    pub user_handle: String,
    /// Unix ms.
    pub created_at: i64,
    /// Who created it (`cli`, `system`, `operator:op_…`).
    pub created_by: String,
    /// Unix ms, if disabled.
    pub disabled_at: Option<i64>,
    /// Unix ms.
    pub last_login_at: Option<i64>,
    /// Passkeys registered.
    pub passkeys: i64,
}

/// A passkey as stored.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PasskeyRow {
    /// `pk_…`.
    pub id: PasskeyId,
    /// Whose.
    pub operator_id: OperatorId,
    /// base64url credential id.
    pub cred_id: String,
    /// The operator's name for it.
    pub name: String,
    /// webauthn-rs `Passkey`, JSON.
    pub passkey: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms.
    pub last_used_at: Option<i64>,
}

/// An enrollment link as stored (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct EnrollmentRow {
    /// `en_…`.
    pub id: EnrollmentId,
    /// The operator it enrolls.
    pub operator_id: OperatorId,
    /// Unix ms.
    pub expires_at: i64,
    /// Unix ms, once used.
    pub used_at: Option<i64>,
}

/// Why an operator could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateOperatorError {
    /// The name is taken.
    #[error("an operator named {0:?} already exists")]
    Exists(String),
    /// Anything else.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

const OP_COLUMNS: &str = "o.id, o.name, o.role, o.user_handle, o.created_at, o.created_by, \
     o.disabled_at, o.last_login_at, \
     (SELECT COUNT(*) FROM passkeys p WHERE p.operator_id = o.id) AS passkeys";

const PK_COLUMNS: &str = "id, operator_id, cred_id, name, passkey, created_at, last_used_at";

impl Store {
    /// Creates an operator (no passkey yet).
    #[tracing::instrument(skip_all, fields(operator.id = %row.id))]
    pub async fn operator_create(&self, row: &OperatorRow) -> Result<(), CreateOperatorError> {
        let res = sqlx::query(
            "INSERT INTO operators (id, name, role, user_handle, created_at, created_by) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(row.id.as_str().to_owned())
        .bind(row.name.clone())
        .bind(row.role.as_str())
        .bind(row.user_handle.clone())
        .bind(row.created_at)
        .bind(row.created_by.clone())
        .execute(self.pool())
        .await;
        match res {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
                Err(CreateOperatorError::Exists(row.name.clone()))
            }
            Err(e) => Err(anyhow::Error::new(e)
                .context("failed to insert operator")
                .into()),
        }
    }

    /// One operator by id.
    pub async fn operator_get(&self, id: &OperatorId) -> anyhow::Result<Option<OperatorRow>> {
        sqlx::query_as(&format!(
            "SELECT {OP_COLUMNS} FROM operators o WHERE o.id = $1"
        ))
        .bind(id.as_str().to_owned())
        .fetch_optional(self.pool())
        .await
        .read("failed to read operator", "malformed operator row")
    }

    /// One operator by login name.
    pub async fn operator_by_name(&self, name: &str) -> anyhow::Result<Option<OperatorRow>> {
        sqlx::query_as(&format!(
            "SELECT {OP_COLUMNS} FROM operators o WHERE o.name = $1"
        ))
        .bind(name.to_owned())
        .fetch_optional(self.pool())
        .await
        .read("failed to read operator", "malformed operator row")
    }

    /// Every operator, by name.
    pub async fn operator_list(&self) -> anyhow::Result<Vec<OperatorRow>> {
        sqlx::query_as(&format!(
            "SELECT {OP_COLUMNS} FROM operators o ORDER BY o.name"
        ))
        .fetch_all(self.pool())
        .await
        .read("failed to list operators", "malformed operator row")
    }

    /// The tenants an operator is scoped to, sorted; empty: every tenant.
    pub async fn operator_tenants(&self, id: &OperatorId) -> anyhow::Result<Vec<String>> {
        sqlx::query_scalar(
            "SELECT tenant_id FROM operator_tenants WHERE operator_id = $1 ORDER BY tenant_id",
        )
        .bind(id.as_str().to_owned())
        .fetch_all(self.pool())
        .await
        .read(
            "failed to read the operator's tenants",
            "malformed operator tenant row",
        )
    }

    /// Every scoped operator's tenants (operators without rows are absent).
    pub async fn operator_tenants_all(
        &self,
    ) -> anyhow::Result<std::collections::HashMap<String, Vec<String>>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT operator_id, tenant_id FROM operator_tenants ORDER BY operator_id, tenant_id",
        )
        .fetch_all(self.pool())
        .await
        .read(
            "failed to read operators' tenants",
            "malformed operator tenant row",
        )?;
        let mut all = std::collections::HashMap::<String, Vec<String>>::new();
        for (operator, tenant) in rows {
            all.entry(operator).or_default().push(tenant);
        }
        Ok(all)
    }

    /// Replaces an operator's tenants in one transaction; empty: every
    /// tenant. Each tenant must exist (the foreign key refuses others).
    #[tracing::instrument(skip_all, fields(operator.id = %id))]
    pub async fn operator_set_tenants(
        &self,
        id: &OperatorId,
        tenants: &[String],
    ) -> anyhow::Result<()> {
        let mut tx = self.pool().begin().await.context("failed to begin")?;
        sqlx::query("DELETE FROM operator_tenants WHERE operator_id = $1")
            .bind(id.as_str().to_owned())
            .execute(&mut *tx)
            .await
            .context("failed to clear the operator's tenants")?;
        for t in tenants {
            sqlx::query("INSERT INTO operator_tenants (operator_id, tenant_id) VALUES ($1, $2)")
                .bind(id.as_str().to_owned())
                .bind(t.clone())
                .execute(&mut *tx)
                .await
                .context("failed to scope the operator to a tenant")?;
        }
        tx.commit().await.context("failed to commit")?;
        Ok(())
    }

    /// Sets or clears `disabled_at`; disabling also deletes the operator's
    /// dashboard sessions, in the same transaction. False if no such operator.
    pub async fn operator_set_disabled(
        &self,
        id: &OperatorId,
        disabled_at: Option<i64>,
    ) -> anyhow::Result<bool> {
        let mut tx = self.pool().begin().await.context("failed to begin")?;
        let n = sqlx::query("UPDATE operators SET disabled_at = $1 WHERE id = $2")
            .bind(disabled_at)
            .bind(id.as_str().to_owned())
            .execute(&mut *tx)
            .await
            .context("failed to update operator")?
            .rows_affected();
        if disabled_at.is_some() {
            sqlx::query("DELETE FROM dashboard_sessions WHERE operator_id = $1")
                .bind(id.as_str().to_owned())
                .execute(&mut *tx)
                .await
                .context("failed to end the operator's sessions")?;
        }
        tx.commit().await.context("failed to commit")?;
        Ok(n == 1)
    }

    /// Records a login.
    pub async fn operator_logged_in(&self, id: &OperatorId, now: i64) -> anyhow::Result<()> {
        sqlx::query("UPDATE operators SET last_login_at = $1 WHERE id = $2")
            .bind(now)
            .bind(id.as_str().to_owned())
            .execute(self.pool())
            .await
            .context("failed to record login")?;
        Ok(())
    }

    /// Whether any enabled admin has a passkey (else the first start offers
    /// an enrollment link).
    pub async fn operator_admin_enrolled(&self) -> anyhow::Result<bool> {
        let n: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM operators o WHERE o.role = 'admin' \
             AND o.disabled_at IS NULL \
             AND EXISTS (SELECT 1 FROM passkeys p WHERE p.operator_id = o.id)",
        )
        .fetch_one(self.pool())
        .await
        .context("failed to count enrolled admins")?
        .try_get("n")?;
        Ok(n > 0)
    }

    /// Stores a passkey. False if its credential id is registered already.
    pub async fn passkey_insert(&self, row: &PasskeyRow) -> anyhow::Result<bool> {
        let res = sqlx::query(
            "INSERT INTO passkeys (id, operator_id, cred_id, name, passkey, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(row.id.as_str().to_owned())
        .bind(row.operator_id.as_str().to_owned())
        .bind(row.cred_id.clone())
        .bind(row.name.clone())
        .bind(row.passkey.clone())
        .bind(row.created_at)
        .execute(self.pool())
        .await;
        match res {
            Ok(_) => Ok(true),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Ok(false),
            Err(e) => Err(anyhow::Error::new(e).context("failed to insert passkey")),
        }
    }

    /// An operator's passkeys, oldest first.
    pub async fn passkeys_of(&self, op: &OperatorId) -> anyhow::Result<Vec<PasskeyRow>> {
        sqlx::query_as(&format!(
            "SELECT {PK_COLUMNS} FROM passkeys WHERE operator_id = $1 ORDER BY created_at, id"
        ))
        .bind(op.as_str().to_owned())
        .fetch_all(self.pool())
        .await
        .read("failed to list passkeys", "malformed passkey row")
    }

    /// Saves a passkey's updated state (its counter) and its last use.
    pub async fn passkey_used(&self, cred_id: &str, passkey: &str, now: i64) -> anyhow::Result<()> {
        sqlx::query("UPDATE passkeys SET passkey = $1, last_used_at = $2 WHERE cred_id = $3")
            .bind(passkey.to_owned())
            .bind(now)
            .bind(cred_id.to_owned())
            .execute(self.pool())
            .await
            .context("failed to update passkey")?;
        Ok(())
    }

    /// Deletes one of `op`'s passkeys unless it is their last. `Ok(None)`:
    /// no such passkey of theirs; `Ok(Some(false))`: it is the last one.
    pub async fn passkey_delete(
        &self,
        op: &OperatorId,
        id: &PasskeyId,
    ) -> anyhow::Result<Option<bool>> {
        // One statement, so two concurrent deletions cannot both pass the
        // "not the last" check.
        let n = sqlx::query(
            "DELETE FROM passkeys WHERE id = $1 AND operator_id = $2 \
             AND (SELECT COUNT(*) FROM passkeys WHERE operator_id = $3) > 1",
        )
        .bind(id.as_str().to_owned())
        .bind(op.as_str().to_owned())
        .bind(op.as_str().to_owned())
        .execute(self.pool())
        .await
        .context("failed to delete passkey")?
        .rows_affected();
        if n == 1 {
            return Ok(Some(true));
        }
        let exists =
            sqlx::query("SELECT 1 AS one FROM passkeys WHERE id = $1 AND operator_id = $2")
                .bind(id.as_str().to_owned())
                .bind(op.as_str().to_owned())
                .fetch_optional(self.pool())
                .await
                .context("failed to read passkey")?
                .is_some();
        Ok(exists.then_some(false))
    }

    /// When the operator's latest unused, unexpired enrollment link
    /// expires (Unix ms), if there is one.
    pub async fn enrollment_outstanding(
        &self,
        operator: &OperatorId,
        now: i64,
    ) -> anyhow::Result<Option<i64>> {
        let row = sqlx::query(
            "SELECT expires_at FROM enrollments WHERE operator_id = $1 AND used_at IS NULL \
             AND expires_at > $2 ORDER BY expires_at DESC LIMIT 1",
        )
        .bind(operator.as_str().to_owned())
        .bind(now)
        .fetch_optional(self.pool())
        .await
        .context("failed to read outstanding enrollment links")?;
        row.map(|r| r.try_get("expires_at").map_err(anyhow::Error::from))
            .transpose()
    }

    /// Stores an enrollment link's hash and retires (expires now) every
    /// other unused link of its operator, in one transaction: an operator
    /// asked for a fresh link, so the ones printed before stop working.
    pub async fn enrollment_replace(
        &self,
        row: &EnrollmentRow,
        token_hash: &str,
        now: i64,
    ) -> anyhow::Result<usize> {
        let mut tx = self.pool().begin().await.context("failed to begin")?;
        let retired = sqlx::query(
            "UPDATE enrollments SET expires_at = $1 WHERE operator_id = $2 \
             AND used_at IS NULL AND expires_at > $1",
        )
        .bind(now)
        .bind(row.operator_id.as_str().to_owned())
        .execute(&mut *tx)
        .await
        .context("failed to retire enrollment links")?
        .rows_affected();
        insert_enrollment(&mut tx, row, token_hash, now).await?;
        tx.commit().await.context("failed to commit")?;
        Ok(usize::try_from(retired).unwrap_or(usize::MAX))
    }

    /// Stores an enrollment link's hash (the operator's other unused links
    /// stay valid until one is used: `enrollment_complete`).
    pub async fn enrollment_insert(
        &self,
        row: &EnrollmentRow,
        token_hash: &str,
        now: i64,
    ) -> anyhow::Result<()> {
        let mut conn = self.pool().acquire().await.context("failed to connect")?;
        insert_enrollment(&mut conn, row, token_hash, now).await
    }

    /// The enrollment link with this secret's hash.
    pub async fn enrollment_by_hash(&self, hash: &str) -> anyhow::Result<Option<EnrollmentRow>> {
        sqlx::query_as(
            "SELECT id, operator_id, expires_at, used_at FROM enrollments WHERE token_hash = $1",
        )
        .bind(hash.to_owned())
        .fetch_optional(self.pool())
        .await
        .read("failed to read enrollment link", "malformed enrollment row")
    }

    /// Uses an enrollment link and stores the passkey it enrolled, in one
    /// transaction: false (and nothing stored) if the link was used or
    /// expired meanwhile.
    pub async fn enrollment_complete(
        &self,
        enrollment_id: &EnrollmentId,
        passkey: &PasskeyRow,
        now: i64,
    ) -> anyhow::Result<bool> {
        let mut tx = self.pool().begin().await.context("failed to begin")?;
        let n = sqlx::query(
            "UPDATE enrollments SET used_at = $1 WHERE id = $2 AND used_at IS NULL AND expires_at > $3",
        )
        .bind(now)
        .bind(enrollment_id.to_string())
        .bind(now)
        .execute(&mut *tx)
        .await
        .context("failed to use enrollment link")?
        .rows_affected();
        if n != 1 {
            return Ok(false);
        }
        // Any other link of the same operator stops working with this one
        // (several replicas' first-start links, say).
        sqlx::query(
            "UPDATE enrollments SET used_at = $1 WHERE used_at IS NULL AND id <> $2 \
             AND operator_id = (SELECT operator_id FROM enrollments WHERE id = $2)",
        )
        .bind(now)
        .bind(enrollment_id.to_string())
        .execute(&mut *tx)
        .await
        .context("failed to retire the operator's other enrollment links")?;
        sqlx::query(
            "INSERT INTO passkeys (id, operator_id, cred_id, name, passkey, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(passkey.id.as_str().to_owned())
        .bind(passkey.operator_id.as_str().to_owned())
        .bind(passkey.cred_id.clone())
        .bind(passkey.name.clone())
        .bind(passkey.passkey.clone())
        .bind(now)
        .execute(&mut *tx)
        .await
        .context("failed to insert passkey (registered already?)")?;
        tx.commit().await.context("failed to commit")?;
        Ok(true)
    }

    /// Saves a dashboard session record.
    pub async fn dashboard_session_save(
        &self,
        id_hash: &str,
        operator_id: Option<&OperatorId>,
        data: &str,
        expires_at: i64,
    ) -> anyhow::Result<()> {
        sqlx::query(
            "INSERT INTO dashboard_sessions (id_hash, operator_id, data, expires_at) \
             VALUES ($1, $2, $3, $4) \
             ON CONFLICT (id_hash) DO UPDATE SET operator_id = excluded.operator_id, \
             data = excluded.data, expires_at = excluded.expires_at",
        )
        .bind(id_hash.to_owned())
        .bind(operator_id.map(OperatorId::to_string))
        .bind(data.to_owned())
        .bind(expires_at)
        .execute(self.pool())
        .await
        .context("failed to save dashboard session")?;
        Ok(())
    }

    /// Whether a record with this id hash exists (for id collisions).
    pub async fn dashboard_session_exists(&self, id_hash: &str) -> anyhow::Result<bool> {
        Ok(
            sqlx::query("SELECT 1 AS one FROM dashboard_sessions WHERE id_hash = $1")
                .bind(id_hash.to_owned())
                .fetch_optional(self.pool())
                .await
                .context("failed to read dashboard session")?
                .is_some(),
        )
    }

    /// A live dashboard session's data.
    pub async fn dashboard_session_load(
        &self,
        id_hash: &str,
        now: i64,
    ) -> anyhow::Result<Option<(String, i64)>> {
        let row = sqlx::query(
            "SELECT data, expires_at FROM dashboard_sessions WHERE id_hash = $1 AND expires_at > $2",
        )
        .bind(id_hash.to_owned())
        .bind(now)
        .fetch_optional(self.pool())
        .await
        .context("failed to load dashboard session")?;
        row.map(|r| Ok((r.try_get("data")?, r.try_get("expires_at")?)))
            .transpose()
    }

    /// Deletes a dashboard session.
    pub async fn dashboard_session_delete(&self, id_hash: &str) -> anyhow::Result<()> {
        sqlx::query("DELETE FROM dashboard_sessions WHERE id_hash = $1")
            .bind(id_hash.to_owned())
            .execute(self.pool())
            .await
            .context("failed to delete dashboard session")?;
        Ok(())
    }

    /// Deletes expired dashboard sessions; returns how many.
    pub async fn dashboard_session_gc(&self, now: i64) -> anyhow::Result<u64> {
        Ok(
            sqlx::query("DELETE FROM dashboard_sessions WHERE expires_at <= $1")
                .bind(now)
                .execute(self.pool())
                .await
                .context("failed to delete expired dashboard sessions")?
                .rows_affected(),
        )
    }
}

/// Inserts an enrollment link's row (its secret as `token_hash`).
async fn insert_enrollment(
    conn: &mut sqlx::AnyConnection,
    row: &EnrollmentRow,
    token_hash: &str,
    now: i64,
) -> anyhow::Result<()> {
    sqlx::query(
        "INSERT INTO enrollments (id, operator_id, token_hash, created_at, expires_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(row.id.to_string())
    .bind(row.operator_id.as_str().to_owned())
    .bind(token_hash.to_owned())
    .bind(now)
    .bind(row.expires_at)
    .execute(conn)
    .await
    .context("failed to insert enrollment link")?;
    Ok(())
}
