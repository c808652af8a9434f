/**
 * A test kit for hosts: several mesh nodes on one in-memory network, under `TestClock`, without
 * reading `src/`. Nodes address each other by name: node `"b"` listens as `b:6633`, and a node whose
 * peers are `["b", "c"]` dials those names. Every node built from one `network` meets the others;
 * nodes on different networks never do.
 *
 * @example
 * ```ts
 * import { Effect } from "effect"
 * import { MeshTest } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const network = yield* MeshTest.network
 *   const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"] })
 *   const b = yield* MeshTest.node(network, { serverId: "b", peers: ["a"] })
 *   // Under `TestClock` use `settleUntil`; with the real clock, `eventually`.
 *   yield* MeshTest.eventually(MeshTest.linked(a))
 *   yield* MeshTest.eventually(MeshTest.hears(b, 1))
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as HotList from "./HotList.js"
import * as LocalWaker from "./LocalWaker.js"
import * as MaintenanceFlags from "./MaintenanceFlags.js"
import * as MemoryTransport from "./MemoryTransport.js"
import * as Mesh from "./Mesh.js"
import * as MeshConfig from "./MeshConfig.js"
import * as MeshError from "./MeshError.js"
import * as QueueConfigCache from "./QueueConfigCache.js"

/**
 * One in-memory network: its transport and its controls (see `MemoryTransport.Network`): refuse dials
 * to a host, cut its links, stop reading, delay, and `partition` two nodes from each other, `isolate`
 * one from all, `heal` either, both ways.
 *
 * @since 0.1.0
 * @category models
 */
export type Network = MemoryTransport.Network

/**
 * A running node and its shipped host services.
 *
 * @since 0.1.0
 * @category models
 */
export interface Node {
  readonly serverId: string
  readonly mesh: Mesh.MeshShape
  readonly waker: LocalWaker.LocalWakerShape
  readonly cache: QueueConfigCache.MemoryQueueConfigCacheShape
  readonly hotList: HotList.MemoryHotListShape
  readonly flags: MaintenanceFlags.MaintenanceFlagsShape
}

/**
 * @since 0.1.0
 * @category models
 */
export interface NodeOptions {
  readonly serverId: string
  /** The names of the peers to dial (each a node's name on the same network). */
  readonly peers: ReadonlyArray<string>
  /** The node's name on the network, what its peers dial. Default: its `serverId`. */
  readonly host?: string
  /** Default `"s3cr3t"`; give nodes different secrets to test refusals. */
  readonly secret?: string
  /** Anything else of the configuration (heartbeat, dead threshold, queue size, ...). */
  readonly config?: Partial<MeshConfig.MeshConfigShape>
  /** Options of the runtime layers (the reconnect schedule, liveness bounds) and the shipped waker. */
  readonly options?: Mesh.LocalOptions
  /**
   * The host's optional services, provided beside the shipped ones: a `Discovery`
   * (`Discovery.layer(...)`), an `EphemeralAdmin`, a lane. Any layer that needs nothing and cannot fail.
   */
  readonly services?: Layer.Layer<never>
}

/**
 * The port every test node listens on (the mesh's default).
 *
 * @since 0.1.0
 * @category constants
 */
export const PORT = MeshConfig.defaults.port

/**
 * A fresh in-memory network, for the nodes of one test.
 *
 * @since 0.1.0
 * @category constructors
 */
export const network: Effect.Effect<Network> = MemoryTransport.makeNetwork

/**
 * The configuration of a test node: its name as host and server id, peers by name.
 *
 * @since 0.1.0
 * @category constructors
 */
export const config = (options: NodeOptions): Partial<MeshConfig.MeshConfigShape> => ({
  serverId: options.serverId,
  port: PORT,
  peers: options.peers.map((host) => ({ host, port: PORT })),
  secret: Redacted.make(options.secret ?? "s3cr3t"),
  ...options.config
})

/**
 * A node on `network`, living in the current scope (close the scope to stop it, as a crash would).
 *
 * @since 0.1.0
 * @category constructors
 */
