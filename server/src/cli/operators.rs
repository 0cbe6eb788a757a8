//! `cordon operator …`, through the auth service.

use super::*;
use crate::auth::Auth;
use crate::time::rfc3339_ms;

pub(super) async fn operator(
    store: &Store,
    settings: &Settings,
    command: OperatorCommand,
) -> anyhow::Result<()> {
    let auth = Auth::new(
        store.clone(),
        &settings.dashboard_url(settings.server.bind.port()),
        None,
    )?;
    match command {
        OperatorCommand::Invite { name, role } => {
            let inv = auth.invite(&Actor::Cli, &name, role).await?;
            eprintln!(
                "Operator {} ({}) created. Send them this one-time link (valid until {}):",
                inv.operator.name,
                role,
                rfc3339_ms(inv.expires_at)
            );
            println!("{}", inv.link);
        }
        OperatorCommand::EnrollLink { name } => {
            let inv = auth.fresh_link(&Actor::Cli, name.as_deref()).await?;
            eprintln!(
                "A fresh one-time link for {} (valid until {}); links printed before for them no longer work:",
                inv.operator.name,
                rfc3339_ms(inv.expires_at)
            );
            println!("{}", inv.link);
        }
        OperatorCommand::List => {
            let scopes = auth.scopes().await?;
            for o in auth.list().await? {
                let state = if o.disabled_at.is_some() {
                    "disabled"
                } else if o.passkeys == 0 {
                    "not-enrolled"
                } else {
                    "active"
                };
                let tenants = scopes
                    .get(o.id.as_str())
                    .filter(|_| o.role != app::api::auth::Role::Admin)
                    .map_or_else(|| "all tenants".to_owned(), |t| t.join(","));
                println!(
                    "{}\t{}\t{}\t{}\t{} passkey(s)\t{}",
                    o.id, o.name, o.role, state, o.passkeys, tenants
                );
            }
        }
        OperatorCommand::Disable { name } => {
            let op = auth.by_name(&name).await?;
            auth.set_disabled(&Actor::Cli, &op.id, true).await?;
            println!("operator {name} disabled; their dashboard sessions have ended");
        }
        OperatorCommand::Scope { name, tenants, all } => {
            let op = auth.by_name(&name).await?;
            let scope = (!all).then_some(tenants);
            let shown = scope.as_ref().map(|t| {
                let mut names: Vec<String> = t.iter().map(ToString::to_string).collect();
                names.sort();
                names.dedup();
                names.join(", ")
            });
            auth.set_scope(&Actor::Cli, &op.id, scope).await?;
            match shown {
                Some(t) => println!("operator {name} now sees only tenants {t}"),
                None => println!("operator {name} now sees every tenant"),
            }
        }
        OperatorCommand::Enable { name } => {
            let op = auth.by_name(&name).await?;
            auth.set_disabled(&Actor::Cli, &op.id, false).await?;
            println!("operator {name} enabled");
        }
    }
    Ok(())
}
