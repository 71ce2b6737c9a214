/**
 * `issuers list|add|show|change|remove`: the trusted issuers of workload identity federation
 * (`/admin/trusted-issuers`), for admin tokens only (the server answers 403 to the others). `change`
 * reads the issuer and replaces it with the options given over what it holds, so an option left
 * out keeps its value. Thin handlers over `AdminClient`, as in `AdminCommands.ts`.
 */
import { Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Duration, Effect, Option, Schema } from "effect"
import { FEDERATION_ALGORITHMS, MAX_TOKEN_LIFETIME_LIMIT_SECONDS } from "../domain/Limits.js"
import { TrustedIssuerDocument, type TrustedIssuerInput } from "../domain/TrustedIssuers.js"
import { AdminClient } from "./AdminClient.js"
import type { AdminCallError, AdminSetupError } from "./AdminClientErrors.js"
import { commandGroup } from "./CommandGroup.js"
import { type CommandFailed, connection, parseDuration, parseProfileList, runAdmin, trustedIssuerNameArg } from "./CommandLine.js"
import { readJwksFile } from "./JwksFile.js"
import { fitToTerminal, formatTime, note, printResult, record, table } from "./Output.js"

type Algorithm = typeof FEDERATION_ALGORITHMS[number]

const badValue = (text: string) => Effect.fail(ValidationError.invalidValue(HelpDoc.p(text)))

/** `RS256,ES256`: each one of the algorithms a trusted issuer may sign with. */
const parseAlgorithms = (text: string) => {
  const algorithms = text.split(",").map((part) => part.trim()).filter((part) => part !== "")
  const wrong = algorithms.find((alg) => !(FEDERATION_ALGORITHMS as ReadonlyArray<string>).includes(alg))
  return wrong !== undefined || algorithms.length === 0
    ? badValue(
      `--algorithms must list some of ${FEDERATION_ALGORITHMS.join(", ")} (comma-separated), not ${JSON.stringify(wrong ?? text)}`
    )
    : Effect.succeed(algorithms as ReadonlyArray<Algorithm>)
}

/** `3600`, `10m`, `1h`: whole seconds from 1 to a week. */
const parseLifetime = (text: string) => {
  const duration = /^\d+$/.test(text) ? undefined : parseDuration(text)
  const seconds = /^\d+$/.test(text) ? Number(text) : duration === undefined ? Number.NaN : Duration.toMillis(duration) / 1000
  return Number.isInteger(seconds) && seconds >= 1 && seconds <= MAX_TOKEN_LIFETIME_LIMIT_SECONDS
    ? Effect.succeed(seconds)
    : badValue(
      `--max-token-lifetime must be whole seconds or a duration such as 10m or 1h, from 1 s to a week ` +
        `(${MAX_TOKEN_LIFETIME_LIMIT_SECONDS}), not ${JSON.stringify(text)}`
    )
}

/** The options `add` and `change` share; `add` requires --issuer and --profiles. */
const settingOptions = {
  jwks: Options.text("jwks").pipe(
    Options.withPseudoName("FILE"),
    Options.withDescription(
      "The issuer's public keys, a JWK Set file (- reads standard input), for an issuer the server cannot reach " +
        "(kubectl get --raw /openid/v1/jwks); without it, keys come from the issuer's discovery document."
    ),
    Options.optional
  ),
  audience: Options.text("audience").pipe(
    Options.withPseudoName("AUD"),
    Options.withDescription("The audience its tokens must carry (one of their aud); default: the server's ISSUER."),
    Options.optional
  ),
  algorithms: Options.text("algorithms").pipe(
    Options.withPseudoName("ALGS"),
    Options.withDescription(`The signing algorithms accepted, comma-separated: ${FEDERATION_ALGORITHMS.join(", ")} (default: all).`),
    Options.mapEffect(parseAlgorithms),
    Options.optional
  ),
  maxLifetime: Options.text("max-token-lifetime").pipe(
    Options.withPseudoName("DURATION"),
    Options.withDescription(
      "The longest token lifetime accepted (exp - iat): seconds, or a duration such as 10m or 1h, up to a week; default 1h."
    ),
    Options.mapEffect(parseLifetime),
    Options.optional
  ),
  allowLoopback: Options.boolean("allow-insecure-loopback").pipe(
    Options.withDescription("Let the issuer and its jwks_uri be plain http: on a loopback host (tests, a sidecar on this host).")
  )
}

