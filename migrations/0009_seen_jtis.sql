-- One-time JWT ids: the jti of every accepted client assertion (private_key_jwt) and
-- DPoP proof, kept until the JWT expires, so that a replay is refused on every instance. The key is
-- a SHA-256 digest of what the jti belongs to and the jti itself (a jti is any text a client chose).
CREATE TABLE seen_jtis (
  key        text PRIMARY KEY,
  expires_at timestamptz NOT NULL
);

CREATE INDEX seen_jtis_by_expiry ON seen_jtis (expires_at);
