-- The live view's single-use tickets, in the database so a ticket issued by
-- one replica (the dashboard's call) is taken by whichever replica the
-- WebSocket reaches. Only the SHA-256 of a ticket is kept; a ticket is
-- deleted when used, and expired ones at the next issue.
CREATE TABLE live_tickets (
    hash         TEXT PRIMARY KEY,
    operator_id  TEXT NOT NULL,
    session_id   TEXT NOT NULL,
    expires_at   BIGINT NOT NULL
);
CREATE INDEX live_tickets_expiry ON live_tickets(expires_at);
