//! Registering passkeys: the `Ceremony` kept in the dashboard session
//! between a ceremony's two steps, enrolling through a link, a logged-in
//! operator adding one, and listing and removing an operator's passkeys.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::json;
use webauthn_rs::prelude::{
    CreationChallengeResponse, Passkey, PasskeyAuthentication, PasskeyRegistration,
    RegisterPublicKeyCredential, Uuid,
};

use super::{Auth, AuthError, CEREMONY_TTL_MS, checked_name};
use crate::audit::{Actor, NewEvent};
use crate::domain::{EnrollmentId, OperatorId, PasskeyId};
use crate::ids::{self, token_hash};
use crate::store::operators::{EnrollmentRow, OperatorRow, PasskeyRow};
use crate::time::now_ms;

/// A passkey ceremony in progress, kept in the dashboard session between
/// its two steps (webauthn-rs's state must stay on the server).
#[derive(Serialize, Deserialize)]
pub(crate) enum Ceremony {
    /// Enrolling through a link.
    Enroll {
        enrollment: EnrollmentId,
        operator: OperatorId,
        name: String,
        state: PasskeyRegistration,
        started: i64,
    },
    /// A logged-in operator adds a passkey.
    Add {
        operator: OperatorId,
        name: String,
        state: PasskeyRegistration,
        started: i64,
    },
    /// Logging in as a name that is no operator able to log in: answered
    /// with decoy options (`decoy.rs`), finished as a wrong passkey.
    Decoy { started: i64 },
    /// Logging in, or (`reauth`) a logged-in operator proving presence
    /// again before a sensitive step (exporting a credential).
    Login {
        operator: OperatorId,
        state: PasskeyAuthentication,
        started: i64,
        #[serde(default)]
        reauth: bool,
    },
}

impl Ceremony {
    fn started(&self) -> i64 {
        match self {
            Self::Enroll { started, .. }
            | Self::Add { started, .. }
            | Self::Login { started, .. }
            | Self::Decoy { started } => *started,
        }
    }
}

fn cred_id_of(passkey: &Passkey) -> anyhow::Result<String> {
    use base64::Engine;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(passkey.cred_id()))
}

impl Auth {
    /// Step 1 of enrolling through a link: the browser's creation options.
    pub(crate) async fn enroll_start(
        &self,
        secret: &str,
        passkey_name: &str,
    ) -> Result<(CreationChallengeResponse, Ceremony), AuthError> {
        let passkey_name = checked_name("passkey_name", passkey_name)?;
        let enrollment = self.valid_link(secret).await?;
        let op = self
            .get(&enrollment.operator_id)
            .await?
            .ok_or(AuthError::Link(
                "this enrollment link's operator no longer exists",
            ))?;
        if op.disabled_at.is_some() {
            return Err(AuthError::Disabled(op.name));
        }
        let (ccr, state) = self.begin_registration(&op).await?;
        Ok((
            ccr,
            Ceremony::Enroll {
                enrollment: enrollment.id,
                operator: op.id,
                name: passkey_name,
                state,
                started: now_ms(),
            },
        ))
    }

    async fn valid_link(&self, secret: &str) -> Result<EnrollmentRow, AuthError> {
        if !secret.starts_with(ids::ENROLLMENT_SECRET) || secret.len() > 100 {
            return Err(AuthError::Link(
                "this is not an enrollment link (copy the whole link, or ask an admin for a new one)",
            ));
        }
        let row = self
            .store()
            .enrollment_by_hash(&token_hash(secret))
            .await?
            .ok_or(AuthError::Link(
                "this enrollment link is not valid (mistyped, or not from this deployment): ask an admin for a new one",
            ))?;
        if row.used_at.is_some() {
            return Err(AuthError::Link(
                "this enrollment link was used already: log in, or ask an admin for a new one",
            ));
        }
        if row.expires_at <= now_ms() {
            return Err(AuthError::Link(
                "this enrollment link has expired: ask an admin for a new one (cordon operator invite)",
            ));
        }
        Ok(row)
    }

