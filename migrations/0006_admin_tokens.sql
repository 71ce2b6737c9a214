-- Admin tokens managed at run time (POST/GET/DELETE /admin/tokens), beside the environment's
-- ADMIN_TOKEN and ADMIN_TOKENS. A token is stored only as the hex SHA-256 of what it is (256 random
-- bits, so a fast digest is enough), looked up by that digest and compared again in constant time.
-- `profiles` is a JSON array of profile names for the `owner` and `viewer` roles, NULL for `admin`.
-- A revoked token's row is deleted: every instance reads this table on each admin request, so a
-- revocation is refused everywhere from the next request on.
CREATE TABLE admin_tokens (
  name         text PRIMARY KEY,
  role         text NOT NULL CHECK (role IN ('admin', 'owner', 'viewer')),
  profiles     jsonb,
  digest       text NOT NULL UNIQUE,
  created_at   timestamptz NOT NULL,
  last_used_at timestamptz,
  CHECK ((role = 'admin') = (profiles IS NULL))
);
