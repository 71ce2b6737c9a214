/**
 * Handlers of the admin JSON API. Paths and payloads arrive decoded (their problems are answered
 * `400 invalid_request` once, by `AdminBodies`); every typed failure is answered by the wire schema
 * its endpoint declares. A created-or-existed answer chooses its status (201 or 200) itself.
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Layer, Option, Schema } from "effect"
import { randomUUID } from "node:crypto"
import { Api } from "../server/Api.js"
import { KEY_ON_CREDENTIALS_DEPRECATION, KEY_ON_CREDENTIALS_SUNSET } from "../domain/Deprecations.js"
import { ClientSecrets } from "../catalogue/ClientSecrets.js"
import { CredentialManager } from "../catalogue/CredentialManager.js"
import { AdminActor } from "../domain/AdminActor.js"
import { type AdminAction, authorize, authorizeOn, reaches } from "../domain/AdminRoles.js"
import { AUDIT_PAGE_DEFAULT } from "../domain/AuditEvents.js"
import { InvalidRequest, NotFound, type StorageUnavailable } from "../domain/Errors.js"
import { NewFederatedCredential } from "../domain/FederatedCredentialBodies.js"
import { TrustedIssuerStore } from "../federation/TrustedIssuerStore.js"
import { ClientId, EnvironmentName, type ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import {
  EnvironmentDocument,
  type KeyCredentialInput,
  NewCredential,
  NewKeyCredential,
  ProfileDocument,
  SaveProfileResult,
  ServiceDocument,
  type ServiceInput
} from "../domain/Models.js"
import { defaultHandler } from "../domain/Handlers.js"
import { type AllowedOrigins, judgeUpstream, normalisedOrigins, upstreamStanding } from "../domain/UpstreamPolicy.js"
import { AppConfig } from "../config/AppConfig.js"
import { currentDate } from "../domain/Time.js"
import { storedHandlerOf } from "../service-call/proxy/UpstreamHeaders.js"
import { AuditTrail } from "../storage/AuditTrail.js"
import { CatalogueLookup, type CatalogueLookupShape } from "../catalogue/CatalogueLookup.js"
import { CatalogueQueries } from "../catalogue/CatalogueQueries.js"
import { CatalogueWrites } from "../catalogue/CatalogueWrites.js"
import { type ServiceAddress } from "../domain/ServiceAddress.js"
import * as AdminAuthHttp from "./AdminAuthHttp.js"
import * as AdminBodies from "./AdminBodies.js"
import { checkChanges, deprecatedSaveAnswer, parsedPublicKey, saveAnswer } from "./SaveProfileChanges.js"

/**
 * A key credential made by POST …/credentials: the same answer, marked deprecated (RFC 9745), with
 * its sunset (RFC 8594) and the operation to use instead.
 */
const deprecatedKeyAnswer = (path: ServiceAddress) => (response: HttpServerResponse.HttpServerResponse) =>
  HttpServerResponse.setHeaders(response, {
    deprecation: KEY_ON_CREDENTIALS_DEPRECATION,
    sunset: KEY_ON_CREDENTIALS_SUNSET,
    link: `</admin/profiles/${encodeURIComponent(path.profile)}/environments/${encodeURIComponent(path.environment)}` +
      `/services/${path.uuid}/key-credentials>; rel="successor-version"`
  })

/** A JSON answer encoded by its schema, with the status the handler chose (201 created or 200). */
const documentResponse = <A, I>(schema: Schema.Schema<A, I>, value: A, status: number) =>
  Effect.map(Schema.encode(schema)(value), (body) => HttpServerResponse.unsafeJson(body, { status })).pipe(Effect.orDie)

export const profileNotFound = new NotFound({ description: "Profile not found" })
const environmentNotFound = new NotFound({ description: "Environment not found" })
const serviceNotFound = new NotFound({ description: "Service not found" })
const credentialNotFound = new NotFound({ description: "No such live credential on this service" })

/** The caller's permission for `action` (`AdminRoles.authorize`): 403 when its role may not. */
export const permit = (action: AdminAction) =>
  Effect.flatMap(AdminActor, (caller) => Either.match(authorize(caller, action), { onLeft: Effect.fail, onRight: () => Effect.void }))

/**
 * The caller's permission for `action` on `profile` (`AdminRoles.authorizeOn`): a profile out of
 * its scope fails with `missing`, what the endpoint answers for a profile that does not exist.
 */
