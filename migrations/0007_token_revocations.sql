-- Access tokens revoked by their client (POST /oauth/revoke, RFC 7009), by `jti`, kept only until
-- the token's own `exp` (`expires_at`): an expired token is refused anyway, so older rows are
-- deleted by the next revocation. A revocation is a catalogue write (it bumps `catalogue_version`
-- and announces its service's scope), so every instance's cache drops the service's answers and
-- reads the revocation back before the revoking request is answered (docs/cache-coherence.md).
-- Read with the credential: the revoked tokens of a client id, unexpired.
CREATE TABLE revoked_tokens (
  jti        text PRIMARY KEY,
  client_id  text NOT NULL,
  expires_at timestamptz NOT NULL
);

CREATE INDEX revoked_tokens_by_client ON revoked_tokens (client_id, expires_at);

-- A fourth role of stored admin tokens: `introspector`, scoped to profiles like `owner` and `viewer`,
-- good for POST /oauth/introspect only (resource servers).
ALTER TABLE admin_tokens DROP CONSTRAINT admin_tokens_role_check;
ALTER TABLE admin_tokens ADD CONSTRAINT admin_tokens_role_check
  CHECK (role IN ('admin', 'owner', 'viewer', 'introspector'));
