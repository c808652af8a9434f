/**
 * An in-memory transport for deterministic tests under `TestClock`. Connections are pairs of bounded
 * pipes inside the process; the network's controls steer failure: refuse dials, cut every connection
 * to an address, stop a listener's readers (so writers block once the pipe is full), and delay bytes
 * in flight. Every dial is logged with the `Clock` time at which it was made.
 *
 * One network is one value: every node built on it must share it, or they never meet. So there is no
 * ready-made layer that makes a network behind your back: make one (`makeNetwork`, or the test kit's
 * `MeshTest.network`) and give each node `layer(network, { host: name })`.
 *
 * A node on the network has a name (its `host`): a listener it binds to a wildcard address
 * (`0.0.0.0`, `::`) is reached only by dials to that name, as a host's own address would be, and the
 * other end sees the dialer's name as the remote address. A listener bound to a given host is reached
 * by dials to that host. Without a name (`layer(network)`), a wildcard listener is reached by dials to
 * loopback names (`127.0.0.1`, `localhost`, `::1`) on its port. A control's `target` is a port (every
 * host), a host (every port) or `host:port`; `partition`, `isolate` and `heal` act on named nodes in
 * both directions, dials and open connections alike.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
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
  /** The name of the node that dialled (`undefined` for an unnamed one). */
  readonly from: string | undefined
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
  /**
   * Splits the named nodes of `groupA` from those of `groupB`, both ways: their open connections are
   * cut and their dials refused until `heal`.
   */
  readonly partition: (groupA: ReadonlyArray<string>, groupB: ReadonlyArray<string>) => Effect.Effect<void>
  /** Cuts the named node off from every other node, both ways, until `heal`. */
  readonly isolate: (node: string) => Effect.Effect<void>
  /** Lifts every partition and isolation; the nodes' dialers reconnect on their own schedules. */
  readonly heal: Effect.Effect<void>
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
  /** The transport of an unnamed node (see the module comment). */
  readonly transport: TransportShape
  /** The transport of the node named `host`. */
  readonly transportOf: (host: string) => TransportShape
  readonly network: MemoryNetworkShape
}

/** Chunks a pipe holds before its writer suspends: the in-memory "socket buffer". */
const PIPE_CAPACITY = 64

/** Addresses a listener binds to take every address of its host. */
const WILDCARD_HOSTS = new Set(["0.0.0.0", "::", "*"])
/** Names an unnamed node's wildcard listeners are reached by. */
const LOOPBACK_HOSTS = new Set(["127.0.0.1", "localhost", "::1", "0.0.0.0", "::"])

interface Pipe {
  readonly queue: Queue.Queue<{ readonly bytes: Uint8Array; readonly at: number }>
  /** Succeeds on a graceful close (the reader drains, then ends); fails on a cut. */
  readonly closed: Deferred.Deferred<void, TransportError>
}

interface Link {
  readonly toListener: Pipe
  readonly toDialer: Pipe
  /** The dialing node's name, if it has one. */
  readonly from: string | undefined
  /** The listening node's name (or bound host). */
  readonly to: string
}

interface ListenerState {
  /** The name (or bound host) it is reached by; `*` for an unnamed node's wildcard listener. */
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
    return Number(target.slice(colon + 1)) === port && (targetHost === host || host === "*")
  }
  return target === host
}

