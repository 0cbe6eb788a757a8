//! Operators of the dashboard: accounts and roles, passkeys (webauthn-rs;
//! no passwords anywhere), one-time enrollment links, dashboard sessions
//! (tower-sessions in the database) and the middleware that puts the
//! logged-in operator into each request.
//!
//! - `mod.rs`: the [`Auth`] service the CLI, the ceremony endpoints and the
//!   dashboard's backend call; every change is audited before it is made.
//! - `session_store.rs`: tower-sessions records in `dashboard_sessions`.
//! - `middleware.rs`: who is asking; log-in redirects; idle and absolute expiry.
//! - `routes.rs`: the passkey ceremonies under `/ui/auth/`.

mod decoy;
pub mod middleware;
pub mod routes;
mod session_store;
mod throttle;

use crate::fix::WithFix;
use std::sync::Arc;

use app::api::auth::Role;
use serde::{Deserialize, Serialize};
use serde_json::json;
use webauthn_rs::prelude::{
    CreationChallengeResponse, Passkey, PasskeyAuthentication, PasskeyRegistration,
    PublicKeyCredential, RegisterPublicKeyCredential, RequestChallengeResponse, Url, Uuid,
    Webauthn, WebauthnBuilder,
};

use crate::audit::{Actor, NewEvent};
use crate::domain::{OperatorId, PasskeyId};
use crate::ids::{self, token_hash};
use crate::store::Store;
use crate::store::operators::{CreateOperatorError, EnrollmentRow, OperatorRow, PasskeyRow};
use crate::time::now_ms;

pub use session_store::DbSessionStore;

/// How long an enrollment link works.
pub const ENROLL_TTL_MS: i64 = 60 * 60 * 1000;
/// How long a passkey ceremony may take between its two steps.
const CEREMONY_TTL_MS: i64 = 5 * 60 * 1000;
/// The longest operator or passkey name, in characters.
pub const MAX_NAME: usize = 64;

/// What the auth service can fail with; each maps to one `UiError`
/// (`middleware.rs`, the web side).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A field is wrong.
    #[error("{field}: {message}")]
    Invalid {
        /// The field.
        field: &'static str,
        /// What is wrong.
        message: String,
    },
    /// The enrollment link is unknown, used or expired.
    #[error("{0}")]
    Link(&'static str),
    /// The browser's passkey response did not verify.
    #[error("the passkey response did not verify ({0}); try again")]
    Ceremony(String),
    /// No ceremony was started in this dashboard session, or it expired.
    #[error(
        "no passkey ceremony is in progress in this browser (or it took over 5 minutes): start again"
    )]
    NoCeremony,
    /// No such operator, or disabled, or without passkeys.
    #[error("no enabled operator {0:?} with a passkey")]
    UnknownOperator(String),
    /// The operator is disabled.
    #[error("operator {0} is disabled")]
    Disabled(String),
    /// Not found.
    #[error("{0} not found")]
    NotFound(String),
    /// Conflicting state (name taken, last passkey, registered already).
    #[error("{0}")]
    Conflict(String),
    /// Anything else.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// A passkey ceremony in progress, kept in the dashboard session between
/// its two steps (webauthn-rs's state must stay on the server).
#[derive(Serialize, Deserialize)]
pub(crate) enum Ceremony {
    /// Enrolling through a link.
    Enroll {
        enrollment: String,
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

/// The operators service; cheap to clone.
#[derive(Clone)]
pub struct Auth(Arc<Inner>);

/// Why a login's passkey answer was refused, whatever the cause: the same
/// for a wrong passkey, a forged answer and a name that is no operator.
const LOGIN_REJECTED: &str = "not a passkey of this operator";

struct Inner {
    store: Store,
    webauthn: Webauthn,
    public_url: Url,
    /// Login options for names that are not operators.
    decoys: decoy::Decoys,
    /// Bounds on the ceremony calls anyone may make.
    throttle: throttle::Throttle,
}

fn checked_name(field: &'static str, name: &str) -> Result<String, AuthError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > MAX_NAME || name.chars().any(|c| c.is_control()) {
        return Err(AuthError::Invalid {
            field,
            message: format!("1 to {MAX_NAME} characters, no control characters"),
        });
    }
    Ok(name.to_owned())
}

/// Operator login names: letters, digits, `.`, `_`, `-`, `@`.
fn checked_login(name: &str) -> Result<String, AuthError> {
    let name = checked_name("name", name)?;
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '@'))
    {
        return Err(AuthError::Invalid {
            field: "name",
            message: "letters, digits, '.', '_', '-' and '@' only".into(),
        });
    }
    Ok(name)
}

fn cred_id_of(passkey: &Passkey) -> anyhow::Result<String> {
    use base64::Engine;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(passkey.cred_id()))
}

