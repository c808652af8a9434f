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
import type * as Scope from "effect/Scope"
import type { TransportError } from "../../MeshError.js"
import type { Connection, ListenOptions } from "../../Transport.js"
import { connectionOf, destroy, KEEPALIVE_MS } from "./nodeSocket.js"
import * as ServerScope from "./serverScope.js"

const noop = () => {}

const remoteOf = (socket: Net.Socket): string => `${socket.remoteAddress ?? "?"}:${socket.remotePort ?? "?"}`

/** Binds a TCP listener in the current scope; the port bound. */
export const listen = (
  listenOptions: ListenOptions,
  onConnection: (connection: Connection) => Effect.Effect<void>
): Effect.Effect<number, TransportError, Scope.Scope> =>
  Effect.gen(function* () {
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
          Effect.catchCause((cause) =>
            Cause.hasInterruptsOnly(cause)
              ? Effect.void
              : Effect.logError("mesh connection failed", cause).pipe(
                  Effect.annotateLogs({ module: "TcpTransport", remote })
                )
          ),
          Effect.ensuring(destroy(socket))
        )
      )
    }

    return yield* ServerScope.bind({
      create: () => Net.createServer(onSocket),
      listen: listenOptions,
      logAs: { message: "mesh listener error", module: "TcpTransport" },
      fibers,
      sockets,
      onClosing: () => {
        closing = true
      }
    })
  })
