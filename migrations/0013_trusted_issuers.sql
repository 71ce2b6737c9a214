-- Trusted issuers of workload identity federation: an issuer whose tokens (a Kubernetes projected
-- service-account token, a GitHub Actions OIDC token, a SPIFFE JWT-SVID) a federated credential
-- accepts in place of a secret. `name` is how credentials name it (their verifier holds the name);
-- `settings` is the rest of its document (keys' source, audience, algorithms, lifetime, profiles).
CREATE TABLE trusted_issuers (
  name text PRIMARY KEY,
  issuer text NOT NULL,
  settings jsonb NOT NULL,
  created_at timestamptz NOT NULL,
  updated_at timestamptz NOT NULL
);
