-- The per-sandbox egress log: one row per proxied connection (written when it
-- ends, with its byte counts) or refusal. Host and port only, never a URL.
-- Times are Unix milliseconds (INTEGER).

CREATE TABLE egress_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    sandbox_id  TEXT NOT NULL,
    ts          INTEGER NOT NULL,
    host        TEXT NOT NULL,
    port        INTEGER NOT NULL CHECK (port BETWEEN 0 AND 65535),
    decision    TEXT NOT NULL CHECK (decision IN ('allowed', 'denied')),
    reason      TEXT,
    bytes_up    INTEGER NOT NULL DEFAULT 0,
    bytes_down  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX egress_log_sandbox ON egress_log(sandbox_id, id);
CREATE INDEX egress_log_ts ON egress_log(ts);
