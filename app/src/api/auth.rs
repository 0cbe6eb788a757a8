//! Operators, roles and passkeys as the dashboard sees them. The passkey
//! ceremonies themselves are plain JSON endpoints under `/ui/auth/` (the
//! browser's WebAuthn API needs them in a fixed shape); these are the
//! server functions around them.

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::UiError;

/// What an operator may do. Ordered: each role may do what the ones below
/// it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads audit, sessions and screenshots.
    Viewer,
    /// Also decides grants, manages credentials and ends sessions.
    Operator,
    /// Also manages operators, tenants and API keys.
    Admin,
}

impl Role {
    /// Every role, lowest first.
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

    /// The stored and shown name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Viewer => "viewer",
            Self::Operator => "operator",
            Self::Admin => "admin",
        }
    }

    /// Whether this role may do what `needed` may.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "viewer" => Ok(Self::Viewer),
            "operator" => Ok(Self::Operator),
            "admin" => Ok(Self::Admin),
            other => Err(format!(
                "unknown role {other:?} (expected admin, operator or viewer)"
            )),
        }
    }
}

/// The logged-in operator, put into each request by the server's auth
/// middleware.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Operator {
    /// `op_…`.
    pub id: String,
    /// Login name.
    pub name: String,
    /// Role.
    pub role: Role,
    /// The tenants this operator sees and acts on; `None`: every tenant
    /// (always so for admins). Read again on every request, so a change of
    /// scope applies at once.
    pub tenants: Option<Vec<String>>,
}

impl Operator {
    /// Whether this operator sees (and, as their role allows, acts on)
    /// `tenant`'s sessions, grants, credentials, approvals, tasks and audit
    /// events.
    pub fn sees(&self, tenant: &str) -> bool {
        self.tenants
            .as_ref()
            .is_none_or(|ts| ts.iter().any(|t| t == tenant))
    }

    /// Whether this operator sees every tenant.
    pub fn global(&self) -> bool {
        self.tenants.is_none()
    }
}

/// One of the operator's passkeys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PasskeyInfo {
    /// `pk_…`.
    pub id: String,
    /// The name the operator gave it.
    pub name: String,
    /// Unix ms.
    pub created_at: i64,
    /// Unix ms of the last login with it.
    pub last_used_at: Option<i64>,
}

/// An operator as the admin page lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OperatorInfo {
    /// `op_…`.
    pub id: String,
    /// Login name.
    pub name: String,
    /// Role.
    pub role: Role,
    /// Unix ms.
    pub created_at: i64,
    /// Disabled operators cannot log in.
    pub disabled: bool,
    /// Unix ms.
    pub last_login_at: Option<i64>,
    /// How many passkeys they have (0: not enrolled yet).
    pub passkeys: i64,
    /// The tenants they are scoped to; `None`: every tenant.
    pub tenants: Option<Vec<String>>,
}

/// A one-time enrollment link, shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invite {
    /// The operator it enrolls.
    pub operator: OperatorInfo,
    /// The link (the secret is in its fragment, so it never reaches a log).
    pub link: String,
    /// Unix ms.
    pub expires_at: i64,
}

/// The logged-in operator.
#[server(prefix = "/ui/fn", endpoint = "whoami")]
pub async fn whoami() -> Result<Operator, UiError> {
    let (_, op) = super::backend::require(Role::Viewer, "see the dashboard").await?;
    Ok(op)
}

/// The calling operator's passkeys.
#[server(prefix = "/ui/fn", endpoint = "my_passkeys")]
pub async fn my_passkeys() -> Result<Vec<PasskeyInfo>, UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "list your passkeys").await?;
    ctl.my_passkeys(&op).await
}

/// Removes one of the calling operator's passkeys (never the last).
#[server(prefix = "/ui/fn", endpoint = "remove_passkey")]
pub async fn remove_passkey(id: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Viewer, "remove a passkey").await?;
    let request = use_context::<http::request::Parts>()
        .ok_or_else(|| UiError::internal("no request context"))?;
    ctl.remove_passkey(&op, id, &request).await
}

/// Every operator (admin).
#[server(prefix = "/ui/fn", endpoint = "list_operators")]
pub async fn list_operators() -> Result<Vec<OperatorInfo>, UiError> {
    let (ctl, op) = super::backend::require(Role::Admin, "list operators").await?;
    ctl.operators(&op).await
}

/// Creates an operator and their enrollment link (admin).
#[server(prefix = "/ui/fn", endpoint = "invite_operator")]
pub async fn invite_operator(name: String, role: Role) -> Result<Invite, UiError> {
    let (ctl, op) = super::backend::require(Role::Admin, "invite operators").await?;
    ctl.invite(&op, name, role).await
}

/// Disables or enables an operator (admin); disabling ends their dashboard
/// sessions at once.
#[server(prefix = "/ui/fn", endpoint = "set_operator_enabled")]
pub async fn set_operator_enabled(id: String, enabled: bool) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Admin, "disable or enable operators").await?;
    ctl.set_operator_enabled(&op, id, enabled).await
}

/// Scopes an operator to tenants (admin): `tenants` is a comma- or
/// space-separated list of tenant ids; empty means every tenant. Admins are
/// always global. Applies to the operator's next request.
#[server(prefix = "/ui/fn", endpoint = "set_operator_tenants")]
pub async fn set_operator_tenants(id: String, tenants: String) -> Result<(), UiError> {
    let (ctl, op) = super::backend::require(Role::Admin, "scope operators to tenants").await?;
    ctl.set_operator_tenants(&op, id, tenants).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_are_ordered_and_parse_only_their_names() {
        assert!(Role::Admin.allows(Role::Operator));
        assert!(Role::Operator.allows(Role::Viewer));
        assert!(!Role::Viewer.allows(Role::Operator));
        assert!(!Role::Operator.allows(Role::Admin));
        for r in Role::ALL {
            assert_eq!(r.as_str().parse::<Role>().unwrap(), r);
        }
        assert!("root".parse::<Role>().is_err());
        assert!("Admin".parse::<Role>().is_err());
    }

    #[test]
    fn an_operator_sees_only_their_tenants_and_an_unscoped_one_sees_all() {
        let mut op = Operator {
            id: "op_x".into(),
            name: "x".into(),
            role: Role::Operator,
            tenants: Some(vec!["acme".into()]),
        };
        assert!(op.sees("acme"));
        assert!(!op.sees("globex"));
        assert!(!op.sees("acm"));
        assert!(!op.global());
        op.tenants = Some(Vec::new());
        assert!(!op.sees("acme"), "an empty scope sees nothing");
        op.tenants = None;
        assert!(op.sees("globex") && op.global());
    }
}
