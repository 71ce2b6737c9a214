/**
 * The admin tokens (docs/contract.md §5): ADMIN_TOKEN, whose actor is `admin`, and ADMIN_TOKENS,
 * comma-separated `name:token` pairs whose actors are their names (split at the first ':'). A problem is said by the
 * entry's position, never by quoting it: an entry may hold a token.
 */
import { Either, Redacted } from "effect"
import {
  ADMIN_TOKEN_ACTOR_NAME,
  ADMIN_TOKEN_NAME_PATTERN,
  ADMIN_TOKEN_NAME_RULE,
  isReservedAdminTokenName,
  RESERVED_ADMIN_TOKEN_NAME_RULE
} from "../domain/AdminRoles.js"
import { tokenDigest } from "../domain/TokenDigest.js"

export interface AdminTokenEntry {
  /** The actor the audit trail records for this token. */
  readonly name: string
  readonly token: Redacted.Redacted<string>
}

/** The actor of ADMIN_TOKEN. */
export const ADMIN_TOKEN_ACTOR = ADMIN_TOKEN_ACTOR_NAME
/** A named token must be sendable as a bearer token (RFC 6750 b64token), and long enough not to be guessed. */
const TOKEN = /^[A-Za-z0-9._~+/-]+=*$/
export const MIN_NAMED_TOKEN_LENGTH = 16
const STRONG_TOKEN_RULE = `at least ${MIN_NAMED_TOKEN_LENGTH} characters of letters, digits, ` +
  "'-', '.', '_', '~', '+', '/' (and '=' at the end)"

/** Whether a token meets the rule for ADMIN_TOKENS: sendable as a bearer token, too long to guess. */
export const isStrongAdminToken = (token: string): boolean => token.length >= MIN_NAMED_TOKEN_LENGTH && TOKEN.test(token)

/** Addresses only this machine can reach: a weak ADMIN_TOKEN is tolerated there, for a first try. */
export const isLoopbackHost = (host: string): boolean =>
  host === "localhost" || host === "::1" || /^(::ffff:)?127(\.\d{1,3}){3}$/.test(host)

/**
 * What to say about an ADMIN_TOKEN weaker than the ADMIN_TOKENS rule (undefined when it is strong):
 * beyond loopback it stops the start (`refused`), on loopback the start goes on with a warning.
 */
export const weakAdminTokenProblem = (adminToken: string, host: string): { refused: boolean; message: string } | undefined => {
  if (adminToken === "" || isStrongAdminToken(adminToken)) return undefined
  const fix = "e.g. ADMIN_TOKEN=$(openssl rand -base64 32), or unset it and use the generated data/admin-token"
  return isLoopbackHost(host)
    ? {
      refused: false,
      message: `ADMIN_TOKEN is weak (it must be ${STRONG_TOKEN_RULE}); allowed only because HOST=${host} is loopback: ${fix}`
    }
    : {
      refused: true,
      message: `ADMIN_TOKEN must be ${STRONG_TOKEN_RULE} when HOST=${host} reaches beyond this machine (${fix}; ` +
        "or HOST=127.0.0.1 to try it locally)"
    }
}

/** Every configured token with its actor; a message naming the problem when the settings are not usable. */
export const parseAdminTokens = (
  adminToken: string | undefined,
  adminTokens: string | undefined
): Either.Either<ReadonlyArray<AdminTokenEntry>, string> => {
  const entries: Array<AdminTokenEntry> = []
  if (adminToken !== undefined && adminToken !== "") {
    entries.push({ name: ADMIN_TOKEN_ACTOR, token: Redacted.make(adminToken) })
  }
  if (adminTokens === undefined || adminTokens.trim() === "") return Either.right(entries)
  const pairs = adminTokens.split(",")
  for (const [index, pair] of pairs.entries()) {
    const at = `ADMIN_TOKENS entry ${index + 1} of ${pairs.length}`
    const colon = pair.indexOf(":")
    if (colon < 0) return Either.left(`${at} is not name:token`)
    const name = pair.slice(0, colon).trim()
    const token = pair.slice(colon + 1).trim()
    if (!ADMIN_TOKEN_NAME_PATTERN.test(name)) return Either.left(`${at}: the name must be ${ADMIN_TOKEN_NAME_RULE}`)
    // `admin` itself is ADMIN_TOKEN's: refused below when ADMIN_TOKEN is set, as before.
    if (name !== ADMIN_TOKEN_ACTOR && isReservedAdminTokenName(name)) {
      return Either.left(`${at}: the name ${name} is reserved; a name must be ${RESERVED_ADMIN_TOKEN_NAME_RULE}`)
    }
    if (!isStrongAdminToken(token)) return Either.left(`${at} (${name}): the token must be ${STRONG_TOKEN_RULE}`)
    if (entries.some((entry) => entry.name === name)) {
      return Either.left(
        name === ADMIN_TOKEN_ACTOR
          ? `${at}: the name admin is ADMIN_TOKEN's; choose another name`
          : `${at}: the name ${name} is given twice`
      )
    }
    const same = entries.find((entry) => tokenDigest(Redacted.value(entry.token)).equals(tokenDigest(token)))
    if (same !== undefined) return Either.left(`${at} (${name}): the token is also ${same.name}'s; give each name its own token`)
    entries.push({ name, token: Redacted.make(token) })
  }
  return Either.right(entries)
}
