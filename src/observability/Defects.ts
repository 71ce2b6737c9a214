import { Cause } from "effect"

/**
 * What a defect was and where it happened, without anything the client sent: the error's name, its
 * SQLSTATE when it came from the database, and the stack frames. Not its message, which for a
 * database error can quote the offending value (`invalid input syntax for type uuid: "..."`).
 */
export const describeDefect = (cause: Cause.Cause<unknown>): string => {
  const defects = [...Cause.defects(cause), ...Cause.failures(cause)]
  if (defects.length === 0) return "interrupted"
  return defects.map((defect) => {
    if (!(defect instanceof Error)) return `a thrown ${typeof defect}`
    const origin = (defect as { cause?: { code?: unknown } }).cause
    const sqlState = typeof origin?.code === "string" ? ` (SQLSTATE ${origin.code})` : ""
    const frames = (defect.stack ?? "").split("\n").filter((line) => /^\s+at /.test(line)).slice(0, 12)
    return [`${defect.name}${sqlState}`, ...frames].join("\n")
  }).join("\n")
}
