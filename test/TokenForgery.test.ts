/**
 * Forged and malformed access tokens at `POST /service/{profile}/{env}/json/{uuid}`, after the
 * attack catalogue of RFC 8725 (JWT Best Current Practices): every one is refused with
 * `401 invalid_token` and the `Bearer realm="service", error="invalid_token"` challenge (docs/contract.md §2).
 *
 * Each forgery targets a live credential of an existing oauth service with claims that would
 * otherwise be accepted (a control test shows such a token, honestly signed, gets 200), so the
 * refusal can only come from the property under test.
 *
 * Servers are set up with `layer(...)`, not `it.layer(...)`: see test/ServiceCallAuthorization.test.ts.
 */
import { afterAll, beforeAll, describe, expect, layer } from "@effect/vitest"
import { Effect } from "effect"
import * as Jose from "jose"
import { createPublicKey } from "node:crypto"
import * as NodeHttp from "node:http"
import type { AddressInfo } from "node:net"
import { testSigningKey } from "../src/keys/KeyService.js"
import { createFixture, type Fixture, issueToken, makeTestServer } from "../src/testing.js"
import {
  attackerKeyPair,
  base64url,
  callPath,
  callService,
  expectEcho,
  expectInvalidToken,
  hmacWith,
  type HmacAlgorithm,
  realClaims,
  realHeader,
  TEST_ISSUER,
  serverNow,
  signPs256,
  signWith,
  unsigned
} from "./support/Tokens.js"

/** A fixture, the server's current time, and the server's signing key. */
const setup = Effect.gen(function*() {
  const keys = yield* testSigningKey
  const fixture = yield* createFixture()
  const now = yield* serverNow(fixture)
  const publicJwk = keys.publicJwk
  return { keys, fixture, now, publicJwk }
})

/** Replaces the payload of a signed token, keeping its header and signature. */
const withPayload = (token: string, payload: object) => {
  const [header, , signature] = token.split(".")
  return `${header}.${base64url(payload)}.${signature}`
}

/** Replaces the header of a signed token, keeping its payload and signature. */
const withHeader = (token: string, header: object) => {
  const [, payload, signature] = token.split(".")
  return `${base64url(header)}.${payload}.${signature}`
}

const expectRefused = (fixture: Fixture, token: string) => Effect.map(callService(callPath(fixture), { token }), expectInvalidToken)

/** Records every request it receives: the attacker's JWKS / certificate host for jku and x5u. */
const attackerHost = {
  server: undefined as NodeHttp.Server | undefined,
  hits: [] as Array<string>,
  url: (path: string) => `http://127.0.0.1:${(attackerHost.server!.address() as AddressInfo).port}${path}`
}

