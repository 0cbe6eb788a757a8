-- A grant request may ask for CDP access (`cdp: true`): an operator-mode
-- session opened with its token may then be driven over /cdp/{id}, where
-- scripts read what the page can (localStorage, non-HttpOnly cookies).
-- Without it, the CDP endpoint refuses operator-mode sessions.
ALTER TABLE grant_requests ADD COLUMN cdp BIGINT NOT NULL DEFAULT 0 CHECK (cdp IN (0, 1));