const issuerOption = Options.text("issuer").pipe(
  Options.withPseudoName("URL"),
  Options.withDescription(
    "The issuer identifier, its tokens' iss exactly (https:; http: only on a loopback host with " +
      "--allow-insecure-loopback). Its keys come from URL/.well-known/openid-configuration unless --jwks."
  )
)

const profilesOption = Options.text("profiles").pipe(
  Options.withPseudoName("PROFILES"),
  Options.withDescription(
    "The profiles (comma-separated) whose services may have federated credentials of this issuer, replacing its " +
      "list; \"\" for none."
  ),
  Options.mapEffect(parseProfileList("profiles"))
)

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`

/** Where the issuer's keys come from, for people. */
const describeKeys = (issuer: TrustedIssuerDocument) => {
  if (issuer.jwks === undefined) return `discovery: ${issuer.issuer.replace(/\/$/, "")}/.well-known/openid-configuration`
  const kids = issuer.jwks.keys.map((key) => (typeof key.kid === "string" ? key.kid : "(no kid)"))
  return `inline JWKS, ${plural(kids.length, "key")}: ${kids.join(", ")}`
}

const describeIssuer = (issuer: TrustedIssuerDocument) =>
  record([
    ["name", issuer.name],
    ["issuer", issuer.issuer],
    ["keys", describeKeys(issuer)],
    ["audience", issuer.audience],
    ["algorithms", issuer.algorithms.join(", ")],
    ["max_token_lifetime", `${issuer.max_token_lifetime_seconds} s`],
    ["profiles", issuer.profiles.join(", ") || "none (no service may use it)"],
    ["allow_insecure_loopback", issuer.allow_insecure_loopback ? "yes (plain http: on loopback)" : "no"],
    ["created_at", formatTime(issuer.created_at)],
    ["updated_at", formatTime(issuer.updated_at)]
  ])

const issuerResult = (issuer: TrustedIssuerDocument) => ({
  json: Schema.encodeSync(TrustedIssuerDocument)(issuer),
  text: describeIssuer(issuer)
})

// --- list, show -------------------------------------------------------------------------------

const issuersList = Command.make("list", { ...connection }, ({ json, url }) =>
  runAdmin(
    url,
    Effect.gen(function*() {
      const issuers = yield* (yield* AdminClient).listTrustedIssuers()
      yield* printResult(json, {
        json: { issuers: issuers.map((issuer) => Schema.encodeSync(TrustedIssuerDocument)(issuer)) },
        // The URL last, so that cutting it to the terminal's width leaves the other columns whole.
        text: fitToTerminal(table(
          ["name", "keys", "profiles", "issuer"],
          issuers.map((issuer) => [
            issuer.name,
            issuer.jwks === undefined ? "discovery" : `inline (${issuer.jwks.keys.length})`,
            issuer.profiles.join(",") || "-",
            issuer.issuer
          ]),
          "no trusted issuers"
        ))
      })
    })
  )).pipe(Command.withDescription("List the trusted issuers (issuers show NAME for every setting)."))

const issuersShow = Command.make("show", { name: trustedIssuerNameArg, ...connection }, ({ json, name, url }) =>
  runAdmin(
    url,
    Effect.gen(function*() {
      yield* printResult(json, issuerResult(yield* (yield* AdminClient).getTrustedIssuer(name)))
    })
  )).pipe(Command.withDescription("Show a trusted issuer: where its keys come from, audience, algorithms, lifetime, profiles."))

// --- add, change ------------------------------------------------------------------------------

/** The JWKS of `--jwks`, read now (undefined without the option). */
const jwksOf = (file: Option.Option<string>) => Option.match(file, { onNone: () => Effect.succeed(undefined), onSome: readJwksFile })

const issuersAdd = Command.make(
  "add",
  { name: trustedIssuerNameArg, issuer: issuerOption, profiles: profilesOption, ...settingOptions, ...connection },
  ({ algorithms, allowLoopback, audience, issuer, json, jwks, maxLifetime, name, profiles, url }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        const keys = yield* jwksOf(jwks)
        const input: typeof TrustedIssuerInput.Encoded = {
          issuer,
          profiles,
          ...(keys === undefined ? {} : { jwks: keys }),
          ...Option.match(audience, { onNone: () => ({}), onSome: (audience) => ({ audience }) }),
          ...Option.match(algorithms, { onNone: () => ({}), onSome: (algorithms) => ({ algorithms }) }),
          ...Option.match(maxLifetime, { onNone: () => ({}), onSome: (seconds) => ({ max_token_lifetime_seconds: seconds }) }),
          ...(allowLoopback ? { allow_insecure_loopback: true } : {})
        }
        yield* printResult(json, issuerResult(yield* (yield* AdminClient).createTrustedIssuer(name, input)))
      })
    )
).pipe(
  Command.withDescription(
    "Register a trusted issuer (a Kubernetes cluster, GitHub Actions, a SPIFFE trust domain, any OIDC issuer) whose " +
      "workload tokens federated credentials accept in place of a secret; refused when the name is taken."
  )
)

const changeOptions = {
  discovery: Options.boolean("discovery").pipe(
    Options.withDescription("Drop the inline JWKS: the keys come from the issuer's discovery document again.")
  ),
  denyLoopback: Options.boolean("no-allow-insecure-loopback").pipe(
    Options.withDescription("https: only again (the opposite of --allow-insecure-loopback).")
  )
}

/** `change` without an option to apply, or with two that contradict: a bad command line (exit 2). */
const changeProblem = (options: {
  readonly discovery: boolean
  readonly jwks: Option.Option<string>
  readonly allowLoopback: boolean
  readonly denyLoopback: boolean
  readonly given: number
}) =>
  options.discovery && Option.isSome(options.jwks)
    ? "--jwks and --discovery contradict each other: give one"
    : options.allowLoopback && options.denyLoopback
    ? "--allow-insecure-loopback and --no-allow-insecure-loopback contradict each other: give one"
    : options.given === 0
    ? "nothing to change: give the options to change (see service-auth issuers change --help)"
    : undefined

const issuersChange = Command.make(
  "change",
  {
    name: trustedIssuerNameArg,
    issuer: Options.optional(issuerOption),
    profiles: Options.optional(profilesOption),
    ...settingOptions,
    ...changeOptions,
    ...connection
  },
  (options) => {
    const { algorithms, allowLoopback, audience, denyLoopback, discovery, issuer, jwks, maxLifetime, name, profiles } = options
    const given =
      [issuer, profiles, jwks, audience, algorithms, maxLifetime].filter((option: Option.Option<unknown>) => Option.isSome(option))
        .length +
      [discovery, allowLoopback, denyLoopback].filter((flag) => flag).length
    const problem = changeProblem({ discovery, jwks, allowLoopback, denyLoopback, given })
    if (problem !== undefined) {
      return Effect.zipRight(
        note(problem),
        Effect.fail<ValidationError.ValidationError | AdminCallError | AdminSetupError | CommandFailed>(
          ValidationError.invalidArgument(HelpDoc.p(problem))
        )
      )
    }
    return runAdmin(
      options.url,
      Effect.gen(function*() {
        const client = yield* AdminClient
        const keys = yield* jwksOf(jwks)
        const current = yield* client.getTrustedIssuer(name)
        const currentJwks = discovery ? undefined : keys ?? current.jwks
        const input: typeof TrustedIssuerInput.Encoded = {
          issuer: Option.getOrElse(issuer, () => current.issuer),
          profiles: Option.getOrElse(profiles, () => current.profiles),
          ...(currentJwks === undefined ? {} : { jwks: currentJwks }),
          audience: Option.getOrElse(audience, () => current.audience),
          algorithms: Option.getOrElse(algorithms, () => current.algorithms),
          max_token_lifetime_seconds: Option.getOrElse(maxLifetime, () => current.max_token_lifetime_seconds),
          allow_insecure_loopback: allowLoopback || (!denyLoopback && current.allow_insecure_loopback)
        }
        const { issuer: changed } = yield* client.putTrustedIssuer(name, input)
        yield* printResult(options.json, issuerResult(changed))
      })
    )
  }
).pipe(
  Command.withDescription(
    "Change a trusted issuer: the options given replace those settings, the others are kept. Every instance uses the " +
      "new settings from its next token request on."
  )
)

// --- remove -----------------------------------------------------------------------------------

const issuersRemove = Command.make("remove", { name: trustedIssuerNameArg, ...connection }, ({ json, name, url }) =>
  runAdmin(
    url,
    Effect.gen(function*() {
      yield* (yield* AdminClient).deleteTrustedIssuer(name)
      yield* printResult(json, { json: { name, deleted: true }, text: `removed trusted issuer ${name}` })
    })
  )).pipe(
    Command.withDescription(
      "Remove a trusted issuer; refused while live federated credentials name it (remove those first: credentials remove)."
    )
  )

export const issuers = commandGroup(
  "issuers",
  "List, add, show, change and remove the trusted issuers of workload identity federation (admin tokens only).",
  [issuersList, issuersAdd, issuersShow, issuersChange, issuersRemove]
)
