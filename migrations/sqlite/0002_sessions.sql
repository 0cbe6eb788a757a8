-- Browser sessions and the sandboxes that run them.

-- One row per started browser. `pid` is the sandbox's process (group) id on
-- `host`; `marker` is a string unique to this sandbox found in its command
-- line, so the reaper never signals a recycled pid.
CREATE TABLE sandboxes (
    id          TEXT PRIMARY KEY,
    driver      TEXT NOT NULL,
    host        TEXT NOT NULL,
    pid         INTEGER,
    marker      TEXT NOT NULL,
    cdp_url     TEXT,
    state       TEXT NOT NULL,          -- starting | warm | assigned | stopped
    session_id  TEXT,
    created_at  INTEGER NOT NULL,
    stopped_at  INTEGER
);
CREATE INDEX sandboxes_live ON sandboxes(host, state);

-- starting -> ready -> closing -> closed | failed
CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenants(id),
    api_key_id       TEXT,
    state            TEXT NOT NULL,
    close_reason     TEXT,
    error            TEXT,
    credential_mode  TEXT NOT NULL,
    domains          TEXT NOT NULL,     -- JSON array
    record           TEXT NOT NULL,
    viewport_w       INTEGER NOT NULL,
    viewport_h       INTEGER NOT NULL,
    sandbox_id       TEXT,
    host             TEXT NOT NULL,
    created_at       INTEGER NOT NULL,
    ready_at         INTEGER,
    closed_at        INTEGER,
    deadline_at      INTEGER NOT NULL,
    last_activity_at INTEGER NOT NULL
);
CREATE INDEX sessions_tenant_state ON sessions(tenant_id, state);
CREATE INDEX sessions_host_state ON sessions(host, state);
