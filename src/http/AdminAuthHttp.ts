/**
 * The admin token check. The framework's bearer decoding is ignored (it does not check the scheme);
 * the header is parsed here and compared in constant time (both sides hashed to equal length).
 */
import { HttpServerRequest } from "@effect/platform"
import { Effect, Layer, Redacted } from "effect"
import { createHash, timingSafeEqual } from "node:crypto"
import { AppConfig } from "../AppConfig.js"
import { AdminAuth } from "../api/AdminApi.js"
import { Unauthorized } from "../domain/Errors.js"
import { parseAuthorization } from "./AuthorizationHeader.js"

const sha256 = (value: string) => createHash("sha256").update(value, "utf8").digest()

export const layer = Layer.effect(
  AdminAuth,
  Effect.gen(function*() {
    const config = yield* AppConfig
    const expected = sha256(Redacted.value(config.adminToken))
    return AdminAuth.of({
      adminToken: () =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const header = request.headers["authorization"]
          const credentials = header === undefined ? undefined : parseAuthorization(header)
          if (credentials === undefined || credentials.scheme !== "bearer") {
            return yield* new Unauthorized({ description: "Send the admin token as Authorization: Bearer <token>" })
          }
          if (!timingSafeEqual(sha256(credentials.value), expected)) {
            return yield* new Unauthorized({ description: "The admin token is not valid" })
          }
        })
    })
  })
)
