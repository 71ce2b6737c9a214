/**
 * The admin commands (`tokens` in `TokenCommands.ts`, `issuers` in `IssuerCommands.ts`), each a
 * thin handler over `AdminClient` run by `runAdmin` (which reports failures). Arguments are
 * positional in the order profile, environment, service uuid, client id; `--url` and `--json` are
 * on every command. To add a command: a method on `AdminClient`, a handler, an entry below.
 */
import { Command, HelpDoc, Options, ValidationError } from "@effect/cli"
import { Data, Effect, Option, Schema } from "effect"
import { ProfileList } from "../admin/AdminApi.js"
import { AUDIT_PAGE_MAX, AuditEventPage } from "../domain/AuditEvents.js"
import { type EnvironmentName, ProfileId } from "../domain/Identifiers.js"
import { EnvironmentDocument, ProfileDocument, ServiceDocument } from "../domain/Models.js"
import { MAX_LIFETIME_DAYS } from "../domain/Policies.js"
import { AdminClient } from "./AdminClient.js"
import { commandGroup } from "./CommandGroup.js"
import { CommandFailed, connection, environmentArg, profileArg, runAdmin, serviceUuidArg } from "./CommandLine.js"
import { formatTime, note, printResult, record, table } from "./Output.js"
import { credentials } from "./CredentialCommands.js"
import { issuers } from "./IssuerCommands.js"
import { rotateCommand } from "./Rotation.js"
import { tokens } from "./TokenCommands.js"

const describeService = (service: ServiceDocument) =>
  record([
    ["uuid", service.uuid],
    ["name", service.name === "" ? "-" : service.name],
    ["auth_type", service.auth_type],
    ["handler", describeHandler(service.handler)],
    ...(service.rate_limit === undefined
      ? []
      : [["rate_limit", `${service.rate_limit.requests} calls per ${service.rate_limit.per_seconds} s per client`] as const]),
    ...(service.require_dpop === true ? [["require_dpop", "yes: DPoP-bound tokens only"] as const] : []),
    ...(service.upstream_refusal === undefined ? [] : [["upstream", `refused (502): ${service.upstream_refusal}`] as const]),
    ["credentials", service.credentials.map((credential) => credential.client_id).join(", ") || "-"]
  ])

/** The handler in one line: a proxy's URL, its timeout and its static headers' names (never their values). */
const describeHandler = (handler: ServiceDocument["handler"]) =>
  handler.type === "proxy"
    ? [
      `proxy ${handler.url}`,
      handler.timeout_ms === undefined ? undefined : `timeout ${handler.timeout_ms} ms`,
      handler.headers === undefined || handler.headers.length === 0 ? undefined : `headers ${handler.headers.join(", ")}`
    ].filter((part) => part !== undefined).join(", ")
    : handler.type

/** An option the server would refuse anyway, or a header whose value variable is not set. */
class InvalidServiceOption extends Data.TaggedError("InvalidServiceOption")<{ readonly message: string }> {}

/**
 * `--header NAME=VARIABLE`: the static header NAME with the value of the environment variable
 * VARIABLE, so that a secret never appears on a command line (shell history, `ps`).
 */
const staticHeaders = (specs: ReadonlyArray<string>) =>
  Effect.forEach(specs, (spec) => {
    const equals = spec.indexOf("=")
    const name = equals > 0 ? spec.slice(0, equals) : ""
    const variable = equals > 0 ? spec.slice(equals + 1) : ""
    if (name === "" || variable === "") {
      return Effect.fail(new InvalidServiceOption({ message: `--header ${JSON.stringify(spec)}: expected NAME=VARIABLE` }))
    }
    const value = process.env[variable]
    if (value === undefined || value === "") {
      return Effect.fail(new InvalidServiceOption({ message: `--header ${name}: the environment variable ${variable} is not set` }))
    }
    return Effect.succeed([name, value] as const)
  }).pipe(Effect.map((entries) => Object.fromEntries(entries)))

// --- profiles ---------------------------------------------------------------------------------

