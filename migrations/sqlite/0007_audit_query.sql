-- Indexes for the dashboard's audit search (`Store::audit_query`).
-- Every page is read in seq order, so each index ends in seq: a filter whose
-- equalities cover an index's leading columns reads its page as one range of
-- that index, at the start, the middle or the end of the log alike.
--   tenant                  → audit_events_tenant (0001)
--   session (+ anything)    → audit_events_session (0001)
--   action prefix           → audit_events_action, one range per action
--   actor (+ action prefix) → audit_events_actor_action, one range per action
--   tenant + action prefix  → audit_events_tenant_action, one range per action
--   tenant + actor (+ …)    → audit_events_tenant_actor_action, one range per action
--   time range              → audit_events_ts, once, to turn it into a seq range
CREATE INDEX audit_events_ts ON audit_events(ts);
CREATE INDEX audit_events_action ON audit_events(action, seq);
CREATE INDEX audit_events_actor_action ON audit_events(actor, action, seq);
CREATE INDEX audit_events_tenant_action ON audit_events(tenant_id, action, seq);
CREATE INDEX audit_events_tenant_actor_action ON audit_events(tenant_id, actor, action, seq);
