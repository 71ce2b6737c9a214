-- Credentials that expire: at `expires_at` a credential is refused as if deleted, on every
-- instance, by comparing it with the clock at each decision; `expiry_recorded` says its
-- `credential.expired` audit event was written (a conditional UPDATE, so one instance writes it once).
ALTER TABLE credentials ADD COLUMN expires_at timestamptz;
ALTER TABLE credentials ADD COLUMN expiry_recorded boolean NOT NULL DEFAULT false;

-- What the expiry sweep looks for: live credentials past their expiry and not yet recorded.
CREATE INDEX credentials_expiry_due ON credentials (expires_at)
  WHERE deleted_at IS NULL AND expires_at IS NOT NULL AND NOT expiry_recorded;

-- A profile's policy: the longest lifetime of a new credential, in days (null: none).
ALTER TABLE profiles ADD COLUMN credential_max_lifetime_days integer
  CHECK (credential_max_lifetime_days BETWEEN 1 AND 3650);

-- A service's per-client rate limit: {"requests": N, "per_seconds": S}, or null for none.
ALTER TABLE services ADD COLUMN rate_limit jsonb;