impl Auth {
    /// The service for the dashboard at `public_url`: its host is the
    /// WebAuthn relying-party id, its origin the only one accepted.
    /// `decoy_key` keys the login options shown for names that are not
    /// operators (derived from the master key, so every replica shows the
    /// same; `None`: random, for a command that answers no login).
    pub fn new(
        store: Store,
        public_url: &Url,
        decoy_key: Option<&[u8; 32]>,
    ) -> anyhow::Result<Self> {
        let host = public_url
            .host_str()
            .ok_or_else(|| anyhow::anyhow!("public_url: has no host"))?;
        if host.parse::<std::net::IpAddr>().is_ok() || host.starts_with('[') {
            return Err(anyhow::anyhow!(
                "public_url: {public_url} names an IP address, and passkeys are bound to a host name: operators could not log in"
            ))
            .fix(format!(
                "set public_url to the address operators type, with a host name: \
                 http://localhost:{} on this machine, or a DNS name (over https when bind is not \
                 loopback)",
                public_url.port_or_known_default().unwrap_or(8080)
            ));
        }
        let webauthn = WebauthnBuilder::new(host, public_url)
            .map_err(|e| anyhow::anyhow!("public_url: not usable for passkeys: {e}"))?
            .rp_name("Cordon")
            .build()
            .map_err(|e| anyhow::anyhow!("public_url: not usable for passkeys: {e}"))?;
        Ok(Self(Arc::new(Inner {
            store,
            webauthn,
            public_url: public_url.clone(),
            decoys: decoy::Decoys::new(decoy_key)?,
            throttle: throttle::Throttle::default(),
        })))
    }

    fn store(&self) -> &Store {
        &self.0.store
    }

    /// The bounds on the passkey calls anyone may make.
    pub(crate) fn throttle(&self) -> &throttle::Throttle {
        &self.0.throttle
    }

    /// The dashboard's URL, whose host passkeys are bound to.
    pub fn public_url(&self) -> &Url {
        &self.0.public_url
    }

    async fn audit(&self, event: NewEvent) -> Result<(), AuthError> {
        self.store().audit_append(event).await?;
        Ok(())
    }

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
            id: ids::random_id(ids::ENROLLMENT),
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

    /// Every operator.
    pub async fn list(&self) -> Result<Vec<OperatorRow>, AuthError> {
        Ok(self.store().operator_list().await?)
    }

    /// One operator by login name.
    pub async fn by_name(&self, name: &str) -> Result<OperatorRow, AuthError> {
        self.store()
            .operator_by_name(name)
            .await?
            .ok_or_else(|| AuthError::NotFound(format!("operator {name:?}")))
    }

    /// One operator by id (disabled ones too).
    pub async fn get(&self, id: &OperatorId) -> Result<Option<OperatorRow>, AuthError> {
        Ok(self.store().operator_get(id).await?)
    }

    /// The operator as the dashboard sees them, with their tenant scope
    /// (`None`: every tenant; admins are always global, whatever rows a
    /// hand-edited database may hold).
    pub async fn dashboard_operator(
        &self,
        row: OperatorRow,
    ) -> Result<app::api::auth::Operator, AuthError> {
        let tenants = if row.role == Role::Admin {
            None
        } else {
            Some(self.store().operator_tenants(&row.id).await?).filter(|t| !t.is_empty())
        };
        Ok(app::api::auth::Operator {
            id: row.id.to_string(),
            name: row.name,
            role: row.role,
            tenants,
        })
    }

    /// Every scoped operator's tenants, by operator id.
    pub async fn scopes(
        &self,
    ) -> Result<std::collections::HashMap<String, Vec<String>>, AuthError> {
        Ok(self.store().operator_tenants_all().await?)
    }

    /// Scopes an operator to `tenants` (`None` or empty: every tenant);
    /// audited as `operator.scope`. Admins are always global: scoping one is
    /// refused. Each tenant must exist. Takes effect on the operator's next
    /// request (the middleware reads the scope every time).
    pub async fn set_scope(
        &self,
        actor: &Actor,
        id: &OperatorId,
        tenants: Option<Vec<crate::domain::TenantId>>,
    ) -> Result<OperatorRow, AuthError> {
        let op = self
            .get(id)
            .await?
            .ok_or_else(|| AuthError::NotFound(format!("operator {id}")))?;
        let mut tenants: Vec<String> = tenants
            .unwrap_or_default()
            .into_iter()
            .map(|t| t.to_string())
            .collect();
        tenants.sort();
        tenants.dedup();
        if op.role == Role::Admin && !tenants.is_empty() {
            return Err(AuthError::Invalid {
                field: "tenants",
                message: format!(
                    "{} is an admin, and admins see every tenant; scope an operator or viewer",
                    op.name
                ),
            });
        }
        let known: Vec<String> = self
            .store()
            .tenant_list()
            .await?
            .into_iter()
            .map(|t| t.id.to_string())
            .collect();
        if let Some(t) = tenants.iter().find(|t| !known.contains(t)) {
            return Err(AuthError::Invalid {
                field: "tenants",
                message: format!("no tenant {t}"),
            });
        }
        self.audit(
            NewEvent::new(actor.clone(), "operator.scope")
                .params(json!({
                    "operator": id.as_str(),
                    "name": op.name,
                    "tenants": if tenants.is_empty() { json!("all") } else { json!(tenants) },
                }))
                .outcome("requested"),
        )
        .await?;
        self.store().operator_set_tenants(id, &tenants).await?;
        Ok(op)
    }

