/**
 * An in-memory transport for deterministic tests under `TestClock`. Connections are pairs of bounded
 * pipes inside the process; the network's controls steer failure: refuse dials, cut every connection
 * to an address, stop a listener's readers (so writers block once the pipe is full), and delay bytes
 * in flight. Every dial is logged with the `Clock` time at which it was made.
 *
 * One network is one value: every node built on it must share it, or they never meet. So there is no
 * ready-made layer that makes a network behind your back: make one (`makeNetwork`, or the test kit's
 * `MeshTest.network`) and give each node `layer(network)`.
 *
 * Listeners are addressed by `host:port`; one bound to `0.0.0.0`, `::` or `127.0.0.1` takes dials to
 * any host on its port. A control's `target` is a port (every host), a host (every port) or
 * `host:port`.
 *
 * @since 0.1.0
 */
import {
  Clock,
  Context,
  Deferred,
  Duration,
  Effect,
  FiberSet,
  Layer,
  Option,
  Queue,
  Ref,
  type Scope
} from "effect"
import { TransportError } from "./MeshError.js"
import { type Connection, Transport, type TransportShape } from "./Transport.js"

/**
 * One dial attempt as the network saw it.
 *
 * @since 0.1.0
 * @category models
 */
export interface DialRecord {
  readonly host: string
  readonly port: number
  /** `Clock` time of the attempt, in milliseconds. */
  readonly at: number
  readonly outcome: "connected" | "refused"
}

/**
 * What a control applies to: a port (on every host), a host (every port), or `host:port`.
 *
 * @since 0.1.0
 * @category models
 */
export type Target = number | string

/**
 * The controls of the in-memory network.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryNetworkShape {
  /** Refuse (or stop refusing) every dial to `target`, whether or not something listens there. */
  readonly refuse: (target: Target, refused: boolean) => Effect.Effect<void>
  /** Break every open connection to `target`: both ends fail, as on a reset. */
  readonly cut: (target: Target) => Effect.Effect<void>
  /** Stop (or resume) the readers of every connection into `target`, current and future. */
  readonly stopReading: (target: Target, stopped: boolean) => Effect.Effect<void>
  /** Delay every byte written from now on by `delay` (by `Clock` time). */
  readonly setDelay: (delay: Duration.DurationInput) => Effect.Effect<void>
  /** Every dial so far, oldest first. */
  readonly dials: Effect.Effect<ReadonlyArray<DialRecord>>
  /** How many connections into `target` are open. */
  readonly openConnections: (target: Target) => Effect.Effect<number>
}

/**
 * The controls of the network a node's transport is on, for tests that reach it through a layer.
 *
 * @since 0.1.0
 * @category tags
 */
export class MemoryNetwork extends Context.Tag("queen-mesh/MemoryNetwork")<
  MemoryNetwork,
  MemoryNetworkShape
>() {}

/**
 * A network: its transport (shared by every node on it) and its controls.
 *
 * @since 0.1.0
 * @category models
 */
export interface Network {
  readonly transport: TransportShape
  readonly network: MemoryNetworkShape
}

/** Chunks a pipe holds before its writer suspends: the in-memory "socket buffer". */
const PIPE_CAPACITY = 64

const WILDCARD_HOSTS = new Set(["0.0.0.0", "::", "127.0.0.1", "localhost", "*"])

interface Pipe {
  readonly queue: Queue.Queue<{ readonly bytes: Uint8Array; readonly at: number }>
  /** Succeeds on a graceful close (the reader drains, then ends); fails on a cut. */
  readonly closed: Deferred.Deferred<void, TransportError>
}

interface Link {
  readonly toListener: Pipe
  readonly toDialer: Pipe
}

interface ListenerState {
  readonly host: string
  readonly port: number
  readonly readers: Effect.Latch
  readonly accept: (link: Link) => Effect.Effect<void>
  readonly links: Set<Link>
}

const makePipe = Effect.all({
  queue: Queue.bounded<{ readonly bytes: Uint8Array; readonly at: number }>(PIPE_CAPACITY),
  closed: Deferred.make<void, TransportError>()
})

