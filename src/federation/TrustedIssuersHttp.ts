/**
 * Handlers of the trusted issuers (`TrustedIssuersApi`), for admin tokens only but for a profile's
 * list of those it may use, which any token reading the profile gets. An issuer is
 * checked before it is stored: its URL (`issuerUrlProblem`), each inline key as a key credential's
 * (`parsePublicJwk`); the audience defaults to this server's issuer identifier. Deleting an issuer
 * that live federated credentials name is refused (409, naming them): the credentials go first,
 * which ends their tokens at once, as any credential's deletion does.
 */
import { HttpApiBuilder, HttpServerResponse } from "@effect/platform"
import { Effect, Either, Layer, Option, Schema } from "effect"
import { Api } from "../server/Api.js"
import { adminMiddleware, permit, permitOn, profileNotFound } from "../admin/AdminHttp.js"
import { AppConfig } from "../config/AppConfig.js"
import { CatalogueQueries, type LiveService } from "../catalogue/CatalogueQueries.js"
import type { ServiceAddress } from "../domain/ServiceAddress.js"
import { AdminActor } from "../domain/AdminActor.js"
import { auditEvent } from "../domain/AuditEvents.js"
import { Conflict, InvalidRequest, NotFound } from "../domain/Errors.js"
import { verifierIdentity } from "../domain/FederatedCredential.js"
import { parsePublicJwk } from "../domain/KeyCredential.js"
import { currentDate } from "../domain/Time.js"
import { DEFAULT_MAX_TOKEN_LIFETIME_SECONDS, FEDERATION_ALGORITHMS } from "../domain/Limits.js"
import {
  issuerDocument,
  profileIssuerDocument,
  TrustedIssuerDocument,
  type TrustedIssuer,
  type TrustedIssuerInput,
  issuerUrlProblem
} from "../domain/TrustedIssuers.js"
import { TrustedIssuerStore } from "./TrustedIssuerStore.js"

/** Only an admin token manages trusted issuers: the caller, or 403. */
const mayManageIssuers = Effect.zipRight(permit("issuers.manage"), AdminActor)

const notFound = new NotFound({ description: "No trusted issuer has that name" })

/** The issuer to store from what was sent, every default applied; 400 saying what is wrong. */
const checkedIssuer = (name: string, input: TrustedIssuerInput, serverIssuer: string, now: Date) =>
  Effect.gen(function*() {
    const allow = input.allow_insecure_loopback === true
    const urlProblem = issuerUrlProblem(input.issuer, allow, "issuer")
    if (urlProblem !== undefined) return yield* new InvalidRequest({ description: urlProblem })
    for (const [index, key] of (input.jwks?.keys ?? []).entries()) {
      const parsed = parsePublicJwk(key)
      if (Either.isLeft(parsed)) {
        return yield* new InvalidRequest({ description: `jwks.keys.${index}: ${parsed.left.replace(/^public_key/, "the key")}` })
      }
    }
    const algorithms = FEDERATION_ALGORITHMS.filter((alg) => (input.algorithms ?? FEDERATION_ALGORITHMS).includes(alg))
    const issuer: TrustedIssuer = {
      name,
      issuer: input.issuer,
      jwks: input.jwks ?? null,
      audience: input.audience ?? serverIssuer,
      algorithms,
      max_token_lifetime_seconds: input.max_token_lifetime_seconds ?? DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
      profiles: [...new Set(input.profiles)].sort(),
      allow_insecure_loopback: allow,
      created_at: now,
      updated_at: now
    }
    return issuer
  })

/** What the audit trail records of an issuer. */
const issuerDetails = (issuer: TrustedIssuer) => ({ name: issuer.name, issuer: issuer.issuer, profiles: issuer.profiles })

const SERVICES_PAGE = 500

