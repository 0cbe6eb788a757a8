-- The per-sandbox egress log: one row per proxied connection (written when it
-- ends, with its byte counts) or refusal. Host and port only, never a URL.
-- Times are Unix milliseconds (BIGINT).

CREATE TABLE egress_log (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sandbox_id  TEXT NOT NULL,
    ts          BIGINT NOT NULL,
    host        TEXT NOT NULL,
    port        INTEGER NOT NULL CHECK (port BETWEEN 0 AND 65535),
    decision    TEXT NOT NULL CHECK (decision IN ('allowed', 'denied')),
    reason      TEXT,
    bytes_up    BIGINT NOT NULL DEFAULT 0,
    bytes_down  BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX egress_log_sandbox ON egress_log(sandbox_id, id);
CREATE INDEX egress_log_ts ON egress_log(ts);
