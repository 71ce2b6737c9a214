/**
 * The caller's presence, as an `AbortSignal` for work done on its behalf (the upstream call of a
 * proxied service). Node closes the response when the connection goes, answered or not; closed
 * before the answer was written means the caller left, and the work is aborted: an upstream call
 * nobody will read must not hold one of the service's `UPSTREAM_MAX_CONCURRENCY` slots until its
 * timeout. The app's handlers get the same from Effect, whose fiber is interrupted on that close.
 */
import type { ServerResponse } from "node:http"

export const callerSignal = (response: ServerResponse): AbortSignal => {
  const controller = new AbortController()
  if (response.destroyed) controller.abort()
  else response.once("close", () => response.writableFinished || controller.abort())
  return controller.signal
}
