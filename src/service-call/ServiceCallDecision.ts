/**
 * `POST /service/{profile}/{env}/json/{uuid}`, decided once, in the contract's order: find the
 * service (404); for an `oauth` service authenticate the Bearer token (RFC 6750) before the body is
 * read. `decideServiceCall` answers a refusal, says what it still needs from storage, or lets the
 * call through; both entries (`FastLane` on node:http, `ServiceHttp` on the HttpApi app) call it,
 * then read the body the same way and call the handler. `ServiceCallGate.decide` runs it in Effect,
 * reading what the catalogue cache and the key ring did not hold.
 *
 * One indexed read per request finds the service and tells whether the token's credential is still
 * live and which of its tokens its client revoked, so a deletion or a revocation acknowledged by any
 * instance is refused by every instance on the next request.
 * A call let through with a token is a use of its credential (`recordCallUse`, docs/contract.md §3).
 */
import { Either, Option } from "effect"
import { type AccessTokenClaims } from "../token/TokenService.js"
import { boundKey, tokenStanding } from "../token/TokenStanding.js"
import { type InsufficientScope, InvalidRequest, InvalidToken, NotFound } from "../domain/Errors.js"
import type { ClientId } from "../domain/Identifiers.js"
import { type Answer, errorAnswer } from "../domain/Answer.js"
import { type AuthorizationHeader, isMultiple, MULTIPLE_AUTHORIZATION, parseAuthorization } from "../domain/AuthorizationHeader.js"
import { parseJson } from "../domain/Json.js"
import type { ServiceRoute } from "../catalogue/CatalogueLookup.js"
import { type ServiceAddress, serviceAddress } from "../domain/ServiceAddress.js"
import { asDpopRefusal, boundTokenAsBearer, dpopChallenge, dpopRequired, proofMissing, unboundTokenAsDpop } from "./DPoPBinding.js"
import { type JsonObject } from "./ServiceHandlers.js"
import { type RateLimitsShape } from "./RateLimits.js"

const REALM = `Bearer realm="service"`
const challenge = (error?: "invalid_request" | "invalid_token" | "insufficient_scope") => ({
  "www-authenticate": error === undefined ? REALM : `${REALM}, error="${error}"`
})

const serviceNotFound = errorAnswer(new NotFound({ description: "Service not found" }))
const tokenRequired = errorAnswer(new InvalidToken({ description: "An access token is required" }), challenge())
/** A service with `require_dpop` names the DPoP scheme in its challenge (RFC 9449 §7.1). */
const dpopTokenRequired: Answer = { ...tokenRequired, headers: dpopChallenge() }
const malformedHeader = errorAnswer(
  new InvalidRequest({ description: "The Authorization header must be a single Bearer token" }),
  challenge("invalid_request")
)
const multipleHeaders = errorAnswer(new InvalidRequest({ description: MULTIPLE_AUTHORIZATION }), challenge("invalid_request"))
const otherService = errorAnswer(
  new InvalidToken({ description: "The access token was issued for another service" }),
  challenge("invalid_token")
)
const revoked = errorAnswer(new InvalidToken({ description: "The access token has been revoked" }), challenge("invalid_token"))
/** Refused as a deleted credential's token is, but saying what happened: nothing was revoked. */
const credentialExpired = errorAnswer(
  new InvalidToken({ description: "The access token's credential has expired" }),
  challenge("invalid_token")
)

/**
 * What the request presented: no credentials, several `Authorization` headers, something that is not
 * one `Bearer <token>`, or a token.
 */
type Presented =
  | { readonly _tag: "None" }
  | { readonly _tag: "Multiple" }
  | { readonly _tag: "Malformed" }
  | { readonly _tag: "Bearer"; readonly token: string; readonly dpop: boolean }

