/**
 * The TCP transport (spec "Topology"): `@effect/platform-node`'s socket server for listening, plain
 * `node:net` connections for dialling, and reads straight from the socket's 'data' event: the mesh's
 * wake latency is one event-loop turn, not a stream pipeline. A reader that needs an effect for a
 * chunk pauses the socket meanwhile, so a slow reader back-pressures the peer instead of buffering.
 *
 * Every dial resolves the hostname again, so a peer whose IP moved is picked up without a DNS refresh
 * loop; no-delay is on, since the mesh carries small latency-bound frames and coalesces its own writes.
 *
 * @since 0.1.0
 */
import * as Net from "node:net"
import * as NodeSocket from "@effect/platform-node/NodeSocket"
import * as NodeSocketServer from "@effect/platform-node/NodeSocketServer"
import { Duration, Effect, Exit, Fiber, Layer, Option, Runtime, type Scope } from "effect"
import { TransportError } from "./MeshError.js"
import * as Resolver from "./Resolver.js"
import { type Connection, Transport, type TransportShape } from "./Transport.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface TcpOptions {
  /** How long a dial may take before it counts as failed. Default 5 seconds. */
  readonly connectTimeout?: Duration.DurationInput
  /** How a configured `host:port` becomes the address dialled. Default: the system's DNS, every dial. */
  readonly resolver?: Resolver.ResolverShape
}

const fromSocket = (socket: Net.Socket, address: string): Connection => {
  // Frames written in one tick are gathered and leave as one buffer, in one write, when the tick ends:
  // cheaper than corking the socket and writing each (one stream chunk per frame).
  let pending: Array<Uint8Array> = []
  const flush = () => {
    const frames = pending
    pending = []
    if (socket.destroyed || !socket.writable) return
    socket.write(frames.length === 1 ? frames[0]! : Buffer.concat(frames))
  }
  return {
    unsafeTryWrite: (bytes) => {
      if (socket.destroyed || !socket.writable || socket.writableNeedDrain) return false
      if (pending.length === 0) process.nextTick(flush)
      pending.push(bytes)
      return true
    },
    remoteAddress: Option.fromNullable(socket.remoteAddress),
    read: <E>(onChunk: (chunk: Uint8Array) => Effect.Effect<void, E> | undefined) =>
      Effect.flatMap(Effect.runtime<never>(), (runtime) =>
        Effect.async<void, TransportError | E>((resume) => {
          // Chunks are handed on from the socket's 'data' event, with no fiber in between; an effect
          // returned for a chunk pauses the socket until it completes.
          const backlog: Array<Uint8Array> = []
          let running: Fiber.RuntimeFiber<void, E> | undefined
          let ended = false
          let finished = false
          const finish = (result: Effect.Effect<void, TransportError | E>) => {
            if (finished) return
            finished = true
            cleanup()
            resume(result)
          }
          const pump = () => {
            while (running === undefined && backlog.length > 0 && !finished) {
              let effect: Effect.Effect<void, E> | undefined
              try {
                effect = onChunk(backlog.shift()!)
              } catch (defect) {
                // A throw from the reader must end this connection, never escape the socket's event
                // handler (that would take the whole process down).
                return finish(Effect.die(defect))
              }
              if (effect === undefined) continue
              socket.pause()
              const fiber = Runtime.runFork(runtime)(effect)
              running = fiber
              fiber.addObserver((exit) => {
                running = undefined
                if (Exit.isFailure(exit)) return finish(Effect.failCause(exit.cause))
                pump()
                if (running === undefined && !finished) {
                  if (ended) finish(Effect.void)
                  else socket.resume()
                }
              })
            }
          }
          const onData = (chunk: Buffer) => {
            backlog.push(chunk)
            pump()
          }
          const onEnd = () => {
            ended = true
            if (running === undefined) finish(Effect.void)
          }
          const onClose = () => {
            // After 'end' a close is the normal ending; before it, the connection broke.
            if (!ended) finish(Effect.fail(new TransportError({ reason: "Read", address })))
            else if (running === undefined) finish(Effect.void)
          }
          const onError = (cause: Error) =>
            finish(Effect.fail(new TransportError({ reason: "Read", address, cause })))
          const cleanup = () => {
            socket.off("data", onData)
            socket.off("end", onEnd)
            socket.off("close", onClose)
            socket.off("error", onError)
          }
          socket.on("data", onData)
          socket.on("end", onEnd)
          socket.on("close", onClose)
          socket.on("error", onError)
          if (socket.isPaused()) socket.resume()
          return Effect.suspend(() => {
            cleanup()
            finished = true
            return running === undefined ? Effect.void : Fiber.interrupt(running)
          })
        })
      ),
    write: (bytes) =>
      Effect.async<void, TransportError>((resume) => {
        if (socket.destroyed || !socket.writable) {
          resume(Effect.fail(new TransportError({ reason: "Closed", address })))
          return
        }
        if (socket.write(bytes)) {
          resume(Effect.void)
          return
        }
        // The socket's buffer is over its high-water mark: wait for it to drain, or for the end.
        const cleanup = () => {
          socket.off("drain", onDrain)
          socket.off("close", onClose)
        }
        const onDrain = () => {
          cleanup()
          resume(Effect.void)
        }
        const onClose = () => {
          cleanup()
          resume(Effect.fail(new TransportError({ reason: "Write", address })))
        }
        socket.on("drain", onDrain)
        socket.on("close", onClose)
        return Effect.sync(cleanup)
      })
  }
}

