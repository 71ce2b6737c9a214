-- Coherent per-instance caches on PostgreSQL (docs/cache-coherence.md).
--
-- `catalogue_version` counts committed changes to profiles, environments, services and
-- credentials. Every write transaction of the catalogue begins by incrementing it (which also
-- serialises catalogue writes: they are rare, and it rules out deadlocks between them) and notifies
-- `service_auth_cache` with the new value, delivered to listening instances at commit.
CREATE TABLE catalogue_version (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version   bigint NOT NULL
);

INSERT INTO catalogue_version (singleton, version) VALUES (true, 0);

-- One row per running instance that serves from a cache: it may trust its cache only while its
-- lease is valid, and it records the last catalogue version it has dropped its cache for. A
-- deletion is acknowledged once every live lease has acknowledged its version, or has run out.
CREATE TABLE cache_leases (
  instance_id   text PRIMARY KEY,
  expires_at    timestamptz NOT NULL,
  acked_version bigint NOT NULL
);
