-- Credentials a resource server introspects with: the profiles whose access tokens the credential may
-- introspect at POST /oauth/introspect, authenticating as at the token endpoint (a JSON array of
-- profile ids, set only by an admin; null: none, the credential may not introspect at all).
ALTER TABLE credentials ADD COLUMN introspect_profiles jsonb;
