/**
 * How the server writes its log: Effect's default human-readable lines, or with LOG_FORMAT=json one
 * JSON object per line: `time`, `level`, `message`, and the log's annotations as fields (a request's
 * `request_id`, `method`, `route`, `status`, `duration_ms`; see `http/RequestLog.ts`). What is logged
 * never includes a secret: the request log has no query string, header or body.
 */
import { Cause, HashMap, Inspectable, Layer, Logger } from "effect"

const jsonLine = Logger.make(({ annotations, cause, date, logLevel, message }) => {
  const text = Array.isArray(message) ? message.map(Inspectable.toStringUnknown).join(" ") : Inspectable.toStringUnknown(message)
  const line: Record<string, unknown> = { time: date.toISOString(), level: logLevel.label, message: text }
  for (const [key, value] of HashMap.toEntries(annotations)) line[key] = value
  if (!Cause.isEmpty(cause)) line.cause = Cause.pretty(cause)
  globalThis.console.log(JSON.stringify(line))
})

/** The logger for `format`, in place of the default one. */
export const layer = (format: "text" | "json") =>
  format === "json" ? Logger.replace(Logger.defaultLogger, jsonLine) : Layer.empty

/** A line printed whatever LOG_LEVEL says (the generated admin token), in the log's format. */
export const printAlways = (format: "text" | "json", message: string) =>
  globalThis.console.log(
    format === "json" ? JSON.stringify({ time: new Date().toISOString(), level: "WARN", message }) : message
  )
