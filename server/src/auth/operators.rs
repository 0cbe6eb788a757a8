//! Operators as accounts: reading them, their tenant scope, disabling and
//! enabling, and the audit rows of attempts their role or scope refuses.

use app::api::auth::Role;
use serde_json::json;

use super::{Auth, AuthError};
use crate::audit::{Actor, NewEvent};
use crate::domain::OperatorId;
use crate::store::operators::OperatorRow;
use crate::time::now_ms;

impl Auth {
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
