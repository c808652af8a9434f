/**
 * The seam between the mesh and the network: something that can listen on a port and dial a
 * `host:port`, giving byte streams (spec "Topology"). The mesh ships a TCP transport
 * (`TcpTransport.layer`) and an in-memory one for deterministic tests (`MemoryTransport.layer`); a
 * user can provide any other, for example one tunnelled through their own network layer.
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { Deferred, Effect } from "effect"
 * import { MemoryTransport, Transport } from "queen-mesh"
 *
 * // Any `Transport` listens and dials; here the in-memory one, as the node named queen-b.
 * const program = Effect.gen(function* () {
 *   const transport = yield* Transport.Transport
 *   const received = yield* Deferred.make<string>()
 *   const port = yield* transport.listen({ host: "0.0.0.0", port: 7000 }, (connection) =>
 *     connection
 *       .read((chunk) => Deferred.succeed(received, new TextDecoder().decode(chunk)))
 *       .pipe(Effect.ignore)
 *   )
 *   const connection = yield* transport.dial("queen-b", port)
 *   yield* connection.write(new TextEncoder().encode("hello"))
 *   strictEqual(yield* Deferred.await(received), "hello")
 * })
 *
 * Effect.runPromise(
 *   Effect.gen(function* () {
 *     const network = yield* MemoryTransport.makeNetwork
 *     yield* Effect.scoped(program).pipe(Effect.provide(MemoryTransport.layer(network, { host: "queen-b" })))
 *   })
 * )
 * ```
 *
 * @since 0.1.0
 */
import type * as Socket from "@effect/platform/Socket"
import type * as SocketServer from "@effect/platform/SocketServer"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as FiberSet from "effect/FiberSet"
import * as Option from "effect/Option"
import * as Runtime from "effect/Runtime"
import type * as Scope from "effect/Scope"
import { TransportError } from "./MeshError.js"

/**
 * One established connection. The mesh uses each connection one way only (spec "Topology"): it
 * writes on connections it dialled and reads from connections it accepted.
 *
 * @since 0.1.0
 * @category models
 */
export interface Connection {
  /** The remote IP, where the transport knows it (the "resolved IP" of the stats). */
  readonly remoteAddress: Option.Option<string>
  /**
   * Who the transport authenticated the dialer as, on an accepted connection, where it does (the
   * TLS-PSK identity, which is the dialer's server id): the HELLO must then carry that same server id,
   * or it is refused (`wrong_identity`).
   */
  readonly identity?: string | undefined
  /**
   * Reads until the peer closes its side (success) or the connection breaks (failure), handing each
   * chunk of bytes to `onChunk` in order, synchronously as it arrives. When `onChunk` returns an
   * effect, reading pauses until that effect completes (back-pressure); if it fails, reading stops
   * with its error.
   */
  readonly read: <E>(
    onChunk: (chunk: Uint8Array) => Effect.Effect<void, E> | undefined
  ) => Effect.Effect<void, TransportError | E>
  /**
   * Writes bytes. Completes once the transport has taken them; suspends while the peer does not read
   * and the transport's own buffer is full.
   */
  readonly write: (bytes: Uint8Array) => Effect.Effect<void, TransportError>
  /**
   * Optional fast path: writes `bytes` now and returns true if the transport can take them without
   * waiting, else returns false and writes nothing. The mesh uses it to send on an idle link without
   * waking a fiber; a lone frame may leave at once, but the frames of a busy tick should leave as one
   * system call where possible.
   */
  readonly unsafeTryWrite?: (bytes: Uint8Array) => boolean
}

/**
 * Where to listen.
 *
 * @since 0.1.0
 * @category models
 */
export interface ListenOptions {
  readonly host: string
  /** 0 asks for an ephemeral port. */
  readonly port: number
}

/**
 * A transport: listen on a port, dial a `host:port`.
 *
 * @since 0.1.0
 * @category models
 */
export interface TransportShape {
  /**
   * Listens until the scope closes. Each accepted connection is handed to `onConnection` in a fiber of
   * its own, and closed when that fiber ends or the scope closes. Returns the bound port.
   */
  readonly listen: (
    options: ListenOptions,
    onConnection: (connection: Connection) => Effect.Effect<void>
  ) => Effect.Effect<number, TransportError, Scope.Scope>
  /**
   * Dials `host:port`, resolving `host` afresh on every call. The connection closes with the scope.
   */
  readonly dial: (host: string, port: number) => Effect.Effect<Connection, TransportError, Scope.Scope>
  /**
   * Optional: connections refused below the mesh (a TLS handshake that failed) since the start; the
   * stats count them in `rejections.tls_handshake` and `handshake_failures`.
   */
  readonly handshakeFailures?: () => number
}

/**
 * The transport the mesh listens and dials with.
 *
 * @since 0.1.0
 * @category tags
 */
export class Transport extends Context.Tag("queen-mesh/Transport")<Transport, TransportShape>() {}

// ---------------------------------------------------------------------------------------------
// from @effect/platform sockets
// ---------------------------------------------------------------------------------------------

/**
 * Bytes a connection built by {@link fromSocket} holds for a reader that is still applying an earlier
 * chunk: a platform socket cannot be paused, so past this the connection fails instead of growing.
 *
 * @since 0.1.0
 * @category constants
 */
export const SOCKET_BACKLOG_BYTES = 32 * 1024 * 1024

/**
 * A `Connection` over a platform `Socket`: the socket runs in the current scope, its chunks go to the
 * reader in order (a chunk whose effect is running holds the next ones back, up to
 * {@link SOCKET_BACKLOG_BYTES}), and writes go through its writer. Completes once the socket is open.
 */
