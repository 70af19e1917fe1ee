/**
 * An OTLP/HTTP receiver inside the test: a small node:http server on 127.0.0.1 that keeps what
 * arrives at /v1/traces, /v1/logs and /v1/metrics, decoded from the OTLP JSON encoding (what
 * Quiesce sends by default), and answers 200 as a collector does.
 */
import { Schema } from "effect"
import { createServer, type Server } from "node:http"

/** An OTLP attribute value as the JSON encoding writes it. */
const AnyValue = Schema.Struct({
  stringValue: Schema.optionalKey(Schema.String),
  boolValue: Schema.optionalKey(Schema.Boolean),
  intValue: Schema.optionalKey(Schema.Union([Schema.String, Schema.Number])),
  doubleValue: Schema.optionalKey(Schema.Number)
})

const KeyValues = Schema.Array(Schema.Struct({ key: Schema.String, value: AnyValue }))

/** What arrives at /v1/traces (the parts the tests read). */
const TracesBody = Schema.Struct({
  resourceSpans: Schema.Array(Schema.Struct({
    resource: Schema.Struct({ attributes: KeyValues }),
    scopeSpans: Schema.Array(Schema.Struct({
      spans: Schema.Array(Schema.Struct({
        traceId: Schema.String,
        spanId: Schema.String,
        parentSpanId: Schema.optionalKey(Schema.String),
        name: Schema.String,
        attributes: KeyValues
      }))
    }))
  }))
})
const decodeTraces = Schema.decodeUnknownSync(TracesBody)

/** One received span, its attributes flattened to plain values. */
export interface ReceivedSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId: string | undefined
  readonly name: string
  readonly attributes: Readonly<Record<string, string | number | boolean>>
  /** The resource's attributes (service.name, …). */
  readonly resource: Readonly<Record<string, string | number | boolean>>
}

const plain = (value: typeof AnyValue.Type): string | number | boolean =>
  value.stringValue ?? value.boolValue ?? (value.intValue === undefined ? undefined : Number(value.intValue)) ?? value.doubleValue ?? ""

const flatten = (attributes: typeof KeyValues.Type) => Object.fromEntries(attributes.map(({ key, value }) => [key, plain(value)]))

/** A running receiver: what it has received so far, per signal. */
export interface OtlpReceiver {
  readonly endpoint: string
  readonly spans: () => ReadonlyArray<ReceivedSpan>
  /** The bodies received per path (`/v1/logs`, …), as parsed JSON. */
  readonly bodies: (path: string) => ReadonlyArray<unknown>
  /** Every request received, by path, whatever its body. */
  readonly requests: () => ReadonlyArray<string>
  readonly close: () => Promise<void>
}

/** Starts a receiver on a free loopback port. */
export const startOtlpReceiver = async (port = 0): Promise<OtlpReceiver> => {
  const received: Array<{ readonly path: string; readonly body: unknown }> = []
  const server: Server = createServer((request, response) => {
    const chunks: Array<Buffer> = []
    request.on("data", (chunk: Buffer) => chunks.push(chunk))
    request.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8")
      let body: unknown = text
      try {
        body = JSON.parse(text)
      } catch {
        // Kept as text: a test that expects JSON fails on it.
      }
      received.push({ path: request.url ?? "", body })
      response.writeHead(200, { "content-type": "application/json" })
      response.end("{}")
    })
  })
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject)
    server.listen(port, "127.0.0.1", resolve)
  })
  const address = server.address()
  const listening = typeof address === "object" && address !== null ? address.port : 0
  const bodies = (path: string) => received.filter((entry) => entry.path === path).map((entry) => entry.body)
  return {
    endpoint: `http://127.0.0.1:${listening}`,
    bodies,
    requests: () => received.map((entry) => entry.path),
    spans: () =>
      bodies("/v1/traces").flatMap((body) =>
        decodeTraces(body).resourceSpans.flatMap((resourceSpan) =>
          resourceSpan.scopeSpans.flatMap((scope) =>
            scope.spans.map((span): ReceivedSpan => ({
              traceId: span.traceId,
              spanId: span.spanId,
              parentSpanId: span.parentSpanId === "" ? undefined : span.parentSpanId,
              name: span.name,
              attributes: flatten(span.attributes),
              resource: flatten(resourceSpan.resource.attributes)
            }))
          )
        )
      ),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      })
  }
}