export const layer = HttpApiBuilder.group(Api, "trustedIssuers", (handlers) =>
  Effect.gen(function*() {
    const store = yield* TrustedIssuerStore
    const queries = yield* CatalogueQueries
    const { issuer: serverIssuer } = yield* AppConfig

    /** The client ids of the live federated credentials that name the issuer. */
    const usersOf = (name: string) =>
      Effect.gen(function*() {
        const users: Array<string> = []
        let after: ServiceAddress | undefined = undefined
        for (;;) {
          const page: ReadonlyArray<LiveService> = yield* queries.liveServices(undefined, after, SERVICES_PAGE)
          for (const service of page) {
            for (const credential of service.credentials) {
              if (verifierIdentity(credential.secretHash)?.issuer === name) users.push(credential.clientId)
            }
          }
          if (page.length < SERVICES_PAGE) return users
          const last: LiveService = page[page.length - 1]!
          after = { profile: last.profile, environment: last.environment, uuid: last.uuid }
        }
      })

    const put = (name: string, input: TrustedIssuerInput, createOnly: boolean) =>
      Effect.gen(function*() {
        const caller = yield* mayManageIssuers
        const now = yield* currentDate
        const issuer = yield* checkedIssuer(name, input, serverIssuer, now)
        if (createOnly && Option.isSome(yield* store.find(name))) {
          return yield* new Conflict({ description: `A trusted issuer named ${name} exists` })
        }
        const previous = yield* store.put(issuer, (before) =>
          auditEvent(caller, now, {
            action: Option.isSome(before) ? "trusted_issuer.changed" : "trusted_issuer.created",
            details: issuerDetails(issuer)
          }))
        const stored = Option.match(previous, { onNone: () => issuer, onSome: (old) => ({ ...issuer, created_at: old.created_at }) })
        return { document: issuerDocument(stored), existed: Option.isSome(previous) }
      })

    return handlers
      .handle("listTrustedIssuers", () =>
        Effect.gen(function*() {
          yield* mayManageIssuers
          return { issuers: (yield* store.list).map(issuerDocument) }
        }))
      .handle("createTrustedIssuer", ({ payload: { name, ...input } }) => Effect.map(put(name, input, true), ({ document }) => document))
      .handle("getTrustedIssuer", ({ path: { name } }) =>
        Effect.gen(function*() {
          yield* mayManageIssuers
          const found = yield* store.find(name)
          if (Option.isNone(found)) return yield* notFound
          return issuerDocument(found.value)
        }))
      .handle("putTrustedIssuer", ({ path: { name }, payload }) =>
        Effect.flatMap(put(name, payload, false), ({ document, existed }) =>
          Effect.map(
            Schema.encode(TrustedIssuerDocument)(document),
            (body) =>
              HttpServerResponse.unsafeJson(body, { status: existed ? 200 : 201 })
          ).pipe(Effect.orDie)))
      .handle("deleteTrustedIssuer", ({ path: { name } }) =>
        Effect.gen(function*() {
          const caller = yield* mayManageIssuers
          const users = yield* usersOf(name)
          if (users.length > 0) {
            return yield* new Conflict({
              description: `The trusted issuer ${name} is used by live federated credentials: ${users.join(", ")}; delete them first`
            })
          }
          const now = yield* currentDate
          const removed = yield* store.remove(
            name,
            (issuer) =>
              auditEvent(caller, now, { action: "trusted_issuer.deleted", details: issuerDetails(issuer) })
          )
          if (!removed) return yield* notFound
        }))
      // Whoever reads the profile sees which issuers its credentials may name, never another profile's name or a key.
      .handle("listProfileTrustedIssuers", ({ path: { profile } }) =>
        Effect.gen(function*() {
          yield* permitOn("profile.read", profile, profileNotFound)
          if (Option.isNone(yield* queries.getProfile(profile))) return yield* profileNotFound
          const allowing = (yield* store.list).filter((issuer) => issuer.profiles.includes(profile))
          return { issuers: allowing.map(profileIssuerDocument) }
        }))
  })).pipe(Layer.provide(adminMiddleware))
