/**
 * The mesh as a service: the API a broker calls to send hints, over the runtime that carries them
 * (spec "The mesh", all of it). `Mesh.layer` builds the runtime's services once and provides them
 * itself, the way `Sharding.layer` provides its pieces: `Liveness` (the inbound-liveness map),
 * `Dispatch` (the spec's "effect on receipt"), `Listener` (the receive side) and `Peers` (one dialer
 * fiber per peer with its bounded queue), over `MeshEvents` (the event hub). Everything lives in the
 * layer's scope.
 *
 * When the mesh is not active (sync off, or no peers) nothing binds and nothing is sent; local wakes
 * still reach the host's waker.
 *
 * @since 0.1.0
 */
import {
  Clock,
  Context,
  type Duration,
  Effect,
  Either,
  Layer,
  Option,
  type Scope,
  type Stream,
  SubscriptionRef
} from "effect"
import * as Dispatch from "./Dispatch.js"
import * as Frame from "./Frame.js"
import * as HotList from "./HotList.js"
import { loop } from "./internal/loop.js"
import * as Quick from "./internal/quick.js"
import * as SelfDials from "./internal/selfDials.js"
import { VERSION } from "./internal/version.js"
import * as Listener from "./Listener.js"
import * as Liveness from "./Liveness.js"
import * as MaintenanceFlags from "./MaintenanceFlags.js"
import * as MeshConfig from "./MeshConfig.js"
import { type HandshakeError, InvalidInputError, MeshClosedError, type TransportError } from "./MeshError.js"
import * as MeshEventModule from "./MeshEvent.js"
import { type MeshEvent, MeshEvents } from "./MeshEvent.js"
import * as MeshMetrics from "./MeshMetrics.js"
import type { MeshStats, RejectionStats } from "./MeshStats.js"
import * as Peers from "./Peers.js"
import * as QueueConfigCache from "./QueueConfigCache.js"
import * as TcpTransport from "./TcpTransport.js"
import * as TlsTransport from "./TlsTransport.js"
import { type Transport, Transport as TransportTag } from "./Transport.js"
import * as Waker from "./Waker.js"

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
   * nothing. See the README's "Shutting down" for the order a broker should use.
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
   * `HOTLIST_DIRTY_BATCH` (tag 5).
   */
  readonly hotlistDirty: (
    item: Frame.QueueItemInput
  ) => Effect.Effect<void, InvalidInputError | MeshClosedError>
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
  readonly stats: Effect.Effect<MeshStats>
  /** What received frames did, peers coming and going, refused input. Subscribe before it matters. */
  readonly events: Stream.Stream<MeshEvent>
  /**
   * Calls `observer` synchronously for every event while the scope lasts, straight from the receive
   * path: the cheapest way to watch, for an observer that never blocks (the CLI prints events so).
   */
  readonly observe: (observer: (event: MeshEvent) => void) => Effect.Effect<void, never, Scope.Scope>
  /** Brings this node's Effect `Metric`s up to date with its counters (`/metrics` does it per scrape). */
  readonly syncMetrics: Effect.Effect<void>
}

/**
 * The mesh, as a host reaches it.
 *
 * @since 0.1.0
 * @category tags
 */
export class Mesh extends Context.Tag("queen-mesh/Mesh")<Mesh, MeshShape>() {}

/** Distinct pending hot-list items that force a flush before the window ends. */
const HOTLIST_FLUSH_AT = 10_000

const invalid = (detail: string) => new InvalidInputError({ detail })

/**
 * The host's four services: what the mesh applies received frames to.
 *
 * @since 0.1.0
 * @category models
 */
export type HostServices =
  | Waker.Waker
  | QueueConfigCache.QueueConfigCache
  | HotList.HotList
  | MaintenanceFlags.MaintenanceFlags

