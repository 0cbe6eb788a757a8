//! Enrollment links: inviting an operator, the first admin's link at
//! start (once across replicas and restarts), and a fresh link on request,
//! each audited before it is made.

use app::api::auth::Role;
use serde_json::json;
use webauthn_rs::prelude::Uuid;

use super::{Auth, AuthError, ENROLL_TTL_MS, checked_login};
use crate::audit::{Actor, NewEvent};
use crate::domain::{EnrollmentId, OperatorId};
use crate::ids::{self, token_hash};
use crate::store::operators::{CreateOperatorError, EnrollmentRow, OperatorRow};
use crate::time::now_ms;

/// A new operator's enrollment link.
#[derive(Debug, Clone)]
pub struct Invitation {
    /// The operator.
    pub operator: OperatorRow,
    /// The link; its secret is in the fragment.
    pub link: String,
    /// Unix ms.
    pub expires_at: i64,
}

/// What the first start found: whether the first admin needs a link.
#[derive(Debug, Clone)]
pub enum FirstStart {
    /// An enabled admin has a passkey: no link.
    AdminExists,
    /// A new link (printed once, on standard output).
    Link(Invitation),
    /// No admin can log in, but a link for `operator` made before (by an
    /// earlier start, or a replica) is unused and valid until `expires_at`
    /// (Unix ms): none is made; `cordon operator enroll-link` makes a fresh
    /// one and retires it.
    Outstanding {
        /// The admin it enrolls.
        operator: OperatorRow,
        /// Unix ms.
        expires_at: i64,
    },
}

impl Auth {
    /// Creates operator `name` with `role` and an enrollment link.
    pub async fn invite(
        &self,
        actor: &Actor,
        name: &str,
        role: Role,
    ) -> Result<Invitation, AuthError> {
        let name = checked_login(name)?;
        let row = OperatorRow {
            id: OperatorId::generate(),
            name,
            role,
            user_handle: Uuid::new_v4().to_string(),
            created_at: now_ms(),
            created_by: actor.as_stored(),
            disabled_at: None,
            last_login_at: None,
            passkeys: 0,
        };
        self.audit(
            NewEvent::new(actor.clone(), "operator.invite")
                .params(
                    json!({ "operator": row.id.as_str(), "name": row.name, "role": role.as_str() }),
                )
                .outcome("requested"),
        )
        .await?;
        self.store()
            .operator_create(&row)
            .await
            .map_err(|e| match e {
                CreateOperatorError::Exists(n) => {
                    AuthError::Conflict(format!("an operator named {n:?} already exists"))
                }
                CreateOperatorError::Other(e) => AuthError::Internal(e),
            })?;
        let (link, expires_at) = self.new_link(&row.id, false).await?;
        Ok(Invitation {
            operator: row,
            link,
            expires_at,
        })
    }

    /// A fresh enrollment link for `operator`. Unless `retire`, its other
    /// unused links (made by replicas starting together) keep working until
    /// one is used, which retires the rest (`enrollment_complete`); retiring
    /// them at start would race a replica that just linked the same first
    /// admin. An operator who asks for a fresh link (`retire`) wants the
    /// ones printed before to stop working.
    async fn new_link(
        &self,
        operator: &OperatorId,
        retire: bool,
    ) -> Result<(String, i64), AuthError> {
        let secret = ids::secret_token(ids::ENROLLMENT_SECRET);
        let now = now_ms();
        let row = EnrollmentRow {
            id: EnrollmentId::generate(),
            operator_id: operator.clone(),
            expires_at: now + ENROLL_TTL_MS,
            used_at: None,
        };
        if retire {
            self.store()
                .enrollment_replace(&row, &token_hash(&secret), now)
                .await?;
        } else {
            self.store()
                .enrollment_insert(&row, &token_hash(&secret), now)
                .await?;
        }
        let mut url = self
            .0
            .public_url
            .join("/enroll")
            .map_err(anyhow::Error::new)?;
        url.set_fragment(Some(&secret));
        Ok((url.to_string(), row.expires_at))
    }

