/**
 * Serves an HTTP effect (an app: a response for the `HttpServerRequest` in context) on a `node:http` server: each request is handed to the app as the platform's
 * request made from a web `Request` (`HttpServerRequest.fromWeb`), and the response is written back
 * directly when its body is in memory (one `end`, no web `Response` or stream between: a stats poll
 * is then a fraction of what it was), or streamed with the socket's back-pressure when it is a stream.
 *
 * Why not `@effect/platform-node`'s `NodeHttpServer`: loading it (with `ws`, `mime` and the platform's
 * Node context) was about a third of `queen-mesh node`'s start-up and some 10 MiB of its memory, for
 * routes that answer a few small JSON bodies and one event stream (docs/cli.md, "Start-up and
 * memory"). Node's own `Request`/`Response` are loaded on the first request instead of at start.
 *
 * A client that goes away aborts its request: the handler's fiber is interrupted, and a streamed body
 * (the cluster page's events) is cancelled.
 *
 * @internal
 */
import type * as Http from "node:http"
import { Readable } from "node:stream"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Cookies from "effect/http/Cookies"
import type * as HttpBody from "effect/http/HttpBody"
import * as HttpEffect from "effect/http/HttpEffect"
import { ClientAbort, ServeError } from "effect/http/HttpServerError"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import type * as Scope from "effect/Scope"

/** Where the server listens; port 0 asks for an ephemeral one. */
export interface ListenAt {
  readonly host: string
  readonly port: number
}

/**
 * Binds `server` for the life of the current scope and returns the port bound. When the scope closes,
 * open connections are closed with it (an open event stream would otherwise hold the server).
 */
export const listen = (server: Http.Server, at: ListenAt): Effect.Effect<number, ServeError, Scope.Scope> =>
  Effect.flatMap(Effect.context<never>(), (context) =>
    Effect.acquireRelease(
      Effect.callback<number, ServeError>((resume) => {
        const onError = (cause: Error) => {
          server.close()
          resume(Effect.fail(new ServeError({ cause })))
        }
        server.once("error", onError)
        server.listen({ host: at.host, port: at.port }, () => {
          server.off("error", onError)
          // A later server error (an accept failure) is logged and must not crash the process; a
          // connection's own errors are the server's `clientError`.
          server.on("error", (cause) => {
            Effect.runForkWith(context)(
              Effect.logWarning("HTTP server error").pipe(
                Effect.annotateLogs({
                  module: "HttpRoutes",
                  address: `${at.host}:${at.port}`,
                  reason: cause.message
                })
              )
            )
          })
          const bound = server.address()
          resume(Effect.succeed(typeof bound === "object" && bound !== null ? bound.port : at.port))
        })
        return Effect.sync(() => server.close())
      }),
      () =>
        Effect.callback<void>((resume) => {
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
    )
  )

/**
 * Answers every request of `server` with `app`, run with the current services, until the scope closes.
 * `app` runs interruptibly, so a client that goes away stops it (effect 4 runs a handled app
 * uninterruptibly unless told).
 */
export const serve = <E, R>(
  server: Http.Server,
  app: Effect.Effect<
    HttpServerResponse.HttpServerResponse,
    E,
    R | HttpServerRequest.HttpServerRequest | Scope.Scope
  >
): Effect.Effect<void, never, R | Scope.Scope> =>
  Effect.flatMap(Effect.context<R>(), (services) => {
    // Each request's Node response, found again from the platform's request once the app answered.
    const pending = new WeakMap<HttpServerRequest.HttpServerRequest, Pending>()
    const handled = HttpEffect.toHandled(Effect.interruptible(app), (request, answered) =>
      Effect.sync(() => {
        const to = pending.get(request)
        if (to === undefined) return
        pending.delete(request)
        respond(services, to.withoutBody, answered, to.response)
      })
    )
    const onRequest = (request: Http.IncomingMessage, response: Http.ServerResponse) => {
      const web = toWeb(request)
      if (web === undefined) {
        response.writeHead(400, { "content-type": "text/plain" }).end("bad request\n")
        return
      }
      const serverRequest = HttpServerRequest.fromWeb(web)
      pending.set(serverRequest, { response, withoutBody: request.method === "HEAD" })
      const context = Context.add(services, HttpServerRequest.HttpServerRequest, serverRequest)
      const fiber = Effect.runForkWith(context)(handled)
      // A client that goes away before its response is finished interrupts the request's fiber.
      response.once("close", () => {
        if (!response.writableFinished) fiber.interruptUnsafe(undefined, ClientAbort.annotation)
      })
      fiber.addObserver(() => {
        // Still pending: only a defect past the platform's own error handling leaves a request unanswered.
        if (pending.delete(serverRequest) && !response.headersSent && !response.destroyed) {
          response.writeHead(500).end()
        }
      })
    }
    return Effect.acquireRelease(
      Effect.sync(() => server.on("request", onRequest)),
      () => Effect.sync(() => server.off("request", onRequest))
    ).pipe(Effect.asVoid)
  })

/** Where one request's answer goes. */
interface Pending {
  readonly response: Http.ServerResponse
  readonly withoutBody: boolean
}

/** The web request of a Node one, or `undefined` when Node's request is not one (a bad header). */
const toWeb = (request: Http.IncomingMessage): Request | undefined => {
  try {
    const headers = new Headers()
    const raw = request.rawHeaders
    for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i] ?? "", raw[i + 1] ?? "")
    const method = request.method ?? "GET"
    const hasBody = method !== "GET" && method !== "HEAD"
    return new Request(new URL(request.url ?? "/", "http://localhost"), {
      method,
      headers,
      ...(hasBody ? { body: Readable.toWeb(request), duplex: "half" } : {})
    })
  } catch {
    return undefined
  }
}

