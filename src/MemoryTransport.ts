/**
 * An in-memory transport for deterministic tests under `TestClock`. Connections are pairs of bounded
 * pipes inside the process; the `MemoryNetwork` service steers failure: refuse dials to a port, cut
 * every connection to a port, stop a listener's readers (so writers block once the pipe is full), and
 * delay bytes in flight. Every dial is logged with the `Clock` time at which it was made.
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
 * The controls of the in-memory network.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryNetworkShape {
  /** Refuse (or stop refusing) every dial to `port`, whether or not something listens there. */
  readonly refuse: (port: number, refused: boolean) => Effect.Effect<void>
  /** Break every open connection to `port`: both ends fail, as on a reset. */
  readonly cut: (port: number) => Effect.Effect<void>
  /** Stop (or resume) the readers of every connection into `port`, current and future. */
  readonly stopReading: (port: number, stopped: boolean) => Effect.Effect<void>
  /** Delay every byte written from now on by `delay` (by `Clock` time). */
  readonly setDelay: (delay: Duration.DurationInput) => Effect.Effect<void>
  /** Every dial so far, oldest first. */
  readonly dials: Effect.Effect<ReadonlyArray<DialRecord>>
  /** How many connections into `port` are open. */
  readonly openConnections: (port: number) => Effect.Effect<number>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class MemoryNetwork extends Context.Tag("queen-mesh/MemoryNetwork")<
  MemoryNetwork,
  MemoryNetworkShape
>() {}

/** Chunks a pipe holds before its writer suspends: the in-memory "socket buffer". */
const PIPE_CAPACITY = 64

interface Pipe {
  readonly queue: Queue.Queue<{ readonly bytes: Uint8Array; readonly at: number }>
  /** Succeeds on a graceful close (the reader drains, then ends); fails on a cut. */
  readonly closed: Deferred.Deferred<void, TransportError>
}

interface Link {
  readonly toListener: Pipe
  readonly toDialer: Pipe
}

interface PortState {
  refused: boolean
  readers: Effect.Latch
  /** Hands a new link to the listener on this port, if there is one. */
  accept: Option.Option<(link: Link) => Effect.Effect<void>>
  readonly links: Set<Link>
}

const makePipe = Effect.all({
  queue: Queue.bounded<{ readonly bytes: Uint8Array; readonly at: number }>(PIPE_CAPACITY),
  closed: Deferred.make<void, TransportError>()
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = Effect.gen(function* () {
  const ports = new Map<number, PortState>()
  const dialLog = yield* Ref.make<ReadonlyArray<DialRecord>>([])
  let delayMillis = 0
  let nextEphemeral = 49152

  const portState = (port: number): Effect.Effect<PortState> =>
    Effect.suspend(() => {
      const existing = ports.get(port)
      if (existing !== undefined) return Effect.succeed(existing)
      return Effect.map(Effect.makeLatch(true), (readers) => {
        const state: PortState = { refused: false, readers, accept: Option.none(), links: new Set() }
        ports.set(port, state)
        return state
      })
    })

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
  const releaseLink = (state: PortState, link: Link) =>
    Effect.all([
      Deferred.succeed(link.toListener.closed, undefined),
      Deferred.succeed(link.toDialer.closed, undefined),
      Effect.sync(() => state.links.delete(link))
    ])

  const endpoint = (
    host: string,
    inbound: Pipe,
    outbound: Pipe,
    gate: Effect.Latch | undefined
  ): Connection => ({
    remoteAddress: Option.some(host),
    read: read(inbound, gate),
    write: write(outbound, host)
  })

  const dial = (host: string, port: number): Effect.Effect<Connection, TransportError, Scope.Scope> =>
    Effect.gen(function* () {
      const state = yield* portState(port)
      const at = yield* Clock.currentTimeMillis
      const address = `${host}:${port}`
      if (state.refused || Option.isNone(state.accept)) {
        yield* Ref.update(dialLog, (log) => [...log, { host, port, at, outcome: "refused" as const }])
        return yield* new TransportError({ reason: "Dial", address, cause: new Error("connection refused") })
      }
      yield* Ref.update(dialLog, (log) => [...log, { host, port, at, outcome: "connected" as const }])
      const link: Link = { toListener: yield* makePipe, toDialer: yield* makePipe }
      state.links.add(link)
      yield* Effect.addFinalizer(() => releaseLink(state, link))
      yield* state.accept.value(link)
      return endpoint(host, link.toDialer, link.toListener, undefined)
    })

  const listen: TransportShape["listen"] = (options, onConnection) =>
    Effect.gen(function* () {
      const port = options.port === 0 ? nextEphemeral++ : options.port
      const state = yield* portState(port)
      if (Option.isSome(state.accept)) {
        return yield* new TransportError({
          reason: "Listen",
          address: `${options.host}:${port}`,
          cause: new Error("address in use")
        })
      }
      const fibers = yield* FiberSet.make()
      const runFork = yield* FiberSet.runtime(fibers)()
      // The accepted end closes when its handler ends, or when the listener's scope closes.
      state.accept = Option.some((link: Link) =>
        Effect.sync(() => {
          runFork(
            Effect.ensuring(
              onConnection(endpoint("127.0.0.1", link.toListener, link.toDialer, state.readers)),
              releaseLink(state, link)
            )
          )
        })
      )
      yield* Effect.addFinalizer(() =>
        Effect.suspend(() => {
          state.accept = Option.none()
          return Effect.forEach([...state.links], (link) => releaseLink(state, link), { discard: true })
        })
      )
      return port
    })

  const network: MemoryNetworkShape = {
    refuse: (port, refused) =>
      Effect.map(portState(port), (state) => {
        state.refused = refused
      }),
    cut: (port) =>
      Effect.flatMap(portState(port), (state) =>
        Effect.forEach(
          state.links,
          (link) => {
            const error = new TransportError({
              reason: "Read",
              address: `memory:${port}`,
              cause: new Error("connection reset")
            })
            return Effect.all([
              Deferred.fail(link.toListener.closed, error),
              Deferred.fail(link.toDialer.closed, error)
            ])
          },
          { discard: true }
        )
      ),
    stopReading: (port, stopped) =>
      Effect.flatMap(portState(port), (state) => (stopped ? state.readers.close : state.readers.open)),
    setDelay: (delay) =>
      Effect.sync(() => {
        delayMillis = Duration.toMillis(Duration.decode(delay))
      }),
    dials: Ref.get(dialLog),
    openConnections: (port) => Effect.map(portState(port), (state) => state.links.size)
  }

  return { transport: { dial, listen } satisfies TransportShape, network }
})

/**
 * The in-memory transport and its controls, sharing one network.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Transport | MemoryNetwork> = Layer.effectContext(
  Effect.map(make, ({ network, transport }) =>
    Context.make(Transport, transport).pipe(Context.add(MemoryNetwork, network))
  )
)
