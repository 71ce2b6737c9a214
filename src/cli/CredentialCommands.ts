/**
 * The `credentials` commands: `list` (one service's, or with `--expiring` those of every profile
 * that expire within a period), `add` (with `--expires-at`; a key credential with `--public-key`, a
 * federated one with `--federated`) and `remove`. Thin handlers over `AdminClient`, as in
 * `AdminCommands.ts`.
 */
import { Args, Command, HelpDoc, Options, Prompt, ValidationError } from "@effect/cli"
import { Duration, Effect, Option, Schema } from "effect"
import { CredentialList } from "../admin/AdminApi.js"
import { type ClientId, type EnvironmentName, ProfileId, type ServiceUuid } from "../domain/Identifiers.js"
import { NewFederatedCredential } from "../domain/FederatedCredentialBodies.js"
import { DATE_TIME_RULE, NewCredential, NewKeyCredential } from "../domain/Models.js"
import { parseRfc3339 } from "../domain/Time.js"
import { AdminClient } from "./AdminClient.js"
import type { AdminCallError, AdminSetupError } from "./AdminClientErrors.js"
import { commandGroup } from "./CommandGroup.js"
import {
  clientIdArg,
  CommandFailed,
  connection,
  environmentArg,
  isInteractive,
  parseDuration,
  parseProfileList,
  profileArg,
  runAdmin,
  serviceUuidArg
} from "./CommandLine.js"
import { formatLastUsed, formatTime, newCredentialText, note, printResult, SECRET_SHOWN_ONCE, table } from "./Output.js"
import { newKeyCredentialText, readPublicKeyFile } from "./PublicKeyFile.js"
import { FEDERATED_NEXT_STEP, federatedIdentityCell, federatedOptions, newFederatedCredentialText } from "./FederatedCredentialOptions.js"

const serviceArgs = { profile: profileArg, environment: environmentArg, uuid: serviceUuidArg }

const DAY_MS = 86_400_000

/** `30d`, `7d`, or a duration (`12h`, `90m`): how far ahead `--expiring` looks, in ms. */
export const parseExpiringWithin = (text: string): number | undefined => {
  const days = /^(\d{1,5})d$/.exec(text)
  if (days !== null) return Number(days[1]) * DAY_MS
  const duration = parseDuration(text)
  return duration === undefined ? undefined : Duration.toMillis(duration)
}

const expiringOption = Options.text("expiring").pipe(
  Options.withPseudoName("PERIOD"),
  Options.withDescription(
    "List, across every profile the admin token reaches, the credentials that expire within PERIOD (30d, 7d, 12h) " +
      "or have expired (and still count toward their service's two until removed). No service arguments then."
  ),
  Options.mapEffect((text) => {
    const within = parseExpiringWithin(text)
    return within !== undefined && within > 0
      ? Effect.succeed(within)
      : Effect.fail(
        ValidationError.invalidValue(HelpDoc.p(`--expiring must be a period such as 30d, 7d or 12h, not ${JSON.stringify(text)}`))
      )
  }),
  Options.optional
)

/** When a credential expires, for people: `never`, the time, or the time and `(expired)`. */
const formatExpiry = (expiresAt: Date | null, now: number) =>
  expiresAt === null ? "never" : `${formatTime(expiresAt)}${expiresAt.getTime() <= now ? " (expired)" : ""}`

