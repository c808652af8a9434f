/**
 * The mesh as a service: the API a broker calls to send hints, and the runtime that carries them
 * (spec "The mesh", all of it). `Mesh.layer` composes the listener, one dialer fiber per peer with its
 * bounded dropping queue, the liveness map and the hot-list flush fiber, and applies received frames
 * to the host's services. Everything lives in the layer's scope.
 *
 * When the mesh is not active (sync off, or no peers) nothing binds and nothing is sent; local wakes
 * still reach the host's waker.
 *
 * @since 0.1.0
 */
import {
  Context,
  Duration,
  Effect,
  Either,
  Layer,
  Option,
  PubSub,
  type Scope,
  Stream,
  SubscriptionRef
} from "effect"
import * as Dialer from "./Dialer.js"
import * as Frame from "./Frame.js"
import * as HotList from "./HotList.js"
import * as Listener from "./Listener.js"
import * as Liveness from "./Liveness.js"
import * as MaintenanceFlags from "./MaintenanceFlags.js"
import * as MeshConfig from "./MeshConfig.js"
import { InvalidInputError, type TransportError } from "./MeshError.js"
import type { MeshEvent } from "./MeshEvent.js"
import { Counters, type MeshStats } from "./MeshStats.js"
import * as QueueConfigCache from "./QueueConfigCache.js"
import * as TcpTransport from "./TcpTransport.js"
import type { Transport } from "./Transport.js"
import * as Waker from "./Waker.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface MeshShape {
  readonly serverId: string
  /** Enabled and at least one peer: the listener is bound and the dialers run. */
  readonly active: boolean
  /** The bound mesh port, when active. */
  readonly port: Option.Option<number>
  /** A push committed: wake local pops on that queue and tell every peer (tag 1). */
  readonly messageAvailable: (item: Frame.QueueItemInput) => Effect.Effect<void, InvalidInputError>
  /** A multi-partition push: local wakes, and one frame to every peer (tag 2). No-op when empty. */
  readonly messageAvailableBatch: (
    items: ReadonlyArray<Frame.QueueItemInput>
  ) => Effect.Effect<void, InvalidInputError>
  /**
   * A partition turned dirty. Coalesced: the distinct items marked within a flush window go out as one
   * `HOTLIST_DIRTY_BATCH` (tag 5).
   */
  readonly hotlistDirty: (item: Frame.QueueItemInput) => Effect.Effect<void, InvalidInputError>
  /** A queue was configured: peers drop their cached settings for it (tag 10). */
  readonly queueConfigSet: (ref: Frame.QueueRefInput) => Effect.Effect<void, InvalidInputError>
  /** A queue was deleted: peers drop their cached settings for it (tag 11). */
  readonly queueConfigDelete: (ref: Frame.QueueRefInput) => Effect.Effect<void, InvalidInputError>
  /** Sets the local maintenance flag and tells every peer (tag 40). */
  readonly setMaintenance: (enabled: boolean) => Effect.Effect<void>
  /** Sets the local pop-maintenance flag and tells every peer (tag 41). */
  readonly setPopMaintenance: (enabled: boolean) => Effect.Effect<void>
  /** The body of the stats routes (spec "Observing it"). */
  readonly stats: Effect.Effect<MeshStats>
  /** What received frames did, peers coming and going, refused input. Subscribe before it matters. */
  readonly events: Stream.Stream<MeshEvent>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Mesh extends Context.Tag("queen-mesh/Mesh")<Mesh, MeshShape>() {}

/** Events kept per subscriber before the oldest are discarded: observers never slow the mesh. */
const EVENT_BUFFER = 4096
/** Distinct pending hot-list items that force a flush before the window ends. */
const HOTLIST_FLUSH_AT = 10_000

const validItem = (input: Frame.QueueItemInput): Either.Either<Frame.QueueItem, InvalidInputError> => {
  if (typeof input.queue !== "string" || input.queue === "") {
    return Either.left(new InvalidInputError({ detail: "queue must be a non-empty string" }))
  }
  if (typeof input.partition !== "string") {
    return Either.left(new InvalidInputError({ detail: "partition must be a string" }))
  }
  return Either.right(Frame.queueItem(input))
}

const validRef = (input: Frame.QueueRefInput): Either.Either<Frame.QueueRef, InvalidInputError> =>
  typeof input.queue === "string" && input.queue !== ""
    ? Either.right(Frame.queueRef(input))
    : Either.left(new InvalidInputError({ detail: "queue must be a non-empty string" }))

