/**
 * The TCP transport (spec "Topology"): plain `node:net` for listening and for dialling, and reads
 * straight from the socket's 'data' event: the mesh's wake latency is one event-loop turn, not a stream
 * pipeline. A reader that needs an effect for a chunk pauses the socket meanwhile, so a slow reader
 * back-pressures the peer instead of buffering.
 *
 * Every dial resolves the hostname again, so a peer whose IP moved is picked up without a DNS refresh
 * loop; no-delay is on, since the mesh carries small latency-bound frames and coalesces its own writes.
 *
 * @since 0.1.0
 */
import * as Net from "node:net"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import {
  connectionOf,
  destroy,
  KEEPALIVE_MS as SOCKET_KEEPALIVE_MS
} from "./internal/transport/nodeSocket.js"
import * as TcpListener from "./internal/transport/tcpListener.js"
import * as MeshConfig from "./MeshConfig.js"
import { type TlsConfigError, TransportError } from "./MeshError.js"
import * as Resolver from "./Resolver.js"
import { type Connection, Transport, type TransportShape } from "./Transport.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface TcpOptions {
  /** How long a dial may take before it counts as failed. Default 5 seconds. */
  readonly connectTimeout?: Duration.Input
  /** How a configured `host:port` becomes the address dialled. Default: the system's DNS, every dial. */
  readonly resolver?: Resolver.ResolverShape
}

/**
 * TCP keep-alive on every mesh socket, first probe after this much idle time: the kernel's own check
 * that the other end still exists, under the mesh's heartbeats (which are what liveness trusts).
 *
 * @since 0.1.0
 * @category constants
 */
export const KEEPALIVE_MS = SOCKET_KEEPALIVE_MS

/**
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { Deferred, Effect } from "effect"
 * import { TcpTransport } from "queen-mesh"
 *
 * // Over loopback: listen on an ephemeral port and dial it.
 * const program = Effect.gen(function* () {
 *   const transport = TcpTransport.make()
 *   const received = yield* Deferred.make<string>()
 *   const port = yield* transport.listen({ host: "127.0.0.1", port: 0 }, (connection) =>
 *     connection
 *       .read((chunk) => Deferred.succeed(received, new TextDecoder().decode(chunk)))
 *       .pipe(Effect.ignore)
 *   )
 *   const connection = yield* transport.dial("127.0.0.1", port)
 *   yield* connection.write(new TextEncoder().encode("hello"))
 *   strictEqual(yield* Deferred.await(received), "hello")
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: TcpOptions = {}): TransportShape => {
  const connectTimeout = Duration.fromInputUnsafe(options.connectTimeout ?? "5 seconds")

  const resolver = options.resolver ?? Resolver.system

  const dial = (name: string, namePort: number): Effect.Effect<Connection, TransportError, Scope.Scope> =>
    Effect.flatMap(resolver.resolve(name, namePort), ({ host, port }) => connect(host, port))

  const connect = (host: string, port: number): Effect.Effect<Connection, TransportError, Scope.Scope> => {
    const address = `${host}:${port}`
    return Effect.acquireRelease(
      Effect.callback<Net.Socket, TransportError>((resume) => {
        const socket = Net.createConnection({
          host,
          port,
          noDelay: true,
          keepAlive: true,
          keepAliveInitialDelay: KEEPALIVE_MS
        })
        // A permanent listener: an 'error' with none would crash the process.
        socket.on("error", () => {})
        const onConnect = () => {
          socket.off("error", onError)
          resume(Effect.succeed(socket))
        }
        const onError = (cause: Error) => {
          // Format the stack now: an unformatted one keeps this callback's closure (and the socket)
          // reachable for as long as the error lives.
          void cause.stack
          socket.off("connect", onConnect)
          socket.destroy()
          resume(Effect.fail(new TransportError({ reason: "Dial", address, cause })))
        }
        socket.once("connect", onConnect)
        socket.once("error", onError)
        return Effect.sync(() => socket.destroy())
      }).pipe(
        Effect.timeoutOrElse({
          duration: connectTimeout,
          orElse: () =>
            Effect.fail(
              new TransportError({ reason: "Timeout", address, cause: new Error("connect timed out") })
            )
        })
      ),
      destroy
    ).pipe(Effect.map((socket) => connectionOf(socket, address)))
  }

  const listen: TransportShape["listen"] = TcpListener.listen

  return { dial, listen }
}

/**
 * TCP over `node:net`, resolving with `options.resolver` (default: the system's DNS, every dial).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: TcpOptions = {}): Layer.Layer<Transport> =>
  Layer.sync(Transport, () => make(options))

/**
 * TCP over `node:net`, resolving peers with the `Resolver` in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerResolved = (
  options: Omit<TcpOptions, "resolver"> = {}
): Layer.Layer<Transport, never, Resolver.Resolver> =>
  Layer.effect(
    Transport,
    Effect.map(Resolver.Resolver, (resolver) => make({ ...options, resolver }))
  )

/**
 * The transport `MeshConfig` asks for: TCP (`QUEEN_MESH_TLS=off`, the default) or TLS-PSK
 * (`QUEEN_MESH_TLS=psk`, keys derived from `QUEEN_SYNC_SECRET`), resolving names with the system's
 * DNS on every dial unless `options.resolver` says otherwise.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options: TcpOptions = {}
): Layer.Layer<Transport, TlsConfigError, MeshConfig.MeshConfig> =>
  Layer.unwrap(
    Effect.flatMap(MeshConfig.MeshConfig, (config) =>
      config.tls === "off"
        ? Effect.succeed(layer(options))
        : // TLS (its module and `node:tls`) is loaded only by a node that asks for it.
          Effect.map(
            Effect.promise(() => import("./TlsTransport.js")),
            (TlsTransport) =>
              TlsTransport.layer({
                secret: config.secret,
                accepted: config.acceptedSecrets,
                identity: config.serverId,
                ...(options.connectTimeout === undefined ? {} : { connectTimeout: options.connectTimeout }),
                handshakeTimeout: config.handshakeTimeout,
                ...(options.resolver === undefined ? {} : { resolve: options.resolver.resolve })
              })
          )
    )
  )