const presentedCredentials = (header: AuthorizationHeader): Presented => {
  if (header === undefined) return { _tag: "None" }
  if (isMultiple(header)) return { _tag: "Multiple" }
  const credentials = parseAuthorization(header)
  // A token presented as `DPoP` (RFC 9449 §7.1) is verified as a Bearer one is, then its proof.
  return credentials?.scheme === "bearer" || credentials?.scheme === "dpop"
    ? { _tag: "Bearer", token: credentials.value, dpop: credentials.scheme === "dpop" }
    : { _tag: "Malformed" }
}

export interface ServiceCallInput {
  readonly profile: string
  readonly environment: string
  readonly uuid: string
  readonly authorization: AuthorizationHeader
  /** The client's address: who a service without OAuth counts a rate limit against. */
  readonly remoteAddress: string
  readonly nowMillis: number
  /** The `DPoP` header (RFC 9449 §4.1), when sent. */
  readonly dpop?: string | undefined
}

/** What the decision needs besides the request: all synchronous, all in memory. */
export interface ServiceCallServices {
  readonly verifyAt: (token: string, nowMillis: number) => Either.Either<AccessTokenClaims, InvalidToken | InsufficientScope>
  readonly isUnknownKey: (error: InvalidToken | InsufficientScope) => boolean
  readonly isForService: (claims: AccessTokenClaims, address: ServiceAddress) => boolean
  /** The catalogue's answer; undefined when it must be read from storage. */
  readonly serviceRoute: (address: ServiceAddress, clientId: Option.Option<ClientId>) => Option.Option<ServiceRoute> | undefined
  /** A call let through with a token: a use of its credential (`CallLastUse`), recorded in memory. */
  readonly recordCallUse: (clientId: ClientId, nowMillis: number) => void
  /** Counts a call to a service with a rate limit (`RateLimits`). */
  readonly admit: RateLimitsShape["admit"]
}

export type ServiceCallDecision =
  | { readonly _tag: "Answer"; readonly answer: Answer }
  /** The token names a key this instance does not hold yet: learn it, then decide again. */
  | { readonly _tag: "NeedsKey"; readonly token: string }
  /** The catalogue cache does not hold the route: read it (`findServiceRoute`), then decide again. */
  | { readonly _tag: "NeedsRoute"; readonly address: ServiceAddress; readonly clientId: Option.Option<ClientId> }
  /** A DPoP-bound token: its proof to check (`DPoPProof`), then `call` admitted (`admitCall`), or a 401. */
  | {
    readonly _tag: "Prove"
    readonly call: Omit<ServiceCallAllowed, "_tag" | "rateHeaders">
    readonly caller: ClientId
    readonly token: string
    readonly jkt: string
    readonly proof: string
  }
  /** Let through: read the body, then call the service's handler. */
  | {
    readonly _tag: "Call"
    readonly address: ServiceAddress
    readonly route: ServiceRoute
    /** The verified token's client id; null for a service without OAuth. */
    readonly caller: string | null
    readonly clientId: Option.Option<ClientId>
    /** The rate limit's fields, which every answer of the call carries; undefined for a service without one. */
    readonly rateHeaders: Readonly<Record<string, string>> | undefined
  }

const answer = (answer: Answer): ServiceCallDecision => ({ _tag: "Answer", answer })

