-- The catalogue: profiles contain environments, environments contain services.
CREATE TABLE profiles (
  profile    text PRIMARY KEY,
  created_at timestamptz NOT NULL
);

CREATE TABLE environments (
  profile    text NOT NULL REFERENCES profiles (profile) ON DELETE CASCADE,
  name       text NOT NULL,
  created_at timestamptz NOT NULL,
  PRIMARY KEY (profile, name)
);

-- A uuid identifies a service inside its profile and environment, so the same uuid may exist in
-- two environments (a token for one is never valid for the other).
CREATE TABLE services (
  profile     text NOT NULL,
  environment text NOT NULL,
  uuid        text NOT NULL,
  name        text NOT NULL,
  auth_type   text NOT NULL CHECK (auth_type IN ('oauth', 'none')),
  handler     jsonb NOT NULL,
  created_at  timestamptz NOT NULL,
  position    bigserial,
  PRIMARY KEY (profile, environment, uuid),
  FOREIGN KEY (profile, environment) REFERENCES environments (profile, name) ON DELETE CASCADE
);

-- Credentials are never deleted, only tombstoned (deleted_at), and deliberately carry no foreign
-- key to services: the tombstone outlives its service, so a client id is never reused and a token
-- of a deleted credential never verifies again, even when the service is re-created.
CREATE TABLE credentials (
  client_id    text PRIMARY KEY,
  profile      text NOT NULL,
  environment  text NOT NULL,
  service_uuid text NOT NULL,
  secret_hash  text NOT NULL,
  created_at   timestamptz NOT NULL,
  last_used_at timestamptz,
  deleted_at   timestamptz,
  position     bigserial
);

CREATE INDEX credentials_live_by_service
  ON credentials (profile, environment, service_uuid)
  WHERE deleted_at IS NULL;

-- Keys every instance must share: the credential digest key and the generated signing key.
CREATE TABLE server_keys (
  name       text PRIMARY KEY,
  value      text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