/**
 * What the mesh needs: its configuration, a transport, and the host's four services.
 *
 * @since 0.1.0
 * @category models
 */
export type Requirements =
  | MeshConfig.MeshConfig
  | Transport
  | Waker.Waker
  | QueueConfigCache.QueueConfigCache
  | HotList.HotList
  | MaintenanceFlags.MaintenanceFlags

/**
 * Starts the mesh in the current scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make: Effect.Effect<MeshShape, TransportError, Scope.Scope | Requirements> = Effect.gen(
  function* () {
    const config = yield* MeshConfig.MeshConfig
    const waker = yield* Waker.Waker
    const cache = yield* QueueConfigCache.QueueConfigCache
    const hotList = yield* HotList.HotList
    const flags = yield* MaintenanceFlags.MaintenanceFlags
    const active = MeshConfig.isActive(config)
    const counters = new Counters()

    // Events: offered only while someone listens, so the receive path pays nothing otherwise. A
    // subscriber more than EVENT_BUFFER events behind misses the newest: observers never slow the mesh.
    const pubsub = yield* Effect.acquireRelease(PubSub.dropping<MeshEvent>(EVENT_BUFFER), PubSub.shutdown)
    let subscribers = 0
    const emit = (event: MeshEvent): void => {
      if (subscribers > 0) pubsub.unsafeOffer(event)
    }
    const publish = (event: MeshEvent) => Effect.sync(() => emit(event))
    const events = Stream.unwrapScoped(
      Effect.acquireRelease(
        Effect.map(PubSub.subscribe(pubsub), (subscription) => {
          subscribers++
          return Stream.fromQueue(subscription)
        }),
        () =>
          Effect.sync(() => {
            subscribers--
          })
      )
    )

    // The links to peers, each with its bounded dropping queue.
    const links = active
      ? yield* Effect.forEach(config.peers, (peer) => Dialer.makePeerLink(peer, config.sendQueueCapacity))
      : []
    const broadcastBytes = (bytes: Uint8Array) => {
      for (const link of links) {
        if (!link.offer(bytes)) counters.dropped++
      }
    }
    const broadcast = (frame: Frame.Frame): Effect.Effect<void> =>
      Effect.suspend(() => {
        if (links.length === 0) return Effect.void
        const encoded = Frame.encodeEither(frame)
        if (Either.isRight(encoded)) {
          broadcastBytes(encoded.right)
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

    // Applying received frames to the host's services: synchronously where the host offers it (no
    // effect per frame on the receive path), else through the services' effects.
    const wakeNow = waker.unsafeWake
    const markNow = hotList.unsafeMarkDirty
    const apply = (from: string, frame: Frame.Frame): Effect.Effect<void> | undefined => {
      switch (frame._tag) {
        case "MessageAvailable": {
          const event: MeshEvent = { _tag: "Wake", from, item: frame }
          if (wakeNow === undefined) return Effect.zipRight(waker.wake(frame), publish(event))
          wakeNow(frame)
          emit(event)
          return undefined
        }
        case "MessageAvailableBatch": {
          if (wakeNow === undefined) {
            return Effect.forEach(
              frame.items,
              (item) => Effect.zipRight(waker.wake(item), publish({ _tag: "Wake", from, item })),
              { discard: true }
            )
          }
          for (const item of frame.items) {
            wakeNow(item)
            emit({ _tag: "Wake", from, item })
          }
          return undefined
        }
        case "HotlistDirtyBatch": {
          const announce = () => {
            for (const item of frame.items) emit({ _tag: "HotlistDirty", from, item })
          }
          if (markNow === undefined)
            return Effect.zipRight(hotList.markDirty(frame.items), Effect.sync(announce))
          markNow(frame.items)
          announce()
          return undefined
        }
        case "QueueConfigSet":
        case "QueueConfigDelete":
          return Effect.zipRight(
            cache.invalidate(frame),
            publish({
              _tag: "QueueConfigInvalidated",
              from,
              op: frame._tag === "QueueConfigSet" ? "set" : "delete",
              ref: { queue: frame.queue, tenant: frame.tenant }
            })
          )
        case "MaintenanceModeSet":
          return Effect.zipRight(
            SubscriptionRef.set(flags.maintenance, frame.enabled),
            publish({ _tag: "Maintenance", from, enabled: frame.enabled })
          )
        case "PopMaintenanceModeSet":
          return Effect.zipRight(
            SubscriptionRef.set(flags.popMaintenance, frame.enabled),
            publish({ _tag: "PopMaintenance", from, enabled: frame.enabled })
          )
        case "Heartbeat":
        case "Hello":
          return undefined
      }
    }

    const liveness = yield* Liveness.make({
      deadThreshold: config.deadThreshold,
      onTransition: ({ serverId, alive }) =>
        alive
          ? Effect.zipRight(
              Effect.logInfo("mesh peer alive").pipe(Effect.annotateLogs({ peer: serverId })),
              publish({ _tag: "PeerUp", serverId })
            )
          : Effect.zipRight(
              Effect.logWarning("mesh peer dead").pipe(
                Effect.annotateLogs({
                  peer: serverId,
                  dead_threshold_ms: Duration.toMillis(config.deadThreshold)
                })
              ),
              publish({ _tag: "PeerDown", serverId })
            )
    })

    // Hot-list marks, coalesced per flush window. The flush fiber sleeps on `hotMarked` while nothing is
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

    let port: Option.Option<number> = Option.none()
    if (active) {
      const bound = yield* Listener.make({
        host: config.bindHost,
        port: config.port,
        secret: config.secret,
        handshakeTimeout: config.handshakeTimeout,
        counters,
        liveness,
        apply,
        publish
      })
      port = Option.some(bound)
      yield* Effect.forEach(
        links,
        (link) =>
          Effect.forkScoped(
            Dialer.run(link, {
              serverId: config.serverId,
              secret: config.secret,
              heartbeatInterval: config.heartbeatInterval,
              counters
            })
          ),
        { discard: true }
      )
      yield* hotMarked.await.pipe(
        Effect.zipRight(Effect.sleep(config.hotlistFlushWindow)),
        Effect.zipRight(flushHot),
        Effect.forever,
        Effect.annotateLogs({ module: "HotListFlush" }),
        Effect.forkScoped
      )
      yield* Effect.logInfo("mesh started").pipe(
        Effect.annotateLogs({ port: bound, peers: config.peers.map((p) => `${p.host}:${p.port}`).join(",") })
      )
    } else {
      yield* Effect.logInfo("mesh inactive: only the in-process waker runs").pipe(
        Effect.annotateLogs({ reason: config.enabled ? "no_peers" : "disabled" })
      )
    }

    const stats: Effect.Effect<MeshStats> = Effect.gen(function* () {
      const maintenance_mode = yield* SubscriptionRef.get(flags.maintenance)
      const pop_maintenance_mode = yield* SubscriptionRef.get(flags.popMaintenance)
      if (Option.isNone(port)) {
        return {
          enabled: false,
          reason: config.enabled ? "no_peers" : "disabled",
          server_id: config.serverId,
          transport: "tcp-mesh",
          maintenance_mode,
          pop_maintenance_mode
        } as const
      }
      const servers = yield* liveness.servers
      const alive = servers.filter((server) => server.alive).length
      return {
        enabled: true,
        server_id: config.serverId,
        transport: "tcp-mesh",
        port: port.value,
        peer_count: links.length,
        peers: links.map((link) => ({
          host: link.peer.host,
          port: link.peer.port,
          connected: link.connected,
          resolved: Option.isSome(link.resolvedIp),
          resolved_ip: Option.getOrNull(link.resolvedIp),
          queued: link.queue.size
        })),
        servers_alive: alive,
        servers_dead: servers.length - alive,
        servers: servers.map((server) => ({
          server_id: server.serverId,
          alive: server.alive,
          last_seen_ms_ago: server.silentFor
        })),
        messages_sent: counters.sent,
        messages_received: counters.received,
        messages_dropped: counters.dropped,
        handshake_failures: counters.handshakeFailures,
        frames_invalid: counters.invalid,
        frames_unknown: counters.unknown,
        maintenance_mode,
        pop_maintenance_mode
      } as const
    })

    const messageAvailable: MeshShape["messageAvailable"] = (input) =>
      Either.match(validItem(input), {
        onLeft: Effect.fail,
        onRight: (item) => Effect.zipRight(waker.wake(item), broadcast({ _tag: "MessageAvailable", ...item }))
      })

    const messageAvailableBatch: MeshShape["messageAvailableBatch"] = (inputs) =>
      Effect.suspend(() => {
        if (inputs.length === 0) return Effect.void
        const items: Array<Frame.QueueItem> = []
        for (const input of inputs) {
          const item = validItem(input)
          if (Either.isLeft(item)) return Effect.fail(item.left)
          items.push(item.right)
        }
        return Effect.zipRight(
          Effect.forEach(items, waker.wake, { discard: true }),
          broadcast({ _tag: "MessageAvailableBatch", items })
        )
      })

    const hotlistDirty: MeshShape["hotlistDirty"] = (input) =>
      Either.match(validItem(input), {
        onLeft: Effect.fail,
        onRight: (item) =>
          Effect.suspend(() => {
            if (links.length === 0) return Effect.void
            pendingHot.set(HotList.itemKey(item), item)
            hotMarked.unsafeOpen()
            return pendingHot.size >= HOTLIST_FLUSH_AT ? flushHot : Effect.void
          })
      })

    const queueConfig =
      (tag: "QueueConfigSet" | "QueueConfigDelete"): MeshShape["queueConfigSet"] =>
      (input) =>
        Either.match(validRef(input), {
          onLeft: Effect.fail,
          onRight: (ref) => broadcast({ _tag: tag, ...ref })
        })

    const mesh: MeshShape = {
      serverId: config.serverId,
      active,
      port,
      messageAvailable,
      messageAvailableBatch,
      hotlistDirty,
      queueConfigSet: queueConfig("QueueConfigSet"),
      queueConfigDelete: queueConfig("QueueConfigDelete"),
      setMaintenance: (enabled) =>
        Effect.zipRight(
          SubscriptionRef.set(flags.maintenance, enabled),
          broadcast({ _tag: "MaintenanceModeSet", enabled })
        ),
      setPopMaintenance: (enabled) =>
        Effect.zipRight(
          SubscriptionRef.set(flags.popMaintenance, enabled),
          broadcast({ _tag: "PopMaintenanceModeSet", enabled })
        ),
      stats,
      events
    }
    return mesh
  }
).pipe(Effect.annotateLogs({ module: "Mesh" }))

/**
 * The mesh, given its configuration, a transport and the host's services.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<Mesh, TransportError, Requirements> = Layer.scoped(
  Mesh,
  Effect.flatMap(MeshConfig.MeshConfig, (config) => Effect.annotateLogs(make, { server_id: config.serverId }))
)

/**
 * Options of the shipped in-memory host services.
 *
 * @since 0.1.0
 * @category models
 */