/**
 * Makes a network.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Effect, Either } from "effect"
 * import { MemoryTransport } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const { network, transport } = yield* MemoryTransport.makeNetwork
 *   yield* transport.listen({ host: "queen-b", port: 6633 }, () => Effect.void)
 *   yield* network.refuse("queen-b", true)
 *   const refused = yield* Effect.either(transport.dial("queen-b", 6633))
 *   strictEqual(Either.isLeft(refused), true)
 *   yield* network.refuse("queen-b", false)
 *   yield* transport.dial("queen-b", 6633)
 *   const dials = yield* network.dials
 *   deepStrictEqual(
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

  /** Where a listener bound to `host` by the node `origin` is reached. */
  const reachedAs = (host: string, origin: string | undefined) =>
    WILDCARD_HOSTS.has(host) || (origin === undefined && LOOPBACK_HOSTS.has(host)) ? (origin ?? "*") : host
  const find = (host: string, port: number) =>
    listeners.get(`${host}:${port}`) ?? (LOOPBACK_HOSTS.has(host) ? listeners.get(`*:${port}`) : undefined)
  // Partitions: pairs of groups of named nodes that do not reach each other, either way.
  const partitions: Array<{ readonly a: ReadonlySet<string>; readonly b: ReadonlySet<string> | "all" }> = []
  const blocked = (from: string | undefined, to: string) => {
    if (from === undefined || from === to) return false
    const inB = (part: (typeof partitions)[number], node: string) =>
      part.b === "all" ? !part.a.has(node) : part.b.has(node)
    return partitions.some(
      (part) => (part.a.has(from) && inB(part, to)) || (part.a.has(to) && inB(part, from))
    )
  }
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

  const cutLink = (link: Link, why: string) => {
    const error = new TransportError({
      reason: "Read",
      address: `memory:${why}`,
      cause: new Error("connection reset")
    })
    return Effect.all([
      Deferred.fail(link.toListener.closed, error),
      Deferred.fail(link.toDialer.closed, error)
    ])
  }

  /** The transport of the node named `origin` (undefined: an unnamed node). */
  const transportOf = (origin: string | undefined): TransportShape => {
    const dial = (host: string, port: number): Effect.Effect<Connection, TransportError, Scope.Scope> =>
      Effect.gen(function* () {
        const at = yield* Clock.currentTimeMillis
        const address = `${host}:${port}`
        const state = find(host, port)
        if (state === undefined || isRefused(host, port) || blocked(origin, state.host)) {
          yield* Ref.update(dialLog, (log) => [
            ...log,
            { host, port, at, outcome: "refused" as const, from: origin }
          ])
          return yield* new TransportError({
            reason: "Dial",
            address,
            cause: new Error("connection refused")
          })
        }
        yield* Ref.update(dialLog, (log) => [
          ...log,
          { host, port, at, outcome: "connected" as const, from: origin }
        ])
        const link: Link = {
          toListener: yield* makePipe,
          toDialer: yield* makePipe,
          from: origin,
          to: state.host
        }
        state.links.add(link)
        yield* Effect.addFinalizer(() => releaseLink(state, link))
        yield* state.accept(link)
        return endpoint(host, link.toDialer, link.toListener, undefined)
      })

    const listen: TransportShape["listen"] = (options, onConnection) =>
      Effect.gen(function* () {
        const port = options.port === 0 ? nextEphemeral++ : options.port
        const host = reachedAs(options.host, origin)
        const key = `${host}:${port}`
        if (listeners.has(key)) {
          return yield* new TransportError({
            reason: "Listen",
            address: `${options.host}:${port}`,
            cause: new Error("address in use")
          })
        }
        const fibers = yield* FiberSet.make()
        const runFork = yield* FiberSet.runtime(fibers)()
        const readers = yield* Effect.makeLatch(!isStopped(host, port))
        const state: ListenerState = {
          host,
          port,
          readers,
          links: new Set(),
          // The accepted end closes when its handler ends, or when the listener's scope closes.
          accept: (link) =>
            Effect.sync(() => {
              runFork(
                Effect.ensuring(
                  onConnection(endpoint(link.from ?? "127.0.0.1", link.toListener, link.toDialer, readers)),
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
    return { dial, listen }
  }

  /** Cuts every open link a partition now separates. */
  const enforce = Effect.suspend(() =>
    Effect.forEach(
      [...listeners.values()].flatMap((state) =>
        [...state.links].filter((link) => blocked(link.from, link.to))
      ),
      (link) => cutLink(link, "partition"),
      { discard: true }
    )
  )

  const network: MemoryNetworkShape = {
    refuse: (target, on) =>
      Effect.sync(() => {
        if (on) refused.add(target)
        else refused.delete(target)
      }),
    cut: (target) =>
      Effect.forEach(
        matching(target).flatMap((state) => [...state.links]),
        (link) => cutLink(link, String(target)),
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
      Effect.sync(() => matching(target).reduce((sum, state) => sum + state.links.size, 0)),
    partition: (groupA, groupB) =>
      Effect.zipRight(
        Effect.sync(() => partitions.push({ a: new Set(groupA), b: new Set(groupB) })),
        enforce
      ),
    isolate: (node) =>
      Effect.zipRight(
        Effect.sync(() => partitions.push({ a: new Set([node]), b: "all" })),
        enforce
      ),
    heal: Effect.sync(() => {
      partitions.length = 0
    })
  }

  const named = new Map<string, TransportShape>()
  return {
    transport: transportOf(undefined),
    transportOf: (host) => {
      let transport = named.get(host)
      if (transport === undefined) {
        transport = transportOf(host)
        named.set(host, transport)
      }
      return transport
    },
    network
  }
})

/**
 * The transport of `network` and its controls, for one node (give every node of a test the same
 * network): the node named `options.host`, or an unnamed one.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  network: Network,
  options: { readonly host?: string } = {}
): Layer.Layer<Transport | MemoryNetwork> =>
  Layer.succeedContext(
    Context.make(
      Transport,
      options.host === undefined ? network.transport : network.transportOf(options.host)
    ).pipe(Context.add(MemoryNetwork, network.network))
  )
