/**
 * The signing keys as the admin API answers them (`GET /admin/keys`, `POST /admin/keys/rotate`):
 * ids, places in the rotation schedule and times, never private material.
 */
import { Schema } from "effect"
import { Timestamp } from "./Models.js"

/** A signing key's place in the rotation schedule (docs/contract.md §3). */
export const SigningKeyStatus = Schema.Literal("next", "active", "retiring", "retired").annotations({
  identifier: "SigningKeyStatus",
  description: "next: published, signs from active_from; active: signs; retiring: superseded, still verifies " +
    "until retires_at; retired: verifies nothing, gone from the JWKS."
})

/** A signing key as the admin API lists it: its id, status and times, never private material. */
export const SigningKeyInfo = Schema.Struct({
  kid: Schema.String.annotations({ description: "The key's id (RFC 7638 thumbprint), as in the JWKS and token headers." }),
  status: SigningKeyStatus,
  created_at: Timestamp.annotations({ description: "When the key was made." }),
  active_from: Timestamp.annotations({ description: "When it starts (or started) signing." }),
  superseded_at: Schema.NullOr(Timestamp).annotations({
    description: "When the following key takes over signing; null while none is scheduled."
  }),
  retires_at: Schema.NullOr(Timestamp).annotations({
    description: "When it stops verifying (superseded_at + 3600 s + 60 s of tolerated clock skew); null while none is scheduled."
  })
}).annotations({ identifier: "SigningKey" })
export type SigningKeyInfo = typeof SigningKeyInfo.Type

export const RotatedKey = Schema.Struct({
  kid: SigningKeyInfo.fields.kid,
  status: SigningKeyStatus,
  active_from: SigningKeyInfo.fields.active_from
}).annotations({ identifier: "RotatedKey", description: "The new key: published now, signing from active_from." })