    async fn begin_registration(
        &self,
        op: &OperatorRow,
    ) -> Result<(CreationChallengeResponse, PasskeyRegistration), AuthError> {
        let handle =
            Uuid::parse_str(&op.user_handle).context("malformed user handle in database")?;
        let existing = self
            .store()
            .passkeys_of(&op.id)
            .await?
            .iter()
            .map(|p| serde_json::from_str::<Passkey>(&p.passkey).map(|k| k.cred_id().clone()))
            .collect::<Result<Vec<_>, _>>()
            .context("malformed passkey in database")?;
        self.0
            .webauthn
            .start_passkey_registration(handle, &op.name, &op.name, Some(existing))
            .map_err(|e| {
                AuthError::Internal(anyhow::Error::new(e).context("cannot start registration"))
            })
    }

    /// Step 2 of enrolling or adding a passkey: verifies the browser's
    /// answer and stores the passkey. Answers the operator.
    pub(crate) async fn register_finish(
        &self,
        ceremony: Ceremony,
        credential: &RegisterPublicKeyCredential,
    ) -> Result<OperatorRow, AuthError> {
        let now = now_ms();
        if now - ceremony.started() > CEREMONY_TTL_MS {
            return Err(AuthError::NoCeremony);
        }
        let (operator, name, state, enrollment) = match ceremony {
            Ceremony::Enroll {
                enrollment,
                operator,
                name,
                state,
                ..
            } => (operator, name, state, Some(enrollment)),
            Ceremony::Add {
                operator,
                name,
                state,
                ..
            } => (operator, name, state, None),
            Ceremony::Login { .. } | Ceremony::Decoy { .. } => return Err(AuthError::NoCeremony),
        };
        let passkey = self
            .0
            .webauthn
            .finish_passkey_registration(credential, &state)
            .map_err(|e| AuthError::Ceremony(e.to_string()))?;
        let row = PasskeyRow {
            id: PasskeyId::generate(),
            operator_id: operator.clone(),
            cred_id: cred_id_of(&passkey)?,
            name,
            passkey: serde_json::to_string(&passkey).map_err(anyhow::Error::new)?,
            created_at: now,
            last_used_at: None,
        };
        let action = if enrollment.is_some() {
            "operator.enroll"
        } else {
            "operator.passkey_add"
        };
        self.audit(
            NewEvent::new(Actor::Operator(operator.to_string()), action)
                .params(json!({ "passkey": row.id.as_str(), "name": row.name }))
                .outcome("requested"),
        )
        .await?;
        let stored = match &enrollment {
            Some(e) => self.store().enrollment_complete(e, &row, now).await?,
            None => self.store().passkey_insert(&row).await?,
        };
        if !stored {
            return Err(match enrollment {
                Some(_) => AuthError::Link("this enrollment link was used or expired meanwhile"),
                None => AuthError::Conflict("this passkey is registered already".into()),
            });
        }
        self.get(&operator)
            .await?
            .ok_or_else(|| AuthError::NotFound(format!("operator {operator}")))
    }

    /// A logged-in operator starts adding a passkey.
    pub(crate) async fn add_start(
        &self,
        operator: &OperatorId,
        passkey_name: &str,
    ) -> Result<(CreationChallengeResponse, Ceremony), AuthError> {
        let name = checked_name("passkey_name", passkey_name)?;
        let op = self
            .get(operator)
            .await?
            .ok_or_else(|| AuthError::NotFound(format!("operator {operator}")))?;
        let (ccr, state) = self.begin_registration(&op).await?;
        Ok((
            ccr,
            Ceremony::Add {
                operator: op.id,
                name,
                state,
                started: now_ms(),
            },
        ))
    }

    /// An operator's passkeys.
    pub async fn passkeys(&self, operator: &OperatorId) -> Result<Vec<PasskeyRow>, AuthError> {
        Ok(self.store().passkeys_of(operator).await?)
    }

    /// Removes one of `operator`'s own passkeys, never the last.
    pub async fn remove_passkey(&self, operator: &OperatorId, id: &str) -> Result<(), AuthError> {
        let id: PasskeyId = id
            .parse()
            .map_err(|_| AuthError::NotFound(format!("passkey {id:?}")))?;
        self.audit(
            NewEvent::new(
                Actor::Operator(operator.to_string()),
                "operator.passkey_remove",
            )
            .params(json!({ "passkey": id.as_str() }))
            .outcome("requested"),
        )
        .await?;
        match self.store().passkey_delete(operator, &id).await? {
            Some(true) => Ok(()),
            Some(false) => Err(AuthError::Conflict(
                "this is your last passkey: add another before removing it".into(),
            )),
            None => Err(AuthError::NotFound(format!("passkey {id}"))),
        }
    }
}