/**
 * What the mesh needs: its configuration, a transport, and the host's four services.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements = MeshConfig.MeshConfig | Transport | HostServices

const rejectionStats = (r: Readonly<Record<HandshakeError.Reason, number>>): RejectionStats => ({
  bad_mac: r.BadMac,
  not_hello: r.NotHello,
  invalid_hello: r.InvalidHello,
  oversized_hello: r.OversizedHello,
  missing_server_id: r.MissingServerId,
  timeout: r.Timeout,
  closed: r.Closed,
  bad_challenge_answer: r.BadChallengeAnswer,
  wrong_receiver: r.WrongReceiver,
  wrong_label: r.WrongLabel,
  legacy_refused: r.LegacyRefused,
  too_many_connections: r.TooManyConnections,
  own_server_id: r.OwnServerId,
  tls_handshake: r.TlsHandshake
})

/**
 * The API over running services, in the current scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<
  MeshShape,
  never,
  | Scope.Scope
  | MeshConfig.MeshConfig
  | Waker.Waker
  | MaintenanceFlags.MaintenanceFlags
  | MeshEvents
  | Liveness.Liveness
  | Listener.Listener
  | Peers.Peers
  | MeshMetrics.MeshMetrics
> = Effect.gen(function* () {
  const config = yield* MeshConfig.MeshConfig
  const waker = yield* Waker.Waker
  const flags = yield* MaintenanceFlags.MaintenanceFlags
  const events = yield* MeshEvents
  const liveness = yield* Liveness.Liveness
  const listener = yield* Listener.Listener
  const peers = yield* Peers.Peers
  const metrics = yield* MeshMetrics.MeshMetrics
  const startedAt = yield* Clock.currentTimeMillis
  const active = Option.isSome(listener.port)
  const wakeNow = waker.unsafeWake
  // Set first thing when the scope closes (finalizers run last-added first, and this one is added
  // last of the mesh's own), so no call slips in while the links are being torn down.
  let closed = false
  const closedError = (operation: string) => new MeshClosedError({ operation })

  const broadcast = (frame: Frame.Frame): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (peers.size === 0) return Effect.void
      const encoded = Frame.encodeEither(frame)
      if (Either.isRight(encoded)) {
        peers.broadcast(encoded.right)
        return Effect.void
      }
      // Only a batch can outgrow the cap: send it in halves.
      if (
        (frame._tag === "MessageAvailableBatch" || frame._tag === "HotlistDirtyBatch") &&
        frame.items.length > 1
      ) {
        const half = Math.ceil(frame.items.length / 2)
        return Effect.zipRight(
          broadcast({ ...frame, items: frame.items.slice(0, half) }),
          broadcast({ ...frame, items: frame.items.slice(half) })
        )
      }
      return Effect.logWarning("dropped a frame larger than the 16 MiB cap").pipe(
        Effect.annotateLogs({ frame: frame._tag, length: encoded.left.length })
      )
    })

  // Hot-list marks, coalesced per flush window. The flush loop waits on `hotMarked` while nothing is
  // pending, so an idle mesh has no timer running.
  const pendingHot = new Map<string, Frame.QueueItem>()
  const hotMarked = yield* Effect.makeLatch(false)
  const flushHot = Effect.suspend(() => {
    hotMarked.unsafeClose()
    if (pendingHot.size === 0) return Effect.void
    const items = [...pendingHot.values()]
    pendingHot.clear()
    return broadcast({ _tag: "HotlistDirtyBatch", items })
  })
  if (active) {
    yield* loop("HotListFlush", Effect.zipRight(Effect.sleep(config.hotlistFlushWindow), flushHot), {
      before: hotMarked.await
    })
    yield* Effect.logInfo("mesh started").pipe(
      Effect.annotateLogs({
        port: Option.getOrElse(listener.port, () => 0),
        peers: config.peers.map(Peers.peerName).join(","),
        auth: config.auth,
        tls: config.tls
      })
    )
  } else {
    yield* Effect.logInfo("mesh inactive: only the in-process waker runs").pipe(
      Effect.annotateLogs({ reason: config.enabled ? "no_peers" : "disabled" })
    )
  }

  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      closed = true
    })
  )

  const stats: Effect.Effect<MeshStats> = Effect.gen(function* () {
    const maintenance_mode = yield* SubscriptionRef.get(flags.maintenance)
    const pop_maintenance_mode = yield* SubscriptionRef.get(flags.popMaintenance)
    const uptime_ms = (yield* Clock.currentTimeMillis) - startedAt
    if (Option.isNone(listener.port)) {
      return {
        enabled: false,
        reason: config.enabled ? "no_peers" : "disabled",
        server_id: config.serverId,
        transport: "tcp-mesh",
        version: VERSION,
        uptime_ms,
        maintenance_mode,
        pop_maintenance_mode
      } as const
    }
    const servers = yield* liveness.servers
    const links = yield* peers.links
    const counts = yield* listener.counts
    const alive = servers.filter((server) => server.alive).length
    const failures = Listener.handshakeFailuresOf(counts)
    let sent = 0
    let dropped = 0
    for (const link of links) {
      sent += link.written
      dropped += link.droppedFull + link.droppedDown + link.discarded
    }
    return {
      enabled: true,
      running: !closed,
      server_id: config.serverId,
      transport: "tcp-mesh",
      port: listener.port.value,
      version: VERSION,
      uptime_ms,
      auth: config.auth,
      tls: config.tls,
      peer_count: links.length,
      peers: links.map((link) => ({
        host: link.host,
        port: link.port,
        connected: link.connected,
        self: link.self,
        resolved: link.connected,
        resolved_ip: Option.getOrNull(link.resolvedIp),
        last_resolved_ip: Option.getOrNull(link.lastResolvedIp),
        queued: link.queued,
        queued_bytes: link.queuedBytes,
        handed: link.handed,
        written: link.written,
        dropped_full: link.droppedFull,
        dropped_down: link.droppedDown,
        discarded: link.discarded,
        reconnects: link.reconnects,
        last_error: Option.getOrNull(link.lastError)
      })),
      servers_alive: alive,
      servers_dead: servers.length - alive,
      servers: servers.map((server) => ({
        server_id: server.serverId,
        alive: server.alive,
        last_seen_ms_ago: server.silentFor
      })),
      messages_sent: sent,
      messages_received: counts.framesRead,
      messages_dropped: dropped,
      handshake_failures: failures,
      signature_failures: failures,
      sequence_rejections: 0,
      frames_dispatched: counts.framesDispatched,
      frames_invalid: counts.framesInvalid,
      frames_unknown: counts.framesUnknown,
      frames_oversized: counts.framesOversized,
      items_invalid: counts.itemsInvalid,
      rejections: rejectionStats(counts.rejections),
      inbound: {
        open: counts.inboundOpen,
        authenticated: counts.inboundOpenAuthenticated,
        authenticated_total: counts.inboundAuthenticated,
        closed_silent: counts.closedSilent,
        closed_idle: counts.closedIdle,
        legacy_accepted: counts.legacyAccepted,
        self_dials: counts.selfDials
      },
      maintenance_mode,
      pop_maintenance_mode
    } as const
  })

  // The hot path of a push: validate, encode once, hand the bytes to every link, wake local pops.
  const unsafeMessageAvailable = (input: Frame.QueueItemInput): void => {
    if (closed) throw closedError("messageAvailable")
    const item = Frame.validItem(input)
    if (Either.isLeft(item)) throw invalid(item.left)
    // Peers first: their frames leave now, and a local pop woken here runs only after this call anyway.
    if (peers.size > 0) peers.broadcast(Quick.encodeMessageAvailable(item.right))
    if (wakeNow !== undefined) wakeNow(item.right)
    else Effect.runFork(waker.wake(item.right))
  }

  // Validation is pure, so it happens as the effect is built: the effect itself is then one `sync`
  // step, the cheapest a fiber can run (a `suspend` costs about half as much again, per call).
  const messageAvailable: MeshShape["messageAvailable"] = (input) => {
    if (closed) return Effect.fail(closedError("messageAvailable"))
    const item = Frame.validItem(input)
    if (Either.isLeft(item)) return Effect.fail(invalid(item.left))
    const valid = item.right
    if (wakeNow === undefined) {
      return Effect.zipRight(waker.wake(valid), broadcast({ _tag: "MessageAvailable", ...valid }))
    }
    return Effect.sync(() => {
      if (closed) return
      if (peers.size > 0) peers.broadcast(Quick.encodeMessageAvailable(valid))
      wakeNow(valid)
    })
  }

  const messageAvailableBatch: MeshShape["messageAvailableBatch"] = (inputs) =>
    Effect.suspend((): Effect.Effect<void, InvalidInputError | MeshClosedError> => {
      if (closed) return Effect.fail(closedError("messageAvailableBatch"))
      if (inputs.length === 0) return Effect.void
      const items: Array<Frame.QueueItem> = []
      for (const input of inputs) {
        const item = Frame.validItem(input)
        if (Either.isLeft(item)) return Effect.fail(invalid(item.left))
        items.push(item.right)
      }
      return Effect.zipRight(
        Effect.forEach(items, waker.wake, { discard: true }),
        broadcast({ _tag: "MessageAvailableBatch", items })
      )
    })

  const hotlistDirty: MeshShape["hotlistDirty"] = (input) =>
    Effect.suspend((): Effect.Effect<void, InvalidInputError | MeshClosedError> => {
      if (closed) return Effect.fail(closedError("hotlistDirty"))
      const item = Frame.validItem(input)
      if (Either.isLeft(item)) return Effect.fail(invalid(item.left))
      if (peers.size === 0) return Effect.void
      pendingHot.set(HotList.itemKey(item.right), item.right)
      hotMarked.unsafeOpen()
      return pendingHot.size >= HOTLIST_FLUSH_AT ? flushHot : Effect.void
    })

  const queueConfig =
    (tag: "QueueConfigSet" | "QueueConfigDelete"): MeshShape["queueConfigSet"] =>
    (input) =>
      Effect.suspend((): Effect.Effect<void, InvalidInputError | MeshClosedError> => {
        if (closed)
          return Effect.fail(closedError(tag === "QueueConfigSet" ? "queueConfigSet" : "queueConfigDelete"))
        const ref = Frame.validRef(input)
        return Either.isLeft(ref) ? Effect.fail(invalid(ref.left)) : broadcast({ _tag: tag, ...ref.right })
      })

  const mesh: MeshShape = {
    serverId: config.serverId,
    active,
    port: listener.port,
    messageAvailable,
    unsafeMessageAvailable,
    messageAvailableBatch,
    hotlistDirty,
    queueConfigSet: queueConfig("QueueConfigSet"),
    queueConfigDelete: queueConfig("QueueConfigDelete"),
    setMaintenance: (enabled) =>
      Effect.suspend(() =>
        closed
          ? Effect.fail(closedError("setMaintenance"))
          : Effect.zipRight(
              SubscriptionRef.set(flags.maintenance, enabled),
              broadcast({ _tag: "MaintenanceModeSet", enabled })
            )
      ),
    setPopMaintenance: (enabled) =>
      Effect.suspend(() =>
        closed
          ? Effect.fail(closedError("setPopMaintenance"))
          : Effect.zipRight(
              SubscriptionRef.set(flags.popMaintenance, enabled),
              broadcast({ _tag: "PopMaintenanceModeSet", enabled })
            )
      ),
    stats,
    events: events.events,
    observe: events.observe,
    syncMetrics: metrics.sync
  }
  return mesh
}).pipe(Effect.annotateLogs({ module: "Mesh" }))

/**
 * Options of the runtime's layers.
 *
 * @since 0.1.0
 * @category models
 */
