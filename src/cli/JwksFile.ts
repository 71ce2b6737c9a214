/**
 * `issuers add|change --jwks FILE`: an issuer's public keys given inline, for an issuer the server
 * cannot reach (a private cluster's `kubectl get --raw /openid/v1/jwks > jwks.json`), read from a
 * file or, with `-`, from standard input. The server checks each key; a private key is refused
 * here already, so that it never travels.
 */
import { Effect } from "effect"
import { readFile } from "node:fs/promises"
import { CommandFailed } from "./CommandLine.js"

/** Members only a private (or symmetric) JWK has. */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"]

/** Standard input whole; refused on a terminal, where nobody would know that it waits for a paste. */
const readStdin = Effect.gen(function*() {
  if (process.stdin.isTTY) {
    return yield* new CommandFailed({ message: "--jwks -: standard input is a terminal; pipe the JWKS in, or give a file" })
  }
  return yield* Effect.tryPromise({
    try: async () => {
      const chunks: Array<Buffer> = []
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
      return Buffer.concat(chunks).toString("utf8")
    },
    catch: () => new CommandFailed({ message: "cannot read the JWKS from standard input" })
  })
})

/**
 * The JWKS of `path` (`-`: standard input) as the admin API takes it: `{"keys": [...]}`; a lone JWK
 * is taken as a set of one. Whatever is wrong with it, the message never repeats key material.
 */
export const readJwksFile = (path: string) =>
  Effect.gen(function*() {
    const where = path === "-" ? "standard input" : path
    const text = path === "-" ? yield* readStdin : yield* Effect.tryPromise({
      try: () => readFile(path, "utf8"),
      catch: () => new CommandFailed({ message: `cannot read the JWKS file ${path}` })
    })
    const parsed: unknown = yield* Effect.try({
      try: () => JSON.parse(text) as unknown,
      catch: () => new CommandFailed({ message: `${where} is not JSON: expected a JWK Set ({"keys": [...]})` })
    })
    const isObject = (value: unknown): value is Record<string, unknown> =>
      typeof value === "object" && value !== null && !Array.isArray(value)
    const jwks = isObject(parsed) && typeof parsed.kty === "string" ? { keys: [parsed] } : parsed
    if (!isObject(jwks) || !Array.isArray(jwks.keys)) {
      return yield* new CommandFailed({ message: `${where} is not a JWK Set: expected {"keys": [...]}` })
    }
    const secret = jwks.keys.findIndex((key) => isObject(key) && PRIVATE_MEMBERS.some((member) => Object.hasOwn(key, member)))
    if (secret >= 0) {
      return yield* new CommandFailed({
        message: `${where}: key ${secret} is a private or symmetric key: give the issuer's public keys only`
      })
    }
    return jwks as { readonly keys: ReadonlyArray<Record<string, unknown>> }
  })
