/**
 * The client credentials grant (RFC 6749 §4.4), decided once: `decideToken` takes what a request
 * to `POST /oauth/token` said and answers it, in the order of the contract's precedence table, or
 * says what it still needs from storage. The endpoint's one execution (`TokenExecution`, which both
 * entries call) decides with it; this service (`ClientCredentialsGrant.complete`) carries a decision
 * that needs storage to its end in Effect, fetching what the catalogue cache did not hold, recording
 * a failure, refreshing `last_used_at`, up to the token to sign, which the execution signs.
 *
 * One indexed read finds the service and the presented client's live credential together; the only
 * write of a success is `last_used_at`, at most once a minute per credential.
 */
import { Context, Effect, Either, Layer, Option, type Redacted } from "effect"
import type { AuthorizationHeader } from "../domain/AuthorizationHeader.js"
import { AppConfig } from "../config/AppConfig.js"
import { SeenJtis } from "./SeenJtis.js"
import { makeProofVerifier } from "./DPoPProof.js"
import {
  DPOP_REQUIRED_DESCRIPTION,
  INVALID_REQUEST_DESCRIPTION,
  InvalidClient,
  InvalidDpopProof,
  InvalidRequest,
  InvalidTarget,
  TooManyAttempts,
  UnsupportedGrantType
} from "../domain/Errors.js"
import { type ClientId, isClientId } from "../domain/Identifiers.js"
import { lastUseIsStale } from "../domain/LastUse.js"
import { type Answer, errorAnswer } from "../domain/Answer.js"
import type { TokenResult } from "../observability/ServiceMetrics.js"
import { CatalogueLookup, type TokenTarget } from "../catalogue/CatalogueLookup.js"
import { LastUse } from "../catalogue/LastUse.js"
import { resourceAddress, type ServiceAddress, serviceAddress, spanAttributes } from "../domain/ServiceAddress.js"
import { tracerEnabled } from "../observability/Tracing.js"
import { AuthFailureLimiter } from "./AuthFailureLimiter.js"
import { type AssertionRefusal, ClientAssertions } from "./ClientAssertion.js"
import { authenticatedClient, refusalLine, refusalReason } from "./ClientAuthentication.js"
import { ClientSecrets, type ClientSecretsShape } from "../catalogue/ClientSecrets.js"
import { clientCredentials, formFields, NO_STORE, type TokenFields } from "./TokenForm.js"

/** What a token request said, as read by either entry. */
export interface TokenInput {
  readonly authorization: AuthorizationHeader
  /** The body when it is a form (`application/x-www-form-urlencoded`); undefined for any other body. */
  readonly form: string | undefined
  /** The client's address, for brute-force protection. */
  readonly remoteAddress: string
  readonly nowMillis: number
  /** The `DPoP` header (RFC 9449 §4.1), when sent: the token is then bound to the proof's key. */
  readonly dpop?: string | undefined
}

/** What the decision needs besides the request: all synchronous, all in memory. */
export interface TokenDecisionServices {
  readonly blockedAt: (clientId: string, address: string, nowMillis: number) => Option.Option<number>
  /** Whether failures of the pair are being counted where all instances see them (`AuthFailureLimiter`). */
  readonly counting: (clientId: string, address: string) => boolean
  /** The catalogue's answer; undefined when it must be read from storage. */
  readonly tokenTarget: (address: ServiceAddress, clientId: Option.Option<ClientId>) => Option.Option<TokenTarget> | undefined
  readonly matches: ClientSecretsShape["matches"]
  /** The service a `resource` (RFC 8707) names under this issuer; undefined when it names none. */
  readonly resourceAddress: (resource: string) => ServiceAddress | undefined
  /** A service URL's form under this issuer, which a `resource` naming none is told to follow. */
  readonly resourceTemplate: string
}

