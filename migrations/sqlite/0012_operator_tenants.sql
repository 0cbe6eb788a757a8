-- Operators scoped to tenants. An operator with no rows here sees every
-- tenant (so operators made before scopes existed keep working); one with
-- rows sees only those tenants, everywhere in the dashboard. Admins are
-- always global: setting a scope on one is refused by the auth service.
-- One role per operator (operators.role) applies in each of its tenants.
-- A tenant named in a scope cannot be deleted (no cascade): an operator
-- whose last tenant vanished would otherwise see every tenant.
CREATE TABLE operator_tenants (
    operator_id  TEXT NOT NULL REFERENCES operators(id) ON DELETE CASCADE,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    PRIMARY KEY (operator_id, tenant_id)
);
CREATE INDEX operator_tenants_tenant ON operator_tenants(tenant_id);
