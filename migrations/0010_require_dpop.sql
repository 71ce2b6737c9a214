-- Services that accept only DPoP-bound tokens: the token endpoint issues them only tokens
-- bound with a DPoP proof, and the gateway refuses Bearer tokens for them.
ALTER TABLE services ADD COLUMN require_dpop boolean NOT NULL DEFAULT false;