export type TokenDecision =
  /** A failure, answered as it is. */
  | { readonly _tag: "Answer"; readonly answer: Answer; readonly result: TokenResult }
  /** The catalogue cache does not hold the target: read it (`findTokenTarget`), then decide again. */
  | { readonly _tag: "NeedsTarget"; readonly address: ServiceAddress; readonly clientId: Option.Option<ClientId> }
  /**
   * Authentication failed: take one of the pair's attempts (shared between instances), then answer
   * `answer`, or 429 when none was left. `reason` is for the debug log (an assertion's verdict logs its own).
   */
  | { readonly _tag: "Refuse"; readonly clientId: string; readonly answer: Answer; readonly reason?: string }
  /** Authenticated while failures of the pair are being counted: once they are, 429 if they filled the window, else `next`. */
  | { readonly _tag: "Settle"; readonly clientId: ClientId; readonly next: Authenticated }
  /** Authenticated: sign a token for it, recording the credential's use first when `recordUse` (its `last_used_at` is stale). */
  | { readonly _tag: "Issue"; readonly clientId: ClientId; readonly address: ServiceAddress; readonly recordUse: boolean }
  /** Authenticated, with a DPoP proof (`DPoPProof`): a token bound to its key, or 400 `invalid_dpop_proof`. */
  | Bind
  /** A key credential's assertion to verify (`ClientAssertions`): then `next`, or `Refuse` with `answer`. */
  | {
    readonly _tag: "Assert"
    readonly assertion: Redacted.Redacted<string>
    readonly clientId: ClientId
    readonly verifier: string
    /** The service's profile (a federated credential's issuer must allow it). */
    readonly profile: string
    readonly next: Authenticated
    readonly answer: Answer
  }

type Issue = Extract<TokenDecision, { readonly _tag: "Issue" }>
interface Bind {
  readonly _tag: "Bind"
  readonly proof: string
  readonly issue: Issue
}
/** What follows a successful client authentication. */
type Authenticated = Issue | Bind | Extract<TokenDecision, { readonly _tag: "Answer" }>

/**
 * What an authenticated request gets: a token, or with a DPoP header a bound one; for a service with
 * `require_dpop`, without a DPoP header, `400 invalid_request` (the client authenticated: no failure
 * is counted).
 */
const issueOrBind = (input: TokenInput, issue: Issue, requireDpop: boolean | undefined): Authenticated =>
  input.dpop !== undefined
    ? { _tag: "Bind", proof: input.dpop, issue }
    : requireDpop === true
    ? dpopRequired
    : issue

/** A failure's answer: `no-store` always, and the Basic challenge when Basic authentication failed. */
const failureAnswer = (error: InvalidRequest | UnsupportedGrantType | InvalidTarget | TooManyAttempts | InvalidClient): Answer =>
  errorAnswer(
    error,
    error._tag === "InvalidClient" && error.basic ? { ...NO_STORE, "www-authenticate": `Basic realm="oauth"` } : NO_STORE
  )

const failure = (
  error: InvalidRequest | UnsupportedGrantType | InvalidTarget | TooManyAttempts | InvalidClient,
  result: TokenResult
): TokenDecision => ({ _tag: "Answer", answer: failureAnswer(error), result })

const missing = failure(new InvalidRequest({ description: INVALID_REQUEST_DESCRIPTION }), "invalid_request")
/** The pair has no attempt left in its window: 429 with `Retry-After`. */
const tooManyAttempts = (retryAfterSeconds: number): Extract<TokenDecision, { readonly _tag: "Answer" }> => ({
  _tag: "Answer",
  answer: failureAnswer(new TooManyAttempts({ retryAfterSeconds })),
  result: "invalid_client"
})
const dpopRequired: Authenticated = {
  _tag: "Answer",
  answer: failureAnswer(new InvalidRequest({ description: DPOP_REQUIRED_DESCRIPTION })),
  result: "invalid_request"
}
/** A refused assertion's answer: the fixed one, with its reason when that may be told (`ClientAssertion`). */
const assertionRefusal = (refusal: AssertionRefusal, fixed: Answer): Answer =>
  refusal.disclosed ? failureAnswer(new InvalidClient({ basic: false, reason: refusal.reason })) : fixed

/** The specification's description for every row-4 failure. */
const targetNotFound = missing

const invalidTarget = (description: string) => failure(new InvalidTarget({ description }), "invalid_target")
const manyResources = invalidTarget("Only one resource may be requested")
/** A `resource` of another form, or another origin (`127.0.0.1` for a `localhost` issuer): the form expected. */
const unknownResource = (template: string) => invalidTarget(`The resource is not a service URL of this server: expected ${template}`)
const contradictingResource = invalidTarget("The resource names another service than profile, environment and service_uuid")
/** Row 4 for a target named by `resource`: the request was well formed, its target is not one. */
const resourceNotFound = invalidTarget("The resource names no oauth service")

/**
 * The target of a request: its three fields, or the service its one `resource` names (RFC 8707),
 * which the fields, when sent too, must name as well. A failure is answered as it is.
 */
