-- The credential vault: one row per (tenant, domain) holding that site's
-- cookies sealed with XChaCha20-Poly1305 under the master key `key_id`
-- names. The associated data binds each ciphertext to (tenant_id, domain,
-- id), so a ciphertext copied onto another row does not decrypt.
-- Times are Unix milliseconds (INTEGER); earliest_expiry is NULL when every
-- cookie is a session cookie.

CREATE TABLE vault_credentials (
    id                 TEXT PRIMARY KEY,
    tenant_id          TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    domain             TEXT NOT NULL,
    ciphertext         BLOB NOT NULL,
    nonce              BLOB NOT NULL,
    key_id             TEXT NOT NULL,
    created_at         INTEGER NOT NULL,
    last_refreshed_at  INTEGER NOT NULL,
    last_injected_at   INTEGER,
    earliest_expiry    INTEGER,
    cookie_count       INTEGER NOT NULL CHECK (cookie_count >= 0),
    source             TEXT NOT NULL CHECK (source IN ('import', 'refresh')),
    UNIQUE (tenant_id, domain)
);
CREATE INDEX vault_credentials_key ON vault_credentials(key_id);
