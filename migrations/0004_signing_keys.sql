-- Signing keys with a rotation schedule (docs/contract.md §3). Every instance computes the same
-- schedule from these stored times: a key signs from `active_from` until the next key's
-- `active_from`, then verifies for one token lifetime plus the tolerated clock skew, then retires.
-- Rows are never deleted, so `GET /admin/keys` lists retired keys too.
--
-- `public_jwk` is the public half ({kty, n, e}): enough to verify and publish without opening the
-- private key. `private_key` is PKCS#8 PEM, or `enc:v1:...` (AES-256-GCM) when KEY_ENCRYPTION_KEY
-- is set. The generated key of earlier versions (server_keys `signing_key`) is moved here at start
-- (its kid is a thumbprint, which SQL cannot compute), so existing deployments keep their kid.
CREATE TABLE signing_keys (
  kid         text PRIMARY KEY,
  public_jwk  jsonb NOT NULL,
  private_key text NOT NULL,
  created_at  timestamptz NOT NULL,
  active_from timestamptz NOT NULL,
  -- The order keys were added in (rotations are serialised): of two keys starting at the same
  -- moment, the later one signs.
  position    serial NOT NULL
);
