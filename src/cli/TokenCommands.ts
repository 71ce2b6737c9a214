/**
 * `tokens create|list|revoke`: the admin tokens kept by the server (`POST/GET/DELETE /admin/tokens`),
 * for an admin token only (the server answers 403 to the others). A new token is printed once, on
 * standard output, so that it can be piped into a secret store; nothing else ever shows it.
 */
import { Args, Command, Options } from "@effect/cli"
import { Effect, Schema } from "effect"
import { AdminTokenList, CreatedAdminToken } from "../admin/AdminTokensApi.js"
import { ADMIN_ROLES } from "../domain/AdminRoles.js"
import { AdminClient } from "./AdminClient.js"
import { commandGroup } from "./CommandGroup.js"
import { connection, runAdmin } from "./CommandLine.js"
import { formatLastUsed, formatTime, note, printResult, record, table } from "./Output.js"

const nameArg = Args.text({ name: "name" }).pipe(Args.withDescription("The token's name: 1-64 letters, digits, '.', '_' or '-'."))

const TOKEN_SHOWN_ONCE = "the admin token is shown once, now: store it (the server keeps only a digest)"

const describeProfiles = (profiles: ReadonlyArray<string> | null) => (profiles === null ? "all" : profiles.join(", "))

const tokensCreate = Command.make(
  "create",
  {
    name: nameArg,
    role: Options.choice("role", ADMIN_ROLES).pipe(
      Options.withDescription(
        "admin: everything; owner: its profiles, but not creating or deleting them; viewer: reads only; introspector: POST /oauth/introspect for its profiles (resource servers), nothing else."
      )
    ),
    profiles: Options.text("profile").pipe(
      Options.withPseudoName("PROFILE"),
      Options.withDescription(
        "A profile the token reaches (repeat for several); required for owner, viewer and introspector, not for admin."
      ),
      Options.repeated
    ),
    ...connection
  },
  ({ json, name, profiles, role, url }) =>
    runAdmin(
      url,
      Effect.gen(function*() {
        const created = yield* (yield* AdminClient).createAdminToken({
          name,
          role,
          ...(profiles.length === 0 ? {} : { profiles })
        })
        yield* printResult(json, {
          json: Schema.encodeSync(CreatedAdminToken)(created),
          text: record([
            ["name", created.name],
            ["role", created.role],
            ["profiles", describeProfiles(created.profiles)],
            ["token", created.token]
          ])
        })
        yield* note(TOKEN_SHOWN_ONCE)
        // A scope may name a profile to be made later, but a typo would go unnoticed: say which do not exist.
        if (created.profiles !== null) {
          const existing = new Set((yield* (yield* AdminClient).listProfiles()).profiles.map((p) => p.profile as string))
          const missing = created.profiles.filter((profile) => !existing.has(profile))
          if (missing.length > 0) yield* note(missingProfilesWarning(missing))
        }
      })
    )
).pipe(Command.withDescription("Create an admin token and print it, once."))

/** The profiles a new token names that do not exist (yet): it reaches each once an admin creates it. */
export const missingProfilesWarning = (missing: ReadonlyArray<string>) =>
  `warning: ${missing.length === 1 ? `there is no profile ${missing[0]}` : `there are no profiles ${missing.join(", ")}`} ` +
  `(yet): the token reaches ${missing.length === 1 ? "it" : "each"} only once it is created ` +
  `(profiles create ${missing[0]}); check the name${missing.length === 1 ? "" : "s"}`

const tokensList = Command.make("list", { ...connection }, ({ json, url }) =>
  runAdmin(
    url,
    Effect.gen(function*() {
      const list = yield* (yield* AdminClient).listAdminTokens()
      yield* printResult(json, {
        json: Schema.encodeSync(AdminTokenList)(list),
        text: table(
          ["name", "role", "profiles", "created", "last used"],
          list.tokens.map((token) => [
            token.name,
            token.role,
            describeProfiles(token.profiles),
            formatTime(token.created_at),
            formatLastUsed(token.last_used_at)
          ]),
          "no stored admin tokens"
        )
      })
    })
  )).pipe(
    Command.withDescription("List the stored admin tokens (never the tokens themselves; ADMIN_TOKEN and ADMIN_TOKENS are not listed).")
  )

const tokensRevoke = Command.make("revoke", { name: nameArg, ...connection }, ({ json, name, url }) =>
  runAdmin(
    url,
    Effect.gen(function*() {
      yield* (yield* AdminClient).revokeAdminToken(name)
      yield* printResult(json, {
        json: { name, revoked: true },
        text: `revoked ${name}; every instance refuses it from its next request`
      })
    })
  )).pipe(Command.withDescription("Revoke a stored admin token: refused at once by every instance."))

export const tokens = commandGroup(
  "tokens",
  "Create, list and revoke the admin tokens the server keeps (admin tokens only).",
  [tokensCreate, tokensList, tokensRevoke]
)
