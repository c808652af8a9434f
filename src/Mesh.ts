/**
 * The mesh as a service: the API a broker calls to send hints, over the runtime that carries them
 * (spec "The mesh", all of it). `Mesh.layer` builds the runtime's services once and provides them
 * itself, the way `Sharding.layer` provides its pieces: inbound liveness, dispatch (the spec's "effect on
 * receipt"), the listener (the receive side), the peers (one dialer per peer with its bounded queue),
 * the lane if the host provides one, the health tracker and the metrics, over the event hub. Everything
 * lives in the layer's scope; `docs/architecture.md` maps the modules behind it.
 *
 * When the mesh is not active (sync off, or no peers) nothing binds and nothing is sent; local wakes
 * still reach the host's waker.
 *
 * @since 0.1.0
 */
import type * as Config from "effect/Config"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Option from "effect/Option"
import * as References from "effect/References"
import type * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type * as Frame from "./Frame.js"
import * as HotList from "./HotList.js"
import * as Outbound from "./internal/links/outboundLink.js"
import * as Api from "./internal/mesh/api.js"
import * as Runtime from "./internal/mesh/runtime.js"
import * as LocalWaker from "./LocalWaker.js"
import * as MaintenanceFlags from "./MaintenanceFlags.js"
import type * as Membership from "./Membership.js"
import * as MeshConfig from "./MeshConfig.js"
import type {
  InvalidInputError,
  LinkDown,
  MeshClosedError,
  MeshConfigError,
  TlsConfigError,
  TransportError
} from "./MeshError.js"
import type { MeshEvent } from "./MeshEvent.js"
import * as MeshHealth from "./MeshHealth.js"
import type * as MeshStats from "./MeshStats.js"
import * as QueueConfigCache from "./QueueConfigCache.js"
import * as TcpTransport from "./TcpTransport.js"
import type { Transport } from "./Transport.js"
import type * as Waker from "./Waker.js"

/**
 * The mesh's API: what a broker calls on a push, a queue configuration or a maintenance flip, and
 * what it reads for the stats.
 *
 * @example
 * ```ts
 * import { Effect, SubscriptionRef } from "effect"
 * import { MeshTest } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const network = yield* MeshTest.network
 *   const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"] })
 *   const b = yield* MeshTest.node(network, { serverId: "b", peers: ["a"] })
 *   yield* MeshTest.eventually(MeshTest.linked(a))
 *   // Flip maintenance on `a`: every peer hears it.
 *   yield* a.mesh.setMaintenance(true)
 *   yield* MeshTest.eventually(SubscriptionRef.get(b.flags.maintenance))
 * })
 *
 * Effect.runPromise(Effect.scoped(program))
 * ```
 *
 * @since 0.1.0
 * @category models
 */
