-- Several control planes on one database (issue 13).
--
-- `deployment`: one row made at the first migration: the deployment's own
-- random id (mixed into every internal hop's signature, so a hop signed for
-- another deployment with the same secret is refused) and the id of the
-- master key the vault is sealed under (a replica with another key is
-- refused at start; `keys rotate` moves it).
CREATE TABLE deployment (
    id             INTEGER PRIMARY KEY CHECK (id = 1),
    deployment_id  TEXT NOT NULL,
    key_id         TEXT,
    created_at     BIGINT NOT NULL
);

-- One row per replica name (`replica_name`; sessions.host and
-- sandboxes.host hold it). `heartbeat_at` moves every few seconds while the
-- replica runs; a replica whose heartbeat is older than the loss window is
-- `lost`: its sessions are ended (`replica_lost`) and its browsers stopped
-- by the replica that holds the housekeeping lock.
CREATE TABLE replicas (
    name            TEXT PRIMARY KEY,
    instance        TEXT NOT NULL,     -- random per process start
    advertise_url   TEXT,
    key_id          TEXT NOT NULL,
    schema_version  BIGINT NOT NULL,
    version         TEXT NOT NULL,
    state           TEXT NOT NULL,     -- up | stopped | lost
    started_at      BIGINT NOT NULL,
    heartbeat_at    BIGINT NOT NULL
);
CREATE INDEX replicas_state ON replicas(state, heartbeat_at);
