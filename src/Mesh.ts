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
  type ConfigError,
  Context,
  type Duration,
  Effect,
  Either,
  Layer,
  Option,
  Redacted,
  type Schedule,
  type Scope,
  Stream,
  SubscriptionRef
} from "effect"
import type * as Frame from "./Frame.js"
import * as HotList from "./HotList.js"
import * as Keyring from "./internal/keyring.js"
import * as Lane from "./internal/lane/carrier.js"
import * as Listener from "./internal/links/listener.js"
import * as Liveness from "./internal/links/liveness.js"
import * as Outbound from "./internal/links/outboundLink.js"
import * as Peers from "./internal/links/peers.js"
import * as SelfDials from "./internal/links/selfDials.js"
import * as HealthRef from "./internal/membership/healthRef.js"
import * as HealthTracker from "./internal/membership/healthTracker.js"
import { membersOf } from "./internal/membership/membership.js"
import * as Topology from "./internal/membership/topology.js"
import * as Dispatch from "./internal/mesh/dispatch.js"
import * as EphCounts from "./internal/mesh/ephCounts.js"
import * as MeshMetrics from "./internal/metrics/metricsSync.js"
import { VERSION } from "./internal/version.js"
import * as Codec from "./internal/wire/codec.js"
import * as Frames from "./internal/wire/frames.js"
import * as LocalWaker from "./LocalWaker.js"
import * as MaintenanceFlags from "./MaintenanceFlags.js"
import type * as Membership from "./Membership.js"
import * as MeshConfig from "./MeshConfig.js"
import {
  InvalidInputError,
  type LinkDown,
  MeshClosedError,
  type MeshConfigError,
  type TlsConfigError,
  type TransportError
} from "./MeshError.js"
import * as MeshEventModule from "./MeshEvent.js"
import { type MeshEvent, MeshEvents } from "./MeshEvent.js"
import * as MeshHealth from "./MeshHealth.js"
import * as MeshStats from "./MeshStats.js"
import * as QueueConfigCache from "./QueueConfigCache.js"
import * as TcpTransport from "./TcpTransport.js"
import type { Transport } from "./Transport.js"
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
export class Mesh extends Context.Tag("queen-mesh/Mesh")<Mesh, MeshShape>() {}

const invalid = (detail: string) => new InvalidInputError({ detail })

/** A push, built once for every push to the same partition (see `pushOf` in `make`). */
interface Push {
  readonly item: Frame.QueueItem
  readonly bytes: Uint8Array
  readonly effect: Effect.Effect<void>
}

/** Pushes kept at most: partitions pushed to lately. */
const PUSHES_KEPT = 1024

/**
 * Pushes by queue, partition and tenant (absent: `undefined`), in nested maps keyed by the caller's own
 * strings, so a lookup builds nothing. Only string names are kept (anything else takes the slow path
 * and its error); the table is dropped whole when it holds `PUSHES_KEPT`.
 */
class PushTable {
  private readonly byQueue = new Map<string, Map<string, Map<string | undefined, Push>>>()
  private size = 0

  /** The tenant of an input as a key: `undefined` for none, `null` for one that is not a string. */
  private static tenantKey(input: Frame.QueueItemInput): string | undefined | null {
    let tenant = input.tenant
    if (typeof tenant === "object" && tenant !== null) tenant = Option.getOrUndefined(tenant)
    if (tenant === undefined || tenant === null || tenant === "") return undefined
    return typeof tenant === "string" ? tenant : null
  }

  get(input: Frame.QueueItemInput): Push | undefined {
    const { queue, partition } = input
    if (typeof queue !== "string" || typeof partition !== "string") return undefined
    const tenant = PushTable.tenantKey(input)
    if (tenant === null) return undefined
    return this.byQueue.get(queue)?.get(partition)?.get(tenant)
  }

  set(input: Frame.QueueItemInput, push: Push): void {
    const { queue, partition } = input
    if (typeof queue !== "string" || typeof partition !== "string") return
    const tenant = PushTable.tenantKey(input)
    if (tenant === null) return
    if (this.size >= PUSHES_KEPT) {
      this.byQueue.clear()
      this.size = 0
    }
    let byPartition = this.byQueue.get(queue)
    if (byPartition === undefined) {
      byPartition = new Map()
      this.byQueue.set(queue, byPartition)
    }
    let byTenant = byPartition.get(partition)
    if (byTenant === undefined) {
      byTenant = new Map()
      byPartition.set(partition, byTenant)
    }
    byTenant.set(tenant, push)
    this.size++
  }
}

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
  | EphCounts.EphCounts
  | Lane.Lane
  | Topology.Topology
  | HealthRef.HealthRef
