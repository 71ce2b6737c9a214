/**
 * `POST /service/{profile}/{env}/json/{uuid}` over HTTP, as docs/contract.md §2 states it: tokens the test signs itself
 * (expiry, scope, a foreign key with the same kid: 401 and 403), and expiry on the server's clock.
 *
 * Servers are set up with `layer(...)`, not `it.layer(...)`: see test/ServiceCallAuthorization.test.ts.
 */
import { describe, layer } from "@effect/vitest"
import { Effect, TestClock } from "effect"
import * as Jose from "jose"
import { testSigningKey } from "../src/keys/KeyService.js"
import { createFixture, issueToken, makeTestServer } from "../src/testing.js"
import {
  attackerKeyPair,
  callPath,
  callService,
  CHALLENGE,
  expectEcho,
  expectInvalidToken,
  expectServiceError,
  realClaims,
  realHeader,
  serverNow,
  signWith
} from "./support/Tokens.js"
import { withToken } from "./support/ServiceCall.js"

describe("POST /service/…: tokens signed by the test (expiry, scope, foreign key)", () => {
  layer(makeTestServer())((it) => {
    /** Signs claims with the server's own key through jose, as the server does. */
    const signReal = (claims: Record<string, unknown>) =>
      Effect.gen(function*() {
        const keys = yield* testSigningKey
        return yield* Effect.promise(() =>
          new Jose.SignJWT(claims).setProtectedHeader({ alg: "RS256", typ: "JWT", kid: keys.kid }).sign(keys.privateKey)
        )
      })

    it.effect("control: a token the test signs with the server's key and real claims → 200", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const token = yield* signReal({ ...realClaims(fixture, now) })
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
      }))

    it.effect("an expired token (iat and exp in the past) → 401 invalid_token", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const token = yield* signReal({ ...realClaims(fixture, now - 7200) })
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("a token whose exp is exactly now is expired (now >= exp) → 401 invalid_token", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const token = yield* signReal({ ...realClaims(fixture, now - 3600) })
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
      }))

    it.effect("a valid signature with scope \"other\" → 403 insufficient_scope with its challenge", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const token = yield* signReal({ ...realClaims(fixture, now), scope: "other" })
        const response = yield* callService(callPath(fixture), { token })
        expectServiceError(response, 403, "insufficient_scope", CHALLENGE.insufficientScope)
      }))

    it.effect("scopes that only resemble service:call → 403 insufficient_scope", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        for (const scope of ["", "service", "service:calls", "SERVICE:CALL", "service:call:admin"]) {
          const token = yield* signReal({ ...realClaims(fixture, now), scope })
          expectServiceError(
            yield* callService(callPath(fixture), { token }),
            403,
            "insufficient_scope",
            CHALLENGE.insufficientScope
          )
        }
      }))

    it.effect("a scope list that includes service:call (RFC 6749 §3.3) → 200", () =>
      Effect.gen(function*() {
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const token = yield* signReal({ ...realClaims(fixture, now), scope: "other service:call" })
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
      }))

    it.effect("live credential, matching data, but signed by another RSA key with the same kid → 401", () =>
      Effect.gen(function*() {
        const keys = yield* testSigningKey
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const { privateKey } = attackerKeyPair()
        const token = signWith(privateKey, realHeader(keys.kid), realClaims(fixture, now))
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
        // The same claims and header signed with the real key pass, so only the key made the difference.
        expectEcho(
          yield* callService(callPath(fixture), { token: signWith(keys.privateKey, realHeader(keys.kid), realClaims(fixture, now)) }),
          fixture,
          fixture.clientId
        )
      }))

    it.effect("signed by another key through jose, same kid → 401", () =>
      Effect.gen(function*() {
        const keys = yield* testSigningKey
        const fixture = yield* createFixture()
        const now = yield* serverNow(fixture)
        const { privateKey } = yield* Effect.promise(() => Jose.generateKeyPair("RS256", { modulusLength: 2048 }))
        const token = yield* Effect.promise(() =>
          new Jose.SignJWT({ ...realClaims(fixture, now) })
            .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: keys.kid })
            .sign(privateKey)
        )
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
      }))
  })
})

describe("POST /service/…: expiry on the server's clock (TestClock)", () => {
  layer(makeTestServer())((it) => {
    it.effect("a token works until exp - 1 s and is refused from exp on (now >= exp)", () =>
      Effect.gen(function*() {
        const { fixture, token } = yield* withToken()
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        yield* TestClock.adjust("3599 seconds")
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
        yield* TestClock.adjust("1 second")
        expectInvalidToken(yield* callService(callPath(fixture), { token }))
        // A fresh token works again.
        expectEcho(yield* callService(callPath(fixture), { token: yield* issueToken(fixture) }), fixture, fixture.clientId)
      }))
  })
})
