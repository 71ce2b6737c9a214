/**
 * What the admin commands share: the positional arguments (always in the order profile,
 * environment, service uuid, client id), `--url` and `--json`, durations, and `runAdmin`, which
 * connects a command to the server and reports its failure on stderr. A new admin command is a
 * handler over `AdminClient` given to `runAdmin`, with these arguments and options.
 */
import { Args, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Cause, Config, Duration, Effect, ParseResult, Schema } from "effect"
import { TRUSTED_ISSUER_NAME_RULE, TrustedIssuerName } from "../domain/FederatedCredential.js"
import { ClientId, EnvironmentName, ProfileId, ServiceUuid } from "../domain/Identifiers.js"
import { AdminClient, DEFAULT_SERVER_URL } from "./AdminClient.js"
import type { AdminSetupError } from "./AdminClientErrors.js"
import { note } from "./Output.js"

/**
 * Names are checked here with the server's own schemas, before anything is sent: a name such as
 * `..` would otherwise be normalised out of the URL and address another resource.
 */
const checked = <A>(schema: Schema.Schema<A, string>) => (value: string) =>
  Schema.decodeUnknown(schema)(value).pipe(
    Effect.mapError((error) => HelpDoc.p(ParseResult.ArrayFormatter.formatErrorSync(error)[0]?.message ?? error.message))
  )

export const profileArg = Args.text({ name: "profile" }).pipe(
  Args.withDescription("The profile's identifier."),
  Args.mapEffect(checked(ProfileId))
)

export const environmentArg = Args.text({ name: "environment" }).pipe(
  Args.withDescription("The environment's name in the profile."),
  Args.mapEffect(checked(EnvironmentName))
)

/** Any case is accepted, as the server does (RFC 9562 §4); it is sent in lower case. */
export const serviceUuidArg = Args.text({ name: "service-uuid" }).pipe(
  Args.withDescription("The service's uuid."),
  Args.mapEffect((value) => checked(ServiceUuid)(value.toLowerCase()))
)

export const clientIdArg = Args.text({ name: "client-id" }).pipe(
  Args.withDescription("The credential's client id (svc_...)."),
  Args.mapEffect(checked(ClientId))
)

export const trustedIssuerNameArg = Args.text({ name: "name" }).pipe(
  Args.withDescription(`The trusted issuer's name (${TRUSTED_ISSUER_NAME_RULE}).`),
  Args.mapEffect(checked(TrustedIssuerName))
)

/**
 * A comma-separated list of profiles as an option gives it (`acme,globex`; "" is none), each
 * checked as a profile identifier; `option` names it in the refusal (a bad value: exit 2).
 */
export const parseProfileList = (option: string) => (text: string) => {
  const profiles = text.split(",").map((part) => part.trim()).filter((part) => part !== "")
  const wrong = profiles.find((profile) => !Schema.is(ProfileId)(profile))
  return wrong === undefined
    ? Effect.succeed(profiles as ReadonlyArray<string> as ReadonlyArray<ProfileId>)
    : Effect.fail(ValidationError.invalidValue(HelpDoc.p(`--${option}: ${JSON.stringify(wrong)} is not a profile identifier`)))
}

const urlOption = Options.text("url").pipe(
  Options.withPseudoName("URL"),
  Options.withDescription(
    `The server's base URL (default: SERVICE_AUTH_URL, else ${DEFAULT_SERVER_URL}). ` +
      "The admin token is read from ADMIN_TOKEN, never from the command line."
  ),
  Options.withFallbackConfig(Config.string("SERVICE_AUTH_URL").pipe(Config.withDefault(DEFAULT_SERVER_URL)))
)

const jsonOption = Options.boolean("json").pipe(
  Options.withDescription("Print exactly one JSON document on stdout, for scripts, instead of text for people.")
)

/** The options every admin command takes. */
export const connection = { url: urlOption, json: jsonOption } as const

/** A failure of the command itself rather than of a call: a refusal, a name not found. */
export class CommandFailed extends Schema.TaggedError<CommandFailed>()("CommandFailed", { message: Schema.String }) {}

const DURATION_PART = /(\d+)(ms|s|m|h)/y
const UNIT_MILLIS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 } as const

/** `30s`, `10m`, `1h`, `1h30m`, `500ms`; undefined for anything else. */
export const parseDuration = (text: string): Duration.Duration | undefined => {
  if (text === "") return undefined
  let millis = 0
  for (let index = 0; index < text.length;) {
    DURATION_PART.lastIndex = index
    const part = DURATION_PART.exec(text)
    if (part === null) return undefined
    millis += Number(part[1]) * UNIT_MILLIS[part[2] as keyof typeof UNIT_MILLIS]
    index = DURATION_PART.lastIndex
  }
  return Duration.millis(millis)
}

/** A `--name DURATION` option; zero is refused. */
export const durationOption = (name: string, description: string) =>
  Options.text(name).pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription(description),
    Options.mapEffect((text) => {
      const duration = parseDuration(text)
      return duration !== undefined && Duration.greaterThan(duration, Duration.zero)
        ? Effect.succeed(duration)
        : Effect.fail(
          ValidationError.invalidValue(
            HelpDoc.p(`--${name} must be a positive duration such as 30s, 10m, 1h or 1h30m, not ${JSON.stringify(text)}`)
          )
        )
    })
  )

/** A duration for people: `10m`, `1h 30m`, `2s`. */
export const formatDuration = (duration: Duration.Duration): string => {
  const millis = Duration.toMillis(duration)
  return Duration.format(Duration.millis(millis >= 1_000 ? Math.round(millis / 1_000) * 1_000 : millis))
}

/**
 * Runs an admin command against the server at `url`: any failure is printed on stderr as
 * `service-auth: <message>` (for the server's errors, its `error_description`) and fails the
 * command, so the process exits non-zero. The admin token never appears in a message.
 */
export const runAdmin = <A, E extends { readonly message: string }, R>(
  url: string,
  command: Effect.Effect<A, E, R | AdminClient>
): Effect.Effect<A, E | AdminSetupError, Exclude<R, AdminClient>> =>
  command.pipe(
    Effect.provide(AdminClient.layer(url)),
    Effect.tapError((error) => note(error.message)),
    Effect.tapDefect((defect) => note(`unexpected failure: ${Cause.pretty(Cause.die(defect))}`))
  )

/** Whether a person can answer a question: both ends of the terminal, so the prompt is seen and answered. */
export const isInteractive = Effect.sync(() => Boolean(process.stdin.isTTY) && Boolean(process.stdout.isTTY))
