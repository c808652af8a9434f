/**
 * Serves an `HttpApp` on a `node:http` server, through the platform's web handler
 * (`HttpApp.toWebHandlerRuntime`): each request is handed over as a web `Request`, and the web
 * `Response` it answers is written back, its body streamed with the socket's back-pressure.
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
import * as HttpApp from "@effect/platform/HttpApp"
import { ServeError } from "@effect/platform/HttpServerError"
import * as Effect from "effect/Effect"
import * as Runtime from "effect/Runtime"
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
  Effect.flatMap(Effect.runtime<never>(), (runtime) =>
    Effect.acquireRelease(
      Effect.async<number, ServeError>((resume) => {
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
            Runtime.runFork(runtime)(
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
        Effect.async<void>((resume) => {
          server.close(() => resume(Effect.void))
          server.closeAllConnections()
        })
    )
  )

/**
 * Answers every request of `server` with `app`, run in the current runtime, until the scope closes.
 */
export const serve = <E, R>(
  server: Http.Server,
  app: HttpApp.Default<E, R | Scope.Scope>
): Effect.Effect<void, never, R | Scope.Scope> =>
  Effect.flatMap(Effect.runtime<R>(), (runtime) => {
    const handler = HttpApp.toWebHandlerRuntime(runtime)(app)
    const onRequest = (request: Http.IncomingMessage, response: Http.ServerResponse) => {
      void answer(handler, request, response)
    }
    return Effect.acquireRelease(
      Effect.sync(() => server.on("request", onRequest)),
      () => Effect.sync(() => server.off("request", onRequest))
    ).pipe(Effect.asVoid)
  })

type WebHandler = (request: Request) => Promise<Response>

/** The web request of a Node one, or `undefined` when Node's request is not one (a bad header). */
const toWeb = (request: Http.IncomingMessage, signal: AbortSignal): Request | undefined => {
  try {
    const headers = new Headers()
    const raw = request.rawHeaders
    for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i] ?? "", raw[i + 1] ?? "")
    const method = request.method ?? "GET"
    const hasBody = method !== "GET" && method !== "HEAD"
    return new Request(new URL(request.url ?? "/", "http://localhost"), {
      method,
      headers,
      signal,
      ...(hasBody ? { body: Readable.toWeb(request), duplex: "half" } : {})
    })
  } catch {
    return undefined
  }
}

const answer = async (handler: WebHandler, request: Http.IncomingMessage, response: Http.ServerResponse) => {
  const aborter = new AbortController()
  response.once("close", () => {
    if (!response.writableFinished) aborter.abort()
  })
  const web = toWeb(request, aborter.signal)
  if (web === undefined) {
    response.writeHead(400, { "content-type": "text/plain" }).end("bad request\n")
    return
  }
  let answered: Response
  try {
    answered = await handler(web)
  } catch {
    if (!response.headersSent) response.writeHead(500).end()
    return
  }
  if (response.destroyed) {
    await answered.body?.cancel().catch(() => {})
    return
  }
  response.statusCode = answered.status
  for (const [name, value] of answered.headers) {
    if (name !== "set-cookie") response.setHeader(name, value)
  }
  const cookies = answered.headers.getSetCookie()
  if (cookies.length > 0) response.setHeader("set-cookie", cookies)
  await writeBody(answered.body, response)
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
