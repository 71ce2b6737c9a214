/**
 * How a request the contract's schemas refuse is described in a `400 invalid_request` body: the
 * first problem as `path: message`, never the value sent (it may be a secret pasted in the wrong
 * place). One function for the server's answers and for the CLI, which checks what it is about to
 * send with the same schemas, so that an operator reads the same sentence either way.
 */
import { ParseResult } from "effect"

interface Issue {
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

const EXPECTED = /^Expected ([\s\S]*?), actual /

/**
 * The first problem, with every allowed value when it is one of several: a union of literals
 * (`auth_type`) fails once per member, so `Expected "oauth"` and `Expected "none"` at one path
 * become `Expected "oauth" | "none"`.
 */
export const firstIssue = <I extends Issue>(issues: ReadonlyArray<I>): I | undefined => {
  const [first] = issues
  const expected = first === undefined ? null : EXPECTED.exec(first.message)
  if (first === undefined || expected === null) return first
  const samePath = (issue: Issue) => issue.path.length === first.path.length && issue.path.every((key, i) => key === first.path[i])
  const alternatives = new Set<string>()
  for (const issue of issues.filter(samePath)) {
    const match = EXPECTED.exec(issue.message)
    if (match !== null) match[1]!.split(" | ").forEach((value) => alternatives.add(value))
  }
  return { ...first, message: `Expected ${[...alternatives].join(" | ")}, actual ` }
}

/** One problem of a decode failure as `path: message` (the message alone at the root), without the value. */
export const describeIssue = (issue: Issue): string => {
  const message = issue.message.replace(/, actual [\s\S]*$/, "").slice(0, 300)
  return issue.path.length > 0 ? `${issue.path.map(String).join(".")}: ${message}` : message
}

/** Describes the first problem of a decode failure as `path: message`, without the submitted value. */
export const describeParseError = (error: ParseResult.ParseError): string => {
  const first = firstIssue(ParseResult.ArrayFormatter.formatErrorSync(error))
  return first === undefined ? "Invalid request body" : describeIssue(first)
}

/** Names of the admin API's path parameters: a problem of one of them is reported without its name. */
const PATH_PARAMETERS = new Set(["profile", "environment", "uuid", "client_id"])

/**
 * An admin request's decode failure (its path parameters, query or payload): the first problem;
 * a path parameter's is its message alone, as it always was.
 */
export const describeRequestIssues = (issues: ReadonlyArray<Issue>): string => {
  const first = firstIssue(issues)
  if (first === undefined) return "Invalid request"
  const pathParameter = first.path.length === 1 && PATH_PARAMETERS.has(String(first.path[0]))
  return describeIssue(pathParameter ? { ...first, path: [] } : first)
}
