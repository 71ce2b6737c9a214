/**
 * Graceful shutdown of the Node HTTP server: on SIGTERM (or SIGINT) stop accepting connections,
 * let requests in flight finish (up to SHUTDOWN_GRACE_MS), close idle keep-alive connections as
 * they become idle, then close whatever is left.
 */
import type { Server } from "node:http"

export interface InFlight {
  readonly count: () => number
}

/** Counts requests from arrival until their response is finished or their connection closed. */
export const trackInFlight = (server: Server): InFlight => {
  let inFlight = 0
  server.on("request", (_request, response) => {
    inFlight++
    response.once("close", () => inFlight--)
  })
  return { count: () => inFlight }
}

export const drain = async (server: Server, inFlight: InFlight, graceMs: number): Promise<void> => {
  server.close()
  const deadline = Date.now() + graceMs
  while (inFlight.count() > 0 && Date.now() < deadline) {
    server.closeIdleConnections()
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
  server.closeAllConnections()
}