export interface MeshOptions {
  /** The delays between dials of one peer (default: 250 ms doubling to 5 s; see `Peers`). */
  readonly peers?: Peers.PeersOptions
  /** Bounds of the liveness map (default: 256 servers, forgotten after 10 minutes of silence). */
  readonly liveness?: Omit<Liveness.LivenessOptions, "deadThreshold">
  /** How often the Effect metrics are synced in the background (default 1 s; every scrape syncs too). */
  readonly metricsInterval?: Duration.DurationInput
}

/**
 * The runtime's services, each built once: the event hub, liveness, dispatch, the listener (bound
 * before any dialer starts) and the peers.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRuntime = (
  options: MeshOptions = {}
): Layer.Layer<
  | MeshEvents
  | Liveness.Liveness
  | Dispatch.Dispatch
  | Listener.Listener
  | Peers.Peers
  | MeshMetrics.MeshMetrics,
  TransportError,
  Requirements
> =>
  MeshMetrics.layer(options.metricsInterval === undefined ? {} : { interval: options.metricsInterval }).pipe(
    Layer.provideMerge(Peers.layer(options.peers)),
    Layer.provideMerge(Listener.layer),
    Layer.provideMerge(Layer.merge(Liveness.layer(options.liveness), Dispatch.layer)),
    Layer.provideMerge(Layer.merge(MeshEventModule.layer, SelfDials.layer))
  )

/**
 * The mesh, given its configuration, a transport and the host's services; `options` tune the
 * runtime's layers.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerWith = (options: MeshOptions = {}): Layer.Layer<Mesh, TransportError, Requirements> =>
  Layer.unwrapEffect(
    Effect.map(MeshConfig.MeshConfig, (config) =>
      Layer.scoped(Mesh, make).pipe(
        Layer.provide(layerRuntime(options)),
        // Every log line of this node's fibers carries its server id.
        Layer.annotateLogs("server_id", config.serverId)
      )
    )
  )

/**
 * The mesh with the default runtime options.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Mesh, TransportError, Requirements> = layerWith()

/**
 * Options of the shipped in-memory host services.
 *
 * @since 0.1.0
 * @category models
 */
