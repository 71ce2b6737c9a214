/**
 * The fast lane never lets an exception escape into Node's request event (where it would stop the
 * process): whatever throws inside it, the request goes to the app, once.
 */
import { expect, layer } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import { createServer } from "node:http"
import { AppConfig } from "../src/config/AppConfig.js"
import { layerDomainTest } from "../src/AppLayer.js"
import { FastLane, layer as fastLaneLayer } from "../src/server/FastLane.js"
import { localGuard } from "../src/catalogue/CredentialRepoCache.js"
import { CatalogueLookup } from "../src/catalogue/CatalogueLookup.js"
import * as CatalogueInMemory from "../src/catalogue/CatalogueInMemory.js"
import * as Storage from "../src/storage/Storage.js"
import { FailureCounts } from "../src/token/FailureCounts.js"
import { ServerKeyStore } from "../src/keys/ServerKeyStore.js"
import { TrustedIssuerStore } from "../src/federation/TrustedIssuerStore.js"
import * as AuditTrail from "../src/storage/AuditTrail.js"
import { bodyAlreadyRead } from "../src/server/RequestBody.js"
import { rawRequest } from "./support/Http.js"

/** A catalogue whose cache "holds" every service, and throws when asked for it. */
const throwingPeek = Layer.scopedContext(
  Effect.map(
    Storage.makeCatalogue(Effect.map(CatalogueInMemory.make, ({ store }) => store), Effect.sync(localGuard)),
    (services) =>
      Context.add(services, CatalogueLookup, {
        ...Context.get(services, CatalogueLookup),
        tokenTarget: () => {
          throw new Error("peek failed")
        },
        serviceRoute: () => {
          throw new Error("peek failed")
        }
      })
  )
)

const issuersInMemory = TrustedIssuerStore.layerMemory.pipe(
  Layer.provide(Layer.sync(AuditTrail.AuditTrail, () => AuditTrail.makeMemoryLog().trail))
)

const lane = fastLaneLayer.pipe(
  Layer.provideMerge(layerDomainTest),
  Layer.provideMerge(Layer.mergeAll(throwingPeek, ServerKeyStore.layerMemory, FailureCounts.layerLocal, issuersInMemory)),
  Layer.provideMerge(AppConfig.layerTest())
)

layer(lane)((it) => {
  it.effect("an exception inside the lane hands the request to the app, exactly once", () =>
    Effect.gen(function*() {
      const fastLane = yield* FastLane
      let handedOver = 0
      const bodies: Array<string | undefined> = []
      const server = createServer((request, response) =>
        fastLane(request, response, () => {
          handedOver++
          // A body the lane already read travels with the request; an unread one is still the stream's.
          bodies.push(bodyAlreadyRead(request))
          request.resume()
          response.writeHead(299, { "content-type": "application/json" }).end(`{"app":true}`)
        })
      )
      const port = yield* Effect.async<number>((resume) => {
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed((server.address() as { port: number }).port)))
      })
      try {
        const call = yield* Effect.promise(() =>
          rawRequest(port, {
            method: "POST",
            path: "/service/acme/production/json/6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f7",
            headers: { "content-type": "application/json" },
            body: "{}"
          })
        )
        const token = yield* Effect.promise(() =>
          rawRequest(port, {
            method: "POST",
            path: "/oauth/token",
            headers: { "content-type": "application/x-www-form-urlencoded" },
            body: "grant_type=client_credentials&client_id=svc_00000000000000000000000000000000&client_secret=s" +
              "&profile=acme&environment=production&service_uuid=6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f7"
          })
        )
        expect([call.status, token.status]).toEqual([299, 299])
        expect(handedOver).toBe(2)
        // The service call is refused before its body is read; the token request after.
        expect(bodies).toEqual([
          undefined,
          "grant_type=client_credentials&client_id=svc_00000000000000000000000000000000&client_secret=s" +
          "&profile=acme&environment=production&service_uuid=6f1c2a3b-4d5e-4f60-8a71-92b3c4d5e6f7"
        ])
      } finally {
        server.close()
      }
    }))
})
