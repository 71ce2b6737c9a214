/**
 * How the server writes its log: Effect's default human-readable lines, or with LOG_FORMAT=json one
 * JSON object per line: `time`, `level`, `message`, and the log's annotations as fields (a request's
 * `request_id`, `method`, `route`, `status`, `duration_ms`; see `server/RequestLog.ts`). What is logged
 * never includes a secret: the request log has no query string, header or body.
 */
import { Cause, HashMap, Inspectable, Layer, Logger } from "effect"

/** One line of the JSON format: time, level and message first, then any fields. */
const jsonText = (date: Date, level: string, message: string, fields: Record<string, unknown> = {}) =>
  JSON.stringify({ time: date.toISOString(), level, message, ...fields })

const jsonLine = Logger.make(({ annotations, cause, date, logLevel, message }) => {
  const text = Array.isArray(message) ? message.map(Inspectable.toStringUnknown).join(" ") : Inspectable.toStringUnknown(message)
  const fields: Record<string, unknown> = Object.fromEntries(HashMap.toEntries(annotations))
  if (!Cause.isEmpty(cause)) fields.cause = Cause.pretty(cause)
  globalThis.console.log(jsonText(date, logLevel.label, text, fields))
})

/** The logger for `format`, in place of the default one. */
export const layer = (format: "text" | "json") => format === "json" ? Logger.replace(Logger.defaultLogger, jsonLine) : Layer.empty

/** A line printed whatever LOG_LEVEL says (the generated admin token), in the log's format. */
export const printAlways = (format: "text" | "json", message: string) =>
  globalThis.console.log(format === "json" ? jsonText(new Date(), "WARN", message) : message)
