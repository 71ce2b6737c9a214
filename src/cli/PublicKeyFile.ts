/**
 * `credentials add --public-key FILE`: the public key of a key credential (private_key_jwt), read
 * from a file holding a JWK (JSON) or a PEM public key. The server checks it; a private key is
 * refused here already, so that it never travels, and so is a key the server would refuse (a weak
 * one: `parsePublicJwk`), in the server's words.
 */
import { Effect, Either } from "effect"
import { parsePublicJwk, pemToJwk } from "../domain/KeyCredential.js"
import { readFile } from "node:fs/promises"
import type { NewKeyCredential } from "../domain/Models.js"
import { CommandFailed } from "./CommandLine.js"
import { formatTime, record } from "./Output.js"

/** The file's key as the admin API takes it: a JWK object, or the PEM text. */
export const readPublicKeyFile = (path: string) =>
  Effect.gen(function*() {
    const text = yield* Effect.tryPromise({
      try: () => readFile(path, "utf8"),
      catch: () => new CommandFailed({ message: `cannot read the public key file ${path}` })
    })
    if (/PRIVATE KEY/.test(text) || /"d"\s*:/.test(text)) {
      return yield* new CommandFailed({ message: `${path} holds a private key: give the public key only (a JWK or a PEM public key)` })
    }
    const trimmed = text.trim()
    const key: unknown = trimmed.startsWith("{")
      ? yield* Effect.try({
        try: () => JSON.parse(trimmed) as unknown,
        catch: () => new CommandFailed({ message: `${path} is neither a JSON JWK nor a PEM public key` })
      })
      : trimmed
    const checked = typeof key === "string" ? Either.flatMap(pemToJwk(key), parsePublicJwk) : parsePublicJwk(key)
    if (Either.isLeft(checked)) return yield* new CommandFailed({ message: `${path}: ${checked.left}` })
    return key
  })

/** A new key credential for people: its client id and key; there is no secret. */
export const newKeyCredentialText = (credential: NewKeyCredential): string =>
  record([
    ["client_id", credential.client_id],
    ["key", `${credential.public_key.kty} ${credential.public_key.kid}`],
    ["thumbprint", credential.public_key.thumbprint],
    ["created_at", formatTime(credential.created_at)],
    ["expires_at", credential.expires_at === undefined ? "never" : formatTime(credential.expires_at)]
  ])
