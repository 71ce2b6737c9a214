/**
 * What a start does not do: documents nobody asked for are built on the first request for them,
 * not before the port opens. A server that answers /healthz, tokens and the admin page has not built
 * the OpenAPI document or read Scalar's bundle; the first request for each then serves the same
 * bytes as ever.
 *
 * It reads module state (whether the document was built), so it is one of the process files
 * (vitest.config.ts): no other file in its process can have asked for the document first.
 */
import { HttpClientRequest } from "@effect/platform"
import { describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import { openApiYaml } from "../src/server/OpenApiDocument.js"
import { ServedOpenApi } from "../src/server/ServedOpenApi.js"
import { createFixture, makeTestServer, send, tokenRequest } from "../src/testing.js"

const get = (path: string) => send(HttpClientRequest.get(path))

describe("start-up builds only what answering needs", () => {
  layer(makeTestServer())((it) => {
    it.effect("a ready server has not built the OpenAPI document; GET /openapi.yaml builds it once", () =>
      Effect.gen(function*() {
        expect((yield* get("/healthz")).status).toBe(200)
        expect((yield* get("/readyz")).status).toBe(200)
        expect((yield* get("/.well-known/jwks.json")).status).toBe(200)
        const fixture = yield* createFixture()
        expect((yield* tokenRequest(fixture.tokenFields)).status).toBe(200)
        expect((yield* get("/docs")).status).toBe(200)
        const served = yield* ServedOpenApi
        expect(served.built()).toBe(false)

        const first = yield* get("/openapi.yaml")
        expect(first.status).toBe(200)
        expect(first.headers["content-type"]).toBe("application/yaml; charset=utf-8")
        expect(first.text).toBe(openApiYaml())
        expect(served.built()).toBe(true)
        // Concurrent first requests and later ones all get the one document.
        const again = yield* Effect.all([get("/openapi.yaml"), get("/openapi.yaml")], { concurrency: 2 })
        for (const response of again) expect(response.text).toBe(first.text)
      }))
  })
})
