/**
 * The routes' Node server (src/internal/http/nodeServer.ts): an `HttpApp` served on `node:http`
 * through the platform's web handler, on loopback with an ephemeral port.
 */
import * as Http from "node:http"
import type * as HttpApp from "@effect/platform/HttpApp"
import * as HttpRouter from "@effect/platform/HttpRouter"
import type * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Schedule, Scope, Stream } from "effect"
import * as NodeServer from "../../../src/internal/http/nodeServer.js"

const encoder = new TextEncoder()

/** A GET on loopback: status, headers and body. */
const get = (port: number, path: string, method = "GET", body?: string) =>
  Effect.async<{ status: number; headers: Http.IncomingHttpHeaders; body: string }, Error>((resume) => {
    const request = Http.request({ host: "127.0.0.1", port, path, method }, (response) => {
      let text = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => {
        text += chunk
      })
      response.on("end", () =>
        resume(Effect.succeed({ status: response.statusCode ?? 0, headers: response.headers, body: text }))
      )
    })
    request.on("error", (error) => resume(Effect.fail(error)))
    request.end(body)
  })

const app = (ended: Deferred.Deferred<void>): HttpApp.Default<HttpServerError.HttpServerError> =>
  HttpRouter.empty.pipe(
    HttpRouter.get("/hello", HttpServerResponse.text("hi", { headers: { "x-one": "1" } })),
    HttpRouter.post(
      "/echo",
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        Effect.map(request.text, (text) => HttpServerResponse.text(`got ${text}`))
      )
    ),
    HttpRouter.get(
      "/stream",
      Effect.succeed(
        HttpServerResponse.stream(
          Stream.fromSchedule(Schedule.spaced("10 millis")).pipe(
            Stream.map((n) => encoder.encode(`tick ${n}\n`)),
            Stream.ensuring(Deferred.succeed(ended, undefined))
          ),
          { contentType: "text/plain" }
        )
      )
    )
  )

describe("the routes' Node server", () => {
  it.live("answers, reads a request's body, and ends a stream whose client went away", () =>
    Effect.gen(function* () {
      const ended = yield* Deferred.make<void>()
      const scope = yield* Scope.make()
      const server = Http.createServer()
      const port = yield* NodeServer.listen(server, { host: "127.0.0.1", port: 0 }).pipe(Scope.extend(scope))
      yield* NodeServer.serve(server, app(ended)).pipe(Scope.extend(scope))

      const hello = yield* get(port, "/hello")
      assert.strictEqual(hello.status, 200)
      assert.strictEqual(hello.body, "hi")
      assert.strictEqual(hello.headers["x-one"], "1")
      const head = yield* get(port, "/hello", "HEAD")
      assert.strictEqual(head.status, 200)
      assert.strictEqual(head.body, "")
      const echo = yield* get(port, "/echo", "POST", "a body")
      assert.deepStrictEqual([echo.status, echo.body], [200, "got a body"])
      const missing = yield* get(port, "/nothing")
      assert.strictEqual(missing.status, 404)

      // A client reads two ticks of the stream and goes: the stream's own finalizer runs.
      yield* Effect.async<void, Error>((resume) => {
        const request = Http.request({ host: "127.0.0.1", port, path: "/stream" }, (response) => {
          let text = ""
          response.on("data", (chunk: Buffer) => {
            text += chunk.toString()
            if (text.split("\n").length > 2) {
              request.destroy()
              resume(Effect.void)
            }
          })
        })
        request.on("error", () => {})
        request.end()
      })
      yield* Deferred.await(ended)
      yield* Scope.close(scope, Exit.void)
      assert.isFalse(server.listening)
    })
  )

  it.live("closing the scope ends an open stream and closes the server", () =>
    Effect.gen(function* () {
      const ended = yield* Deferred.make<void>()
      const scope = yield* Scope.make()
      const server = Http.createServer()
      const port = yield* NodeServer.listen(server, { host: "127.0.0.1", port: 0 }).pipe(Scope.extend(scope))
      yield* NodeServer.serve(server, app(ended)).pipe(Scope.extend(scope))
      const closed = yield* Deferred.make<void>()
      yield* Effect.async<void>((resume) => {
        const request = Http.request({ host: "127.0.0.1", port, path: "/stream" }, (response) => {
          response.once("data", () => resume(Effect.void))
          response.on("close", () => Deferred.unsafeDone(closed, Exit.void))
        })
        request.on("error", () => Deferred.unsafeDone(closed, Exit.void))
        request.end()
      })
      yield* Scope.close(scope, Exit.void)
      yield* Deferred.await(closed)
      yield* Deferred.await(ended)
      assert.isFalse(server.listening)
    })
  )

  it.live("a port in use fails with a ServeError and leaves nothing listening", () =>
    Effect.gen(function* () {
      const first = Http.createServer()
      const port = yield* NodeServer.listen(first, { host: "127.0.0.1", port: 0 })
      const second = Http.createServer()
      const failed = yield* Effect.flip(NodeServer.listen(second, { host: "127.0.0.1", port }))
      assert.strictEqual(failed._tag, "ServeError")
      assert.isFalse(second.listening)
    }).pipe(Effect.scoped)
  )
})