const targetOf = (
  fields: TokenFields,
  services: TokenDecisionServices
): TokenDecision | Pick<TokenFields, "profile" | "environment" | "service_uuid"> => {
  if (fields.resource === undefined) return fields
  if (fields.resource.length > 1) return manyResources
  const named = services.resourceAddress(fields.resource[0]!)
  if (named === undefined) return unknownResource(services.resourceTemplate)
  if (
    (fields.profile !== undefined && fields.profile !== named.profile) ||
    (fields.environment !== undefined && fields.environment !== named.environment) ||
    (fields.service_uuid !== undefined && fields.service_uuid.toLowerCase() !== named.uuid)
  ) return contradictingResource
  return { profile: named.profile, environment: named.environment, service_uuid: named.uuid }
}

/** Every answer of the token endpoint but a failure of storage itself, in the contract's order. */
export const decideToken = (input: TokenInput, services: TokenDecisionServices): TokenDecision => {
  // Only a form body carries fields; JSON or anything else yields none (docs/contract.md §1).
  const parsed = input.form === undefined ? Either.right<TokenFields>({}) : formFields(input.form)
  if (Either.isLeft(parsed)) return failure(parsed.left, "invalid_request")
  const fields = parsed.right

  // Rows 1 and 2: the grant type.
  if (fields.grant_type === undefined) return missing
  if (fields.grant_type !== "client_credentials") return failure(new UnsupportedGrantType(), "unsupported_grant_type")

  // A `resource` (RFC 8707) names the target instead of, or as well as, the three fields.
  const target = targetOf(fields, services)
  if ("_tag" in target) return target

  // Row 3: client credentials and the target present.
  const client = clientCredentials(input.authorization, fields)
  if (Either.isLeft(client)) return failure(client.left, "invalid_request")
  const { profile, environment, service_uuid } = target
  // Row 3's text is fixed by the contract; which field is missing is documented, not answered.
  if (client.right === undefined || profile === undefined || environment === undefined || service_uuid === undefined) {
    return missing
  }
  const { basic } = client.right

  // Throttled pairs are refused before anything is looked up.
  const blocked = services.blockedAt(client.right.clientId, input.remoteAddress, input.nowMillis)
  if (Option.isSome(blocked)) return tooManyAttempts(blocked.value)

  // Row 4: the target exists. A client id that is not of our form names no credential: row 5.
  const notFound = fields.resource === undefined ? targetNotFound : resourceNotFound
  const address = serviceAddress(profile, environment, service_uuid)
  if (address === undefined) return notFound
  const clientId = Option.liftPredicate(client.right.clientId, isClientId)
  const found = services.tokenTarget(address, clientId)
  if (found === undefined) return { _tag: "NeedsTarget", address, clientId }
  if (Option.isNone(found) || found.value.authType !== "oauth") return notFound

  // Row 5: which client the request authenticates as (`ClientAuthentication`), as at revocation.
  const stored = Option.getOrUndefined(found.value.credential)
  const credential = authenticatedClient(client.right, stored, input.nowMillis, services.matches)
  if (credential === undefined) {
    const reason = refusalReason(client.right, stored, input.nowMillis)
    return { _tag: "Refuse", clientId: client.right.clientId, answer: failureAnswer(new InvalidClient({ basic })), reason }
  }
  const next = issueOrBind(input, {
    _tag: "Issue",
    clientId: credential.clientId,
    address,
    recordUse: lastUseIsStale(credential.lastUsedAt?.getTime(), input.nowMillis)
  }, found.value.requireDpop)
  const { assertion } = client.right
  if (assertion !== undefined) {
    // private_key_jwt: the credential's key must still verify the assertion.
    const refusal = failureAnswer(new InvalidClient({ basic }))
    const { clientId: assertedId, secretHash: verifier } = credential
    const { profile: assertedProfile } = address
    return {
      _tag: "Assert",
      assertion: assertion.assertion,
      clientId: assertedId,
      verifier,
      profile: assertedProfile,
      next,
      answer: refusal
    }
  }
  // A right secret among wrong ones still being counted is answered as they turn out: refused if they filled the window.
  return services.counting(credential.clientId, input.remoteAddress) ? { _tag: "Settle", clientId: credential.clientId, next } : next
}

/** Where a completed decision ends: an answer, or a token to sign (bound to `jkt` when a DPoP proof was verified). */
export type TokenOutcome =
  | { readonly _tag: "Answer"; readonly answer: Answer; readonly result: TokenResult }
  | { readonly _tag: "Sign"; readonly clientId: ClientId; readonly address: ServiceAddress; readonly jkt: string | undefined }