/** Every credential that expires by `now + within` (expired ones too), across the profiles the token reaches. */
const expiringCredentials = (within: number) =>
  Effect.gen(function*() {
    const client = yield* AdminClient
    const now = Date.now()
    const { profiles } = yield* client.listProfiles()
    const found: Array<{
      profile: ProfileId
      environment: EnvironmentName
      service_uuid: ServiceUuid
      client_id: ClientId
      expires_at: Date
    }> = []
    for (const summary of profiles) {
      // A profile deleted since the list was read has nothing left to expire: skipped, not an error.
      const read = yield* client.getProfile(summary.profile).pipe(
        Effect.map(Option.some),
        Effect.catchIf((error) => error._tag === "AdminApiError" && error.status === 404, () => Effect.succeedNone)
      )
      if (Option.isNone(read)) continue
      const profile = read.value
      for (const environment of profile.environments) {
        for (const service of environment.services) {
          for (const credential of service.credentials) {
            if (credential.expires_at !== null && credential.expires_at.getTime() <= now + within) {
              found.push({
                profile: profile.profile,
                environment: environment.name,
                service_uuid: service.uuid,
                client_id: credential.client_id,
                expires_at: credential.expires_at
              })
            }
          }
        }
      }
    }
    found.sort((a, b) => a.expires_at.getTime() - b.expires_at.getTime())
    return { found, now }
  })

/**
 * A command line short of its arguments (without --expiring), refused in the library's words, as
 * before they became optional (exit 2).
 */
const missingArgument = (name: string) => {
  const problem = `Missing argument <${name}> (see service-auth credentials list --help)`
  return Effect.zipRight(
    note(problem),
    Effect.fail<ValidationError.ValidationError | AdminCallError | AdminSetupError>(ValidationError.missingValue(HelpDoc.p(problem)))
  )
}

/** A key credential's kind as the list shows it: `kty` names Ed25519 `OKP`. */
const KEY_TYPES: Record<string, string> = { RSA: "RSA key", EC: "EC P-256 key", OKP: "Ed25519 key" }

/** How a credential authenticates, in the key column: a secret, a key's type, or a federated identity. */
const keyCell = (credential: typeof CredentialList.Type["credentials"][number]) =>
  credential.public_key !== undefined
    ? KEY_TYPES[credential.public_key.kty] ?? credential.public_key.kty
    : credential.federated !== undefined
    ? federatedIdentityCell(credential.federated)
    : "secret"

/**
 * A service's credentials as a table. The key column (secret, the key type of a private_key_jwt
 * credential, or a federated credential's issuer and subject) only when one is not a secret, and the
 * introspection column only when one may introspect: a table without them reads as before.
 */
const credentialsTable = (credentials: typeof CredentialList.Type["credentials"], now: number) => {
  const keys = credentials.some((c) => c.public_key !== undefined || c.federated !== undefined)
  const introspects = credentials.some((c) => c.introspect_profiles !== undefined)
  return table(
    ["client id", ...(keys ? ["key"] : []), "created", "last used", "expires", ...(introspects ? ["introspects"] : [])],
    credentials.map((credential) => [
      credential.client_id,
      ...(keys ? [keyCell(credential)] : []),
      formatTime(credential.created_at),
      formatLastUsed(credential.last_used_at),
      formatExpiry(credential.expires_at, now),
      ...(introspects ? [credential.introspect_profiles?.join(",") ?? "-"] : [])
    ]),
    "no credentials"
  )
}

const credentialsList = Command.make(
  "list",
  {
    profile: Args.optional(profileArg),
    environment: Args.optional(environmentArg),
    uuid: Args.optional(serviceUuidArg),
    expiring: expiringOption,
    ...connection
  },
  ({ environment, expiring, json, profile, url, uuid }) =>
    Option.isNone(expiring) && Option.isNone(profile)
      ? missingArgument("profile")
      : Option.isNone(expiring) && Option.isNone(environment)
      ? missingArgument("environment")
      : Option.isNone(expiring) && Option.isNone(uuid)
      ? missingArgument("service-uuid")
      : runAdmin(
        url,
        Effect.gen(function*() {
          if (Option.isSome(expiring)) {
            const { found, now } = yield* expiringCredentials(expiring.value)
            return yield* printResult(json, {
              json: { credentials: found.map((c) => ({ ...c, expires_at: c.expires_at.toISOString() })) },
              text: table(
                ["profile", "environment", "service", "client id", "expires"],
                found.map((c) => [c.profile, c.environment, c.service_uuid, c.client_id, formatExpiry(c.expires_at, now)]),
                "no credentials expire within that period"
              )
            })
          }
          if (Option.isNone(profile) || Option.isNone(environment) || Option.isNone(uuid)) return
          const list = yield* (yield* AdminClient).listCredentials({
            profile: profile.value,
            environment: environment.value,
            uuid: uuid.value
          })
          const now = Date.now()
          yield* printResult(json, {
            json: Schema.encodeSync(CredentialList)(list),
            text: credentialsTable(list.credentials, now)
          })
        })
      )
).pipe(
  Command.withDescription(
    "List a service's credentials (at most two) with their last use (a token request, or a service call with one of " +
      "their tokens, recorded at most once a minute) and expiry; with --expiring 30d, those of every profile that " +
      "expire within 30 days. Secrets are never shown."
  )
)

