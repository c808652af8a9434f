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
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Socket from "effect/socket/Socket"
import type * as SocketServer from "effect/socket/SocketServer"
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
export class Transport extends Context.Service<Transport, TransportShape>()("queen-mesh/Transport") {}

// ---------------------------------------------------------------------------------------------
// from effect sockets
// ---------------------------------------------------------------------------------------------

/** The socket's orderly end: the peer closed its side (code 1000), as opposed to a break. */
const isEnd = (error: Socket.SocketError): boolean =>
  error.reason._tag === "SocketCloseError" && error.reason.code === 1000

/**
 * A `Connection` over an effect `Socket`: its reader is acquired in the current scope (which opens
 * the socket: `NodeSocket.makeNet` connects there), `read` pulls chunks and hands them to the reader
 * in order, pulling the next only once an effect returned for one has completed (an effect socket
 * reads on demand, so a slow reader back-pressures the peer), and writes go through its writer.
 * Completes once the socket is open.
 */
const connectionOfSocket = (
  socket: Socket.Socket,
  address: string
): Effect.Effect<Connection, TransportError, Scope.Scope> =>
  Effect.gen(function* () {
    const pull = yield* Effect.mapError(
      Socket.readerBytes(socket),
      (cause) => new TransportError({ reason: "Dial", address, cause })
    )
    const writer = yield* socket.writer
    // The next chunks, or undefined once the peer has closed its side.
    const next = Effect.catch(pull, (error) =>
      isEnd(error)
        ? Effect.undefined
        : Effect.fail(new TransportError({ reason: "Read", address, cause: error }))
    )
    const read = <E>(reader: (chunk: Uint8Array) => Effect.Effect<void, E> | undefined) =>
      Effect.gen(function* () {
        while (true) {
          const chunks = yield* next
          if (chunks === undefined) return
          // A throw from the reader is a defect of this read, as an effect's would be.
          for (const chunk of chunks) {
            const effect = reader(chunk)
            if (effect !== undefined) yield* effect
          }
        }
      })
    return {
      remoteAddress: Option.none(),
      read,
      write: (bytes: Uint8Array) =>
        Effect.mapError(
          writer.write(bytes),
          (cause) => new TransportError({ reason: "Write", address, cause })
        )
    } satisfies Connection
  })

/**
 * A `Transport` from effect sockets (`effect/socket`): `connect` makes the socket to dial `host:port`
 * (it connects when its reader is acquired, as `NodeSocket.makeNet`'s does) and `serve` the server to
 * listen with (`NodeSocketServer.make`). The adapter opens the sockets, hands their chunks in order to
 * the mesh's reader, and closes everything with the scopes. The remote address is not known through
 * an effect socket, so the stats show none.
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
  ) => Effect.Effect<SocketServer.SocketServer["Service"], E2, Scope.Scope>
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
      // The server serves each connection in a fiber of its own, ended when `run` is interrupted,
      // that is when the listener's scope closes.
      yield* server
        .run((socket) =>
          Effect.scoped(
            Effect.flatMap(connectionOfSocket(socket, address), onConnection).pipe(
              Effect.catch(() => Effect.void)
            )
          )
        )
        .pipe(
          Effect.catchCause((cause) => Effect.logError("mesh socket server stopped", cause)),
          Effect.forkScoped
        )
      return server.address._tag === "UnixPathAddress" ? listen.port : server.address.port
    })
})
