/**
 * The admin API's bodies of a federated credential (`FederatedCredential`): what an operator sends
 * to add one, and the answer, which holds nothing secret.
 */
import { Schema } from "effect"
import { FederatedIdentity } from "./FederatedCredential.js"
import { ClientId } from "./Identifiers.js"
import { DateTimeInput, Timestamp } from "./Models.js"

/** How a federated credential's client authenticates: a trusted issuer's token as its JWT client assertion. */
export const FederatedAuthMethod = Schema.Literal("federated_jwt").annotations({
  description: "federated_jwt: a federated credential; the client sends its workload's token from a trusted issuer as " +
    "client_assertion (RFC 7523 §2.2, client_assertion_type jwt-bearer) with client_id."
})

/** What an operator sends to add a federated credential. */
export const FederatedCredentialInput = Schema.Struct({
  expires_at: Schema.optional(DateTimeInput),
  issuer: FederatedIdentity.fields.issuer,
  subject: FederatedIdentity.fields.subject,
  claims: FederatedIdentity.fields.claims
}).annotations({ identifier: "FederatedCredentialInput", parseOptions: { onExcessProperty: "error" } })
export type FederatedCredentialInput = typeof FederatedCredentialInput.Type

/** A federated credential as answered at creation: nothing secret, the identity it accepts. */
export const NewFederatedCredential = Schema.Struct({
  client_id: ClientId,
  created_at: Timestamp,
  expires_at: Schema.optional(Timestamp).annotations({ description: "When it expires; absent when it never does." }),
  federated: FederatedIdentity,
  token_endpoint_auth_method: FederatedAuthMethod
}).annotations({ identifier: "NewFederatedCredential" })
export type NewFederatedCredential = typeof NewFederatedCredential.Type
