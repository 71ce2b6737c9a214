/**
 * What the CLI prints. Results go to stdout, as a table (or `key value` lines) for people, or as
 * exactly one JSON document with `--json` for scripts; notes, progress and failures go to stderr,
 * so a script reading stdout never gets anything else. Commands write here, never through
 * `Console`: what goes through `Console` is the library's help and errors, fitted to the terminal
 * (`TerminalText.ts`), and a result must reach a script exactly as it was made.
 */
import { Effect } from "effect"
import type { NewCredential } from "../domain/Models.js"

/** Writes to stdout and waits until the text is handed to the OS (rotate prints a secret, then waits). */
export const writeStdout = (text: string): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    process.stdout.write(text, () => resume(Effect.void))
  })

/** Writes to stderr and waits until the text is handed to the OS. */
export const writeStderr = (text: string): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    process.stderr.write(text, () => resume(Effect.void))
  })

/** A line on stderr: `service-auth: ` and the text. */
/**
 * How to run this CLI again, for a command it prints to finish something later: `npm run cli --` when
 * it was started that way in a checkout (where `service-auth` is not on PATH), else `service-auth`.
 */
export const commandPrefix = (): string => (process.env.npm_lifecycle_event === "cli" ? "npm run cli --" : "service-auth")

export const note = (text: string): Effect.Effect<void> => writeStderr(`service-auth: ${text}\n`)

/** A command's result: what a script gets with `--json`, and what a person reads otherwise. */
export interface Result {
  readonly json: unknown
  readonly text: string
}

export const printResult = (json: boolean, result: Result): Effect.Effect<void> =>
  writeStdout(json ? `${JSON.stringify(result.json, null, 2)}\n` : ensureNewline(result.text))

const ensureNewline = (text: string) => (text.endsWith("\n") ? text : `${text}\n`)

/** Columns aligned on the widest cell, headers in capitals; `empty` when there are no rows. */
export const table = (
  headers: ReadonlyArray<string>,
  rows: ReadonlyArray<ReadonlyArray<string>>,
  empty: string
): string => {
  if (rows.length === 0) return empty
  const widths = headers.map((header, column) => Math.max(header.length, ...rows.map((row) => (row[column] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((cell, column) => (column === cells.length - 1 ? cell : cell.padEnd(widths[column]!))).join("  ")
  return [line(headers.map((header) => header.toUpperCase())), ...rows.map(line)].join("\n")
}

/**
 * A table for a terminal: each line cut to its width, with `…`, so that a long last column (a URL)
 * does not wrap under the others. Piped, the text is left whole: a script reads every character.
 */
export const fitToTerminal = (text: string): string => {
  const width = process.stdout.isTTY ? process.stdout.columns : undefined
  if (width === undefined || width < 20) return text
  return text.split("\n").map((line) => (line.length > width ? `${line.slice(0, width - 1)}…` : line)).join("\n")
}

/** One record as `key  value` lines, keys aligned. */
export const record = (fields: ReadonlyArray<readonly [string, string]>): string => {
  const width = Math.max(...fields.map(([key]) => key.length))
  return fields.map(([key, value]) => `${key.padEnd(width)}  ${value}`).join("\n")
}

/** A time for people: ISO 8601 in UTC to the second. */
export const formatTime = (date: Date): string => date.toISOString().replace(/\.\d{3}Z$/, "Z")

/** `null` is a credential never used. */
export const formatLastUsed = (date: Date | null): string => (date === null ? "never" : formatTime(date))

/** A new credential for people: the one place, with `--json`, its secret is ever printed. */
export const newCredentialText = (credential: NewCredential): string =>
  record([
    ["client_id", credential.client_id],
    ["client_secret", credential.client_secret],
    ["created_at", formatTime(credential.created_at)],
    // What the credential got: the --expires-at asked for, or the profile's policy; never, when absent.
    ["expires_at", credential.expires_at === undefined ? "never" : formatTime(credential.expires_at)]
  ])

export const SECRET_SHOWN_ONCE = "the client secret is shown once, now: store it (the server keeps only a digest)"