> = Effect.gen(function* () {
  const config = yield* MeshConfig.MeshConfig
  const waker = yield* Waker.Waker
  const flags = yield* MaintenanceFlags.MaintenanceFlags
  const events = yield* MeshEvents
  const liveness = yield* Liveness.Liveness
  const listener = yield* Listener.Listener
  const peers = yield* Peers.Peers
  const metrics = yield* MeshMetrics.MeshMetrics
  const ephCounts = yield* EphCounts.EphCounts
  const lane = Option.getOrUndefined(yield* Lane.Lane)
  const topology = yield* Topology.Topology
  const tenants = config.tenants
  const keys = Keyring.fromSecrets(config.secret, config.acceptedSecrets)
  const startedAt = yield* Clock.currentTimeMillis
  // The TCP mesh (its listener bound), the lane, or both.
  const active = Option.isSome(listener.port) || lane !== undefined
  // Where a broadcast frame goes: every link, and the lane. Chosen once, so a push tests nothing more.
  const send: (bytes: Uint8Array) => void =
    lane === undefined
      ? peers.broadcast
      : (bytes) => {
          peers.broadcast(bytes)
          lane.offer(bytes)
        }
  const hasReceivers = lane === undefined ? () => peers.size > 0 : () => true
  const wakeNow = Waker.syncWakeOf(waker)
  // Set first thing when the scope closes (finalizers run last-added first, and this one is added
  // last of the mesh's own), so no call slips in while the links are being torn down.
  let closed = false
  const closedError = (operation: string) => new MeshClosedError({ operation })

  const broadcast = (frame: Frame.Frame): Effect.Effect<void> =>
    Effect.suspend(() => {
      if (!hasReceivers()) return Effect.void
      const encoded = Codec.encodeEither(frame)
      if (Either.isRight(encoded)) {
        send(encoded.right)
        return Effect.void
      }
      // Only a batch can outgrow the cap: send it in halves.
      if (frame._tag === "MessageAvailableBatch" && frame.items.length > 1) {
        const half = Math.ceil(frame.items.length / 2)
        return Effect.zipRight(
          broadcast({ _tag: frame._tag, items: frame.items.slice(0, half) }),
          broadcast({ _tag: frame._tag, items: frame.items.slice(half) })
        )
      }
      if (frame._tag === "HotlistDirtyBatch" && frame.items.length > 1) {
        const half = Math.ceil(frame.items.length / 2)
        return Effect.zipRight(
          broadcast({ _tag: frame._tag, items: frame.items.slice(0, half) }),
          broadcast({ _tag: frame._tag, items: frame.items.slice(half) })
        )
      }
      return Effect.logWarning("dropped a frame larger than the 16 MiB cap").pipe(
        Effect.annotateLogs({ frame: frame._tag, length: encoded.left.length })
      )
    })

  // Hot-list marks, coalesced per flush window (only while there are peers to tell).
  const hotMarks = active
    ? yield* HotList.makeCoalescer({
        window: config.hotlistFlushWindow,
        send: (items) => broadcast({ _tag: "HotlistDirtyBatch", items })
      })
    : undefined
  if (active) {
    yield* Effect.logInfo("mesh started").pipe(
      Effect.annotateLogs({
        port: Option.getOrElse(listener.port, () => "none"),
        peers: config.peers.map(MeshConfig.peerName).join(","),
        discovery: Option.match(topology.discovery, { onNone: () => "none", onSome: (d) => d.source }),
        lane: lane === undefined ? "none" : lane.kind,
        auth: config.auth,
        tls: config.tls
      })
    )
    if (Redacted.value(config.secret) === "") {
      yield* Effect.logWarning(
        "mesh in open mode: no secret, so any HELLO (and any lane notification) is believed"
      )
    }
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

  const laneMembers = lane === undefined ? Effect.succeed([]) : lane.members
  const members: Effect.Effect<ReadonlyArray<Membership.Member>> = Effect.zipWith(
    Effect.zip(peers.links, liveness.servers),
    laneMembers,
    ([links, servers], onLane) => membersOf(links, servers, onLane)
  )
  const laneStatus: Effect.Effect<MeshHealth.Health["lane"]> =
    lane === undefined ? Effect.succeed("none") : lane.status

  // Health: kept current from the membership, the lane's status and discovery's record; an inactive
  // mesh is `solo` for good.
  const health = yield* HealthRef.HealthRef
  if (active) {
    yield* HealthTracker.track({
      health,
      members,
      lane: laneStatus,
      discovery: Effect.map(peers.discovery, (d) =>
        Option.isNone(d) ? "none" : d.value.found ? "found" : "nothing_found"
      ),
      startupWindow: config.deadThreshold,
      events
    })
  } else {
    yield* SubscriptionRef.set(health, MeshHealth.inactive(config.enabled))
  }

  const stats: Effect.Effect<MeshStats.MeshStats> = Effect.gen(function* () {
    const maintenance_mode = yield* SubscriptionRef.get(flags.maintenance)
    const pop_maintenance_mode = yield* SubscriptionRef.get(flags.popMaintenance)
    const uptime_ms = (yield* Clock.currentTimeMillis) - startedAt
    if (!active) {
      return {
        enabled: false,
        reason: config.enabled ? "no_peers" : "disabled",
        server_id: config.serverId,
        transport: "tcp-mesh",
        version: VERSION,
        uptime_ms,
        health: yield* SubscriptionRef.get(health),
        maintenance_mode,
        pop_maintenance_mode
      } as const
    }
    const membership = yield* peers.membershipCounts
    const discovery = yield* peers.discovery
    const now = yield* SubscriptionRef.get(health)
    return MeshStats.make({
      serverId: config.serverId,
      port: Option.getOrNull(listener.port),
      running: !closed,
      version: VERSION,
      uptimeMs: uptime_ms,
      auth: config.auth,
      tls: config.tls,
      members: yield* members,
      counters: yield* listener.counts,
      ephAdmin: { sent: { ...ephCounts.sent }, received: { ...ephCounts.received } },
      keyId: keys === "open" ? null : keys.primary.id,
      acceptedKeyIds: keys === "open" ? [] : keys.accepted.map((key) => key.id),
      health: now,
      membersJoined: membership.joined,
      membersLeft: membership.left,
      discovery: Option.match(discovery, {
        onNone: () => null,
        onSome: (d) => ({
          source: d.source,
          rounds: d.rounds,
          failed_rounds: d.failedRounds,
          last_error: Option.getOrNull(d.lastError)
        })
      }),
      lane: lane === undefined ? null : yield* lane.stats,
      maintenance: maintenance_mode,
      popMaintenance: pop_maintenance_mode
    })
  })

  // The hot path of a push: validate, encode once, hand the bytes to every link, wake local pops.
  // A push to a partition is usually followed by more pushes to it: the validated item, its encoded
  // frame and (with a synchronous waker) the very effect that sends it are built once and kept, so a
  // repeated push allocates nothing but its key. Bounded: the table is dropped whole when full.
  const pushes = new PushTable()
  const pushOf = (input: Frame.QueueItemInput): Push | InvalidInputError => {
    const known = pushes.get(input)
    if (known !== undefined) return known
    const item = Frames.validItem(input, tenants)
    if (Either.isLeft(item)) return invalid(item.left)
    const valid = item.right
    const bytes = Codec.encodeMessageAvailable(valid)
    const push: Push = {
      item: valid,
      bytes,
      effect:
        wakeNow === undefined
          ? Effect.suspend(() =>
              closed
                ? Effect.void
                : Effect.zipRight(
                    Effect.sync(() => {
                      if (hasReceivers()) send(bytes)
                    }),
                    waker.wake(valid)
                  )
            )
          : Effect.sync(() => {
              if (closed) return
              if (hasReceivers()) send(bytes)
              wakeNow(valid)
            })
    }
    pushes.set(input, push)
    return push
  }

  // The hot path of a push: validate, encode once, hand the bytes to every link, wake local pops.
  const unsafeMessageAvailable = (input: Frame.QueueItemInput): void => {
    if (closed) throw closedError("messageAvailable")
    const push = pushOf(input)
    if (push instanceof InvalidInputError) throw push
    // Peers first: their frames leave now, and a local pop woken here runs only after this call anyway.
    if (hasReceivers()) send(push.bytes)
    if (wakeNow !== undefined) wakeNow(push.item)
    else Effect.runFork(waker.wake(push.item))
  }

  // Validation is pure, so it happens as the effect is built; the effect itself is one `sync` step,
  // the cheapest a fiber can run, and the same object for every push to the same partition.
  const messageAvailable: MeshShape["messageAvailable"] = (input) => {
    if (closed) return Effect.fail(closedError("messageAvailable"))
    const push = pushOf(input)
    return push instanceof InvalidInputError ? Effect.fail(push) : push.effect
  }

  const messageAvailableBatch: MeshShape["messageAvailableBatch"] = (inputs) =>
    Effect.suspend((): Effect.Effect<void, InvalidInputError | MeshClosedError> => {
      if (closed) return Effect.fail(closedError("messageAvailableBatch"))
      if (inputs.length === 0) return Effect.void
      const items: Array<Frame.QueueItem> = []
      for (const input of inputs) {
        const item = Frames.validItem(input, tenants)
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
      const item = Frames.validHotItem(input, tenants)
      if (Either.isLeft(item)) return Effect.fail(invalid(item.left))
      return hotMarks === undefined ? Effect.void : hotMarks.mark(item.right)
    })

  const ephemeralAdmin: MeshShape["ephemeralAdmin"] = (input) =>
    Effect.suspend((): Effect.Effect<void, InvalidInputError | MeshClosedError> => {
      if (closed) return Effect.fail(closedError("ephemeralAdmin"))
      const frame = Frames.validEphAdmin(input)
      if (Either.isLeft(frame)) return Effect.fail(invalid(frame.left))
      ephCounts.sent[frame.right.op]++
      return broadcast(frame.right)
    })

  const queueConfig =
    (tag: "QueueConfigSet" | "QueueConfigDelete"): MeshShape["queueConfigSet"] =>
    (input) =>
      Effect.suspend((): Effect.Effect<void, InvalidInputError | MeshClosedError> => {
        if (closed)
          return Effect.fail(closedError(tag === "QueueConfigSet" ? "queueConfigSet" : "queueConfigDelete"))
        const ref = Frames.validRef(input, tenants)
        return Either.isLeft(ref) ? Effect.fail(invalid(ref.left)) : broadcast({ _tag: tag, ...ref.right })
      })

  /** A flag set here and on every peer (tags 40 and 41). */
  const setFlag =
    (
      operation: string,
      flag: SubscriptionRef.SubscriptionRef<boolean>,
      tag: "MaintenanceModeSet" | "PopMaintenanceModeSet"
    ) =>
    (enabled: boolean): Effect.Effect<void, MeshClosedError> =>
      Effect.suspend(() =>
        closed
          ? Effect.fail(closedError(operation))
          : Effect.zipRight(SubscriptionRef.set(flag, enabled), broadcast({ _tag: tag, enabled }))
      )

  const mesh: MeshShape = {
    serverId: config.serverId,
    active,
    port: listener.port,
    messageAvailable,
    unsafeMessageAvailable,
    messageAvailableBatch,
    hotlistDirty,
    ephemeralAdmin,
    queueConfigSet: queueConfig("QueueConfigSet"),
    queueConfigDelete: queueConfig("QueueConfigDelete"),
    setMaintenance: setFlag("setMaintenance", flags.maintenance, "MaintenanceModeSet"),
    setPopMaintenance: setFlag("setPopMaintenance", flags.popMaintenance, "PopMaintenanceModeSet"),
    stats,
    members,
    // Subscribed before the members are read, so no change falls between the two.
    memberChanges: Stream.unwrapScoped(
      Effect.map(events.subscribe, (subscription) =>
        Stream.concat(
          Stream.fromEffect(members),
          Stream.fromQueue(subscription).pipe(
            Stream.filter(MeshEventModule.isMembershipChange),
            Stream.mapEffect(() => members)
          )
        )
      )
    ),
    health: SubscriptionRef.get(health),
    healthChanges: health.changes,
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
  /** The dialers: the delays between dials of one peer (default {@link reconnectSchedule}). */
  readonly peers?: { readonly reconnectSchedule?: Schedule.Schedule<unknown, LinkDown> }
  /** Bounds of the liveness map (default: 256 servers, forgotten after 10 minutes of silence). */
  readonly liveness?: { readonly maxEntries?: number; readonly pruneAfter?: Duration.DurationInput }
  /** How often the Effect metrics are synced in the background (default 1 s; every scrape syncs too). */
  readonly metricsInterval?: Duration.DurationInput
}

/**
 * The default delays between dials of one peer: 250 ms doubling, capped at 5 s, started afresh after
 * a session that was established (spec "Topology").
 *
 * @since 0.1.0
 * @category options
 */
export const reconnectSchedule: Schedule.Schedule<LinkDown, LinkDown> = Outbound.reconnectSchedule

/** The runtime's services, each built once and provided only to the mesh itself. */
const layerRuntime = (options: MeshOptions) =>
  MeshMetrics.layer(options.metricsInterval === undefined ? {} : { interval: options.metricsInterval }).pipe(
    Layer.provideMerge(Peers.layer(options.peers)),
    Layer.provideMerge(Listener.layer),
    Layer.provideMerge(Lane.layer),
    Layer.provideMerge(Layer.merge(Liveness.layer(options.liveness), Dispatch.layer)),
    Layer.provideMerge(
      Layer.mergeAll(MeshEventModule.layer, SelfDials.layer, EphCounts.layer, Topology.layer, HealthRef.layer)
    )
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
  TransportError | TlsConfigError | ConfigError.ConfigError | MeshConfigError
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
  TransportError | TlsConfigError | ConfigError.ConfigError | MeshConfigError
> => layerTcp(options).pipe(Layer.provide(MeshConfig.layerFromEnv))
