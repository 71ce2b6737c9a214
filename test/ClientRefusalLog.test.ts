/**
 * A client refused at `POST /oauth/token` or `POST /oauth/revoke` for another reason than its
 * assertion (a secret sent for a key credential, a wrong secret, an unknown client id) gets the
 * contract's fixed answer, `401 invalid_client "Invalid client credentials"`, which tells nobody
 * which client ids exist or what kind they are; the reason is logged at debug with the client id,
 * never the secret.
 */
import { describe, expect, layer } from "@effect/vitest"
import { Effect, Layer, Logger, LogLevel } from "effect"
import { oauthError, request } from "./support/Http.js"
import { admin, makeTestServer, tokenRequest } from "../src/testing.js"
import { addKeyCredential, clientKey, createService, targetOf } from "./support/ClientKeys.js"

const INVALID_CLIENT = oauthError("invalid_client", "Invalid client credentials")
const FORM = "application/x-www-form-urlencoded"

describe("client authentication refusals: the fixed answer, and the reason in the debug log", () => {
  const logged: Array<string> = []
  const capture = Layer.merge(
    Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => void logged.push(String(message)))),
    Logger.minimumLogLevel(LogLevel.Debug)
  )
  const refusals = (clientId: string) => logged.filter((line) => line.startsWith(`client authentication of ${clientId} refused`))

  layer(makeTestServer().pipe(Layer.provide(capture)), { timeout: 120_000 })((it) => {
    it.effect("a secret sent for a key credential: 401 as any wrong secret, and why in the log, at both endpoints", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const key = yield* Effect.promise(() => clientKey("EC"))
        const created = yield* addKeyCredential(service, key.publicJwk)
        expect(created.status).toBe(201)
        const clientId: string = created.body.client_id
        const secret = "s".repeat(43)

        const token = yield* tokenRequest({ ...targetOf(service), client_id: clientId, client_secret: secret })
        expect({ status: token.status, body: token.body }).toEqual({ status: 401, body: INVALID_CLIENT })
        const revoke = yield* request("POST", "/oauth/revoke", {
          body: new URLSearchParams({ token: "x", client_id: clientId, client_secret: secret }).toString(),
          contentType: FORM
        })
        expect({ status: revoke.status, body: revoke.body }).toEqual({ status: 401, body: INVALID_CLIENT })

        const why = "a client secret was sent for a key credential, which authenticates with private_key_jwt only"
        expect(refusals(clientId)).toEqual([
          `client authentication of ${clientId} refused: ${why}`,
          `client authentication of ${clientId} refused: ${why}`
        ])
        expect(logged.join("\n")).not.toContain(secret)
      }))

    it.effect("a wrong secret and an unknown client id are logged with their reasons, never the secret", () =>
      Effect.gen(function*() {
        const service = yield* createService()
        const created = yield* admin.post(`${service.servicePath}/credentials`)
        const clientId: string = created.body.client_id
        const wrong = "w".repeat(43)
        const refused = yield* tokenRequest({ ...targetOf(service), client_id: clientId, client_secret: wrong })
        expect({ status: refused.status, body: refused.body }).toEqual({ status: 401, body: INVALID_CLIENT })
        expect(refusals(clientId)).toEqual([`client authentication of ${clientId} refused: the client secret does not match`])

        const unknown = `svc_${"0".repeat(32)}`
        const nobody = yield* tokenRequest({ ...targetOf(service), client_id: unknown, client_secret: wrong })
        expect({ status: nobody.status, body: nobody.body }).toEqual({ status: 401, body: INVALID_CLIENT })
        expect(refusals(unknown)).toEqual([
          `client authentication of ${unknown} refused: the client id names no live credential (unknown, deleted, or of another service)`
        ])
        // A client id not of our form may be a secret pasted in the wrong field: it is not written.
        const pasted = "p".repeat(43)
        yield* tokenRequest({ ...targetOf(service), client_id: pasted, client_secret: wrong })
        expect(logged.join("\n")).not.toContain(pasted)
        expect(logged.join("\n")).not.toContain(wrong)
        expect(created.body.client_secret).toEqual(expect.any(String))
        expect(logged.join("\n")).not.toContain(created.body.client_secret)
      }))
  })
})
