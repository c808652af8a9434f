/**
 * The routes' Node server (src/internal/http/nodeServer.ts): an HTTP app (effect's `HttpRouter`'s
 * routes as an effect) served on `node:http` through our adapter, on loopback with an ephemeral port.
 */
import * as Http from "node:http"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Effect, Exit, Schedule, Scope, Stream } from "effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as NodeServer from "../../../src/internal/http/nodeServer.js"

const encoder = new TextEncoder()

/** A GET on loopback: status, headers and body. */
const get = (port: number, path: string, method = "GET", body?: string) =>
  Effect.callback<{ status: number; headers: Http.IncomingHttpHeaders; body: string }, Error>((resume) => {
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

/** Routes as an app: the router built in the current scope. */
const appOf = (routes: ReadonlyArray<HttpRouter.Route<unknown>>) =>
  HttpRouter.toHttpEffect(HttpRouter.addAll(routes))

const app = (ended: Deferred.Deferred<void>) =>
  appOf([
    HttpRouter.route("GET", "/hello", HttpServerResponse.text("hi", { headers: { "x-one": "1" } })),
    HttpRouter.route(
      "POST",
      "/echo",
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        Effect.map(request.text, (text) => HttpServerResponse.text(`got ${text}`))
      )
    ),
    HttpRouter.route(
      "GET",
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
  ])

describe("the routes' Node server", () => {
  it.live("answers, reads a request's body, and ends a stream whose client went away", () =>
    Effect.gen(function* () {
      const ended = yield* Deferred.make<void>()
      const scope = yield* Scope.make()
      const server = Http.createServer()
      const port = yield* NodeServer.listen(server, { host: "127.0.0.1", port: 0 }).pipe(Scope.provide(scope))
      yield* NodeServer.serve<unknown, never>(server, yield* app(ended)).pipe(Scope.provide(scope))

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
      yield* Effect.callback<void, Error>((resume) => {
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

  it.live(
    "a body in memory goes out whole with its headers and cookies; a handler whose client went away is interrupted",
    () =>
      Effect.gen(function* () {
        const started = yield* Deferred.make<void>()
        const interrupted = yield* Deferred.make<void>()
        const routes = yield* appOf([
          HttpRouter.route(
            "GET",
            "/json",
            Effect.map(HttpServerResponse.json({ a: 1 }), (response) =>
              response.pipe(
                HttpServerResponse.setCookieUnsafe("session", "s1"),
                HttpServerResponse.setStatus(201)
              )
            )
          ),
          HttpRouter.route("GET", "/empty", Effect.succeed(HttpServerResponse.empty({ status: 204 }))),
          HttpRouter.route("GET", "/defect", Effect.die("boom")),
          HttpRouter.route(
            "GET",
            "/slow",
            Deferred.succeed(started, undefined).pipe(
              Effect.andThen(Effect.never),
              Effect.onInterrupt(() => Deferred.succeed(interrupted, undefined)),
              Effect.as(HttpServerResponse.empty())
            )
          )
        ])
        const server = Http.createServer()
        const port = yield* NodeServer.listen(server, { host: "127.0.0.1", port: 0 })
        yield* NodeServer.serve<unknown, never>(server, routes)

        const json = yield* get(port, "/json")
        assert.deepStrictEqual([json.status, json.body], [201, '{"a":1}'])
        assert.strictEqual(json.headers["content-type"], "application/json")
        assert.strictEqual(json.headers["content-length"], "7")
        assert.deepStrictEqual(json.headers["set-cookie"], ["session=s1"])
        const head = yield* get(port, "/json", "HEAD")
        assert.deepStrictEqual([head.status, head.body], [201, ""])
        const empty = yield* get(port, "/empty")
        assert.deepStrictEqual([empty.status, empty.body], [204, ""])
        const defect = yield* get(port, "/defect")
        assert.strictEqual(defect.status, 500)

        // The client goes before the handler answers: the handler's fiber is interrupted.
        const request = Http.request({ host: "127.0.0.1", port, path: "/slow" })
        request.on("error", () => {})
        request.end()
        yield* Deferred.await(started)
        request.destroy()
        yield* Deferred.await(interrupted)
        const after = yield* get(port, "/json")
        assert.strictEqual(after.status, 201)
      }).pipe(Effect.scoped)
  )

  it.live("closing the scope ends an open stream and closes the server", () =>
    Effect.gen(function* () {
      const ended = yield* Deferred.make<void>()
      const scope = yield* Scope.make()
      const server = Http.createServer()
      const port = yield* NodeServer.listen(server, { host: "127.0.0.1", port: 0 }).pipe(Scope.provide(scope))
      yield* NodeServer.serve<unknown, never>(server, yield* app(ended)).pipe(Scope.provide(scope))
      const closed = yield* Deferred.make<void>()
      yield* Effect.callback<void>((resume) => {
        const request = Http.request({ host: "127.0.0.1", port, path: "/stream" }, (response) => {
          response.once("data", () => resume(Effect.void))
          response.on("close", () => Deferred.doneUnsafe(closed, Exit.void))
        })
        request.on("error", () => Deferred.doneUnsafe(closed, Exit.void))
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
