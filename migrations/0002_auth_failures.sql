-- Failed client authentications per (client id, remote address) pair, shared by every instance so
-- that N instances allow AUTH_FAILURE_LIMIT failures a minute for a pair, not N times that. Only
-- failures write here; the pair is a SHA-256 digest (the client id sent may be any text).
CREATE TABLE auth_failures (
  pair     text PRIMARY KEY,
  count    integer NOT NULL,
  reset_at timestamptz NOT NULL
);

CREATE INDEX auth_failures_by_reset ON auth_failures (reset_at);