    /// Audits an attempt on an object of a tenant outside the operator's
    /// scope; the operator is answered `NotFound`, as if it did not exist.
    pub async fn out_of_scope(&self, operator: &str, what: &str, tenant: &str) {
        let event = NewEvent::new(Actor::Operator(operator.to_owned()), "operator.refused")
            .params(json!({ "what": what, "tenant": tenant, "why": "scope" }))
            .outcome("denied: scope");
        let event = match tenant.parse::<crate::domain::TenantId>() {
            Ok(t) => event.tenant(&t),
            Err(_) => event,
        };
        if let Err(e) = self.store().audit_append(event).await {
            tracing::error!(error = %format!("{e:#}"), "failed to audit a refused attempt");
        }
    }

    /// Disables (ending their dashboard sessions at once) or enables an
    /// operator. An admin cannot disable themself.
    pub async fn set_disabled(
        &self,
        actor: &Actor,
        id: &OperatorId,
        disabled: bool,
    ) -> Result<OperatorRow, AuthError> {
        if disabled && *actor == Actor::Operator(id.to_string()) {
            return Err(AuthError::Conflict(
                "you cannot disable yourself; ask another admin".into(),
            ));
        }
        let op = self
            .get(id)
            .await?
            .ok_or_else(|| AuthError::NotFound(format!("operator {id}")))?;
        let action = if disabled {
            "operator.disable"
        } else {
            "operator.enable"
        };
        self.audit(
            NewEvent::new(actor.clone(), action)
                .params(json!({ "operator": id.as_str(), "name": op.name }))
                .outcome("requested"),
        )
        .await?;
        self.store()
            .operator_set_disabled(id, disabled.then(now_ms))
            .await?;
        Ok(op)
    }

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
        let handle = Uuid::parse_str(&op.user_handle)
            .map_err(|e| anyhow::anyhow!("malformed user handle in database: {e}"))?;
        let existing = self
            .store()
            .passkeys_of(&op.id)
            .await?
            .iter()
            .map(|p| serde_json::from_str::<Passkey>(&p.passkey).map(|k| k.cred_id().clone()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| anyhow::anyhow!("malformed passkey in database: {e}"))?;
        self.0
            .webauthn
            .start_passkey_registration(handle, &op.name, &op.name, Some(existing))
            .map_err(|e| AuthError::Internal(anyhow::anyhow!("cannot start registration: {e}")))
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
            .map_err(|e| anyhow::anyhow!("malformed passkey in database: {e}"))?;
        if keys.is_empty() {
            return Err(unknown());
        }
        let (rcr, state) = self
            .0
            .webauthn
            .start_passkey_authentication(&keys)
            .map_err(|e| AuthError::Internal(anyhow::anyhow!("cannot start login: {e}")))?;
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
            let mut key: Passkey = serde_json::from_str(&row.passkey)
                .map_err(|e| anyhow::anyhow!("malformed passkey in database: {e}"))?;
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

    /// Audits an attempt a logged-in operator's role does not allow.
    pub async fn refused(&self, operator: &OperatorId, what: &str) {
        let event = NewEvent::new(Actor::Operator(operator.to_string()), "operator.refused")
            .params(json!({ "what": what }))
            .outcome("denied: role");
        if let Err(e) = self.store().audit_append(event).await {
            tracing::error!(error = %format!("{e:#}"), "failed to audit a refused attempt");
        }
    }
}

/// `first_start_link_once` met another replica's first admin half made:
/// look again.
struct Retry;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn login_names_are_bounded_and_plain() {
        assert_eq!(checked_login(" alice ").unwrap(), "alice");
        assert!(checked_login("alice@example.com").is_ok());
        for bad in ["", "   ", "a b", "al\u{7}ice", "<script>", &"x".repeat(65)] {
            assert!(checked_login(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn passkey_names_may_hold_spaces_but_no_control_characters() {
        assert_eq!(
            checked_name("passkey_name", "Work laptop").unwrap(),
            "Work laptop"
        );
        assert!(checked_name("passkey_name", "tab\there").is_err());
    }
}