export interface LocalOptions {
  readonly waker?: Waker.LocalWakerOptions
  readonly tcp?: TcpTransport.TcpOptions
}

/**
 * The shipped in-memory host services: the parked-pop registry, the queue-config cache, the hot-list and
 * the maintenance flags.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerHostLocal = (
  options: Waker.LocalWakerOptions = {}
): Layer.Layer<
  | Waker.Waker
  | Waker.LocalWaker
  | QueueConfigCache.QueueConfigCache
  | QueueConfigCache.MemoryQueueConfigCache
  | HotList.HotList
  | HotList.MemoryHotList
  | MaintenanceFlags.MaintenanceFlags
> =>
  Layer.mergeAll(
    Waker.layerLocal(options),
    QueueConfigCache.layerMemory(
      options.defaultTenant === undefined ? {} : { defaultTenant: options.defaultTenant }
    ),
    HotList.layerMemory(),
    MaintenanceFlags.layer()
  )

/**
 * A ready mesh over TCP with the shipped in-memory host services, which it also provides so the host
 * can park pops and read the flags.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerLocal = (
  options: LocalOptions = {}
): Layer.Layer<
  | Mesh
  | Waker.Waker
  | Waker.LocalWaker
  | QueueConfigCache.QueueConfigCache
  | QueueConfigCache.MemoryQueueConfigCache
  | HotList.HotList
  | HotList.MemoryHotList
  | MaintenanceFlags.MaintenanceFlags,
  TransportError,
  MeshConfig.MeshConfig
> =>
  layer.pipe(
    Layer.provideMerge(layerHostLocal(options.waker)),
    Layer.provide(TcpTransport.layer(options.tcp))
  )

/**
 * `layerLocal` configured from the process environment.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerFromEnv = (options: LocalOptions = {}) =>
  layerLocal(options).pipe(Layer.provide(MeshConfig.layerFromEnv))
