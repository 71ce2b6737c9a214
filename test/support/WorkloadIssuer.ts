/**
 * A workload identity issuer on loopback, as the tests' trusted issuers: an OIDC discovery document
 * and a JWKS over plain HTTP on 127.0.0.1, signing tokens like a Kubernetes cluster (RS256, `sub`
 * `system:serviceaccount:<ns>:<name>`), GitHub Actions (RS256, `repository`, `environment` claims)
 * or a SPIFFE trust domain (ES256, `sub` `spiffe://…`). Its keys can be rotated, and it can be taken
 * down (every request answered 503) and brought back.
 */
import { Effect } from "effect"
import { exportJWK, generateKeyPair, type JWK, SignJWT } from "jose"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { randomBytes } from "node:crypto"

export type IssuerAlg = "RS256" | "ES256" | "EdDSA"

interface IssuerKey {
  readonly kid: string
  readonly privateKey: CryptoKey
  readonly publicJwk: JWK
}

export interface WorkloadIssuer {
  /** The issuer identifier (`iss`), e.g. http://127.0.0.1:41234/cluster. */
  readonly url: string
  readonly alg: IssuerAlg
  /** The kid tokens are signed with now. */
  readonly currentKid: () => string
  /** Signs `claims` (iss added) with the current key, or the key of `kid`, or a key the JWKS never held (`"unknown"`). */
  readonly sign: (claims: Record<string, unknown>, options?: { readonly kid?: string; readonly alg?: string }) => Promise<string>
  /** A new current key; `keepOld` keeps the previous one in the JWKS too. */
  readonly rotate: (keepOld?: boolean) => Promise<void>
  /** The JWKS as served. */
  readonly jwks: () => { readonly keys: ReadonlyArray<JWK> }
  /** true: every request answers 503 until set false again. */
  readonly setDown: (down: boolean) => void
  /** How many times the JWKS was served. */
  readonly jwksFetches: () => number
  readonly close: () => Promise<void>
}

const newKey = async (alg: IssuerAlg): Promise<IssuerKey> => {
  const { privateKey, publicKey } = await generateKeyPair(alg, alg === "EdDSA" ? { crv: "Ed25519" } : {})
  const kid = randomBytes(8).toString("hex")
  return { kid, privateKey: privateKey as CryptoKey, publicJwk: { ...(await exportJWK(publicKey)), kid, use: "sig", alg } }
}

/** Starts an issuer at `http://127.0.0.1:<port>/<path>` serving discovery and its JWKS (`Cache-Control: max-age`). */
export const startWorkloadIssuer = async (
  options: { readonly alg?: IssuerAlg; readonly path?: string; readonly maxAgeSeconds?: number } = {}
): Promise<WorkloadIssuer> => {
  const alg = options.alg ?? "RS256"
  const path = options.path ?? "cluster"
  let keys: Array<IssuerKey> = [await newKey(alg)]
  let current = keys[0]!
  // Every key it ever had, so a test can sign with a key the JWKS dropped.
  const made: Array<IssuerKey> = [current]
  let down = false
  let fetches = 0
  let url = ""
  const server: Server = createServer((request, response) => {
    if (down) {
      response.writeHead(503).end()
      return
    }
    if (request.url === `/${path}/.well-known/openid-configuration`) {
      response.writeHead(200, { "content-type": "application/json" })
      response.end(JSON.stringify({ issuer: url, jwks_uri: `${url}/keys`, id_token_signing_alg_values_supported: [alg] }))
      return
    }
    if (request.url === `/${path}/keys`) {
      fetches++
      response.writeHead(200, { "content-type": "application/json", "cache-control": `max-age=${options.maxAgeSeconds ?? 3600}` })
      response.end(JSON.stringify({ keys: keys.map((key) => key.publicJwk) }))
      return
    }
    response.writeHead(404).end()
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/${path}`
  const stranger = await newKey(alg)

  return {
    url,
    alg,
    currentKid: () => current.kid,
    sign: async (claims, signOptions = {}) => {
      const key = signOptions.kid === "unknown" ? stranger : made.find((k) => k.kid === signOptions.kid) ?? current
      return new SignJWT({ iss: url, ...claims })
        .setProtectedHeader({ alg: signOptions.alg ?? alg, kid: signOptions.kid === "unknown" ? stranger.kid : key.kid, typ: "JWT" })
        .sign(key.privateKey)
    },
    rotate: async (keepOld = false) => {
      current = await newKey(alg)
      made.push(current)
      keys = keepOld ? [...keys, current] : [current]
    },
    jwks: () => ({ keys: keys.map((key) => key.publicJwk) }),
    setDown: (value) => void (down = value),
    jwksFetches: () => fetches,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}

/** The issuer as an Effect resource: started, and closed with the scope. */
export const workloadIssuer = (options: Parameters<typeof startWorkloadIssuer>[0] = {}) =>
  Effect.acquireRelease(Effect.promise(() => startWorkloadIssuer(options)), (issuer) => Effect.promise(() => issuer.close()))

/** Claims like a Kubernetes projected service-account token's, valid from `nowSeconds` for `lifetime` seconds. */
export const kubernetesClaims = (nowSeconds: number, audience: string, lifetime = 3600) => ({
  sub: "system:serviceaccount:payments:billing",
  aud: [audience],
  iat: nowSeconds,
  nbf: nowSeconds,
  exp: nowSeconds + lifetime,
  "kubernetes.io": { namespace: "payments", serviceaccount: { name: "billing", uid: "6b1f0f58-5a8a-4d4f-9a5e-0c2f3f0f1a11" } }
})

/** Claims like a GitHub Actions OIDC token's. */
export const githubClaims = (nowSeconds: number, audience: string) => ({
  sub: "repo:acme/billing:environment:production",
  aud: audience,
  repository: "acme/billing",
  environment: "production",
  ref: "refs/heads/main",
  jti: randomBytes(8).toString("hex"),
  iat: nowSeconds,
  nbf: nowSeconds,
  exp: nowSeconds + 300
})

/** Claims like a SPIFFE JWT-SVID's. */
export const spiffeClaims = (nowSeconds: number, audience: string) => ({
  sub: "spiffe://example.org/ns/payments/sa/billing",
  aud: [audience],
  iat: nowSeconds,
  exp: nowSeconds + 300
})
