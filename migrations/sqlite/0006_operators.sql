-- Operators of the dashboard, their passkeys, one-time enrollment links and
-- dashboard sessions. No passwords anywhere. Secrets (enrollment tokens,
-- session ids) are stored only as their SHA-256.
-- Times are Unix milliseconds (INTEGER).

CREATE TABLE operators (
    id             TEXT PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    role           TEXT NOT NULL CHECK (role IN ('admin', 'operator', 'viewer')),
    -- The WebAuthn user handle (a UUID), never shown.
    user_handle    TEXT NOT NULL UNIQUE,
    created_at     INTEGER NOT NULL,
    created_by     TEXT NOT NULL,
    disabled_at    INTEGER,
    last_login_at  INTEGER
);

CREATE TABLE passkeys (
    id            TEXT PRIMARY KEY,
    operator_id   TEXT NOT NULL REFERENCES operators(id) ON DELETE CASCADE,
    -- base64url credential id, unique across all operators.
    cred_id       TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    -- webauthn-rs `Passkey` as JSON (public key and counter; no secret).
    passkey       TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER
);
CREATE INDEX passkeys_operator ON passkeys(operator_id);

CREATE TABLE enrollments (
    id           TEXT PRIMARY KEY,
    operator_id  TEXT NOT NULL REFERENCES operators(id) ON DELETE CASCADE,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    used_at      INTEGER
);
CREATE INDEX enrollments_operator ON enrollments(operator_id);

-- tower-sessions records, keyed by the SHA-256 of the session id.
CREATE TABLE dashboard_sessions (
    id_hash      TEXT PRIMARY KEY,
    operator_id  TEXT,
    data         TEXT NOT NULL,
    expires_at   INTEGER NOT NULL
);
CREATE INDEX dashboard_sessions_operator ON dashboard_sessions(operator_id);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions(expires_at);

-- When each agent API key was last used (to the minute), for the admin page.
ALTER TABLE api_keys ADD COLUMN last_used_at INTEGER;