    /// At start: when no enabled admin has a passkey, a link that enrolls
    /// one (the first admin without passkeys, or a new `admin`), unless an
    /// unused, unexpired link for that admin exists already (printed by an
    /// earlier start, or by a replica starting at the same time): a restart
    /// does not print the secret again, nor make one more. Replicas
    /// starting together may each print one: every such link works until
    /// one of them is used (then the others stop), and two first starts at
    /// once make one `admin`, not two.
    pub async fn first_start_link(&self) -> Result<FirstStart, AuthError> {
        self.first_admin_link(false).await
    }

    /// `cordon operator enroll-link`: a fresh link for the first admin
    /// (as the first start makes), retiring the ones not yet used; or for
    /// operator `name`. Audited `operator.relink`.
    pub async fn fresh_link(
        &self,
        actor: &Actor,
        name: Option<&str>,
    ) -> Result<Invitation, AuthError> {
        let Some(name) = name else {
            return match self.first_admin_link(true).await? {
                FirstStart::Link(inv) => Ok(inv),
                FirstStart::AdminExists | FirstStart::Outstanding { .. } => Err(AuthError::Conflict(
                    "an admin can log in already: name the operator who needs a link (cordon operator enroll-link NAME)".into(),
                )),
            };
        };
        let operator = self.by_name(name).await?;
        if operator.disabled_at.is_some() {
            return Err(AuthError::Disabled(operator.name));
        }
        self.relink(actor, operator, true).await
    }

    async fn first_admin_link(&self, fresh: bool) -> Result<FirstStart, AuthError> {
        let mut tries = 0;
        loop {
            tries += 1;
            match self.first_start_link_once(fresh).await {
                // Another replica made `admin` just now: link that one.
                Err(AuthError::Conflict(_)) | Ok(Err(Retry)) if tries < 3 => continue,
                Err(e) => return Err(e),
                Ok(Err(Retry)) => {
                    return Err(AuthError::Conflict(
                        "another control plane keeps creating the first admin".into(),
                    ));
                }
                Ok(Ok(inv)) => return Ok(inv),
            }
        }
    }

    async fn first_start_link_once(
        &self,
        fresh: bool,
    ) -> Result<Result<FirstStart, Retry>, AuthError> {
        if self.store().operator_admin_enrolled().await? {
            return Ok(Ok(FirstStart::AdminExists));
        }
        let waiting =
            |o: &OperatorRow| o.role == Role::Admin && o.disabled_at.is_none() && o.passkeys == 0;
        let first = self
            .store()
            .operator_list()
            .await?
            .into_iter()
            .find(waiting);
        let operator = match first {
            Some(o) => o,
            None => {
                let name = match self.store().operator_by_name("admin").await? {
                    None => "admin".to_owned(),
                    // Made by another replica since the list was read.
                    Some(o) if waiting(&o) => return Ok(Err(Retry)),
                    Some(_) => format!("admin-{}", &ids::random_id("")[..6]),
                };
                let actor = if fresh { Actor::Cli } else { Actor::System };
                return self
                    .invite(&actor, &name, Role::Admin)
                    .await
                    .map(|inv| Ok(FirstStart::Link(inv)));
            }
        };
        if !fresh
            && let Some(expires_at) = self
                .store()
                .enrollment_outstanding(&operator.id, now_ms())
                .await?
        {
            return Ok(Ok(FirstStart::Outstanding {
                operator,
                expires_at,
            }));
        }
        let actor = if fresh { Actor::Cli } else { Actor::System };
        self.relink(&actor, operator, fresh)
            .await
            .map(|inv| Ok(FirstStart::Link(inv)))
    }

    /// A new link for an existing operator, audited; `retire`: their
    /// unused links stop working.
    async fn relink(
        &self,
        actor: &Actor,
        operator: OperatorRow,
        retire: bool,
    ) -> Result<Invitation, AuthError> {
        self.audit(
            NewEvent::new(actor.clone(), "operator.relink")
                .params(json!({ "operator": operator.id.as_str(), "retire_others": retire }))
                .outcome("requested"),
        )
        .await?;
        let (link, expires_at) = self.new_link(&operator.id, retire).await?;
        Ok(Invitation {
            operator,
            link,
            expires_at,
        })
    }
}

/// `first_start_link_once` met another replica's first admin half made:
/// look again.
struct Retry;
