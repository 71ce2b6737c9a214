/**
 * A service call through the HttpApi app rather than the fast lane: a chunked body (no declared
 * length) is never the fast lane's.
 */
import { Effect } from "effect"
import { request as httpRequest } from "node:http"
import { type JsonResponse, serverPort } from "../../src/testing.js"

/** A service call through the HttpApi app: a chunked body is never the fast lane's. */
export const callThroughApp = (path: string, token: string | undefined, headers: Record<string, string> = {}, body = "{}") =>
  Effect.flatMap(serverPort, (port) =>
    Effect.promise(() =>
      new Promise<JsonResponse>((resolve, reject) => {
        const outgoing = httpRequest({
          host: "127.0.0.1",
          port,
          method: "POST",
          path,
          headers: {
            "content-type": "application/json",
            "transfer-encoding": "chunked",
            ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
            ...headers
          }
        }, (response) => {
          const chunks: Array<Buffer> = []
          response.on("data", (chunk: Buffer) => chunks.push(chunk))
          response.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8")
            resolve({
              status: response.statusCode ?? 0,
              headers: response.headers as Record<string, string>,
              body: text === "" ? undefined : JSON.parse(text),
              text
            })
          })
        })
        outgoing.on("error", reject)
        outgoing.end(body)
      })
    ))