const profilesList = Command.make("list", { ...connection }, ({ json, url }) =>
  runAdmin(
    url,
    Effect.gen(function*() {
      const list = yield* (yield* AdminClient).listProfiles()
      yield* printResult(json, {
        json: Schema.encodeSync(ProfileList)(list),
        text: table(
          ["profile", "created"],
          list.profiles.map((profile) => [profile.profile, formatTime(profile.created_at)]),
          "no profiles"
        )
      })
    })
  )).pipe(Command.withDescription("List the profiles."))

const profilesCreate = Command.make("create", {
  profile: profileArg,
  lifetime: Options.text("credential-max-lifetime-days").pipe(
    Options.withPseudoName("DAYS"),
    Options.withDescription(
      `Set the profile's policy (also on an existing profile): its new credentials expire within DAYS (1-${MAX_LIFETIME_DAYS}); none removes it.`
    ),
    // The API's rule (1-3650, null removes): 0 is refused as there, so it cannot mean "none" here only.
    Options.mapEffect((text) => {
      if (text.trim() === "none") return Effect.succeed(null)
      const days = /^\d+$/.test(text.trim()) ? Number(text.trim()) : Number.NaN
      return days >= 1 && days <= MAX_LIFETIME_DAYS
        ? Effect.succeed(days)
        : Effect.fail(ValidationError.invalidValue(HelpDoc.p(
          `--credential-max-lifetime-days must be a whole number of days from 1 to ${MAX_LIFETIME_DAYS}, not ` +
            `${JSON.stringify(text)}; to remove the profile's policy: --credential-max-lifetime-days none`
        )))
    }),
    Options.optional
  ),
  origins: Options.text("upstream-origins").pipe(
    Options.withPseudoName("ORIGINS"),
    Options.withDescription(
      "Admin tokens only: the origins (scheme://host[:port], comma-separated) its proxy services may target besides " +
        "UPSTREAM_ALLOWED_ORIGINS, replacing its list (also on an existing profile); \"\" removes them."
    ),
    Options.optional
  ),
  ...connection
}, ({ json, lifetime, origins, profile, url }) =>
  runAdmin(
    url,
    Effect.gen(function*() {
      const list = Option.map(origins, (text) => text.split(",").map((origin) => origin.trim()).filter((origin) => origin !== ""))
      const answer = yield* (yield* AdminClient).putProfile(
        profile,
        Option.getOrUndefined(lifetime),
        Option.match(list, { onNone: () => undefined, onSome: (listed) => (listed.length === 0 ? null : listed) })
      )
      yield* printResult(json, {
        json: Schema.encodeSync(ProfileDocument)(answer.profile),
        text: answer.created ? `created profile ${profile}` : `profile ${profile} already exists`
      })
    })
  )).pipe(Command.withDescription("Create a profile (nothing changes when it exists)."))

const profilesDelete = Command.make("delete", { profile: profileArg, ...connection }, ({ json, profile, url }) =>
  runAdmin(
    url,
    Effect.gen(function*() {
      yield* (yield* AdminClient).deleteProfile(profile)
      yield* printResult(json, {
        json: { profile, deleted: true },
        text: `deleted profile ${profile} with its environments and services; their credentials' tokens are refused from now on`
      })
    })
  )).pipe(Command.withDescription("Delete a profile and everything in it; its credentials' tokens die at once."))

const profiles = commandGroup(
  "profiles",
  "List, create and delete profiles.",
  [profilesList, profilesCreate, profilesDelete]
)

// --- environments -----------------------------------------------------------------------------

const environmentsCreate = Command.make(
  "create",
  { profile: profileArg, environment: environmentArg, ...connection },
  ({ environment, json, profile, url }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        const answer = yield* (yield* AdminClient).putEnvironment({ profile, environment })
        yield* printResult(json, {
          json: Schema.encodeSync(EnvironmentDocument)(answer.environment),
          text: answer.created
            ? `created environment ${environment} in profile ${profile}`
            : `environment ${environment} already exists in profile ${profile}`
        })
      })
    )
).pipe(Command.withDescription("Create an environment in a profile (nothing changes when it exists)."))

const environmentsDelete = Command.make(
  "delete",
  { profile: profileArg, environment: environmentArg, ...connection },
  ({ environment, json, profile, url }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        yield* (yield* AdminClient).deleteEnvironment({ profile, environment })
        yield* printResult(json, {
          json: { profile, environment, deleted: true },
          text: `deleted environment ${environment} of profile ${profile} with its services; ` +
            "their credentials' tokens are refused from now on"
        })
      })
    )
).pipe(Command.withDescription("Delete an environment with its services; their credentials' tokens die at once."))

