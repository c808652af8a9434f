/**
 * A client of the broker's HTTP API for the demo, the bench and the tests: keep-alive connections,
 * every answer decoded by a Schema, a bounded time for every request.
 */
import * as Http from "node:http"
import { Schema } from "effect"

export const PopAnswer = Schema.Struct({
  lease: Schema.NullOr(Schema.String),
  messages: Schema.Array(
    Schema.Struct({
      id: Schema.String,
      partition: Schema.String,
      payload: Schema.Unknown,
      deliveries: Schema.Number
    })
  ),
  wake: Schema.Literals(["none", "woken", "timeout", "shutdown"])
})
export type PopAnswer = typeof PopAnswer.Type

export const BrokerStats = Schema.Struct({
  server_id: Schema.String,
  pushed: Schema.Number,
  popped: Schema.Number,
  acked: Schema.Number,
  released: Schema.Number,
  claims: Schema.Number,
  parked: Schema.Number,
  waits: Schema.Record(Schema.String, Schema.Number)
})
export type BrokerStats = typeof BrokerStats.Type

/** The few fields of the mesh's stats body the harness reads. */
export const MeshCounters = Schema.Struct({
  enabled: Schema.Boolean,
  messages_sent: Schema.optional(Schema.Number),
  frames_dispatched: Schema.optional(Schema.Number),
  lane: Schema.optional(
    Schema.NullOr(Schema.Struct({ status: Schema.String, frames_received: Schema.Number }))
  )
})
export type MeshCounters = typeof MeshCounters.Type

const Ids = Schema.Struct({ ids: Schema.Array(Schema.String) })
const Acked = Schema.Struct({ acked: Schema.Number })
const Ready = Schema.Struct({ ready: Schema.Boolean, status: Schema.String, reason: Schema.String })
const Settings = Schema.Struct({ leaseTimeSeconds: Schema.Number, encrypted: Schema.Boolean })

export class HttpStatusError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
    readonly path: string
  ) {
    super(`${path}: HTTP ${status} ${body.slice(0, 200)}`)
  }
}

export interface Answer {
  readonly status: number
  readonly body: unknown
}

export interface Push {
  readonly partition?: string
  readonly payload: unknown
}

export class BrokerClient {
  private readonly agent: Http.Agent

  constructor(
    readonly host: string,
    readonly port: number,
    options: { readonly maxSockets?: number } = {}
  ) {
    // As many idle sockets kept as may be open: a thousand long-polls answered at once must not close
    // most of their connections only to open them again (the free list's default is 256).
    const maxSockets = options.maxSockets ?? 256
    this.agent = new Http.Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets })
  }

  /** One request; JSON in and out. Rejects on a network error or after `timeoutMs`. */
  request(method: string, path: string, body?: unknown, timeoutMs = 30_000): Promise<Answer> {
    return new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body)
      const request = Http.request(
        {
          host: this.host,
          port: this.port,
          method,
          path,
          agent: this.agent,
          headers: payload === undefined ? {} : { "content-type": "application/json" }
        },
        (response) => {
          const chunks: Array<Buffer> = []
          response.on("data", (chunk: Buffer) => chunks.push(chunk))
          response.on("error", reject)
          response.on("end", () => {
            const text = Buffer.concat(chunks).toString("utf8")
            let parsed: unknown = text
            try {
              parsed = text === "" ? null : JSON.parse(text)
            } catch {
              // Not JSON: handed back as text.
            }
            resolve({ status: response.statusCode ?? 0, body: parsed })
          })
        }
      )
      request.setTimeout(timeoutMs, () =>
        request.destroy(new Error(`${method} ${path}: no answer in ${timeoutMs} ms`))
      )
      request.on("error", reject)
      request.end(payload)
    })
  }

  private async expect<S extends Schema.ConstraintDecoder<unknown>>(
    schema: S,
    method: string,
    path: string,
    body?: unknown,
    timeoutMs?: number
  ): Promise<S["Type"]> {
    const answer = await this.request(method, path, body, timeoutMs)
    if (answer.status < 200 || answer.status >= 300)
      throw new HttpStatusError(answer.status, JSON.stringify(answer.body), path)
    return Schema.decodeUnknownSync(schema)(answer.body)
  }

  push(queue: string, messages: ReadonlyArray<Push>): Promise<ReadonlyArray<string>> {
    const body = messages.length === 1 ? messages[0] : { messages }
    return this.expect(Ids, "POST", `/queues/${queue}/messages`, body).then((answer) => answer.ids)
  }

  pop(
    queue: string,
    options: { readonly batch?: number; readonly waitMs?: number } = {}
  ): Promise<PopAnswer> {
    const wait = options.waitMs ?? 0
    const path = `/queues/${queue}/messages?batch=${options.batch ?? 1}&wait=${wait}`
    return this.expect(PopAnswer, "GET", path, undefined, wait + 30_000)
  }

  ack(queue: string, lease: string, ids: ReadonlyArray<string>): Promise<number> {
    return this.expect(Acked, "POST", `/queues/${queue}/ack`, { lease, ids }).then((answer) => answer.acked)
  }

  configure(queue: string, settings: { readonly leaseTimeSeconds: number }): Promise<unknown> {
    return this.expect(Schema.Unknown, "PUT", `/queues/${queue}/config`, settings)
  }

  settings(queue: string): Promise<{ readonly leaseTimeSeconds: number; readonly encrypted: boolean }> {
    return this.expect(Settings, "GET", `/queues/${queue}/config`)
  }

  /** Turns maintenance (or pop maintenance) on or off on this replica, which tells its peers. */
  maintenance(enabled: boolean, which: "push" | "pop" = "push"): Promise<unknown> {
    return this.expect(Schema.Unknown, "PUT", which === "push" ? "/maintenance" : "/maintenance/pop", {
      enabled
    })
  }

  stats(): Promise<BrokerStats> {
    return this.expect(BrokerStats, "GET", "/broker/stats")
  }

  meshStats(): Promise<MeshCounters> {
    return this.expect(MeshCounters, "GET", "/internal/api/shared-state/stats")
  }

  /** `/readyz`: the HTTP status and the node's health (`clustered`, `solo`, ...). */
  async ready(): Promise<{ readonly status: number; readonly health: string }> {
    const answer = await this.request("GET", "/readyz")
    return { status: answer.status, health: Schema.decodeUnknownSync(Ready)(answer.body).status }
  }

  close(): void {
    this.agent.destroy()
  }
}
