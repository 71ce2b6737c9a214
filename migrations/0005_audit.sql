-- The audit trail: one row per admin change, written in the transaction of the change itself, so a
-- change that rolls back leaves no event. `id` orders the events (newest first) and is the cursor
-- of `GET /admin/audit`. Never a secret: the actor is an admin token's name, never the token, and a
-- credential is named by its client id only. `details` is a small JSON object (see docs/contract.md).
CREATE TABLE audit_events (
  id           bigserial PRIMARY KEY,
  time         timestamptz NOT NULL,
  actor        text NOT NULL,
  source       text NOT NULL,
  action       text NOT NULL,
  profile      text,
  environment  text,
  service_uuid text,
  client_id    text,
  details      jsonb
);

-- A profile's history, newest first.
CREATE INDEX audit_events_by_profile ON audit_events (profile, id DESC);
