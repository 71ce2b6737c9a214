/**
 * An OTLP/HTTP sink for the tracing tests: a local HTTP server that keeps every POST (the exports
 * to /v1/traces, and anything else sent to it, such as a proxy's upstream calls) and reads the
 * spans of the JSON exports back, with their attributes and events as plain values.
 */
import { createServer, type IncomingHttpHeaders, type Server } from "node:http"
import { gunzipSync } from "node:zlib"

export interface Received {
  readonly path: string
  readonly headers: IncomingHttpHeaders
  readonly body: Buffer
}

export interface ExportedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  /** OTLP's numbering: 1 internal, 2 server, 3 client. */
  readonly kind: number
  readonly attributes: Record<string, unknown>
  readonly events: ReadonlyArray<{ readonly name: string; readonly attributes: Record<string, unknown> }>
  readonly resource: Record<string, unknown>
}

type OtlpAttribute = { readonly key: string; readonly value: Record<string, unknown> }
const attributesOf = (list: ReadonlyArray<OtlpAttribute> | undefined) =>
  Object.fromEntries((list ?? []).map(({ key, value }) => [key, Object.values(value)[0]]))

export interface OtlpSink {
  readonly endpoint: string
  readonly received: Array<Received>
  /** The spans of every JSON export received so far (gzipped ones unpacked). */
  readonly spans: () => Array<ExportedSpan>
  readonly close: () => Promise<void>
}

export const startOtlpSink = async (): Promise<OtlpSink> => {
  const received: Array<Received> = []
  const server: Server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      received.push({ path: request.url ?? "", headers: request.headers, body: Buffer.concat(chunks) })
      // Answered in the request's own encoding: a protobuf exporter reads a protobuf answer.
      const json = request.headers["content-type"] === "application/json"
      response.writeHead(200, { "content-type": json ? "application/json" : "application/x-protobuf" })
      response.end(json ? "{}" : undefined)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  const port = typeof address === "object" && address !== null ? address.port : 0
  const spans = () =>
    received.filter((e) => e.path === "/v1/traces" && e.headers["content-type"] === "application/json").flatMap((e) => {
      const body = e.headers["content-encoding"] === "gzip" ? gunzipSync(e.body) : e.body
      return (JSON.parse(body.toString("utf8")).resourceSpans as Array<any>).flatMap((resourceSpans) =>
        (resourceSpans.scopeSpans as Array<any>).flatMap((scopeSpans) =>
          (scopeSpans.spans as Array<any>).map((span): ExportedSpan => ({
            traceId: span.traceId,
            spanId: span.spanId,
            parentSpanId: span.parentSpanId,
            name: span.name,
            kind: span.kind,
            attributes: attributesOf(span.attributes),
            events: (span.events ?? []).map((event: any) => ({ name: event.name, attributes: attributesOf(event.attributes) })),
            resource: attributesOf(resourceSpans.resource?.attributes)
          }))
        )
      )
    })
  return {
    endpoint: `http://127.0.0.1:${port}`,
    received,
    spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/** Polls `check` until it gives a value, for at most `timeoutMs`. */
export const waitFor = async <A>(what: string, check: () => A | undefined, timeoutMs = 15_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const found = check()
    if (found !== undefined) return found
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}
