/**
 * `credentials add --federated ISSUER --subject SUB [--claim NAME=VALUE]...`: a federated credential
 * (workload identity federation), whose client authenticates with a token its platform issued for
 * the workload rather than with a secret. The options, and how such a credential reads for people:
 * in `credentials add`'s answer and in the key column of `credentials list`.
 */
import { HelpDoc, Options, ValidationError } from "@effect/cli"
import { Effect } from "effect"
import { type FederatedIdentity, TrustedIssuerName } from "../domain/FederatedCredential.js"
import type { NewFederatedCredential } from "../domain/FederatedCredentialBodies.js"
import { formatTime, record } from "./Output.js"

/** `NAME=VALUE` pairs as claims; a pair without both, or a name given twice, is a bad value (exit 2). */
const parseClaims = (pairs: ReadonlyArray<string>) => {
  const claims: Record<string, string> = {}
  for (const pair of pairs) {
    const equals = pair.indexOf("=")
    const name = equals > 0 ? pair.slice(0, equals) : ""
    const value = equals > 0 ? pair.slice(equals + 1) : ""
    const problem = name === "" || value === ""
      ? `--claim ${JSON.stringify(pair)}: expected NAME=VALUE (e.g. repository=acme/billing)`
      : Object.hasOwn(claims, name)
      ? `--claim ${name} is given twice: a claim has one exact value`
      : undefined
    if (problem !== undefined) return Effect.fail(ValidationError.invalidValue(HelpDoc.p(problem)))
    claims[name] = value
  }
  return Effect.succeed(claims)
}

/** The options of `credentials add` for a federated credential. */
export const federatedOptions = {
  federated: Options.text("federated").pipe(
    Options.withPseudoName("ISSUER"),
    Options.withSchema(TrustedIssuerName),
    Options.withDescription(
      "A federated credential (workload identity federation), no secret: its client sends a token of the trusted " +
        "issuer ISSUER (issuers list) as its client assertion. The issuer must allow the profile. Needs --subject."
    ),
    Options.optional
  ),
  subject: Options.text("subject").pipe(
    Options.withPseudoName("SUB"),
    Options.withDescription(
      "With --federated: the token's sub, exactly (system:serviceaccount:NAMESPACE:NAME, " +
        "repo:OWNER/REPO:environment:NAME, spiffe://TRUST-DOMAIN/PATH)."
    ),
    Options.optional
  ),
  claims: Options.text("claim").pipe(
    Options.withPseudoName("NAME=VALUE"),
    Options.withDescription(
      "With --federated: another claim the token must carry with exactly this value (repository=acme/billing). " +
        "Repeat for several (up to 16); not iss, sub, aud, exp, nbf, iat or jti."
    ),
    Options.repeated,
    Options.mapEffect(parseClaims)
  )
}

/** Claims as `name=value` pairs, by name. */
const claimPairs = (claims: FederatedIdentity["claims"]) =>
  Object.entries(claims ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, value]) => `${name}=${value}`)

/** A federated credential's identity in a table cell: `issuer: subject`, and how many claims besides. */
export const federatedIdentityCell = (identity: FederatedIdentity): string => {
  const claims = claimPairs(identity.claims).length
  return `${identity.issuer}: ${identity.subject}${claims === 0 ? "" : ` (+${claims} claim${claims === 1 ? "" : "s"})`}`
}

/** A new federated credential for people: its client id and the identity it accepts; there is no secret. */
export const newFederatedCredentialText = (credential: NewFederatedCredential): string =>
  record([
    ["client_id", credential.client_id],
    ["issuer", credential.federated.issuer],
    ["subject", credential.federated.subject],
    ...(claimPairs(credential.federated.claims).length === 0
      ? []
      : [["claims", claimPairs(credential.federated.claims).join(", ")] as const]),
    ["created_at", formatTime(credential.created_at)],
    ["expires_at", credential.expires_at === undefined ? "never" : formatTime(credential.expires_at)]
  ])

/** What the operator does next: the workload's token is its client's proof. */
export const FEDERATED_NEXT_STEP = "no secret: the client sends its workload's token from the issuer as client_assertion " +
  "(client_assertion_type urn:ietf:params:oauth:client-assertion-type:jwt-bearer) with this client_id"
