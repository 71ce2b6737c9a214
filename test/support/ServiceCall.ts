/** A fixture and a token the server issued for it, for the service call tests. */
import { Effect } from "effect"
import { createFixture, issueToken } from "../../src/testing.js"

export const withToken = (options: Parameters<typeof createFixture>[0] = {}) =>
  Effect.gen(function*() {
    const fixture = yield* createFixture(options)
    return { fixture, token: yield* issueToken(fixture) }
  })
