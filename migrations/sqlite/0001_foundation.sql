-- Tenants, agent API keys (hashed) and the hash-chained audit log.
-- Times are Unix milliseconds (INTEGER); booleans are INTEGER 0/1.

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);

CREATE TABLE api_keys (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    key_hash    TEXT NOT NULL UNIQUE,
    label       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
CREATE INDEX api_keys_tenant ON api_keys(tenant_id);

-- seq is assigned by the writer as head.seq + 1 under the audit_head row lock;
-- the primary key makes a forked chain impossible even if that lock were bypassed.
CREATE TABLE audit_events (
    seq         INTEGER PRIMARY KEY,
    ts          INTEGER NOT NULL,
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

-- The chain's head: one row, locked by every append, so appends serialise and
-- a truncated tail is detectable by `cordon audit verify`.
CREATE TABLE audit_head (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    seq   INTEGER NOT NULL,
    hash  TEXT NOT NULL
);
INSERT INTO audit_head (id, seq, hash)
VALUES (1, 0, '0000000000000000000000000000000000000000000000000000000000000000');

CREATE TRIGGER audit_events_no_update BEFORE UPDATE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END;
CREATE TRIGGER audit_events_no_delete BEFORE DELETE ON audit_events
BEGIN SELECT RAISE(ABORT, 'audit_events is append-only'); END;