export interface LocalOptions extends MeshOptions {
  readonly waker?: Waker.LocalWakerOptions
}

/**
 * The shipped in-memory host services, as the mesh's four services and under their own tags.
 *
 * @since 0.1.0
 * @category models
 */
export type LocalServices =
  | Waker.Waker
  | Waker.LocalWaker
  | QueueConfigCache.QueueConfigCache
  | QueueConfigCache.MemoryQueueConfigCache
  | HotList.HotList
  | HotList.MemoryHotList
  | MaintenanceFlags.MaintenanceFlags

/**
 * The shipped in-memory host services: the parked-pop registry, the queue-config cache, the hot-list and
 * the maintenance flags.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHostLocal = (options: Waker.LocalWakerOptions = {}): Layer.Layer<LocalServices> =>
  Layer.mergeAll(
    Waker.layerLocal(options),
    QueueConfigCache.layerMemory(
      options.defaultTenant === undefined ? {} : { defaultTenant: options.defaultTenant }
    ),
    HotList.layerMemory(),
    MaintenanceFlags.layer()
  )

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
 * The transport `MeshConfig` asks for: TCP (`QUEEN_MESH_TLS=off`, the default) or TLS-PSK
 * (`QUEEN_MESH_TLS=psk`, keys derived from `QUEEN_SYNC_SECRET`), resolving names with the system's
 * DNS on every dial unless `options.resolver` says otherwise.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerTransport = (
  options: TcpTransport.TcpOptions = {}
): Layer.Layer<Transport, TlsTransport.TlsConfigError, MeshConfig.MeshConfig> =>
  Layer.unwrapEffect(
    Effect.map(MeshConfig.MeshConfig, (config) => {
      if (config.tls === "off") return TcpTransport.layer(options)
      let failures = 0
      return Layer.effect(
        TransportTag,
        Effect.map(
          TlsTransport.make({
            secret: config.secret,
            identity: config.serverId,
            ...(options.connectTimeout === undefined ? {} : { connectTimeout: options.connectTimeout }),
            handshakeTimeout: config.handshakeTimeout,
            ...(options.resolver === undefined ? {} : { resolve: options.resolver.resolve }),
            onHandshakeFailure: () => {
              failures++
            }
          }),
          (shape) => ({ ...shape, handshakeFailures: () => failures })
        )
      )
    })
  )

/**
 * {@link layerLocal} over the network: TCP, or TLS-PSK when `QUEEN_MESH_TLS=psk` (see
 * {@link layerTransport}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerTcp = (
  options: LocalOptions & { readonly tcp?: TcpTransport.TcpOptions } = {}
): Layer.Layer<Mesh | LocalServices, TransportError | TlsTransport.TlsConfigError, MeshConfig.MeshConfig> =>
  layerLocal(options).pipe(Layer.provide(layerTransport(options.tcp)))

/**
 * {@link layerTcp} configured from the process environment.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromEnv = (options: LocalOptions & { readonly tcp?: TcpTransport.TcpOptions } = {}) =>
  layerTcp(options).pipe(Layer.provide(MeshConfig.layerFromEnv))
