-- Live links: short-lived capability URLs to a session's live view that an
-- agent hands to its own users (`POST /api/sessions/{id}/live_link`), for a
-- tenant whose settings allow it. Only the SHA-256 of a link's token is
-- kept; a link works until it expires or is revoked (by its agent, or any
-- key of the tenant), and stops with its session or when its key is revoked.
CREATE TABLE live_links (
    id          TEXT PRIMARY KEY,
    token_hash  TEXT NOT NULL UNIQUE,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    session_id  TEXT NOT NULL,
    key_id      TEXT NOT NULL,
    mode        TEXT NOT NULL CHECK (mode IN ('view', 'control')),
    created_at  BIGINT NOT NULL,
    expires_at  BIGINT NOT NULL,
    revoked_at  BIGINT
);
CREATE INDEX live_links_session ON live_links(session_id);