const environments = commandGroup(
  "environments",
  "Create and delete a profile's environments (to see their services: services list).",
  [environmentsCreate, environmentsDelete]
)

// --- services ---------------------------------------------------------------------------------

/** The admin API has no list of an environment's services: they come with the profile document. */
const servicesOf = Effect.fn("servicesOf")(function*(profile: ProfileId, environment: EnvironmentName) {
  const document = yield* (yield* AdminClient).getProfile(profile)
  const found = document.environments.find((candidate) => candidate.name === environment)
  if (found === undefined) {
    return yield* new CommandFailed({ message: `Environment not found: profile ${profile} has no environment ${environment}` })
  }
  return found.services
})

/** The services as a table; the rate limit and DPoP columns only when a service has one (else it reads as before). */
const servicesTable = (services: ReadonlyArray<ServiceDocument>, empty: string) => {
  const limited = services.some((service) => service.rate_limit != null)
  const dpop = services.some((service) => service.require_dpop === true)
  return table(
    ["uuid", "name", "auth", ...(limited ? ["rate limit"] : []), ...(dpop ? ["dpop"] : []), "handler", "credentials"],
    services.map((service) => [
      service.uuid,
      service.name === "" ? "-" : service.name,
      service.auth_type,
      ...(limited ? [service.rate_limit == null ? "-" : `${service.rate_limit.requests}/${service.rate_limit.per_seconds}s`] : []),
      ...(dpop ? [service.require_dpop === true ? "required" : "-"] : []),
      describeHandler(service.handler),
      String(service.credentials.length)
    ]),
    empty
  )
}

const servicesList = Command.make(
  "list",
  { profile: profileArg, environment: environmentArg, ...connection },
  ({ environment, json, profile, url }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        const services = yield* servicesOf(profile, environment)
        yield* printResult(json, {
          json: { services: services.map((service) => Schema.encodeSync(ServiceDocument)(service)) },
          text: servicesTable(services, `no services in ${profile}/${environment}`)
        })
      })
    )
).pipe(Command.withDescription("List an environment's services."))

const servicesCreate = Command.make(
  "create",
  {
    profile: profileArg,
    environment: environmentArg,
    authType: Options.choice("auth-type", ["oauth", "none"]).pipe(
      Options.withDefault("oauth" as const),
      Options.withDescription("oauth: callers need a token from POST /oauth/token; none: open to anyone.")
    ),
    name: Options.text("name").pipe(
      Options.withPseudoName("NAME"),
      Options.withDescription("A name for people (1-200 characters, not unique)."),
      Options.optional
    ),
    proxy: Options.text("proxy").pipe(
      Options.withPseudoName("URL"),
      Options.withDescription("Forward calls to this upstream URL (a proxy service) instead of answering with echo."),
      Options.optional
    ),
    timeoutMs: Options.integer("timeout-ms").pipe(
      Options.withPseudoName("MS"),
      Options.withDescription("With --proxy: how long the upstream has to answer, 100-60000 (default UPSTREAM_TIMEOUT_MS)."),
      Options.optional
    ),
    headers: Options.text("header").pipe(
      Options.withPseudoName("NAME=VARIABLE"),
      Options.withDescription(
        "With --proxy: a static header the upstream receives, its value read from the environment variable VARIABLE " +
          "(never from the command line). Repeat for several (up to 10)."
      ),
      Options.repeated
    ),
    rateLimit: Options.text("rate-limit").pipe(
      Options.withPseudoName("N/SECONDS"),
      Options.withDescription("Each client may make at most N calls per SECONDS seconds (per instance), e.g. 100/60."),
      // A bad value is a bad command line (exit 2), like any option @effect/cli refuses.
      Options.mapEffect((text) => {
        const match = /^(\d+)\/(\d+)s?$/.exec(text.trim())
        return match === null
          ? Effect.fail(ValidationError.invalidValue(HelpDoc.p(
            `--rate-limit must be N/SECONDS, e.g. 100/60 (100 calls a minute), not ${JSON.stringify(text)}`
          )))
          : Effect.succeed({ requests: Number(match[1]), per_seconds: Number(match[2]) })
      }),
      Options.optional
    ),
    requireDpop: Options.boolean("require-dpop").pipe(
      Options.withDescription(
        "Accept only DPoP-bound tokens (RFC 9449): the token endpoint refuses a request without a DPoP proof, " +
          "and Bearer tokens are refused."
      )
    ),
    ...connection
  },
  ({ authType, environment, headers, json, name, profile, proxy, rateLimit, requireDpop, timeoutMs, url }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        if (Option.isNone(proxy) && (Option.isSome(timeoutMs) || headers.length > 0)) {
          return yield* new InvalidServiceOption({ message: "--timeout-ms and --header need --proxy URL" })
        }
        const handler = Option.isNone(proxy) ? undefined : {
          type: "proxy" as const,
          url: proxy.value,
          ...Option.match(timeoutMs, { onNone: () => ({}), onSome: (timeout_ms) => ({ timeout_ms }) }),
          ...(headers.length === 0 ? {} : { headers: yield* staticHeaders(headers) })
        }
        const service = yield* (yield* AdminClient).createService(
          { profile, environment },
          {
            auth_type: authType,
            ...(Option.isSome(rateLimit) ? { rate_limit: rateLimit.value } : {}),
            ...(requireDpop ? { require_dpop: true } : {}),
            ...Option.match(name, { onNone: () => ({}), onSome: (name) => ({ name }) }),
            ...(handler === undefined ? {} : { handler })
          }
        )
        yield* printResult(json, { json: Schema.encodeSync(ServiceDocument)(service), text: describeService(service) })
      })
    )
).pipe(Command.withDescription(
  "Create a service (with a new uuid) in an environment; it answers with echo, or forwards to an upstream (--proxy)."
))

