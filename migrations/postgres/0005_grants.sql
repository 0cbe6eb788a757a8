-- Operator grants: an agent asks for credentials of some domains
-- (grant_requests), an operator approves or denies, and an approval yields
-- one token (grant_tokens). Only the token's SHA-256 (hex) is stored, set
-- when the requester first collects it after approval; until then
-- token_hash is NULL and the token does not exist anywhere.
-- Times are Unix milliseconds (BIGINT); JSON is TEXT; booleans are 0/1.

CREATE TABLE grant_requests (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    api_key_id  TEXT,
    domains     TEXT NOT NULL,
    reason      TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('pending', 'approved', 'denied', 'expired')),
    created_at  BIGINT NOT NULL,
    decided_at  BIGINT,
    decided_by  TEXT
);
CREATE INDEX grant_requests_tenant ON grant_requests(tenant_id, created_at);

CREATE TABLE grant_tokens (
    jti              TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    request_id       TEXT NOT NULL UNIQUE REFERENCES grant_requests(id) ON DELETE CASCADE,
    allowed_domains  TEXT NOT NULL,
    token_hash       TEXT UNIQUE,
    issued_at        BIGINT NOT NULL,
    expires_at       BIGINT NOT NULL,
    single_use       BIGINT NOT NULL CHECK (single_use IN (0, 1)),
    delivered_at     BIGINT,
    consumed_at      BIGINT,
    revoked_at       BIGINT
);
CREATE INDEX grant_tokens_expiry ON grant_tokens(expires_at);