export const node = (
  network: Network,
  options: NodeOptions
): Effect.Effect<Node, MeshError.TransportError | MeshError.MeshConfigError, Scope.Scope> =>
  Effect.map(
    Layer.build(
      Mesh.layerLocal(options.options).pipe(
        Layer.provide(options.services ?? Layer.empty),
        Layer.provide(MemoryTransport.layer(network, { host: options.host ?? options.serverId })),
        Layer.provide(MeshConfig.layer(config(options)))
      )
    ),
    (context) => ({
      serverId: options.serverId,
      mesh: Context.get(context, Mesh.Mesh),
      waker: Context.get(context, LocalWaker.LocalWaker),
      cache: Context.get(context, QueueConfigCache.MemoryQueueConfigCache),
      hotList: Context.get(context, HotList.MemoryHotList),
      flags: Context.get(context, MaintenanceFlags.MaintenanceFlags)
    })
  )

/** Turns of the event loop `settle` waits for. */
const SETTLE_TURNS = 4

/**
 * One turn of the event loop: every `setImmediate` callback queued before it ran, and with them the fibers
 * effect 4's scheduler had queued (it runs them in `setImmediate` turns).
 */
const macrotask: Effect.Effect<void> = Effect.callback<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})

/**
 * Lets every fiber that can run without the clock moving run until it waits, without moving the clock:
 * four turns of the event loop, each of which lets all the work Effect's scheduler has queued finish
 * (effect 4's runs fibers in `setImmediate` turns, a batch at a time). So after `settle`,
 * a frame sent on the memory network has been delivered and applied, and what it caused has happened,
 * up to whatever waits for the `TestClock` (`TestClock.adjust` moves it) or for real I/O. To wait for
 * an outcome, prefer {@link settleUntil}, which says when it is reached.
 *
 * @since 0.1.0
 * @category testing
 */
export const settle: Effect.Effect<void> = Effect.gen(function* () {
  for (let i = 0; i < SETTLE_TURNS; i++) {
    yield* Effect.yieldNow
    yield* macrotask
  }
})

/**
 * An error of the test kit: a condition that never held (`MeshError.NotReached`).
 *
 * @since 0.1.0
 * @category errors
 */
export const NotReached = MeshError.NotReached

/**
 * @since 0.1.0
 * @category errors
 */
export type NotReached = MeshError.NotReached

/**
 * Yields until `check` holds, without moving the clock; fails after `rounds` attempts.
 *
 * @since 0.1.0
 * @category testing
 */
export const settleUntil = <E, R>(
  check: Effect.Effect<boolean, E, R>,
  rounds = 500
): Effect.Effect<void, E | NotReached, R> =>
  Effect.gen(function* () {
    for (let i = 0; i < rounds; i++) {
      if (yield* check) return
      yield* Effect.yieldNow
    }
    return yield* Effect.fail(new NotReached({ detail: "condition not reached while settling" }))
  })

/**
 * Polls `check` every few milliseconds of real time until it holds, failing after `within`: for
 * tests over real sockets (`it.live`), never as an assertion about speed.
 *
 * @since 0.1.0
 * @category testing
 */
export const eventually = <E, R>(
  check: Effect.Effect<boolean, E, R>,
  within: Duration.Input = "10 seconds"
): Effect.Effect<void, E | NotReached, R> =>
  check.pipe(
    Effect.repeat({ schedule: Schedule.spaced(Duration.millis(5)), until: (ok) => ok }),
    Effect.asVoid,
    Effect.timeoutOrElse({
      duration: within,
      orElse: () => Effect.fail(new NotReached({ detail: "condition not reached in time" }))
    })
  )

/**
 * Every configured peer of `node` has an established outbound link (an entry naming the node itself
 * is not a link).
 *
 * @since 0.1.0
 * @category testing
 */
export const linked = (node: Pick<Node, "mesh">): Effect.Effect<boolean> =>
  Effect.map(
    node.mesh.stats,
    (stats) => stats.enabled && stats.peers.every((peer) => peer.connected || peer.self)
  )

/**
 * `node` hears `count` peers alive.
 *
 * @since 0.1.0
 * @category testing
 */
export const hears = (node: Pick<Node, "mesh">, count: number): Effect.Effect<boolean> =>
  Effect.map(node.mesh.stats, (stats) => stats.enabled && stats.servers_alive >= count)
