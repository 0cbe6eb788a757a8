//! Logging in with a passkey, and a logged-in operator proving presence
//! again (`reauth`): names that cannot log in answer with decoy options and
//! fail as a wrong passkey does, so the dashboard tells nobody which
//! operators exist.

use anyhow::Context;
use serde_json::json;
use webauthn_rs::prelude::{Passkey, PublicKeyCredential, RequestChallengeResponse};

use super::{Auth, AuthError, CEREMONY_TTL_MS, Ceremony, checked_name, decoy};
use crate::audit::{Actor, NewEvent};
use crate::domain::OperatorId;
use crate::store::operators::OperatorRow;
use crate::time::now_ms;

/// Why a login's passkey answer was refused, whatever the cause: the same
/// for a wrong passkey, a forged answer and a name that is no operator.
const LOGIN_REJECTED: &str = "not a passkey of this operator";

impl Auth {
    /// Step 1 of logging in: the browser's request options for the named
    /// operator's passkeys.
    pub(crate) async fn login_start(
        &self,
        name: &str,
    ) -> Result<(RequestChallengeResponse, Ceremony), AuthError> {
        let name = checked_name("name", name)?;
        let op = self.store().operator_by_name(&name).await?;
        // A name that cannot log in answers as one that can: nobody learns
        // from the dashboard which operators exist.
        match self.assertion_for(op, &name, false).await {
            Ok((options, ceremony)) => Ok((decoy::plain(options), ceremony)),
            Err(AuthError::UnknownOperator(_) | AuthError::Disabled(_)) => {
                let rp_id = self.0.public_url.host_str().unwrap_or_default();
                Ok((
                    self.0.decoys.options(&name, rp_id),
                    Ceremony::Decoy { started: now_ms() },
                ))
            }
            Err(e) => Err(e),
        }
    }

    /// A logged-in operator proves presence again (before an export).
    pub(crate) async fn reauth_start(
        &self,
        operator: &OperatorId,
    ) -> Result<(RequestChallengeResponse, Ceremony), AuthError> {
        let op = self.get(operator).await?;
        self.assertion_for(op, operator.as_str(), true).await
    }

    async fn assertion_for(
        &self,
        op: Option<OperatorRow>,
        name: &str,
        reauth: bool,
    ) -> Result<(RequestChallengeResponse, Ceremony), AuthError> {
        let unknown = || AuthError::UnknownOperator(name.to_owned());
        let op = op.ok_or_else(unknown)?;
        if op.disabled_at.is_some() {
            return Err(unknown());
        }
        let keys = self
            .store()
            .passkeys_of(&op.id)
            .await?
            .iter()
            .map(|p| serde_json::from_str::<Passkey>(&p.passkey))
            .collect::<Result<Vec<_>, _>>()
            .context("malformed passkey in database")?;
        if keys.is_empty() {
            return Err(unknown());
        }
        let (rcr, state) = self
            .0
            .webauthn
            .start_passkey_authentication(&keys)
            .map_err(|e| {
                AuthError::Internal(anyhow::Error::new(e).context("cannot start login"))
            })?;
        Ok((
            rcr,
            Ceremony::Login {
                operator: op.id,
                state,
                started: now_ms(),
                reauth,
            },
        ))
    }

    /// Step 2 of logging in: verifies the assertion, updates the passkey's
    /// counter and last use. Answers the operator (audited `operator.login`).
    pub(crate) async fn login_finish(
        &self,
        ceremony: Ceremony,
        credential: &PublicKeyCredential,
    ) -> Result<OperatorRow, AuthError> {
        let now = now_ms();
        let (operator, state, started, reauth) = match ceremony {
            Ceremony::Login {
                operator,
                state,
                started,
                reauth,
            } => (operator, state, started, reauth),
            // No passkey can answer a decoy: it fails as a wrong one does.
            Ceremony::Decoy { started } => {
                if now - started > CEREMONY_TTL_MS {
                    return Err(AuthError::NoCeremony);
                }
                self.audit(
                    NewEvent::new(Actor::System, "operator.login")
                        .params(json!({}))
                        .outcome("denied: no such operator"),
                )
                .await?;
                return Err(AuthError::Ceremony(LOGIN_REJECTED.into()));
            }
            _ => return Err(AuthError::NoCeremony),
        };
        let action = if reauth {
            "operator.reauth"
        } else {
            "operator.login"
        };
        if now - started > CEREMONY_TTL_MS {
            return Err(AuthError::NoCeremony);
        }
        let actor = Actor::Operator(operator.to_string());
        let result = match self
            .0
            .webauthn
            .finish_passkey_authentication(credential, &state)
        {
            Ok(r) => r,
            Err(e) => {
                self.audit(
                    NewEvent::new(actor, action)
                        .params(json!({}))
                        .outcome("denied: passkey did not verify"),
                )
                .await?;
                tracing::debug!(error = %e, "a login's passkey response did not verify");
                return Err(AuthError::Ceremony(LOGIN_REJECTED.into()));
            }
        };
        let op = self
            .get(&operator)
            .await?
            .ok_or_else(|| AuthError::NotFound(format!("operator {operator}")))?;
        if op.disabled_at.is_some() {
            return Err(AuthError::Disabled(op.name));
        }
        let rows = self.store().passkeys_of(&operator).await?;
        let mut used = None;
        for row in rows {
            let mut key: Passkey =
                serde_json::from_str(&row.passkey).context("malformed passkey in database")?;
            if key.update_credential(&result).is_some() {
                used = Some((row, key));
                break;
            }
        }
        let (row, key) = used.ok_or_else(|| AuthError::Ceremony(LOGIN_REJECTED.into()))?;
        self.audit(
            NewEvent::new(actor, action)
                .params(json!({ "passkey": row.id.as_str() }))
                .outcome("ok"),
        )
        .await?;
        self.store()
            .passkey_used(
                &row.cred_id,
                &serde_json::to_string(&key).map_err(anyhow::Error::new)?,
                now,
            )
            .await?;
        if !reauth {
            self.store().operator_logged_in(&operator, now).await?;
        }
        Ok(op)
    }
}
