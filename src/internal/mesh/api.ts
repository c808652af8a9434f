/**
 * The mesh's API over its running services: what `Mesh.layer` puts behind the `Mesh` tag. Each call
 * goes to the unit that owns it: a push to the push path, every other frame through the broadcaster
 * (hot-list marks coalesced first), the counts and the membership to the stats assembly, the health to
 * its tracker. Once the layer's scope has closed every call that would send fails with
 * `MeshClosedError` (the lifecycle is set first thing when it closes).
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as HotList from "../../HotList.js"
import * as MaintenanceFlags from "../../MaintenanceFlags.js"
import type * as Membership from "../../Membership.js"
import * as MeshConfig from "../../MeshConfig.js"
import { InvalidInputError, MeshClosedError } from "../../MeshError.js"
import * as MeshEvent from "../../MeshEvent.js"
import type * as MeshStats from "../../MeshStats.js"
import * as Waker from "../../Waker.js"
import * as Keyring from "../keyring.js"
import { RunningLane } from "../lane/running.js"
import { Listener } from "../links/listener.js"
import { Peers } from "../links/peers.js"
import { HealthTracker } from "../membership/healthTracker.js"
import * as MembershipModel from "../membership/membership.js"
import { MetricsSync } from "../metrics/metricsSync.js"
import { VERSION } from "../version.js"
import * as Frames from "../wire/frames.js"
import type { EphOp, QueueItem } from "../wire/payloads.js"
import { Broadcaster } from "./broadcaster.js"
import { Dispatch } from "./dispatch.js"
import { type Lifecycle, PushPath } from "./pushPath.js"
import * as StatsBody from "./statsBody.js"

const invalid = (detail: string) => new InvalidInputError({ detail })
const closedError = (operation: string) => new MeshClosedError({ operation })

/** The API a host calls, in the current scope, over the runtime's services. */
export const make = Effect.gen(function* () {
  const config = yield* MeshConfig.MeshConfig
  const waker = yield* Waker.Waker
  const flags = yield* MaintenanceFlags.MaintenanceFlags
  const events = yield* MeshEvent.MeshEvents
  const listener = yield* Listener
  const peers = yield* Peers
  const dispatch = yield* Dispatch
  const lane = Option.getOrUndefined(yield* RunningLane)
  const health = yield* HealthTracker
  const metrics = yield* MetricsSync
  const members = yield* MembershipModel.current
  const tenants = config.tenants
  const startedAt = yield* Clock.currentTimeMillis
  // The TCP mesh (its listener bound), the lane, or both.
  const active = Option.isSome(listener.port) || lane !== undefined
  const out = new Broadcaster(peers, lane)
  const lifecycle: Lifecycle = { closed: false }
  const pushes = new PushPath(tenants, waker, out, lifecycle)

  // Hot-list marks, coalesced per flush window (only while there are peers to tell).
  const hotMarks = active
    ? yield* HotList.makeCoalescer({
        window: config.hotlistFlushWindow,
        send: (items) => out.frame({ _tag: "HotlistDirtyBatch", items })
      })
    : undefined
  yield* logStart(config, active, listener.port, lane?.kind, yield* peers.discovery)

  // Added last of the mesh's own finalizers, so it runs first: no call slips in while the links go.
  yield* Effect.addFinalizer(() =>
    Effect.sync(() => {
      lifecycle.closed = true
    })
  )

  const stats = StatsBody.gather({
    config,
    active,
    lifecycle,
    startedAt,
    version: VERSION,
    keys: Keyring.fromSecrets(config.secret, config.acceptedSecrets),
    flags,
    listener,
    peers,
    dispatch,
    lane,
    members,
    health: health.health
  })

  /** Fails once closed; otherwise the effect `f` builds. */
  const guarded =
    <A extends ReadonlyArray<unknown>, E>(
      operation: string,
      f: (...args: A) => Effect.Effect<void, E>
    ): ((...args: A) => Effect.Effect<void, E | MeshClosedError>) =>
    (...args) =>
      Effect.suspend(
        (): Effect.Effect<void, E | MeshClosedError> =>
          lifecycle.closed ? Effect.fail(closedError(operation)) : f(...args)
      )

  const messageAvailableBatch = guarded(
    "messageAvailableBatch",
    (inputs: ReadonlyArray<Frames.QueueItemInput>): Effect.Effect<void, InvalidInputError> => {
      if (inputs.length === 0) return Effect.void
      const items: Array<QueueItem> = []
      for (const input of inputs) {
        const item = Frames.validItem(input, tenants)
        if (Result.isFailure(item)) return Effect.fail(invalid(item.failure))
        items.push(item.success)
      }
      return Effect.andThen(
        Effect.forEach(items, waker.wake, { discard: true }),
        out.frame({ _tag: "MessageAvailableBatch", items })
      )
    }
  )

  const hotlistDirty = guarded(
    "hotlistDirty",
    (input: Frames.HotItemInput): Effect.Effect<void, InvalidInputError> => {
      const item = Frames.validHotItem(input, tenants)
      if (Result.isFailure(item)) return Effect.fail(invalid(item.failure))
      return hotMarks === undefined ? Effect.void : hotMarks.mark(item.success)
    }
  )

  const ephemeralAdmin = guarded(
    "ephemeralAdmin",
    (input: {
      readonly op: EphOp
      readonly tenant: string
      readonly queue: string
    }): Effect.Effect<void, InvalidInputError> => {
      const frame = Frames.validEphAdmin(input)
      if (Result.isFailure(frame)) return Effect.fail(invalid(frame.failure))
      dispatch.ephAdmin.sent(frame.success.op)
      return out.frame(frame.success)
    }
  )

  const queueConfig = (tag: "QueueConfigSet" | "QueueConfigDelete") =>
    guarded(
      tag === "QueueConfigSet" ? "queueConfigSet" : "queueConfigDelete",
      (input: Frames.QueueRefInput): Effect.Effect<void, InvalidInputError> => {
        const ref = Frames.validRef(input, tenants)
        return Result.isFailure(ref)
          ? Effect.fail(invalid(ref.failure))
          : out.frame({ _tag: tag, ...ref.success })
      }
    )

  /** A flag set here and on every peer (tags 40 and 41). */
  const setFlag = (
    operation: string,
    flag: SubscriptionRef.SubscriptionRef<boolean>,
    tag: "MaintenanceModeSet" | "PopMaintenanceModeSet"
  ) =>
    guarded(operation, (enabled: boolean) =>
      Effect.andThen(SubscriptionRef.set(flag, enabled), out.frame({ _tag: tag, enabled }))
    )

  return {
    serverId: config.serverId,
    active,
    port: listener.port,
    messageAvailable: (input: Frames.QueueItemInput) => pushes.effect(input),
    unsafeMessageAvailable: (input: Frames.QueueItemInput) => pushes.unsafe(input),
    messageAvailableBatch,
    hotlistDirty,
    ephemeralAdmin,
    queueConfigSet: queueConfig("QueueConfigSet"),
    queueConfigDelete: queueConfig("QueueConfigDelete"),
    setMaintenance: setFlag("setMaintenance", flags.maintenance, "MaintenanceModeSet"),
    setPopMaintenance: setFlag("setPopMaintenance", flags.popMaintenance, "PopMaintenanceModeSet"),
    stats,
    members,
    memberChanges: memberChanges(events, members),
    health: health.health,
    healthChanges: health.changes,
    events: events.events,
    observe: events.observe,
    syncMetrics: metrics.sync
  }
}).pipe(Effect.annotateLogs({ module: "Mesh" }))