export interface ClientCredentialsGrantShape {
  /** The synchronous services the decision reads. */
  readonly services: TokenDecisionServices
  /**
   * Carries a decision through to its outcome: reads the target from storage when the cache did not
   * hold it (and decides again), verifies an assertion or a DPoP proof, counts a failure, records
   * `last_used_at`. A storage failure is answered 503. Runs in the span its caller gives it.
   */
  readonly complete: (input: TokenInput, decision: TokenDecision) => Effect.Effect<TokenOutcome>
}

export class ClientCredentialsGrant extends Context.Tag("service-auth/ClientCredentialsGrant")<
  ClientCredentialsGrant,
  ClientCredentialsGrantShape
>() {
  static readonly layer = Layer.effect(
    ClientCredentialsGrant,
    Effect.gen(function*() {
      const lookup = yield* CatalogueLookup
      const lastUse = yield* LastUse
      const secrets = yield* ClientSecrets
      const limiter = yield* AuthFailureLimiter
      const assertions = yield* ClientAssertions
      const verifyProof = makeProofVerifier(yield* SeenJtis)
      const tokenEndpoint = `${(yield* AppConfig).issuer}/oauth/token`
      const traced = yield* tracerEnabled

      const { issuer } = yield* AppConfig
      const services: TokenDecisionServices = {
        blockedAt: limiter.blockedAt,
        counting: limiter.counting,
        tokenTarget: lookup.tokenTarget,
        matches: secrets.matches,
        resourceAddress: (resource) => resourceAddress(issuer, resource),
        resourceTemplate: `${issuer}/service/{profile}/{environment}/json/{service_uuid}`
      }

      const complete = (input: TokenInput, first: TokenDecision): Effect.Effect<TokenOutcome> =>
        Effect.gen(function*() {
          let decision = first
          if (decision._tag === "NeedsTarget") {
            const { address, clientId } = decision
            if (traced) yield* Effect.annotateCurrentSpan(spanAttributes(address, clientId))
            const target = yield* lookup.findTokenTarget(address, clientId)
            decision = decideToken(input, { ...services, tokenTarget: () => target })
          }
          if (decision._tag === "Assert") {
            const { clientId } = decision
            const verdict = yield* assertions.verdict(
              decision.assertion,
              clientId,
              decision.verifier,
              input.nowMillis,
              decision.profile
            )
            decision = verdict._tag === "Accepted"
              ? { _tag: "Settle", clientId, next: decision.next }
              : { _tag: "Refuse", clientId, answer: assertionRefusal(verdict.refusal, decision.answer) }
          }
          if (decision._tag === "Settle") {
            const blocked = yield* limiter.admit(decision.clientId, input.remoteAddress)
            decision = Option.isSome(blocked) ? tooManyAttempts(blocked.value) : decision.next
          }
          let jkt: string | undefined
          if (decision._tag === "Bind") {
            const proof = yield* verifyProof(decision.proof, { method: "POST", url: tokenEndpoint, nowMillis: input.nowMillis })
            if ("refused" in proof) {
              const answer = errorAnswer(new InvalidDpopProof({ description: proof.refused }), NO_STORE)
              return { _tag: "Answer", answer, result: "invalid_request" } as const
            }
            jkt = proof.jkt
            decision = decision.issue
          }
          switch (decision._tag) {
            case "NeedsTarget":
              return yield* Effect.dieMessage("the token decision needed its target twice")
            case "Answer":
              return { _tag: "Answer", answer: decision.answer, result: decision.result } as const
            case "Refuse": {
              if (decision.reason !== undefined) {
                yield* Effect.logDebug(refusalLine(decision.clientId, decision.reason))
              }
              const blocked = yield* limiter.recordFailure(decision.clientId, input.remoteAddress)
              const answer = Option.isSome(blocked) ? tooManyAttempts(blocked.value).answer : decision.answer
              return { _tag: "Answer", answer, result: "invalid_client" } as const
            }
            case "Issue": {
              if (traced) yield* Effect.annotateCurrentSpan(spanAttributes(decision.address, Option.some(decision.clientId)))
              if (decision.recordUse) yield* lastUse.recordUse(decision.clientId, new Date(input.nowMillis))
              return { _tag: "Sign", clientId: decision.clientId, address: decision.address, jkt } as const
            }
          }
        }).pipe(
          Effect.catchTag("StorageUnavailable", (error) =>
            Effect.succeed({ _tag: "Answer", answer: errorAnswer(error, NO_STORE), result: "temporarily_unavailable" } as const))
        )
      return ClientCredentialsGrant.of({ services, complete })
    })
  )
}
