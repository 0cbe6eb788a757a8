-- Second-factor seeds (TOTP, RFC 6238) per tenant and domain, each with a
-- label ("admin account", "billing"). The secret and its parameters are
-- sealed like cookies (XChaCha20-Poly1305 under the master key `key_id`
-- names, associated data binding tenant_id, domain and id); the parameters
-- are also kept in the clear for listing (the sealed copy is the one used).
-- A grant request may ask for `totp`: an operator-mode session opened with
-- its token may then have Cordon type the current code (`type_totp`).
CREATE TABLE vault_totp (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    domain        TEXT NOT NULL,
    label         TEXT NOT NULL,
    algorithm     TEXT NOT NULL CHECK (algorithm IN ('SHA1', 'SHA256', 'SHA512')),
    digits        INTEGER NOT NULL CHECK (digits BETWEEN 6 AND 8),
    period        INTEGER NOT NULL CHECK (period BETWEEN 10 AND 300),
    ciphertext    BLOB NOT NULL,
    nonce         BLOB NOT NULL,
    key_id        TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    last_used_at  INTEGER,
    UNIQUE (tenant_id, domain, label)
);
CREATE INDEX vault_totp_key ON vault_totp(key_id);

ALTER TABLE grant_requests ADD COLUMN totp INTEGER NOT NULL DEFAULT 0 CHECK (totp IN (0, 1));