const matches = (target: Target, host: string, port: number): boolean => {
  if (typeof target === "number") return target === port
  const colon = target.lastIndexOf(":")
  if (colon > 0 && /^\d+$/.test(target.slice(colon + 1))) {
    const targetHost = target.slice(0, colon)
    return Number(target.slice(colon + 1)) === port && (targetHost === host || WILDCARD_HOSTS.has(host))
  }
  return target === host
}

/**
 * Makes a network.
 *
 * @example
 * ```ts
 * import { Effect, Either } from "effect"
 * import { MemoryTransport } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const { network, transport } = yield* MemoryTransport.makeNetwork
 *   yield* transport.listen({ host: "queen-b", port: 6633 }, () => Effect.void)
 *   yield* network.refuse("queen-b", true)
 *   const refused = yield* Effect.either(transport.dial("queen-b", 6633))
 *   assert.strictEqual(Either.isLeft(refused), true)
 *   yield* network.refuse("queen-b", false)
 *   yield* transport.dial("queen-b", 6633)
 *   const dials = yield* network.dials
 *   assert.deepStrictEqual(
 *     dials.map((dial) => dial.outcome),
 *     ["refused", "connected"]
 *   )
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeNetwork: Effect.Effect<Network> = Effect.gen(function* () {
  const listeners = new Map<string, ListenerState>()
  const refused = new Set<Target>()
  const stopped = new Set<Target>()
  const dialLog = yield* Ref.make<ReadonlyArray<DialRecord>>([])
  let delayMillis = 0
  let nextEphemeral = 49152

  const keyOf = (host: string, port: number) => `${WILDCARD_HOSTS.has(host) ? "*" : host}:${port}`
  const find = (host: string, port: number) => listeners.get(`${host}:${port}`) ?? listeners.get(`*:${port}`)
  const isRefused = (host: string, port: number) => [...refused].some((target) => matches(target, host, port))
  const isStopped = (host: string, port: number) => [...stopped].some((target) => matches(target, host, port))
  const matching = (target: Target) =>
    [...listeners.values()].filter((state) => matches(target, state.host, state.port))

  const write =
    (pipe: Pipe, address: string) =>
    (bytes: Uint8Array): Effect.Effect<void, TransportError> =>
      Effect.gen(function* () {
        if (yield* Deferred.isDone(pipe.closed)) {
          return yield* new TransportError({ reason: "Closed", address })
        }
        const at = (yield* Clock.currentTimeMillis) + delayMillis
        // Copy: the writer may reuse its buffer once the write completes, as with a socket.
        yield* Effect.raceFirst(
          Queue.offer(pipe.queue, { bytes: Uint8Array.from(bytes), at }),
          Effect.flatMap(Deferred.await(pipe.closed), () => new TransportError({ reason: "Closed", address }))
        )
      })

  const read =
    (pipe: Pipe, gate: Effect.Latch | undefined) =>
    <E>(
      onChunk: (chunk: Uint8Array) => Effect.Effect<void, E> | undefined
    ): Effect.Effect<void, TransportError | E> =>
      Effect.gen(function* () {
        while (true) {
          if (gate !== undefined) yield* gate.await
          const ready = yield* Queue.poll(pipe.queue)
          let item: { readonly bytes: Uint8Array; readonly at: number }
          if (Option.isSome(ready)) {
            item = ready.value
          } else {
            const next = yield* Effect.raceFirst(
              Effect.map(Queue.take(pipe.queue), Option.some),
              // Closed: drain what is left, then end (or fail, on a cut).
              Effect.zipRight(Deferred.await(pipe.closed), Queue.poll(pipe.queue))
            )
            if (Option.isNone(next)) return
            item = next.value
          }
          // A reader stopped while it waited holds on to what it took, as a process that stops reading would.
          if (gate !== undefined) yield* gate.await
          const now = yield* Clock.currentTimeMillis
          if (item.at > now) yield* Effect.sleep(Duration.millis(item.at - now))
          const effect = onChunk(item.bytes)
          if (effect !== undefined) yield* effect
        }
      })

  // Either end closing is a graceful close of both directions, as with a TCP close.
  const releaseLink = (state: ListenerState, link: Link) =>
    Effect.all([
      Deferred.succeed(link.toListener.closed, undefined),
      Deferred.succeed(link.toDialer.closed, undefined),
      Effect.sync(() => state.links.delete(link))
    ])

  const endpoint = (
    remote: string,
    inbound: Pipe,
    outbound: Pipe,
    gate: Effect.Latch | undefined
  ): Connection => ({
    remoteAddress: Option.some(remote),
    read: read(inbound, gate),
    write: write(outbound, remote)
  })

  const dial = (host: string, port: number): Effect.Effect<Connection, TransportError, Scope.Scope> =>
    Effect.gen(function* () {
      const at = yield* Clock.currentTimeMillis
      const address = `${host}:${port}`
      const state = find(host, port)
      if (state === undefined || isRefused(host, port)) {
        yield* Ref.update(dialLog, (log) => [...log, { host, port, at, outcome: "refused" as const }])
        return yield* new TransportError({ reason: "Dial", address, cause: new Error("connection refused") })
      }
      yield* Ref.update(dialLog, (log) => [...log, { host, port, at, outcome: "connected" as const }])
      const link: Link = { toListener: yield* makePipe, toDialer: yield* makePipe }
      state.links.add(link)
      yield* Effect.addFinalizer(() => releaseLink(state, link))
      yield* state.accept(link)
      return endpoint(host, link.toDialer, link.toListener, undefined)
    })

  const listen: TransportShape["listen"] = (options, onConnection) =>
    Effect.gen(function* () {
      const port = options.port === 0 ? nextEphemeral++ : options.port
      const key = keyOf(options.host, port)
      if (listeners.has(key)) {
        return yield* new TransportError({
          reason: "Listen",
          address: `${options.host}:${port}`,
          cause: new Error("address in use")
        })
      }
      const fibers = yield* FiberSet.make()
      const runFork = yield* FiberSet.runtime(fibers)()
      const readers = yield* Effect.makeLatch(!isStopped(options.host, port))
      const state: ListenerState = {
        host: WILDCARD_HOSTS.has(options.host) ? "*" : options.host,
        port,
        readers,
        links: new Set(),
        // The accepted end closes when its handler ends, or when the listener's scope closes.
        accept: (link) =>
          Effect.sync(() => {
            runFork(
              Effect.ensuring(
                onConnection(endpoint("127.0.0.1", link.toListener, link.toDialer, readers)),
                releaseLink(state, link)
              )
            )
          })
      }
      listeners.set(key, state)
      yield* Effect.addFinalizer(() =>
        Effect.suspend(() => {
          listeners.delete(key)
          return Effect.forEach([...state.links], (link) => releaseLink(state, link), { discard: true })
        })
      )
      return port
    })

  const network: MemoryNetworkShape = {
    refuse: (target, on) =>
      Effect.sync(() => {
        if (on) refused.add(target)
        else refused.delete(target)
      }),
    cut: (target) =>
      Effect.forEach(
        matching(target).flatMap((state) => [...state.links]),
        (link) => {
          const error = new TransportError({
            reason: "Read",
            address: `memory:${String(target)}`,
            cause: new Error("connection reset")
          })
          return Effect.all([
            Deferred.fail(link.toListener.closed, error),
            Deferred.fail(link.toDialer.closed, error)
          ])
        },
        { discard: true }
      ),
    stopReading: (target, on) =>
      Effect.suspend(() => {
        if (on) stopped.add(target)
        else stopped.delete(target)
        return Effect.forEach(matching(target), (state) => (on ? state.readers.close : state.readers.open), {
          discard: true
        })
      }),
    setDelay: (delay) =>
      Effect.sync(() => {
        delayMillis = Duration.toMillis(Duration.decode(delay))
      }),
    dials: Ref.get(dialLog),
    openConnections: (target) =>
      Effect.sync(() => matching(target).reduce((sum, state) => sum + state.links.size, 0))
  }

  return { transport: { dial, listen }, network }
})

/**
 * The transport of `network` and its controls, for one node (give every node of a test the same
 * network).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (network: Network): Layer.Layer<Transport | MemoryNetwork> =>
  Layer.succeedContext(
    Context.make(Transport, network.transport).pipe(Context.add(MemoryNetwork, network.network))
  )