/**
 * The members now, then again on every membership change. Subscribed before the members are read, so
 * no change falls between the two.
 */
const memberChanges = (
  events: MeshEvent.MeshEventsShape,
  members: Effect.Effect<ReadonlyArray<Membership.Member>>
): Stream.Stream<ReadonlyArray<Membership.Member>> =>
  Stream.unwrap(
    Effect.map(events.subscribe, (subscription) =>
      Stream.concat(
        Stream.fromEffect(members),
        Stream.fromSubscription(subscription).pipe(
          Stream.filter(MeshEvent.isMembershipChange),
          Stream.mapEffect(() => members)
        )
      )
    )
  )

/** `mesh started` with what it runs, or `mesh inactive` with why; a warning for open mode. */
const logStart = (
  config: MeshConfig.MeshConfigShape,
  active: boolean,
  port: Option.Option<number>,
  lane: string | undefined,
  discovery: Option.Option<{ readonly source: string }>
): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (!active) {
      return yield* Effect.logInfo("mesh inactive: only the in-process waker runs").pipe(
        Effect.annotateLogs({ reason: config.enabled ? "no_peers" : "disabled" })
      )
    }
    yield* Effect.logInfo("mesh started").pipe(
      Effect.annotateLogs({
        port: Option.getOrElse(port, () => "none"),
        peers: config.peers.map(MeshConfig.peerName).join(","),
        discovery: Option.match(discovery, { onNone: () => "none", onSome: (d) => d.source }),
        lane: lane ?? "none",
        auth: config.auth,
        tls: config.tls
      })
    )
    if (Redacted.value(config.secret) === "") {
      yield* Effect.logWarning(
        "mesh in open mode: no secret, so any HELLO (and any lane notification) is believed"
      )
    }
  })

/** The stats body's type, for the API's signature. */
export type Stats = Effect.Effect<MeshStats.MeshStats>

/** Everything the API needs, as a type for the layer that builds it. */
export type Requirements = Effect.Services<typeof make> | Scope.Scope
