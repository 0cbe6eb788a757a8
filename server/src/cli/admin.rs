//! `cordon tenant …` and `cordon apikey …`, through the tenants service.

use std::process::ExitCode;

use super::*;

pub(super) async fn tenant(store: &Store, command: TenantCommand) -> anyhow::Result<()> {
    match command {
        TenantCommand::Create { id, name } => {
            let id: TenantId = id.parse().map_err(|e| anyhow::anyhow!("tenant id: {e}"))?;
            tenants::create(store, &Actor::Cli, &id, name.as_deref()).await?;
            println!("tenant {id} created");
        }
        TenantCommand::List => {
            for t in tenants::list(store).await? {
                println!("{}\t{}", t.id, t.name);
            }
        }
    }
    Ok(())
}

pub(super) async fn apikey(store: &Store, command: ApikeyCommand) -> anyhow::Result<ExitCode> {
    match command {
        ApikeyCommand::Create { tenant, label } => {
            let tenant: TenantId = tenant
                .parse()
                .map_err(|e| anyhow::anyhow!("tenant id: {e}"))?;
            let (id, key) = tenants::create_key(store, &Actor::Cli, &tenant, &label).await?;
            eprintln!("API key {id} created for tenant {tenant}. It is shown once; store it now:");
            println!("{key}");
        }
        ApikeyCommand::List { tenant } => {
            let tenant: Option<TenantId> = tenant
                .map(|t| t.parse())
                .transpose()
                .map_err(|e| anyhow::anyhow!("tenant id: {e}"))?;
            for k in tenants::list_keys(store, tenant.as_ref()).await? {
                let state = if k.revoked_at.is_some() {
                    "revoked"
                } else {
                    "active"
                };
                println!("{}\t{}\t{}\t{}", k.id, k.tenant, state, k.label);
            }
        }
        ApikeyCommand::Revoke { id } => {
            tenants::revoke_key(store, &Actor::Cli, &id).await?;
            println!("API key {id} revoked");
        }
    }
    Ok(ExitCode::SUCCESS)
}