export const decideServiceCall = (input: ServiceCallInput, services: ServiceCallServices): ServiceCallDecision => {
  const address = serviceAddress(input.profile, input.environment, input.uuid)
  if (address === undefined) return answer(serviceNotFound)

  // The signature is checked before the read so the read can also answer "is its credential live".
  const presented = presentedCredentials(input.authorization)
  const verified = presented._tag === "Bearer" ? services.verifyAt(presented.token, input.nowMillis) : undefined
  if (presented._tag === "Bearer" && verified !== undefined && Either.isLeft(verified) && services.isUnknownKey(verified.left)) {
    return { _tag: "NeedsKey", token: presented.token }
  }
  const clientId = verified !== undefined && Either.isRight(verified) ? Option.some(verified.right.client_id) : Option.none()

  const route = services.serviceRoute(address, clientId)
  if (route === undefined) return { _tag: "NeedsRoute", address, clientId }
  if (Option.isNone(route)) return answer(serviceNotFound)

  let caller: string | null = null
  if (route.value.authType === "oauth") {
    const requireDpop = route.value.requireDpop === true
    if (presented._tag === "None") return answer(requireDpop ? dpopTokenRequired : tokenRequired)
    if (presented._tag === "Multiple") return answer(multipleHeaders)
    if (presented._tag === "Malformed" || verified === undefined) return answer(malformedHeader)
    // A token presented as DPoP, or to a service that requires DPoP, is refused with the DPoP
    // challenge (RFC 9449 §7.1).
    const refuse = presented.dpop || requireDpop ? (refusal: Answer) => answer(asDpopRefusal(refusal)) : answer
    if (Either.isLeft(verified)) {
      return refuse(
        verified.left._tag === "InsufficientScope"
          ? errorAnswer(verified.left, challenge("insufficient_scope"))
          : errorAnswer(verified.left, challenge("invalid_token"))
      )
    }
    // The token's standing (`TokenStanding`), which introspection and revocation ask as well.
    const standing = tokenStanding(verified.right, address, route.value, input.nowMillis, services.isForService)
    if (standing === "other-service") return refuse(otherService)
    if (standing === "revoked") return refuse(revoked)
    if (standing === "credential-expired") return refuse(credentialExpired)
    const jkt = boundKey(verified.right)
    // `require_dpop`: a Bearer token (not bound) is refused; a bound one presented as Bearer below.
    if (requireDpop && jkt === undefined && !presented.dpop) return answer(dpopRequired)
    if (jkt !== undefined || presented.dpop) {
      if (jkt === undefined) return answer(unboundTokenAsDpop)
      if (!presented.dpop) return answer(boundTokenAsBearer)
      if (input.dpop === undefined) return answer(proofMissing)
      const call = { address, route: route.value, caller: verified.right.client_id, clientId }
      return { _tag: "Prove", call, caller: verified.right.client_id, token: presented.token, jkt, proof: input.dpop }
    }
    caller = verified.right.client_id
  }
  return admitCall(services, input, { address, route: route.value, caller, clientId })
}

/**
 * The last step of a call let through (directly, or once its DPoP proof verified): the service's
 * rate limit for this client (`RateLimits`), then the call is a use of its credential (`recordCallUse`).
 */
export const admitCall = (
  services: Pick<ServiceCallServices, "admit" | "recordCallUse">,
  input: ServiceCallInput,
  call: Omit<ServiceCallAllowed, "_tag" | "rateHeaders">
): Extract<ServiceCallDecision, { readonly _tag: "Answer" | "Call" }> => {
  const limit = call.route.rateLimit
  let rateHeaders: Readonly<Record<string, string>> | undefined = undefined
  if (limit != null) {
    const verdict = services.admit(call.address, limit, call.caller ?? input.remoteAddress, input.nowMillis)
    if (!verdict.allowed) return { _tag: "Answer", answer: verdict.answer }
    rateHeaders = verdict.headers
  }
  if (call.caller !== null) services.recordCallUse(call.caller as ClientId, input.nowMillis)
  return { _tag: "Call", ...call, rateHeaders }
}

/** A call's answer with its rate limit's fields, when its service has one: what both entries write. */
export const withRateHeaders = (allowed: ServiceCallAllowed, answer: Answer): Answer =>
  allowed.rateHeaders === undefined ? answer : { ...answer, headers: { ...answer.headers, ...allowed.rateHeaders } }

export type ServiceCallVerdict = Extract<ServiceCallDecision, { readonly _tag: "Answer" | "Call" }>

export type ServiceCallAllowed = Extract<ServiceCallDecision, { readonly _tag: "Call" }>

/** A service call's body: a JSON object (within the nesting limit). */
export const jsonObject = (text: string): Either.Either<JsonObject, InvalidRequest> =>
  Either.flatMap(parseJson(text), (body) =>
    typeof body === "object" && body !== null && !Array.isArray(body)
      ? Either.right(body as JsonObject)
      : Either.left(new InvalidRequest({ description: "The request body must be a JSON object" })))