const credentialsAdd = Command.make(
  "add",
  {
    ...serviceArgs,
    expiresAt: Options.text("expires-at").pipe(
      Options.withPseudoName("TIME"),
      Options.withDescription(
        "When the credential expires (RFC 3339, e.g. 2027-01-01T00:00:00Z); without it, the profile's " +
          "credential_max_lifetime_days, or never."
      ),
      // A bad value is a bad command line (exit 2), like any option @effect/cli refuses.
      Options.mapEffect((text) =>
        parseRfc3339(text) === undefined
          ? Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--expires-at ${DATE_TIME_RULE}, not ${JSON.stringify(text)}`)))
          : Effect.succeed(text)
      ),
      Options.optional
    ),
    publicKey: Options.file("public-key", { exists: "yes" }).pipe(
      Options.optional,
      Options.withDescription("A key credential (private_key_jwt): the client's public key, a JWK or PEM file. No secret.")
    ),
    ...federatedOptions,
    ...connection
  },
  ({ claims, environment, expiresAt, federated, json, profile, publicKey, subject, url, uuid }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        if (Option.isSome(expiresAt) && parseRfc3339(expiresAt.value) === undefined) {
          return yield* new CommandFailed({ message: `--expires-at ${DATE_TIME_RULE}, not ${JSON.stringify(expiresAt.value)}` })
        }
        if (Option.isNone(federated) && (Option.isSome(subject) || Object.keys(claims).length > 0)) {
          return yield* new CommandFailed({ message: "--subject and --claim need --federated ISSUER" })
        }
        if (Option.isSome(federated)) {
          if (Option.isSome(publicKey)) {
            return yield* new CommandFailed({ message: "--federated and --public-key are two kinds of credential: give one" })
          }
          if (Option.isNone(subject)) {
            return yield* new CommandFailed({ message: "--federated needs --subject SUB: the exact sub of the workload's tokens" })
          }
          const created = yield* (yield* AdminClient).addFederatedCredential({ profile, environment, uuid }, {
            issuer: federated.value,
            subject: subject.value,
            ...(Object.keys(claims).length === 0 ? {} : { claims }),
            ...Option.match(expiresAt, { onNone: () => ({}), onSome: (expires_at) => ({ expires_at }) })
          })
          yield* printResult(json, {
            json: Schema.encodeSync(NewFederatedCredential)(created),
            text: newFederatedCredentialText(created)
          })
          return yield* note(FEDERATED_NEXT_STEP)
        }
        if (Option.isSome(publicKey)) {
          const key = yield* readPublicKeyFile(publicKey.value)
          const created = yield* (yield* AdminClient).addKeyCredential(
            { profile, environment, uuid },
            key,
            Option.getOrUndefined(expiresAt)
          )
          return yield* printResult(json, { json: Schema.encodeSync(NewKeyCredential)(created), text: newKeyCredentialText(created) })
        }
        const credential = yield* (yield* AdminClient).addCredential(
          { profile, environment, uuid },
          Option.getOrUndefined(expiresAt)
        )
        yield* printResult(json, {
          json: Schema.encodeSync(NewCredential)(credential),
          text: newCredentialText(credential)
        })
        yield* note(SECRET_SHOWN_ONCE)
      })
    )
).pipe(
  Command.withDescription(
    "Generate a credential (a service holds at most two) and print its client secret, once; with --public-key, a key " +
      "credential (private_key_jwt) instead, without a secret; with --federated, a federated credential (a trusted " +
      "issuer's workload token), without a secret. Sets the service's auth_type to oauth."
  )
)

/** Asks on a terminal; refuses, rather than waiting for an answer that cannot come, anywhere else. */
const confirmRemoval = Effect.fn("confirmRemoval")(function*(clientId: ClientId, uuid: ServiceUuid) {
  if (!(yield* isInteractive)) {
    return yield* new CommandFailed({
      message: `not removing ${clientId} without confirmation (no terminal to ask on): pass --yes`
    })
  }
  const confirmed = yield* Prompt.confirm({
    message: `Remove credential ${clientId} of service ${uuid}? Its tokens are refused at once.`,
    initial: false
  }).pipe(Effect.catchAll(() => Effect.succeed(false)))
  if (!confirmed) return yield* new CommandFailed({ message: `${clientId} was not removed` })
})

const credentialsRemove = Command.make(
  "remove",
  {
    ...serviceArgs,
    clientId: clientIdArg,
    yes: Options.boolean("yes").pipe(
      Options.withAlias("y"),
      Options.withDescription("Remove without asking (needed when not on a terminal).")
    ),
    ...connection
  },
  ({ clientId, environment, json, profile, url, uuid, yes }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        if (!yes) yield* confirmRemoval(clientId, uuid)
        yield* (yield* AdminClient).removeCredential({ profile, environment, uuid }, clientId)
        yield* printResult(json, {
          json: { profile, environment, service_uuid: uuid, client_id: clientId, deleted: true },
          text: `removed ${clientId}; its tokens are refused from now on`
        })
      })
    )
).pipe(Command.withDescription("Remove a credential (asks first unless --yes); its tokens die at once."))

/** `--profiles a,b`: the profiles, each checked as a profile identifier; "" is none. */
const introspectProfilesOption = Options.text("profiles").pipe(
  Options.withPseudoName("PROFILES"),
  Options.withDescription(
    "The profiles (comma-separated) whose access tokens the credential may introspect, replacing its list; \"\" takes " +
      "the permission away."
  ),
  Options.mapEffect(parseProfileList("profiles"))
)

const credentialsIntrospection = Command.make(
  "allow-introspection",
  { ...serviceArgs, clientId: clientIdArg, profiles: introspectProfilesOption, ...connection },
  ({ clientId, environment, json, profile, profiles, url, uuid }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        const credential = yield* (yield* AdminClient).setIntrospectProfiles({ profile, environment, uuid }, clientId, profiles)
        const allowed = credential.introspect_profiles ?? []
        yield* printResult(json, {
          json: { profile, environment, service_uuid: uuid, client_id: clientId, introspect_profiles: allowed },
          text: allowed.length === 0
            ? `${clientId} may not introspect tokens`
            : `${clientId} may introspect the tokens of ${allowed.join(", ")} at POST /oauth/introspect, ` +
              "authenticating as at the token endpoint"
        })
      })
    )
).pipe(
  Command.withDescription(
    "Admin tokens only: let a credential (a resource server's) introspect the access tokens of the profiles listed, " +
      "with its own client authentication at POST /oauth/introspect."
  )
)

export const credentials = commandGroup(
  "credentials",
  "List, add and remove a service's credentials (rotate: replace one without downtime); allow one to introspect tokens.",
  [credentialsList, credentialsAdd, credentialsRemove, credentialsIntrospection]
)