export interface MeshShape {
  /**
   * Lifecycle: everything below lives in the scope that built the mesh. Once that scope has closed,
   * every call that would send fails with `MeshClosedError` (the synchronous twin throws it), `stats`
   * reports `running: false`, and the `events` stream ends; nothing waits or hangs. The check is made
   * when the call's effect is built, and an effect built before the close and run after it does
   * nothing. See docs/effect.md, "Shutting down", for the order a broker should use.
   */
  readonly serverId: string
  /** Enabled and at least one peer: the listener is bound and the dialers run. */
  readonly active: boolean
  /** The bound mesh port, when active. */
  readonly port: Option.Option<number>
  /** A push committed: wake local pops on that queue and tell every peer (tag 1). */
  readonly messageAvailable: (
    item: Frame.QueueItemInput
  ) => Effect.Effect<void, InvalidInputError | MeshClosedError>
  /**
   * The synchronous twin of `messageAvailable`, for a caller outside any fiber (a socket handler):
   * the same effect, with no fiber hop. Throws `InvalidInputError` on bad input, `MeshClosedError`
   * once the mesh is closed.
   */
  readonly unsafeMessageAvailable: (item: Frame.QueueItemInput) => void
  /** A multi-partition push: local wakes, and one frame to every peer (tag 2). No-op when empty. */
  readonly messageAvailableBatch: (
    items: ReadonlyArray<Frame.QueueItemInput>
  ) => Effect.Effect<void, InvalidInputError | MeshClosedError>
  /**
   * A partition turned dirty. Coalesced: the distinct items marked within a flush window go out as one
   * `HOTLIST_DIRTY_BATCH` (tag 5). With `group`, the mark is for that consumer group's ring only (a
   * seek or a group-delete repair); a scoped and an unscoped mark of one partition are two hints.
   */
  readonly hotlistDirty: (
    item: Frame.HotItemInput
  ) => Effect.Effect<void, InvalidInputError | MeshClosedError>
  /**
   * An ephemeral-queue admin verb ran here: every peer applies it too (`EPH_ADMIN`, tag 20). The
   * tenant must be a UUID and the op one of `reset`, `delete`, `config_set`, as upstream requires.
   * Not applied locally: the caller already did.
   */
  readonly ephemeralAdmin: (command: {
    readonly op: Frame.EphOp
    readonly tenant: string
    readonly queue: string
  }) => Effect.Effect<void, InvalidInputError | MeshClosedError>
  /** A queue was configured: peers drop their cached settings for it (tag 10). */
  readonly queueConfigSet: (
    ref: Frame.QueueRefInput
  ) => Effect.Effect<void, InvalidInputError | MeshClosedError>
  /** A queue was deleted: peers drop their cached settings for it (tag 11). */
  readonly queueConfigDelete: (
    ref: Frame.QueueRefInput
  ) => Effect.Effect<void, InvalidInputError | MeshClosedError>
  /** Sets the local maintenance flag and tells every peer (tag 40). */
  readonly setMaintenance: (enabled: boolean) => Effect.Effect<void, MeshClosedError>
  /** Sets the local pop-maintenance flag and tells every peer (tag 41). */
  readonly setPopMaintenance: (enabled: boolean) => Effect.Effect<void, MeshClosedError>
  /** The body of the stats routes (spec "Observing it"). */
  readonly stats: Effect.Effect<MeshStats.MeshStats>
  /**
   * Every replica this node knows now: each configured peer with its outbound link, each server heard
   * from with its liveness, one member when the node knows they are the same (see `Membership`).
   */
  readonly members: Effect.Effect<ReadonlyArray<Membership.Member>>
  /**
   * The members now, then again every time a link goes up or down, a server turns alive or dead, a peer
   * joins or leaves, the lane goes up or down, or an entry is recognised as this node: for a host that
   * reacts to membership rather than polling `members`. Like `healthChanges`, it starts with the value
   * now.
   */
  readonly memberChanges: Stream.Stream<ReadonlyArray<Membership.Member>>
  /**
   * How well this node is connected now (`clustered`, `degraded`, `isolated`, `solo`; see
   * `MeshHealth`), and every change of it: what `/readyz` answers from, and what a broker can base its
   * own re-poll interval on.
   */
  readonly health: Effect.Effect<MeshHealth.Health>
  /** The health now, then every change (as `memberChanges` starts with the members now). */
  readonly healthChanges: Stream.Stream<MeshHealth.Health>
  /** What received frames did, peers coming and going, refused input. Subscribe before it matters. */
  readonly events: Stream.Stream<MeshEvent>
  /**
   * Calls `observer` synchronously for every event (of `tags`, when given) while the scope lasts,
   * straight from the receive path: the cheapest way to watch, for an observer that never blocks (the
   * CLI prints events so). An event of a kind nobody watches is never built.
   */
  readonly observe: (
    observer: (event: MeshEvent) => void,
    tags?: ReadonlyArray<MeshEvent["_tag"]>
  ) => Effect.Effect<void, never, Scope.Scope>
  /** Brings this node's Effect `Metric`s up to date with its counters (`/metrics` does it per scrape). */
  readonly syncMetrics: Effect.Effect<void>
}

/**
 * The mesh, as a host reaches it.
 *
 * @since 0.1.0
 * @category tags
 */
export class Mesh extends Context.Service<Mesh, MeshShape>()("queen-mesh/Mesh") {}

/**
 * The host's four services: what the mesh applies received frames to.
 *
 * @since 0.1.0
 * @category models
 */
export type HostServices = Runtime.HostServices

/**
 * What the mesh needs: its configuration, a transport, and the host's four services.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements = MeshConfig.MeshConfig | Transport | HostServices

/**
 * Options of the runtime's layers.
 *
 * @since 0.1.0
 * @category models
 */
export interface MeshOptions {
  /** The dialers: the delays between dials of one peer (default {@link reconnectSchedule}). */
  readonly peers?: { readonly reconnectSchedule?: Schedule.Schedule<unknown, LinkDown> }
  /** Bounds of the liveness map (default: 256 servers, forgotten after 10 minutes of silence). */
  readonly liveness?: { readonly maxEntries?: number; readonly pruneAfter?: Duration.Input }
  /**
   * How often the Effect metrics are synced in the background (default 10 s; every scrape syncs too).
   * `Duration.infinity` turns the background sync off, for a host whose every reader of the registry
   * calls `syncMetrics` first.
   */
  readonly metricsInterval?: Duration.Input
}

/**
 * The default delays between dials of one peer: 250 ms doubling, capped at 5 s, started afresh after
 * a session that was established (spec "Topology").
 *
 * @since 0.1.0
 * @category options
 */
