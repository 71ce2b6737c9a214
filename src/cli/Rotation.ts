/**
 * `rotate`: replaces a credential without downtime, as docs/contract.md §0 describes it. It adds a
 * new credential and prints its secret at once (the applications move to it while rotate waits),
 * then watches the old one's `last_used_at` (token requests and calls with its tokens) until it has
 * not moved for `--idle` (by default longer than a cached token lives), and only then removes it;
 * `--force` removes it at once. Whatever stops it before that (Ctrl-C, the server gone, the new
 * credential removed) leaves both credentials and says how to finish by hand.
 */
import { Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Clock, Duration, Effect, Either, Option, Schema } from "effect"
import { TOKEN_LIFETIME_SECONDS } from "../domain/AccessTokens.js"
import type { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import { LAST_USE_RESOLUTION } from "../domain/LastUse.js"
import { NewCredential } from "../domain/Models.js"
import { AdminClient } from "./AdminClient.js"
import type { AdminClientShape, ServiceAddress } from "./AdminClientShape.js"
import { isTransient } from "./AdminClientErrors.js"
import {
  clientIdArg,
  CommandFailed,
  connection,
  durationOption,
  environmentArg,
  formatDuration,
  profileArg,
  runAdmin,
  serviceUuidArg
} from "./CommandLine.js"
import { commandPrefix, formatLastUsed, newCredentialText, note, printResult, SECRET_SHOWN_ONCE } from "./Output.js"

/** The rotation stopped after the new credential was added: both credentials remain. */
export class RotationStopped extends Schema.TaggedError<RotationStopped>()("RotationStopped", {
  message: Schema.String
}) {}

/**
 * `last_used_at` moves with every use of a credential, token requests and service calls alike, at
 * most a minute behind (docs/contract.md §3). Every token of the old credential was issued at a
 * token request, so at most a minute after the last `last_used_at`; it lives an hour. Once the old
 * credential has been still for a token's lifetime plus that minute, no token of it can be live,
 * however long a client caches it: the shortest safe --idle.
 */
const SAFE_IDLE = Duration.sum(Duration.seconds(TOKEN_LIFETIME_SECONDS), LAST_USE_RESOLUTION)
/** The safe --idle and a minute more for the batched write, the poll and clocks a little apart. */
const DEFAULT_IDLE = Duration.sum(SAFE_IDLE, Duration.minutes(1))
/**
 * The shortest --idle that can see a use at all: `last_used_at` moves at most once a
 * `LAST_USE_RESOLUTION`, so a credential called every second may look still for that long; twice
 * that leaves room for the poll. Also how long a credential never used is watched before it goes:
 * a use in the minute before rotate looked would show by then.
 */
export const MIN_IDLE = Duration.times(LAST_USE_RESOLUTION, 2)
const DEFAULT_POLL = Duration.seconds(5)
/** A duration as the option takes it: `1h2m`. */
const asOption = (duration: Duration.Duration) => formatDuration(duration).replaceAll(" ", "")
/** Polls that may fail in a row (server restarting, network blip) before rotate gives up. */
const MAX_FAILED_POLLS = 5
/** How often the wait says it is still waiting when nothing changes. */
const PROGRESS_EVERY = Duration.minutes(1)

export interface RotateInput {
  readonly profile: ProfileId
  readonly environment: EnvironmentName
  readonly uuid: ServiceUuid
  readonly clientId: ClientId
  readonly idle: Option.Option<Duration.Duration>
  readonly poll: Option.Option<Duration.Duration>
  readonly force: boolean
  readonly json: boolean
}

type WaitOutcome = "idle" | "removed elsewhere"

export const rotate = Effect.fn("rotate")(function*(input: RotateInput) {
  if (input.force && Option.isSome(input.idle)) {
    return yield* new CommandFailed({ message: "--force and --idle exclude each other (--force removes the old credential at once)" })
  }
  const idle = Option.getOrElse(input.idle, () => DEFAULT_IDLE)
  const poll = Option.getOrElse(input.poll, () => DEFAULT_POLL)
  const client = yield* AdminClient
  const address: ServiceAddress = { profile: input.profile, environment: input.environment, uuid: input.uuid }
  const oldId = input.clientId

  const before = yield* client.listCredentials(address)
  const old = before.credentials.find((credential) => credential.client_id === oldId)
  if (old === undefined) {
    return yield* new CommandFailed({ message: `No such live credential on this service: ${oldId} (nothing was changed)` })
  }
  const observedAt = yield* Clock.currentTimeMillis
  if (!input.force && Duration.lessThan(idle, SAFE_IDLE)) {
    yield* note(
      `warning: a client may cache a token of ${oldId} for its whole hour and call with it after ${formatDuration(idle)} ` +
        `of quiet, and last_used_at lags up to a minute; the default, --idle ${asOption(DEFAULT_IDLE)}, is safe`
    )
  }

  const fresh = yield* client.addCredential(address)
  yield* printResult(input.json, {
    json: { ...Schema.encodeSync(NewCredential)(fresh), replaces: oldId },
    text: newCredentialText(fresh)
  })
  yield* note(SECRET_SHOWN_ONCE)

  const finishByHand = `${commandPrefix()} credentials remove ${input.profile} ${input.environment} ${input.uuid} ${oldId} --yes`
  const keepBoth = (why: string) => `${why}; both credentials remain: remove ${oldId} later with: ${finishByHand}`

  if (!input.force) {
    const outcome = yield* waitUntilIdle({
      client,
      address,
      oldId,
      newId: fresh.client_id,
      lastUsed: old.last_used_at,
      observedAt,
      idle,
      poll,
      keepBoth
    }).pipe(Effect.onInterrupt(() => note(keepBoth("interrupted while waiting"))))
    if (outcome === "removed elsewhere") {
      return yield* note(`${oldId} was removed meanwhile (not by this command): ${fresh.client_id} replaces it`)
    }
  }

  yield* client.removeCredential(address, oldId).pipe(
    Effect.matchEffect({
      onSuccess: () => note(`removed ${oldId}; its tokens are refused from now on: ${fresh.client_id} replaces it`),
      onFailure: (error) =>
        error._tag === "AdminApiError" && error.status === 404
          ? note(`${oldId} was already removed: ${fresh.client_id} replaces it`)
          : Effect.fail(new RotationStopped({ message: keepBoth(`could not remove ${oldId}: ${error.message}`) }))
    }),
    Effect.onInterrupt(() =>
      note(
        `interrupted while removing ${oldId}: it may remain; check with ` +
          `${commandPrefix()} credentials list ${input.profile} ${input.environment} ${input.uuid}`
      )
    )
  )
})

export interface WaitInput {
  readonly client: AdminClientShape
  readonly address: ServiceAddress
  readonly oldId: ClientId
  readonly newId: ClientId
  readonly lastUsed: Date | null
  /** When `lastUsed` was read: the quiet time counts from there. */
  readonly observedAt: number
  readonly idle: Duration.Duration
  readonly poll: Duration.Duration
  readonly keepBoth: (why: string) => string
}

/**
 * Polls until the old credential's `last_used_at` has not moved for `idle`. It only ever moves
 * forward, so an unchanged value between two reads means no use recorded in between, even across
 * polls that failed.
 */
export const waitUntilIdle = Effect.fn("rotate.waitUntilIdle")(function*(input: WaitInput) {
  const { idle, keepBoth, newId, oldId, poll } = input
  const idleMillis = Duration.toMillis(idle)
  // Never used: no token of it can exist but one issued just before rotate looked, whose use
  // would show within the resolution; so a short watch, the whole idle again once it is used.
  let required = input.lastUsed === null ? Math.min(idleMillis, Duration.toMillis(MIN_IDLE)) : idleMillis
  let seen = input.lastUsed?.getTime() ?? null
  let quietSince = input.observedAt
  let reportedAt = input.observedAt
  let failures = 0
  yield* note(
    `waiting until ${oldId} has not been used for ${formatDuration(Duration.millis(required))} ` +
      `(last used: ${formatLastUsed(input.lastUsed)}${required < idleMillis ? ", so no token of it can be cached" : ""}; ` +
      `checking every ${formatDuration(poll)}; Ctrl-C stops waiting and keeps both credentials)`
  )
  while (true) {
    yield* Effect.sleep(poll)
    const listed = yield* Effect.either(input.client.listCredentials(input.address))
    const now = yield* Clock.currentTimeMillis
    if (Either.isLeft(listed)) {
      failures += 1
      if (!isTransient(listed.left) || failures >= MAX_FAILED_POLLS) {
        return yield* new RotationStopped({ message: keepBoth(listed.left.message) })
      }
      yield* note(`checking ${oldId} failed (${listed.left.message}); trying again in ${formatDuration(poll)}`)
      continue
    }
    failures = 0
    const credentials = listed.right.credentials
    if (!credentials.some((credential) => credential.client_id === newId)) {
      return yield* new RotationStopped({ message: `the new credential ${newId} was removed meanwhile, so ${oldId} is kept` })
    }
    const old = credentials.find((credential) => credential.client_id === oldId)
    if (old === undefined) return "removed elsewhere" satisfies WaitOutcome
    const used = old.last_used_at?.getTime() ?? null
    if (used !== seen) {
      seen = used
      quietSince = now
      reportedAt = now
      required = idleMillis
      yield* note(`${oldId} was used at ${formatLastUsed(old.last_used_at)}: waiting ${formatDuration(idle)} from now`)
    } else if (now - quietSince >= required) {
      yield* note(`${oldId} has not been used for ${formatDuration(Duration.millis(now - quietSince))}`)
      return "idle" satisfies WaitOutcome
    } else if (now - reportedAt >= Duration.toMillis(PROGRESS_EVERY)) {
      reportedAt = now
      yield* note(
        `${oldId} unused for ${formatDuration(Duration.millis(now - quietSince))} of ${formatDuration(Duration.millis(required))}`
      )
    }
  }
})

export const rotateCommand = Command.make(
  "rotate",
  {
    profile: profileArg,
    environment: environmentArg,
    uuid: serviceUuidArg,
    clientId: clientIdArg,
    idle: durationOption(
      "idle",
      `Remove the old credential once its last_used_at has not moved for this long (default ${asOption(DEFAULT_IDLE)}). ` +
        "last_used_at moves with token requests and with service calls made with the credential's tokens, at most a " +
        "minute behind. A client may cache a token for its whole hour, so only a credential still for an hour plus " +
        `that minute (${asOption(SAFE_IDLE)}) has no live token left; the default adds a minute of margin. At least ` +
        `${asOption(MIN_IDLE)}: a shorter quiet time cannot see a use. A credential never used is removed once it has ` +
        `stayed unused for ${asOption(MIN_IDLE)}.`
    ).pipe(
      Options.mapEffect((idle) =>
        Duration.lessThan(idle, MIN_IDLE)
          ? Effect.fail(ValidationError.invalidValue(HelpDoc.p(
            `--idle must be at least ${asOption(MIN_IDLE)}: last_used_at moves at most once a minute, so a credential ` +
              `in use can look unused for shorter than that (the default, ${asOption(DEFAULT_IDLE)}, outlives any cached token)`
          )))
          : Effect.succeed(idle)
      ),
      Options.optional
    ),
    poll: durationOption("poll", "How often to read the old credential's last_used_at (default 5s).").pipe(
      Options.optional
    ),
    force: Options.boolean("force").pipe(
      Options.withDescription("Remove the old credential at once, without waiting (its tokens die at once).")
    ),
    ...connection
  },
  (input) => runAdmin(input.url, rotate(input))
).pipe(
  Command.withDescription(
    "Replace a credential without downtime: add a new one and print its secret (once), wait until the old one " +
      "is no longer used (--idle), then remove it. The service must have room for a second credential."
  )
)
