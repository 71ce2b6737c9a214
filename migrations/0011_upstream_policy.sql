-- Upstream targets are the operator's decision: the origins a profile's proxy services may target
-- besides UPSTREAM_ALLOWED_ORIGINS (a JSON array of normalised origins, set only by an admin; null:
-- none), and whether a service's proxy URL was set by an admin (then it is not judged). Services
-- written before are not approved: their upstreams are judged as an owner's.
ALTER TABLE profiles ADD COLUMN upstream_origins jsonb;
ALTER TABLE services ADD COLUMN upstream_approved boolean NOT NULL DEFAULT false;
