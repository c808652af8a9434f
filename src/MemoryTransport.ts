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
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Ref from "effect/Ref"
import { Faults } from "./internal/memory/faults.js"
import { Hosts } from "./internal/memory/hosts.js"
import { TransportError } from "./MeshError.js"
import { Transport, type TransportShape } from "./Transport.js"

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
  readonly setDelay: (delay: Duration.Input) => Effect.Effect<void>
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
export class MemoryNetwork extends Context.Service<MemoryNetwork, MemoryNetworkShape>()(
  "queen-mesh/MemoryNetwork"
) {}

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

/** The transport of the node named `origin` (undefined: an unnamed node); its dials go in `dialLog`. */
const transportOf = (
  hosts: Hosts,
  dialLog: Ref.Ref<ReadonlyArray<DialRecord>>,
  origin: string | undefined
): TransportShape => ({
  listen: (options, onConnection) => hosts.listen(origin, options, onConnection),
  dial: (host, port) =>
    Effect.gen(function* () {
      const at = yield* Clock.currentTimeMillis
      const listener = hosts.route(origin, host, port)
      const outcome: DialRecord["outcome"] = listener === undefined ? "refused" : "connected"
      yield* Ref.update(dialLog, (log) => [...log, { host, port, at, outcome, from: origin }])
      if (listener === undefined) {
        return yield* new TransportError({
          reason: "Dial",
          address: `${host}:${port}`,
          cause: new Error("connection refused")
        })
      }
      return yield* listener.connect(origin, host)
    })
})

/**
 * Makes a network.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Effect, Result } from "effect"
 * import { MemoryTransport } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const { network, transport } = yield* MemoryTransport.makeNetwork
 *   yield* transport.listen({ host: "queen-b", port: 6633 }, () => Effect.void)
 *   yield* network.refuse("queen-b", true)
 *   const refused = yield* Effect.result(transport.dial("queen-b", 6633))
 *   strictEqual(Result.isFailure(refused), true)
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
  const faults = new Faults()
  const hosts = new Hosts(faults)
  const dialLog = yield* Ref.make<ReadonlyArray<DialRecord>>([])

  const network: MemoryNetworkShape = {
    refuse: (target, on) => Effect.sync(() => faults.refuse(target, on)),
    cut: (target) =>
      Effect.forEach(hosts.matching(target), (listener) => listener.cutWhere(() => true, String(target)), {
        discard: true
      }),
    stopReading: (target, on) =>
      Effect.suspend(() => {
        faults.stopReading(target, on)
        return Effect.forEach(hosts.matching(target), (listener) => listener.reading(!on), { discard: true })
      }),
    setDelay: (delay) => Effect.sync(() => faults.setDelay(Duration.toMillis(delay))),
    dials: Ref.get(dialLog),
    openConnections: (target) =>
      Effect.sync(() => hosts.matching(target).reduce((sum, listener) => sum + listener.openConnections, 0)),
    partition: (groupA, groupB) =>
      Effect.andThen(
        Effect.sync(() => faults.partition(groupA, groupB)),
        hosts.cutPartitioned()
      ),
    isolate: (node) =>
      Effect.andThen(
        Effect.sync(() => faults.isolate(node)),
        hosts.cutPartitioned()
      ),
    heal: Effect.sync(() => faults.heal())
  }

  const named = new Map<string, TransportShape>()
  return {
    transport: transportOf(hosts, dialLog, undefined),
    transportOf: (host) => {
      let transport = named.get(host)
      if (transport === undefined) {
        transport = transportOf(hosts, dialLog, host)
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
