-- Tenants, agent API keys (hashed) and the hash-chained audit log.
-- Times are Unix milliseconds (BIGINT); booleans are INTEGER 0/1 (as on SQLite).

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  BIGINT NOT NULL
);

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    key_hash    TEXT NOT NULL UNIQUE,
    label       TEXT NOT NULL,
    created_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);
CREATE INDEX api_keys_tenant ON api_keys(tenant_id);

CREATE TABLE audit_events (
    seq         BIGINT PRIMARY KEY,
    ts          BIGINT NOT NULL,
    tenant_id   TEXT,
    session_id  TEXT,
    actor       TEXT NOT NULL,
    action      TEXT NOT NULL,
    params      TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    prev_hash   TEXT NOT NULL,
    hash        TEXT NOT NULL
);
CREATE INDEX audit_events_tenant ON audit_events(tenant_id, seq);
CREATE INDEX audit_events_session ON audit_events(session_id, seq);

CREATE TABLE audit_head (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    seq   BIGINT NOT NULL,
    hash  TEXT NOT NULL
);
INSERT INTO audit_head (id, seq, hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

CREATE FUNCTION audit_events_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'audit_events is append-only';
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER audit_events_no_update BEFORE UPDATE OR DELETE ON audit_events
FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
