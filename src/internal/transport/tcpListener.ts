/**
 * The listening side of plain TCP links (spec "Topology"): a `node:net` server that hands every
 * accepted socket to the mesh as a `Connection`, each served in a fiber of the listener's scope.
 * Closing the scope stops accepting first, then ends the connections still open.
 *
 * Built on `node:net` directly rather than a platform socket server: the mesh reads from the socket's
 * own events (nodeSocket.ts) and needs nothing else from one, and a host that runs the mesh then loads
 * no socket framework (nor the WebSocket package that comes with one) for it.
 *
 * @internal
 */
import * as Net from "node:net"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { TransportError } from "../../MeshError.js"
import type { Connection, ListenOptions } from "../../Transport.js"
import { connectionOf, destroy, KEEPALIVE_MS } from "./nodeSocket.js"

const noop = () => {}

const remoteOf = (socket: Net.Socket): string => `${socket.remoteAddress ?? "?"}:${socket.remotePort ?? "?"}`

/** Binds a TCP listener in the current scope; the port bound. */
export const listen = (
  listenOptions: ListenOptions,
  onConnection: (connection: Connection) => Effect.Effect<void>
): Effect.Effect<number, TransportError, Scope.Scope> =>
  Effect.gen(function* () {
    const address = `${listenOptions.host}:${listenOptions.port}`
    const runtime = yield* Effect.runtime<never>()
    const fibers = yield* FiberSet.make<void, never>()
    const run = yield* FiberSet.runtime(fibers)<never>()
    // Every accepted socket until it closes, so the scope can end those still open.
    const sockets = new Set<Net.Socket>()
    let closing = false

    const onSocket = (socket: Net.Socket) => {
      // A reset before the reader is attached must not become an unhandled 'error'.
      socket.on("error", noop)
      if (closing) return void socket.destroy()
      sockets.add(socket)
      socket.once("close", () => sockets.delete(socket))
      socket.setNoDelay(true)
      socket.setKeepAlive(true, KEEPALIVE_MS)
      const remote = remoteOf(socket)
      run(
        onConnection(connectionOf(socket, remote)).pipe(
          Effect.catchAllCause((cause) =>
            Cause.isInterruptedOnly(cause)
              ? Effect.void
              : Effect.logError("mesh connection failed", cause).pipe(
                  Effect.annotateLogs({ module: "TcpTransport", remote })
                )
          ),
          Effect.ensuring(destroy(socket))
        )
      )
    }

    const server = yield* Effect.acquireRelease(
      Effect.async<Net.Server, TransportError>((resume) => {
        const server = Net.createServer(onSocket)
        const onListenError = (cause: Error) => {
          server.close()
          resume(Effect.fail(new TransportError({ reason: "Listen", address, cause })))
        }
        server.once("error", onListenError)
        server.listen({ host: listenOptions.host, port: listenOptions.port }, () => {
          server.off("error", onListenError)
          // Later server errors (an accept failure) are logged; they must not crash the process.
          server.on("error", (cause) => {
            Runtime.runFork(runtime)(
              Effect.logWarning("mesh listener error").pipe(
                Effect.annotateLogs({ module: "TcpTransport", address, reason: cause.message })
              )
            )
          })
          resume(Effect.succeed(server))
        })
        return Effect.sync(() => server.close())
      }),
      (server) =>
        Effect.gen(function* () {
          // Stop accepting first, then end the connections still open.
          closing = true
          let closed = false
          let wake: (() => void) | undefined
          server.close(() => {
            closed = true
            wake?.()
          })
          yield* FiberSet.clear(fibers)
          for (const socket of sockets) socket.destroy()
          yield* Effect.async<void>((resume) => {
            if (closed) resume(Effect.void)
            else wake = () => resume(Effect.void)
          })
        })
    )
    const bound = server.address()
    return typeof bound === "object" && bound !== null ? bound.port : listenOptions.port
  })
