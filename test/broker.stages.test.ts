/**
 * The reference broker's stage tracer (`examples/broker/Stages.ts`): off by default and then no part of
 * the request path (the middleware is the identity, marks do nothing); on, one line per noted request
 * with its marks in order, on the monotonic clock.
 */
import { afterEach, assert, describe, it, vi } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Schema } from "effect"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Stages from "../examples/broker/Stages.js"

const stagesWith = (env: ReadonlyArray<readonly [string, string]>) =>
  Stages.layer.pipe(
    Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnvRecord(Object.fromEntries(env))))
  )

const Line = Schema.fromJsonString(
  Schema.Struct({
    stages: Schema.Struct({
      route: Schema.String,
      ids: Schema.Array(Schema.String),
      at: Schema.Array(Schema.Tuple([Schema.String, Schema.String]))
    })
  })
)

const request = HttpServerRequest.fromWeb(
  new Request("http://localhost/queues/q/messages", { method: "POST" })
)

/** Runs `handler` through the tracer's middleware as one request; returns what it printed. */
const serve = (handler: Effect.Effect<HttpServerResponse.HttpServerResponse, never, Stages.Stages>) =>
  Effect.gen(function* () {
    const stages = yield* Stages.Stages
    const printed: Array<string> = []
    vi.spyOn(process.stdout, "write").mockImplementation((chunk: string | Uint8Array) => {
      printed.push(String(chunk))
      return true
    })
    yield* stages
      .middleware(handler)
      .pipe(Effect.provideService(HttpServerRequest.HttpServerRequest, request))
    return printed
  })

describe("broker stages", () => {
  afterEach(() => {
    vi.restoreAllMocks()
  })

  it.effect("off by default: the middleware is the app itself and nothing is printed", () =>
    Effect.gen(function* () {
      const stages = yield* Stages.Stages
      assert.isFalse(stages.enabled)
      const app = Effect.succeed(HttpServerResponse.empty())
      assert.strictEqual(stages.middleware(app), app)
      const printed = yield* serve(
        Effect.gen(function* () {
          yield* stages.mark("handler")
          yield* stages.note("push", ["1"])
          return HttpServerResponse.empty()
        })
      )
      assert.deepStrictEqual(printed, [])
    }).pipe(Effect.provide(stagesWith([])))
  )

  it.effect("on: a noted request prints its route, ids and marks in order, from in to out", () =>
    Effect.gen(function* () {
      const stages = yield* Stages.Stages
      assert.isTrue(stages.enabled)
      const printed = yield* serve(
        Effect.gen(function* () {
          yield* stages.mark("handler")
          yield* stages.mark("insert")
          yield* stages.note("push", ["41", "42"])
          return HttpServerResponse.empty({ status: 201 })
        })
      )
      assert.strictEqual(printed.length, 1)
      const line = Schema.decodeUnknownSync(Line)(printed[0]!.trimEnd())
      assert.strictEqual(line.stages.route, "push")
      assert.deepStrictEqual(line.stages.ids, ["41", "42"])
      assert.deepStrictEqual(
        line.stages.at.map(([stage]) => stage),
        ["in", "handler", "insert", "out"]
      )
      const times = line.stages.at.map(([, ns]) => BigInt(ns))
      for (let i = 1; i < times.length; i++) assert.isTrue(times[i]! >= times[i - 1]!)
    }).pipe(Effect.provide(stagesWith([["BROKER_TRACE_STAGES", "true"]])))
  )

  it.effect("on: a request that noted nothing (a stats poll) prints nothing", () =>
    Effect.gen(function* () {
      const printed = yield* serve(Effect.succeed(HttpServerResponse.empty()))
      assert.deepStrictEqual(printed, [])
    }).pipe(Effect.provide(stagesWith([["BROKER_TRACE_STAGES", "true"]])))
  )
})