export const permitOn = (action: AdminAction, profile: ProfileId, missing: NotFound = profileNotFound) =>
  Effect.flatMap(
    AdminActor,
    (caller) => Either.match(authorizeOn(caller, action, profile, missing), { onLeft: Effect.fail, onRight: () => Effect.void })
  )

/**
 * Adds `upstream_refusal` to the service documents whose proxy's upstream is outside the upstream
 * policy (`UpstreamPolicy`): what its calls answer 502 for, until an admin saves it or allows its
 * origin. Judged as the gateway judges a call, from the service's route (whether an admin approved
 * its URL, the profile's origins). A name that resolves to an internal address is found only when a
 * connection is made.
 */
const upstreamRefusals = (
  lookup: Pick<CatalogueLookupShape, "findServiceRoute">,
  deployment: ReadonlyArray<string>
) =>
(profile: ProfileId, environment: EnvironmentName, services: ReadonlyArray<ServiceDocument>) =>
  Effect.forEach(services, (service) => {
    if (service.handler.type !== "proxy") return Effect.succeed(service)
    const url = service.handler.url
    return Effect.map(lookup.findServiceRoute({ profile, environment, uuid: service.uuid }, Option.none()), (route) => {
      if (Option.isNone(route)) return service
      const verdict = upstreamStanding(url, route.value.upstreamApproved === true, {
        deployment,
        profile: route.value.upstreamOrigins ?? null
      })
      if (verdict._tag !== "Refused") return service
      const { credentials, ...rest } = service
      return { ...rest, upstream_refusal: verdict.reason, credentials }
    })
  })

/** The admin token check and the body reader, which every admin group uses. */
export const adminMiddleware = Layer.merge(AdminAuthHttp.layer, AdminBodies.layer)

export const layerProfiles = HttpApiBuilder.group(Api, "profiles", (handlers) =>
  Effect.gen(function*() {
    const queries = yield* CatalogueQueries
    const writes = yield* CatalogueWrites
    const manager = yield* CredentialManager
    const refusals = upstreamRefusals(yield* CatalogueLookup, (yield* AppConfig).upstreamAllowedOrigins)
    const getProfile = (profile: ProfileId) =>
      Effect.flatMap(
        queries.getProfile(profile),
        Option.match({
          onNone: (): Effect.Effect<ProfileDocument, NotFound | StorageUnavailable> => Effect.fail(profileNotFound),
          onSome: (document) =>
            Effect.map(
              Effect.forEach(
                document.environments,
                (environment) =>
                  Effect.map(refusals(profile, environment.name, environment.services), (services) => ({ ...environment, services }))
              ),
              (environments) => ({ ...document, environments })
            )
        })
      )

    return handlers
      .handle("listProfiles", () =>
        Effect.gen(function*() {
          yield* permit("profile.read")
          const caller = yield* AdminActor
          const profiles = yield* queries.listProfiles
          return { profiles: profiles.filter((summary) => reaches(caller, summary.profile)) }
        }))
      .handle("putProfile", ({ path: { profile }, payload }) =>
        Effect.gen(function*() {
          // The upstream origins are the operator's decision: an owner sending them is told so.
          const origins = payload.upstream_origins
          if (origins !== undefined) yield* permitOn("upstream.allow", profile)
          const lifetimeDays = payload.credential_max_lifetime_days
          // Refused naming what was asked: the policy, else the PUT itself (creating the profile).
          if (lifetimeDays !== undefined) yield* permitOn("profile.policy", profile)
          yield* permitOn("profile.create", profile)
          if (lifetimeDays !== undefined) yield* permitOn("catalogue.change", profile)
          const created = yield* writes.putProfile(
            profile,
            yield* currentDate,
            yield* AdminActor,
            lifetimeDays,
            origins === undefined ? undefined : normalisedOrigins(origins)
          )
          return yield* documentResponse(ProfileDocument, yield* getProfile(profile), created ? 201 : 200)
        }))
      .handle("getProfile", ({ path: { profile } }) => Effect.zipRight(permitOn("profile.read", profile), getProfile(profile)))
      .handle("deleteProfile", ({ path: { profile } }) =>
        Effect.gen(function*() {
          yield* permitOn("profile.delete", profile)
          if (!(yield* writes.deleteProfile(profile, yield* currentDate, yield* AdminActor))) return yield* profileNotFound
        }))
      .handle("saveProfile", ({ path: { profile }, payload: { changes } }) =>
        Effect.gen(function*() {
          const { answeredApart, deprecatedKey, staged } = yield* checkChanges(changes)
          yield* permitOn("catalogue.change", profile)
          const answer = saveAnswer(yield* manager.saveProfile(profile, staged, yield* AdminActor), answeredApart)
          if (!deprecatedKey) return answer
          return deprecatedSaveAnswer(yield* documentResponse(SaveProfileResult, answer, 200))
        }))
      .handle("putEnvironment", ({ path: { environment, profile } }) =>
        Effect.gen(function*() {
          yield* permitOn("catalogue.change", profile)
          const created = yield* writes.putEnvironment(profile, environment, yield* currentDate, yield* AdminActor)
          const document = (yield* getProfile(profile)).environments.find((e) => e.name === environment)
          if (document === undefined) return yield* environmentNotFound // deleted concurrently
          return yield* documentResponse(EnvironmentDocument, document, created ? 201 : 200)
        }))
      .handle("deleteEnvironment", ({ path: { environment, profile } }) =>
        Effect.gen(function*() {
          yield* permitOn("catalogue.change", profile, environmentNotFound)
          if (!(yield* writes.deleteEnvironment(profile, environment, yield* currentDate, yield* AdminActor))) {
            return yield* environmentNotFound
          }
        }))
  })).pipe(Layer.provide(adminMiddleware))