const servicesDelete = Command.make(
  "delete",
  { profile: profileArg, environment: environmentArg, uuid: serviceUuidArg, ...connection },
  ({ environment, json, profile, url, uuid }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        yield* (yield* AdminClient).deleteService({ profile, environment, uuid })
        yield* printResult(json, {
          json: { profile, environment, service_uuid: uuid, deleted: true },
          text: `deleted service ${uuid}; its credentials' tokens are refused from now on`
        })
      })
    )
).pipe(Command.withDescription("Delete a service; its credentials' tokens die at once."))

const services = commandGroup(
  "services",
  "List, create and delete an environment's services.",
  [servicesList, servicesCreate, servicesDelete]
)

// --- audit ------------------------------------------------------------------------------------

const auditList = Command.make(
  "list",
  {
    profile: Options.text("profile").pipe(
      Options.withPseudoName("PROFILE"),
      Options.withSchema(ProfileId),
      Options.withDescription("Only this profile's events."),
      Options.optional
    ),
    limit: Options.integer("limit").pipe(
      Options.withPseudoName("N"),
      Options.withDescription(`How many events, newest first (1 to ${AUDIT_PAGE_MAX}; the server's default otherwise).`),
      Options.optional
    ),
    after: Options.text("after").pipe(
      Options.withPseudoName("CURSOR"),
      Options.withDescription("The cursor a previous page printed: the events older than that page."),
      Options.optional
    ),
    ...connection
  },
  ({ after, json, limit, profile, url }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        const page = yield* (yield* AdminClient).listAuditEvents({ profile, limit, after })
        yield* printResult(json, {
          json: Schema.encodeSync(AuditEventPage)(page),
          text: table(
            ["time", "actor", "source", "action", "profile", "environment", "service", "client id"],
            page.events.map((event) => [
              formatTime(event.time),
              event.actor,
              event.source,
              event.action,
              event.profile ?? "-",
              event.environment ?? "-",
              event.service_uuid ?? "-",
              event.client_id ?? "-"
            ]),
            "no events"
          )
        })
        if (!json && page.next !== null) yield* note(`older events: add --after ${page.next}`)
      })
    )
).pipe(Command.withDescription("List admin changes, newest first: who, from where, what, where."))

const audit = commandGroup("audit", "Read the audit trail of admin changes.", [auditList])

export const adminCommands = [profiles, environments, services, credentials, rotateCommand, audit, tokens, issuers] as const
