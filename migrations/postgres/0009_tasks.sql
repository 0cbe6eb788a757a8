-- Tasks (`run_task`): one instruction run by the model loop on one session,
-- and its trace, a row per step. A task that was running when its control
-- plane stopped is ended as `aborted` at the next start, its trace kept.
-- Screenshots stay in the recording store; a step names its screenshot's id.
-- Times are Unix milliseconds (BIGINT); JSON is TEXT.

CREATE TABLE tasks (
    id                   TEXT PRIMARY KEY,
    tenant_id            TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE,
    api_key_id           TEXT,
    session_id           TEXT,
    instruction          TEXT NOT NULL,
    status               TEXT NOT NULL CHECK (status IN
        ('running', 'finished', 'max_steps', 'deadline', 'error', 'aborted', 'denied')),
    summary              TEXT,
    result_data          TEXT,
    error                TEXT,
    step_count           BIGINT NOT NULL DEFAULT 0,
    max_steps            BIGINT NOT NULL,
    final_screenshot_id  TEXT,
    host                 TEXT NOT NULL,
    created_at           BIGINT NOT NULL,
    ended_at             BIGINT
);
CREATE INDEX tasks_tenant ON tasks(tenant_id, created_at);
CREATE INDEX tasks_session ON tasks(session_id);

CREATE TABLE task_steps (
    task_id            TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    n                  BIGINT NOT NULL,
    thought            TEXT,
    action             TEXT,
    outcome            TEXT NOT NULL,
    screenshot_id      TEXT,
    model_ms           BIGINT,
    prompt_tokens      BIGINT,
    completion_tokens  BIGINT,
    created_at         BIGINT NOT NULL,
    PRIMARY KEY (task_id, n)
);