/**
 * Writes `answered` to `response`: a body already in memory (every JSON answer and page file) in one
 * `end`, anything else (the cluster page's event stream) through the web `Response` the platform makes
 * of it, streamed with the socket's back-pressure.
 */
const respond = <R>(
  services: Context.Context<R>,
  withoutBody: boolean,
  answered: HttpServerResponse.HttpServerResponse,
  response: Http.ServerResponse
): void => {
  const inMemory = buffered(answered.body)
  if (inMemory === undefined) {
    const web = HttpServerResponse.toWeb(HttpEffect.scopeTransferToStream(answered), {
      withoutBody,
      context: services
    })
    if (response.destroyed) {
      web.body?.cancel().catch(() => {})
      return
    }
    writeHead(response, web.status, web.statusText, web.headers)
    void writeBody(web.body, response)
    return
  }
  if (response.destroyed) return
  response.statusCode = answered.status
  if (answered.statusText !== undefined) response.statusMessage = answered.statusText
  for (const name in answered.headers) {
    const value = answered.headers[name]
    if (value !== undefined) response.setHeader(name, value)
  }
  if (!Cookies.isEmpty(answered.cookies)) {
    response.setHeader("set-cookie", Cookies.toSetCookieHeaders(answered.cookies))
  }
  if (withoutBody || inMemory === null) response.end()
  else response.end(inMemory)
}

/** A body in memory as Node's `end` takes it, `null` for none, `undefined` for one that is not. */
const buffered = (body: HttpBody.HttpBody): string | Uint8Array | null | undefined => {
  switch (body._tag) {
    case "Empty":
      return null
    case "Uint8Array":
      return body.body
    case "Raw":
      return typeof body.body === "string" || body.body instanceof Uint8Array ? body.body : undefined
    default:
      return undefined
  }
}

/** The status and headers of a web `Response`, its cookies kept apart as Node wants them. */
const writeHead = (response: Http.ServerResponse, status: number, statusText: string, headers: Headers) => {
  response.statusCode = status
  if (statusText !== "") response.statusMessage = statusText
  for (const [name, value] of headers) {
    if (name !== "set-cookie") response.setHeader(name, value)
  }
  const cookies = headers.getSetCookie()
  if (cookies.length > 0) response.setHeader("set-cookie", cookies)
}

/** Streams `body` into `response`, waiting for the socket to drain; cancels it if the client goes. */
const writeBody = async (body: ReadableStream<Uint8Array> | null, response: Http.ServerResponse) => {
  if (body === null) {
    response.end()
    return
  }
  const reader = body.getReader()
  let gone = false
  let drained: (() => void) | undefined
  const onClose = () => {
    gone = true
    drained?.()
    reader.cancel().catch(() => {})
  }
  response.once("close", onClose)
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done || gone) break
      if (!response.write(value)) {
        await new Promise<void>((resolve) => {
          drained = resolve
          response.once("drain", resolve)
        })
        drained = undefined
        if (gone) break
      }
    }
  } catch {
    // The body's stream failed after the head went out: end the connection, not the process.
    response.destroy()
    return
  } finally {
    response.off("close", onClose)
  }
  if (!gone) response.end()
}
