/**
 * The admin API of a server a test started as a process (`ServerProcess`), over fetch: JSON in,
 * status and parsed body out. In-process tests use `admin` of `src/testing.ts` instead.
 */
export interface AdminAnswer {
  readonly status: number
  /** The parsed JSON body; undefined when there is none (204) or it is not JSON. */
  readonly body: any
  readonly text: string
}

/** One admin request with `token` as the bearer token, whatever the status. */
export const adminFetch = async (
  base: string,
  token: string,
  method: string,
  path: string,
  body?: unknown
): Promise<AdminAnswer> => {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  })
  const text = await response.text()
  let parsed: unknown = undefined
  try {
    parsed = text === "" ? undefined : JSON.parse(text)
  } catch {
    parsed = undefined
  }
  return { status: response.status, body: parsed, text }
}

/** The body of an admin request that must succeed: a failure names the request and its answer. */
export const adminJson = async (base: string, token: string, method: string, path: string, body?: unknown) => {
  const answer = await adminFetch(base, token, method, path, body)
  if (answer.status >= 300) throw new Error(`${method} ${path} answered ${answer.status}: ${answer.text}`)
  return answer.body
}
