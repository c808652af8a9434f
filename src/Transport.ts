/**
 * The seam between the mesh and the network: something that can listen on a port and dial a
 * `host:port`, giving byte streams (spec "Topology"). The mesh ships a TCP transport
 * (`TcpTransport.layer`) and an in-memory one for deterministic tests (`MemoryTransport.layer`); a
 * user can provide any other, for example one tunnelled through their own network layer.
 *
 * @example
 * ```ts
 * import { Deferred, Effect } from "effect"
 * import { MemoryTransport, Transport } from "queen-mesh"
 *
 * // Any `Transport` listens and dials; here the in-memory one.
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
 *   assert.strictEqual(yield* Deferred.await(received), "hello")
 * })
 *
 * Effect.runPromise(
 *   Effect.gen(function* () {
 *     const network = yield* MemoryTransport.makeNetwork
 *     yield* Effect.scoped(program).pipe(Effect.provide(MemoryTransport.layer(network)))
 *   })
 * )
 * ```
 *
 * @since 0.1.0
 */
import { Context, type Effect, type Option, type Scope } from "effect"
import type { TransportError } from "./MeshError.js"

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
