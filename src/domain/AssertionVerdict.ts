/**
 * A client assertion's verdict, whichever credential verified it (a key credential's
 * `private_key_jwt`, a federated credential's workload token): accepted, or refused with its reason
 * and whether the client may be told it (docs/contract.md §6, §7).
 */

/** Why an assertion was refused; `disclosed` when the client may be told. */
export interface AssertionRefusal {
  readonly reason: string
  readonly disclosed: boolean
}

export type AssertionVerdict =
  | { readonly _tag: "Accepted" }
  | { readonly _tag: "Refused"; readonly refusal: AssertionRefusal }

/** A refusal the client is told (its signature verified, or its algorithm is refused). */
export const told = (reason: string): AssertionRefusal => ({ reason, disclosed: true })
/** A refusal only the debug log says. */
export const kept = (reason: string): AssertionRefusal => ({ reason, disclosed: false })
