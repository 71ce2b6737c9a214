/**
 * The `Authorization` header of an HttpApi request, every value of it when sent more than once
 * (`authorizationHeader`): the platform's headers keep only the first.
 */
import type { HttpServerRequest } from "@effect/platform"
import { NodeHttpServerRequest } from "@effect/platform-node"
import type { IncomingMessage } from "node:http"
import { type AuthorizationHeader, authorizationHeader } from "../domain/AuthorizationHeader.js"

export const requestAuthorization = (request: HttpServerRequest.HttpServerRequest): AuthorizationHeader => {
  const first = request.headers["authorization"]
  if (first === undefined) return undefined
  const incoming = NodeHttpServerRequest.toIncomingMessage(request) as IncomingMessage | undefined
  return incoming?.rawHeaders === undefined ? first : authorizationHeader(incoming)
}