describe("forged tokens (RFC 8725) → 401 invalid_token", () => {
  const attacker = attackerKeyPair()
  const attackerJwk = attacker.publicKey.export({ format: "jwk" })
  let attackerKid = ""

  beforeAll(async () => {
    attackerKid = await Jose.calculateJwkThumbprint(attackerJwk as Jose.JWK)
    attackerHost.server = NodeHttp.createServer((request, response) => {
      attackerHost.hits.push(request.url ?? "")
      if (request.url === "/jwks.json") {
        response.writeHead(200, { "content-type": "application/json" })
        response.end(JSON.stringify({ keys: [{ ...attackerJwk, kid: attackerKid, alg: "RS256", use: "sig" }] }))
      } else {
        response.writeHead(200, { "content-type": "application/pem-certificate-chain" })
        response.end("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
      }
    })
    await new Promise<void>((resolve) => attackerHost.server!.listen(0, "127.0.0.1", resolve))
  })

  afterAll(async () => {
    await new Promise<void>((resolve) => attackerHost.server?.close(() => resolve()) ?? resolve())
  })

  layer(makeTestServer())((it) => {
    it.effect("control: the same claims honestly signed with the server's key → 200", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        const token = signWith(keys.privateKey, realHeader(keys.kid), realClaims(fixture, now))
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
      }))

    it.effect("the server's own key, the right data, but aud naming another service, another issuer, or missing", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        const claims = realClaims(fixture, now)
        const { aud: _, ...withoutAud } = claims
        for (
          const payload of [
            { ...claims, aud: claims.aud.replace(fixture.uuid, "0b5e6a2c-6a55-4b8e-9a53-5f4d8c7a1e10") },
            { ...claims, aud: claims.aud.replace(TEST_ISSUER, "http://elsewhere.test") },
            { ...claims, aud: [claims.aud] },
            withoutAud
          ]
        ) {
          expectInvalidToken(yield* callService(callPath(fixture), { token: signWith(keys.privateKey, realHeader(keys.kid), payload) }))
        }
      }))

    it.effect("alg none (none, None, NONE) with an empty signature", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        for (const alg of ["none", "None", "NONE", "nOnE"]) {
          yield* expectRefused(fixture, unsigned({ alg, typ: "JWT" }, realClaims(fixture, now)))
          yield* expectRefused(fixture, unsigned({ alg, typ: "JWT", kid: keys.kid }, realClaims(fixture, now)))
        }
      }))

    it.effect("alg none on a real token, its RS256 signature kept or dropped", () =>
      Effect.gen(function*() {
        const { fixture, keys } = yield* setup
        const token = yield* issueToken(fixture)
        for (const alg of ["none", "None", "NONE"]) {
          const forged = withHeader(token, { alg, typ: "JWT", kid: keys.kid })
          yield* expectRefused(fixture, forged)
          yield* expectRefused(fixture, `${forged.split(".").slice(0, 2).join(".")}.`)
        }
      }))

    it.effect("HS256/HS384/HS512 keyed with the public key as SPKI PEM (algorithm confusion)", () =>
      Effect.gen(function*() {
        const { fixture, keys, now, publicJwk } = yield* setup
        const pem = createPublicKey({ key: publicJwk as any, format: "jwk" }).export({ type: "spki", format: "pem" })
        expect(typeof pem === "string" && pem.startsWith("-----BEGIN PUBLIC KEY-----")).toBe(true)
        for (const alg of ["HS256", "HS384", "HS512"] as const satisfies ReadonlyArray<HmacAlgorithm>) {
          for (const secret of [pem as string, (pem as string).trim()]) {
            yield* expectRefused(fixture, hmacWith(alg, secret, { alg, typ: "JWT", kid: keys.kid }, realClaims(fixture, now)))
            yield* expectRefused(fixture, hmacWith(alg, secret, { alg, typ: "JWT" }, realClaims(fixture, now)))
          }
        }
      }))

    it.effect("HS256/HS384/HS512 keyed with the public key as the JWK JSON string", () =>
      Effect.gen(function*() {
        const { fixture, keys, now, publicJwk } = yield* setup
        const secrets = [
          JSON.stringify(publicJwk),
          JSON.stringify({ kty: publicJwk.kty, n: publicJwk.n, e: publicJwk.e }),
          JSON.stringify({ e: publicJwk.e, kty: publicJwk.kty, n: publicJwk.n })
        ]
        for (const alg of ["HS256", "HS384", "HS512"] as const satisfies ReadonlyArray<HmacAlgorithm>) {
          for (const secret of secrets) {
            yield* expectRefused(fixture, hmacWith(alg, secret, { alg, typ: "JWT", kid: keys.kid }, realClaims(fixture, now)))
          }
        }
      }))

    it.effect("RS256 with a jku header pointing at the attacker's JWKS, signed by the attacker's key", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        const jku = attackerHost.url("/jwks.json")
        for (const kid of [attackerKid, keys.kid]) {
          yield* expectRefused(
            fixture,
            signWith(attacker.privateKey, { alg: "RS256", typ: "JWT", kid, jku }, realClaims(fixture, now))
          )
        }
        expect(attackerHost.hits.filter((url) => url === "/jwks.json")).toEqual([])
      }))

    it.effect("RS256 with an x5u header pointing at the attacker's host, signed by the attacker's key", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        const x5u = attackerHost.url("/cert.pem")
        for (const kid of [attackerKid, keys.kid]) {
          yield* expectRefused(
            fixture,
            signWith(attacker.privateKey, { alg: "RS256", typ: "JWT", kid, x5u }, realClaims(fixture, now))
          )
        }
        expect(attackerHost.hits.filter((url) => url === "/cert.pem")).toEqual([])
      }))

    it.effect("RS256 with the attacker's public key embedded as a jwk header, signed by it", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        for (const kid of [attackerKid, keys.kid, undefined]) {
          const header = { alg: "RS256", typ: "JWT", ...(kid === undefined ? {} : { kid }), jwk: attackerJwk }
          yield* expectRefused(fixture, signWith(attacker.privateKey, header, realClaims(fixture, now)))
        }
      }))

    it.effect("kid path traversal and injection strings (signed with the server's key)", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        const kids = [
          "../../etc/passwd",
          "../../../../../../dev/null",
          "/dev/null",
          "' OR 1=1 --",
          `${keys.kid}' OR '1'='1`,
          "x' UNION SELECT 'secret' --",
          `${keys.kid}/../${keys.kid}`,
          `${keys.kid}\u0000`,
          ` ${keys.kid}`,
          keys.kid.toUpperCase() === keys.kid ? keys.kid.toLowerCase() : keys.kid.toUpperCase(),
          "",
          "*"
        ]
        for (const kid of kids) {
          yield* expectRefused(fixture, signWith(keys.privateKey, { alg: "RS256", typ: "JWT", kid }, realClaims(fixture, now)))
        }
      }))

    it.effect("kid that is not a string (number, array, object, null), signed with the server's key", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        for (const kid of [1, [keys.kid], { kid: keys.kid }, null]) {
          yield* expectRefused(fixture, signWith(keys.privateKey, { alg: "RS256", typ: "JWT", kid }, realClaims(fixture, now)))
        }
      }))

    it.effect("kid pointing at an empty key (/dev/null) with HS256 keyed by the empty string", () =>
      Effect.gen(function*() {
        const { fixture, now } = yield* setup
        for (const kid of ["/dev/null", "../../../../../../dev/null"]) {
          yield* expectRefused(fixture, hmacWith("HS256", "", { alg: "HS256", typ: "JWT", kid }, realClaims(fixture, now)))
        }
      }))

    it.effect("crit: [\"exp\"] (and an empty crit) on an otherwise valid token signed with the server's key", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        for (const crit of [["exp"], [], ["b64"]]) {
          yield* expectRefused(
            fixture,
            signWith(keys.privateKey, { ...realHeader(keys.kid), crit }, realClaims(fixture, now))
          )
        }
      }))

    it.effect("RS384, RS512 and PS256 signed with the server's key (alg is not RS256)", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        const claims = realClaims(fixture, now)
        yield* expectRefused(fixture, signWith(keys.privateKey, { ...realHeader(keys.kid), alg: "RS384" }, claims, "RS384"))
        yield* expectRefused(fixture, signWith(keys.privateKey, { ...realHeader(keys.kid), alg: "RS512" }, claims, "RS512"))
        yield* expectRefused(fixture, signPs256(keys.privateKey, { ...realHeader(keys.kid), alg: "PS256" }, claims))
        // A header that names RS256 in another casing.
        yield* expectRefused(fixture, signWith(keys.privateKey, { ...realHeader(keys.kid), alg: "rs256" }, claims))
      }))

    it.effect("signature stripped: header.payload. and header.payload", () =>
      Effect.gen(function*() {
        const { fixture } = yield* setup
        const [header, payload] = (yield* issueToken(fixture)).split(".")
        yield* expectRefused(fixture, `${header}.${payload}.`)
        yield* expectRefused(fixture, `${header}.${payload}`)
      }))

    it.effect("extra segments: 4 and 5 parts built from a real token", () =>
      Effect.gen(function*() {
        const { fixture } = yield* setup
        const token = yield* issueToken(fixture)
        const [header, payload, signature] = token.split(".")
        for (
          const forged of [
            `${token}.`,
            `${token}.${signature}`,
            `${token}.e30`,
            `${token}.e30.e30`,
            `${header}.${payload}.${payload}.${signature}`,
            `${header}..${payload}.${signature}.`,
            `.${token}`
          ]
        ) {
          yield* expectRefused(fixture, forged)
        }
      }))

    it.effect("a token over 8 KiB, validly signed with the server's key", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        const token = signWith(keys.privateKey, realHeader(keys.kid), {
          ...realClaims(fixture, now),
          padding: "x".repeat(8 * 1024)
        })
        expect(token.length).toBeGreaterThan(8 * 1024)
        yield* expectRefused(fixture, token)
      }))

    it.effect("iat far in the future (signed with the server's key)", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        for (const ahead of [24 * 3600, 365 * 24 * 3600]) {
          yield* expectRefused(fixture, signWith(keys.privateKey, realHeader(keys.kid), realClaims(fixture, now + ahead)))
        }
      }))

    it.effect("exp as a string, or missing (signed with the server's key)", () =>
      Effect.gen(function*() {
        const { fixture, keys, now } = yield* setup
        const claims = realClaims(fixture, now)
        const { exp: _exp, ...withoutExp } = claims
        for (
          const payload of [
            { ...claims, exp: String(claims.exp) },
            { ...claims, exp: "never" },
            { ...claims, exp: null },
            withoutExp
          ]
        ) {
          yield* expectRefused(fixture, signWith(keys.privateKey, realHeader(keys.kid), payload))
        }
      }))

    it.effect("payload tampered after signing: data.profile changed", () =>
      Effect.gen(function*() {
        const { fixture } = yield* setup
        const other = yield* createFixture()
        const token = yield* issueToken(fixture)
        const claims = Jose.decodeJwt(token)
        const data = claims.data as Record<string, string>
        // Pointing at another profile, presented there and at the original address.
        const tampered = withPayload(token, { ...claims, data: { ...data, profile: other.profile } })
        yield* expectRefused(other, tampered)
        yield* expectRefused(fixture, tampered)
        // Pointing at a profile that only differs in case.
        yield* expectRefused(fixture, withPayload(token, { ...claims, data: { ...data, profile: fixture.profile.toUpperCase() } }))
      }))

    it.effect("payload tampered after signing: only a harmless claim (jti) or the scope changed", () =>
      Effect.gen(function*() {
        const { fixture } = yield* setup
        const token = yield* issueToken(fixture)
        const claims = Jose.decodeJwt(token)
        yield* expectRefused(fixture, withPayload(token, { ...claims, jti: `${claims.jti}x` }))
        yield* expectRefused(fixture, withPayload(token, { ...claims, scope: "service:call admin" }))
        // The same payload re-encoded with a different member order is a different signing input.
        const reordered = Object.fromEntries(Object.entries(claims).reverse())
        yield* expectRefused(fixture, withPayload(token, reordered))
        // And the untouched token still works.
        expectEcho(yield* callService(callPath(fixture), { token }), fixture, fixture.clientId)
      }))

    it.effect("header tampered after signing: typ or kid rewritten", () =>
      Effect.gen(function*() {
        const { fixture, keys } = yield* setup
        const token = yield* issueToken(fixture)
        yield* expectRefused(fixture, withHeader(token, { alg: "RS256", kid: keys.kid }))
        yield* expectRefused(fixture, withHeader(token, { kid: keys.kid, typ: "JWT", alg: "RS256" }))
      }))

    it.effect("segments that are not base64url JSON", () =>
      Effect.gen(function*() {
        const { fixture } = yield* setup
        const [header, payload, signature] = (yield* issueToken(fixture)).split(".")
        for (
          const forged of [
            `${base64url("not json")}.${payload}.${signature}`,
            `${header}.${base64url("not json")}.${signature}`,
            `${header}.${base64url("[1,2]")}.${signature}`,
            `${header}.${base64url("null")}.${signature}`,
            `${base64url("{}")}.${payload}.${signature}`
          ]
        ) {
          yield* expectRefused(fixture, forged)
        }
      }))
  })
})