const connectionOfSocket = (
  socket: Socket.Socket,
  address: string
): Effect.Effect<Connection, TransportError, Scope.Scope> =>
  Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const opened = yield* Deferred.make<void>()
    const ended = yield* Deferred.make<void, TransportError>()
    // Chunks in arrival order, until the reader takes them; `deliver` is the reader's pump.
    const backlog: Array<Uint8Array> = []
    let backlogBytes = 0
    let deliver: (() => void) | undefined
    const onChunk = (chunk: Uint8Array) => {
      backlog.push(chunk)
      backlogBytes += chunk.length
      if (backlogBytes > SOCKET_BACKLOG_BYTES) {
        Deferred.unsafeDone(
          ended,
          Exit.fail(
            new TransportError({ reason: "Read", address, cause: new Error("the reader is too slow") })
          )
        )
        return
      }
      deliver?.()
    }
    yield* socket.run(onChunk, { onOpen: Deferred.succeed(opened, undefined) }).pipe(
      Effect.matchEffect({
        onFailure: (cause) => Deferred.fail(ended, new TransportError({ reason: "Read", address, cause })),
        onSuccess: () => Deferred.succeed(ended, undefined)
      }),
      Effect.forkScoped
    )
    yield* Effect.raceFirst(
      Deferred.await(opened),
      Effect.flatMap(Deferred.await(ended), () => new TransportError({ reason: "Dial", address }))
    )
    const write = yield* socket.writer
    const read = <E>(reader: (chunk: Uint8Array) => Effect.Effect<void, E> | undefined) =>
      Effect.suspend(() => {
        let running: Fiber.RuntimeFiber<void, E> | undefined
        let failed: Exit.Exit<void, E> | undefined
        // Completed by the reader's first failure, so the read ends on it without waiting for the socket.
        const stopped = Deferred.unsafeMake<void, E>(FiberId.none)
        const stop = (exit: Exit.Exit<void, E>) => {
          failed = exit
          Deferred.unsafeDone(stopped, exit)
        }
        // Each chunk in order; one whose effect runs holds the next ones back (a platform socket
        // cannot be paused, hence the backlog's bound).
        const pump = () => {
          while (running === undefined && backlog.length > 0 && failed === undefined) {
            const chunk = backlog.shift()!
            backlogBytes -= chunk.length
            let effect: Effect.Effect<void, E> | undefined
            try {
              effect = reader(chunk)
            } catch (defect) {
              stop(Exit.die(defect))
              return
            }
            if (effect === undefined) continue
            const fiber = Runtime.runFork(runtime)(effect)
            running = fiber
            fiber.addObserver((exit) => {
              running = undefined
              if (Exit.isFailure(exit)) stop(exit)
              pump()
            })
          }
        }
        deliver = pump
        pump()
        // The socket's end, once every chunk it delivered was applied; a reader's failure first.
        const drained: Effect.Effect<void, E> = Effect.suspend(() => {
          if (failed !== undefined) return failed
          if (running !== undefined) return Effect.zipRight(Fiber.await(running), drained)
          if (backlog.length > 0) return Effect.zipRight(Effect.yieldNow(), drained)
          return Effect.void
        })
        return Effect.raceFirst(Effect.zipRight(Deferred.await(ended), drained), Deferred.await(stopped))
      })
    return {
      remoteAddress: Option.none(),
      read,
      write: (bytes: Uint8Array) =>
        Effect.mapError(write(bytes), (cause) => new TransportError({ reason: "Write", address, cause }))
    } satisfies Connection
  })

/**
 * A `Transport` from `@effect/platform` sockets: `connect` makes the socket to dial `host:port` (it
 * connects when run, as `NodeSocket.makeNet` does) and `serve` the server to listen with
 * (`NodeSocketServer.make`). The adapter runs the sockets, keeps chunks in order for the mesh's
 * reader, and closes everything with the scopes. The remote address is not known through a platform
 * socket, so the stats show none.
 *
 * @example
 * ```ts
 * import { NodeSocket, NodeSocketServer } from "@effect/platform-node"
 * import { Layer } from "effect"
 * import { Transport } from "queen-mesh"
 *
 * const SocketTransport = Layer.succeed(
 *   Transport.Transport,
 *   Transport.fromSocket({
 *     connect: (host, port) => NodeSocket.makeNet({ host, port }),
 *     serve: ({ host, port }) => NodeSocketServer.make({ host, port })
 *   })
 * )
 * void SocketTransport
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromSocket = <E1, E2>(options: {
  readonly connect: (host: string, port: number) => Effect.Effect<Socket.Socket, E1>
  readonly serve: (
    options: ListenOptions
  ) => Effect.Effect<SocketServer.SocketServer["Type"], E2, Scope.Scope>
}): TransportShape => ({
  dial: (host, port) => {
    const address = `${host}:${port}`
    return Effect.flatMap(
      Effect.mapError(
        options.connect(host, port),
        (cause) => new TransportError({ reason: "Dial", address, cause })
      ),
      (socket) => connectionOfSocket(socket, address)
    )
  },
  listen: (listen, onConnection) =>
    Effect.gen(function* () {
      const address = `${listen.host}:${listen.port}`
      const server = yield* Effect.mapError(
        options.serve(listen),
        (cause) => new TransportError({ reason: "Listen", address, cause })
      )
      const connections = yield* FiberSet.make()
      yield* server
        .run((socket) =>
          Effect.scoped(
            Effect.flatMap(connectionOfSocket(socket, address), onConnection).pipe(
              Effect.catchAll(() => Effect.void)
            )
          ).pipe(FiberSet.run(connections))
        )
        .pipe(
          Effect.catchAllCause((cause) => Effect.logError("mesh socket server stopped", cause)),
          Effect.forkScoped
        )
      return server.address._tag === "TcpAddress" ? server.address.port : listen.port
    })
})
