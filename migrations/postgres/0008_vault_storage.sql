-- The vault holds localStorage too: a credential's plaintext is now a
-- storageState object (cookies and origins), and storage_count says how many
-- localStorage items it holds (0 for rows sealed before, which hold cookies
-- only). BIGINT like cookie_count: both are read as i64 through sqlx::Any.
ALTER TABLE vault_credentials
    ADD COLUMN storage_count BIGINT NOT NULL DEFAULT 0 CHECK (storage_count >= 0);
