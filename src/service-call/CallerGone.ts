/**
 * The caller's presence, for work done on its behalf (the upstream call of a proxied service).
 * Node closes the response when the connection goes, answered or not; closed before the answer was
 * written means the caller left, and the work is aborted: an upstream call nobody will read must
 * not hold one of the service's `UPSTREAM_MAX_CONCURRENCY` slots until its timeout. The one way
 * the caller's leaving reaches the upstream, whichever entry took the call (`ServiceCallExecution`).
 */
import type { ServerResponse } from "node:http"
import type { WhenCallerGone } from "./proxy/Upstream.js"

export const whenResponseClosed = (response: ServerResponse): WhenCallerGone => (leave) => {
  if (response.destroyed) {
    leave()
    return () => {}
  }
  // `on`, not `once`: a response closes once, and the listener is removed when the work ends.
  const closed = () => response.writableFinished || leave()
  response.on("close", closed)
  return () => response.off("close", closed)
}