const destroy = (socket: Net.Socket) =>
  Effect.sync(() => {
    if (!socket.destroyed) socket.destroy()
  })

/**
 * @example
 * ```ts
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
 *   assert.strictEqual(yield* Deferred.await(received), "hello")
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: TcpOptions = {}): TransportShape => {
  const connectTimeout = Duration.decode(options.connectTimeout ?? "5 seconds")

  const resolver = options.resolver ?? Resolver.system

  const dial = (name: string, namePort: number): Effect.Effect<Connection, TransportError, Scope.Scope> =>
    Effect.flatMap(resolver.resolve(name, namePort), ({ host, port }) => connect(host, port))

  const connect = (host: string, port: number): Effect.Effect<Connection, TransportError, Scope.Scope> => {
    const address = `${host}:${port}`
    return Effect.acquireRelease(
      Effect.async<Net.Socket, TransportError>((resume) => {
        const socket = Net.createConnection({ host, port, noDelay: true })
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
        Effect.timeoutFail({
          duration: connectTimeout,
          onTimeout: () =>
            new TransportError({ reason: "Timeout", address, cause: new Error("connect timed out") })
        })
      ),
      destroy
    ).pipe(Effect.map((socket) => fromSocket(socket, address)))
  }

  const listen: TransportShape["listen"] = (listenOptions, onConnection) =>
    Effect.gen(function* () {
      const server = yield* NodeSocketServer.make({
        host: listenOptions.host,
        port: listenOptions.port
      }).pipe(
        Effect.mapError(
          (cause) =>
            new TransportError({
              reason: "Listen",
              address: `${listenOptions.host}:${listenOptions.port}`,
              cause: cause.cause
            })
        )
      )
      const port = server.address._tag === "TcpAddress" ? server.address.port : listenOptions.port
      yield* server
        .run(() =>
          Effect.flatMap(
            Effect.serviceOption(NodeSocket.NetSocket),
            Option.match({
              onNone: () => Effect.void,
              onSome: (socket) =>
                Effect.acquireUseRelease(
                  Effect.succeed(socket),
                  (socket) => {
                    socket.setNoDelay(true)
                    return onConnection(
                      fromSocket(socket, `${socket.remoteAddress ?? "?"}:${socket.remotePort ?? "?"}`)
                    )
                  },
                  destroy
                )
            })
          )
        )
        .pipe(
          Effect.catchAllCause((cause) => Effect.logError("mesh listener stopped", cause)),
          Effect.forkScoped
        )
      return port
    })

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
