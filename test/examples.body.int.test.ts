/**
 * The reference broker's body reader (`examples/broker/Body.ts`), served by the platform's Node HTTP
 * server on a loopback ephemeral port: a body is decoded by its Schema, a body that is not JSON is a
 * 400's `BodyError`, one over the limit a 413's (by its `Content-Length`, or by what arrives when it
 * is streamed without one), and a Schema's refusal stays the Schema's error.
 */
import * as Http from "node:http"
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schema } from "effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Body from "../examples/broker/Body.js"

const Payload = Schema.Struct({ n: Schema.Number })

const route = HttpRouter.route(
  "POST",
  "/",
  Body.schemaBodyJson(Payload).pipe(
    Effect.map((body) => HttpServerResponse.jsonUnsafe({ n: body.n })),
    Effect.catchTags({
      BodyError: (error) =>
        Effect.succeed(HttpServerResponse.jsonUnsafe({ error: error.reason }, { status: 413 })),
      SchemaError: () => Effect.succeed(HttpServerResponse.jsonUnsafe({ error: "schema" }, { status: 400 }))
    })
  )
)

/** Sends `chunks` (or `body` with its length) and reads the status and body. */
const send = (port: number, body: string | ReadonlyArray<string>) =>
  new Promise<{ readonly status: number; readonly body: string }>((resolve, reject) => {
    const request = Http.request(
      {
        host: "127.0.0.1",
        port,
        method: "POST",
        path: "/",
        headers: typeof body === "string" ? { "content-length": Buffer.byteLength(body) } : {}
      },
      (response) => {
        let text = ""
        response.on("data", (chunk: Buffer) => {
          text += chunk.toString("utf8")
        })
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body: text }))
      }
    )
    request.on("error", reject)
    if (typeof body === "string") request.end(body)
    else {
      for (const chunk of body) request.write(chunk)
      request.end()
    }
  })

const withServer = <A>(run: (port: number) => Promise<A>) =>
  Effect.gen(function* () {
    const server = yield* HttpServer.HttpServer
    const port = server.address._tag === "UnixPathAddress" ? 0 : server.address.port
    return yield* Effect.promise(() => run(port))
  }).pipe(
    Effect.provide(
      HttpRouter.serve(HttpRouter.addAll([route])).pipe(
        Layer.provideMerge(
          NodeHttpServer.layerServer(() => Http.createServer(), { host: "127.0.0.1", port: 0 })
        )
      )
    )
  )

describe("examples/broker Body", () => {
  it.live("decodes a JSON body by its Schema", () =>
    withServer(async (port) => {
      const answer = await send(port, JSON.stringify({ n: 7 }))
      assert.deepStrictEqual([answer.status, JSON.parse(answer.body)], [200, { n: 7 }])
    })
  )

  it.live("a body that is not JSON, or that the Schema refuses, is refused", () =>
    withServer(async (port) => {
      const notJson = await send(port, "{not json")
      assert.deepStrictEqual([notJson.status, JSON.parse(notJson.body)], [413, { error: "not_json" }])
      const refused = await send(port, JSON.stringify({ n: "seven" }))
      assert.deepStrictEqual([refused.status, JSON.parse(refused.body)], [400, { error: "schema" }])
    })
  )

  it.live("a body over the limit is refused, by its length or as it streams", () =>
    withServer(async (port) => {
      const declared = await send(port, "x".repeat(Body.MAX_BODY_BYTES + 1))
      assert.deepStrictEqual([declared.status, JSON.parse(declared.body)], [413, { error: "too_large" }])
      const chunk = "x".repeat(1024 * 1024)
      const streamed = await send(
        port,
        Array.from({ length: 5 }, () => chunk)
      )
      assert.deepStrictEqual([streamed.status, JSON.parse(streamed.body)], [413, { error: "too_large" }])
    })
  )
})