export const layerServices = HttpApiBuilder.group(Api, "services", (handlers) =>
  Effect.gen(function*() {
    const queries = yield* CatalogueQueries
    const writes = yield* CatalogueWrites
    const lookup = yield* CatalogueLookup
    const manager = yield* CredentialManager
    const { upstreamAllowedOrigins } = yield* AppConfig
    const refusals = upstreamRefusals(lookup, upstreamAllowedOrigins)
    const allowedFor = (address: ServiceAddress) =>
      Effect.map(queries.upstreamOrigins(address.profile), (origins): AllowedOrigins => ({
        deployment: upstreamAllowedOrigins,
        profile: Option.getOrNull(origins)
      }))
    const getService = (address: ServiceAddress) =>
      Effect.flatMap(
        queries.getService(address),
        Option.match({
          onNone: (): Effect.Effect<ServiceDocument, NotFound | StorageUnavailable> => Effect.fail(serviceNotFound),
          onSome: (service) => Effect.map(refusals(address.profile, address.environment, [service]), ([decorated]) => decorated!)
        })
      )
    /** The one way a key credential is made, by POST …/key-credentials and (deprecated) POST …/credentials. */
    const addKeyCredential = (path: ServiceAddress, payload: typeof KeyCredentialInput.Type) =>
      Effect.gen(function*() {
        const publicKey = yield* Either.mapLeft(parsedPublicKey(payload.public_key), (problem) =>
          new InvalidRequest({ description: problem }))
        const actor = yield* Effect.zipRight(permitOn("catalogue.change", path.profile), AdminActor)
        return yield* documentResponse(
          NewKeyCredential,
          yield* manager.addKeyCredential(path, publicKey, actor, payload.expires_at),
          201
        )
      })
    const { headerSealingKey } = yield* ClientSecrets
    const issuers = yield* TrustedIssuerStore
    const putService = (address: ServiceAddress, input: ServiceInput, mode: "create" | "upsert") =>
      Effect.gen(function*() {
        // Static header values are sealed here; those not sent again are kept (`storedHandlerOf`).
        // Out of the caller's scope nothing stored is read: the input is judged as for a missing
        // profile, then refused as one.
        const caller = yield* AdminActor
        const current = mode === "create" || input.handler?.type !== "proxy" || !reaches(caller, address.profile)
          ? Option.none()
          : yield* lookup.findServiceRoute(address, Option.none())
        const handler = input.handler === undefined ? defaultHandler : yield* Either.match(
          storedHandlerOf(headerSealingKey, address.uuid, input.handler, Option.getOrUndefined(current)?.handler),
          { onLeft: Effect.fail, onRight: Effect.succeed }
        )
        yield* permitOn("catalogue.change", address.profile)
        // The upstream is the operator's decision (`UpstreamPolicy`): an admin's URL is approved as
        // it is; an owner's keeps an admin's approval only while the URL stays the same, and is
        // otherwise judged, a refusal answering 400 before anything is written.
        let approved = false
        if (handler.type === "proxy") {
          const stored = Option.getOrUndefined(current)
          approved = caller.role === "admin" ||
            (stored?.upstreamApproved === true && stored.handler.type === "proxy" && stored.handler.url === handler.url)
          if (!approved) {
            const verdict = judgeUpstream(handler.url, yield* allowedFor(address))
            if (verdict._tag === "Refused") {
              return yield* new InvalidRequest({ description: `handler.url: ${verdict.reason}` })
            }
          }
        }
        const created = yield* writes.putService(
          address,
          {
            name: input.name ?? address.uuid,
            auth_type: input.auth_type,
            handler,
            rate_limit: input.rate_limit ?? null,
            require_dpop: input.require_dpop === true,
            upstream_approved: approved
          },
          mode,
          yield* currentDate,
          yield* AdminActor
        )
        return yield* documentResponse(ServiceDocument, yield* getService(address), created ? 201 : 200)
      })

    return handlers
      .handle("createService", ({ path: { environment, profile }, payload }) =>
        putService({ profile, environment, uuid: randomUUID() as ServiceUuid }, payload, "create"))
      .handle("putService", ({ path, payload }) =>
        putService(path, payload, "upsert"))
      .handle("getService", ({ path }) =>
        Effect.zipRight(permitOn("profile.read", path.profile, serviceNotFound), getService(path)))
      .handle("deleteService", ({ path }) =>
        Effect.gen(function*() {
          yield* permitOn("catalogue.change", path.profile, serviceNotFound)
          if (!(yield* writes.deleteService(path, yield* currentDate, yield* AdminActor))) {
            return yield* serviceNotFound
          }
        }))
      .handle("listCredentials", ({ path }) =>
        Effect.zipRight(permitOn("profile.read", path.profile, serviceNotFound), getService(path)).pipe(
          Effect.map((service) => ({ credentials: service.credentials }))
        ))
      .handle("createCredential", ({ path, payload }) =>
        "public_key" in payload
          ? Effect.map(addKeyCredential(path, payload), deprecatedKeyAnswer(path))
          : Effect.gen(function*() {
            const actor = yield* Effect.zipRight(permitOn("catalogue.change", path.profile), AdminActor)
            return yield* documentResponse(NewCredential, yield* manager.addCredential(path, actor, payload.expires_at), 201)
          }))
      .handle("createKeyCredential", ({ path, payload }) =>
        addKeyCredential(path, payload))
      .handle("createFederatedCredential", ({ path, payload: { expires_at, ...identity } }) =>
        Effect.gen(function*() {
          const actor = yield* Effect.zipRight(permitOn("catalogue.change", path.profile), AdminActor)
          // One answer whether the issuer is missing or does not allow the profile.
          const issuer = yield* issuers.find(identity.issuer)
          if (Option.isNone(issuer) || !issuer.value.profiles.includes(path.profile)) {
            return yield* new InvalidRequest({
              description: `issuer: no trusted issuer named ${identity.issuer} allows profile ${path.profile}`
            })
          }
          const created = yield* manager.addFederatedCredential(path, identity, actor, expires_at)
          return yield* documentResponse(NewFederatedCredential, created, 201)
        }))
      .handle("deleteCredential", ({ path: { client_id, ...address } }) =>
        Effect.gen(function*() {
          if (!Schema.is(ClientId)(client_id)) {
            // Not echoed: whatever was sent is not a client id (and might be a misplaced secret).
            return yield* credentialNotFound
          }
          yield* permitOn("catalogue.change", address.profile)
          // A removal alone can never exceed the limit.
          yield* manager.removeCredential(address, client_id, yield* AdminActor).pipe(
            Effect.catchTag("CredentialLimitExceeded", Effect.die)
          )
        }))
  })).pipe(Layer.provide(adminMiddleware))

export const layerAudit = HttpApiBuilder.group(Api, "audit", (handlers) =>
  Effect.gen(function*() {
    const trail = yield* AuditTrail
    return handlers.handle("listAuditEvents", ({ urlParams }) =>
      Effect.gen(function*() {
        yield* permit("audit.read")
        const caller = yield* AdminActor
        // Another profile's trail answers as that of a profile that never existed: no events.
        if (urlParams.profile !== undefined && !reaches(caller, urlParams.profile)) return { events: [], next: null }
        return yield* trail.list({
          profile: urlParams.profile,
          profiles: urlParams.profile === undefined && caller.profiles !== null ? caller.profiles : undefined,
          limit: urlParams.limit ?? AUDIT_PAGE_DEFAULT,
          after: urlParams.after
        })
      }))
  })).pipe(Layer.provide(AdminAuthHttp.layer))
