/**
 * An embedding program may build a server, drop it, and build another in the same process (as
 * these tests do all the time). Everything a server keeps (its catalogue and cache, rate-limit
 * windows, failed-attempt counts, verified tokens, upstream pools) belongs to its layers: the
 * second server sees nothing the first left. Effect's metric registry is the one thing a process
 * shares by design (see vitest.config.ts).
 */
import { expect, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { admin, createFixture, issueToken, makeTestServer, tokenRequest } from "../src/testing.js"
import { callPath, callService } from "./support/Tokens.js"

const LIMIT = { requests: 1, per_seconds: 60 }
const FAILURES = 3

/** `use` on a server of its own, built before it and stopped after it. */
const onOwnServer = <A, E, R>(use: Effect.Effect<A, E, R>) =>
  Effect.scoped(Effect.gen(function*() {
    const server = yield* Layer.build(makeTestServer({ config: { authFailureLimit: FAILURES } }))
    return yield* use.pipe(Effect.provide(server))
  }))

/** A service limited to one call a minute per client, its token and one call that used it up. */
const limitedAndUsed = Effect.gen(function*() {
  const fixture = yield* createFixture()
  expect((yield* admin.put(fixture.servicePath, { name: "billing", auth_type: "oauth", rate_limit: LIMIT })).status).toBe(200)
  const token = yield* issueToken(fixture)
  expect((yield* callService(callPath(fixture), { token })).status).toBe(200)
  return { fixture, token }
})

it.effect("an embedding program builds and drops two servers: the second sees no state of the first", () =>
  Effect.gen(function*() {
    const first = yield* onOwnServer(Effect.gen(function*() {
      const used = yield* limitedAndUsed
      expect((yield* callService(callPath(used.fixture), { token: used.token })).status).toBe(429)
      // Failed attempts for the client until its address is throttled.
      const wrong = { ...used.fixture.tokenFields, client_secret: "not-the-secret" }
      for (let attempt = 0; attempt < FAILURES; attempt++) expect((yield* tokenRequest(wrong)).status).toBe(401)
      expect((yield* tokenRequest(used.fixture.tokenFields)).status).toBe(429)
      return used
    }))

    yield* onOwnServer(Effect.gen(function*() {
      // Not its catalogue: the profile, and the token's service, are unknown here.
      expect((yield* admin.get(`/admin/profiles/${first.fixture.profile}`)).status).toBe(404)
      expect((yield* callService(callPath(first.fixture), { token: first.token })).status).toBe(404)
      // Not its rate-limit windows: a service with the same limit starts with a full window.
      const fresh = yield* limitedAndUsed
      // Not its failure counts: the first's client id, throttled there, is only unknown here.
      const { client_id, client_secret } = first.fixture.tokenFields
      expect((yield* tokenRequest({ ...fresh.fixture.tokenFields, client_id: client_id!, client_secret: client_secret! })).status).toBe(401)
      expect((yield* callService(callPath(fresh.fixture), { token: fresh.token })).status).toBe(429)
    }))
  }), 60_000)