export const reconnectSchedule: Schedule.Schedule<LinkDown, LinkDown> = Outbound.reconnectSchedule

/**
 * The mesh, given its configuration, a transport and the host's services; `options` tune the
 * runtime's layers.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (options: MeshOptions = {}): Layer.Layer<Mesh, TransportError, Requirements> =>
  Layer.unwrap(
    Effect.map(MeshConfig.MeshConfig, (config) =>
      Layer.effect(Mesh, Api.make).pipe(
        Layer.provide(Runtime.layer(options)),
        // Every log line of this node's fibers carries its server id.
        Layer.provide(annotateLogs("server_id", config.serverId))
      )
    )
  )

/**
 * The log annotations in force, with `key` added: provided to a layer, every fiber it builds and forks
 * logs with it (effect 3's `Layer.annotateLogs`).
 */
const annotateLogs = (key: string, value: string): Layer.Layer<never> =>
  Layer.effect(
    References.CurrentLogAnnotations,
    Effect.map(References.CurrentLogAnnotations, (annotations) => ({ ...annotations, [key]: value }))
  )

/**
 * The mesh alone: you provide `MeshConfig`, a `Transport` and the four host services.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Mesh, TransportError, Requirements> = layerWith()

/**
 * Options of the layers with the shipped host services.
 *
 * @since 0.1.0
 * @category models
 */
export interface LocalOptions extends MeshOptions {
  readonly waker?: LocalWaker.LocalWakerOptions
}

/**
 * The shipped in-memory host services, as the mesh's four services and under their own tags.
 *
 * @since 0.1.0
 * @category models
 */
export type LocalServices =
  | Waker.Waker
  | LocalWaker.LocalWaker
  | QueueConfigCache.QueueConfigCache
  | QueueConfigCache.MemoryQueueConfigCache
  | HotList.HotList
  | HotList.MemoryHotList
  | MaintenanceFlags.MaintenanceFlags
  | MeshHealth.MeshHealth

/**
 * The shipped in-memory host services: the parked-pop registry, the queue-config cache, the hot-list and
 * the maintenance flags; and the health value the mesh publishes and the registry reads (its
 * `degradedMaxWait` option).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHostLocal = (options: LocalWaker.LocalWakerOptions = {}): Layer.Layer<LocalServices> =>
  Layer.mergeAll(
    LocalWaker.layer(options),
    QueueConfigCache.layerMemory(
      options.defaultTenant === undefined ? {} : { defaultTenant: options.defaultTenant }
    ),
    HotList.layerMemory(),
    MaintenanceFlags.layer()
  ).pipe(Layer.provideMerge(MeshHealth.layer))

/**
 * The mesh with the shipped in-memory host services, which it also provides so the host can park pops
 * and read the flags, over whatever `Transport` is provided (exactly one: `TcpTransport.layer()`, a
 * `MemoryTransport` network's layer, `TlsTransport.layer(...)`, or your own).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerLocal = (
  options: LocalOptions = {}
): Layer.Layer<Mesh | LocalServices, TransportError, MeshConfig.MeshConfig | Transport> =>
  layerWith(options).pipe(Layer.provideMerge(layerHostLocal(options.waker)))

/**
 * {@link layerLocal} over the network: TCP, or TLS-PSK when `QUEEN_MESH_TLS=psk`
 * (`TcpTransport.layerConfig`); you provide `MeshConfig`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerTcp = (
  options: LocalOptions & { readonly tcp?: TcpTransport.TcpOptions } = {}
): Layer.Layer<Mesh | LocalServices, TransportError | TlsConfigError, MeshConfig.MeshConfig> =>
  layerLocal(options).pipe(Layer.provide(TcpTransport.layerConfig(options.tcp)))

/**
 * {@link layerTcp} configured from the current `ConfigProvider` (the process environment unless the
 * host provides another): what a broker composes.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options: LocalOptions & { readonly tcp?: TcpTransport.TcpOptions } = {}
): Layer.Layer<
  Mesh | LocalServices,
  TransportError | TlsConfigError | Config.ConfigError | MeshConfigError
> => layerTcp(options).pipe(Layer.provide(MeshConfig.layerConfig))

/**
 * {@link layerTcp} configured from the process environment, whatever `ConfigProvider` is current (the
 * CLI's choice; a host usually wants {@link layerConfig}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromEnv = (
  options: LocalOptions & { readonly tcp?: TcpTransport.TcpOptions } = {}
): Layer.Layer<
  Mesh | LocalServices,
  TransportError | TlsConfigError | Config.ConfigError | MeshConfigError
> => layerTcp(options).pipe(Layer.provide(MeshConfig.layerFromEnv))
