/**
 * The node's health (`MeshHealth`), owned and kept current here: recomputed from the membership, the
 * lane's status and discovery's record on every membership change (events of those kinds only,
 * coalesced: a burst is one recomputation) and once when the start-up window closes (at the dead
 * threshold, or the first time the node is clustered), published when it changes, with a
 * `HealthChanged` event and a log line (a change for the worse a warning, one for the better info, the
 * verdict at start neither). The value is the host's shared `MeshHealth` when it provides one (so the
 * shipped waker reads the same), else the tracker's own; a mesh that does not run is `solo` for good.
 *
 * @internal
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Latch from "effect/Latch"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type * as Membership from "../../Membership.js"
import * as MeshConfig from "../../MeshConfig.js"
import { MeshEvents, type MeshEventsShape, membershipTags } from "../../MeshEvent.js"
import * as MeshHealth from "../../MeshHealth.js"
import { RunningLane } from "../lane/running.js"
import { Listener } from "../links/listener.js"
import type { Liveness } from "../links/liveness.js"
import { Peers } from "../links/peers.js"
import { loop } from "../loop.js"
import * as MembershipModel from "./membership.js"

/** How bad a status is, for the direction of a change. */
const RANK: Readonly<Record<MeshHealth.Status, number>> = {
  clustered: 0,
  solo: 0,
  starting: 1,
  degraded: 1,
  isolated: 2
}

const same = (a: MeshHealth.Health, b: MeshHealth.Health): boolean =>
  a.status === b.status &&
  a.reason === b.reason &&
  a.expected === b.expected &&
  a.healthy === b.healthy &&
  a.lane === b.lane

/** Computes the health now, then keeps `health` current for as long as the scope lasts. */
export const track = (options: {
  readonly health: SubscriptionRef.SubscriptionRef<MeshHealth.Health>
  readonly members: Effect.Effect<ReadonlyArray<Membership.Member>>
  readonly lane: Effect.Effect<MeshHealth.Health["lane"]>
  /** Whether there is a discovery source, and whether it has found anyone yet. */
  readonly discovery: Effect.Effect<MeshHealth.Conditions["discovery"]>
  /** How long the start-up window stays open (the dead threshold). */
  readonly startupWindow: Duration.Duration
  readonly events: MeshEventsShape
}): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { health, events } = options
    let first = true
    let starting = Duration.isGreaterThan(options.startupWindow, Duration.zero)
    const recompute = Effect.gen(function* () {
      const conditions = { starting, discovery: yield* options.discovery }
      const next = MeshHealth.compute(yield* options.members, yield* options.lane, conditions)
      // Once clustered, the mesh has proved itself: the start-up window is over.
      if (next.status === "clustered") starting = false
      const previous = yield* SubscriptionRef.get(health)
      if (same(previous, next)) return
      yield* SubscriptionRef.set(health, next)
      const initial = first
      first = false
      if (previous.status === next.status) return
      events.emit({ _tag: "HealthChanged", from: previous.status, to: next.status })
      if (initial) return
      const worse = RANK[next.status] > RANK[previous.status]
      yield* (worse ? Effect.logWarning : Effect.logInfo)("mesh health changed").pipe(
        Effect.annotateLogs({
          from: previous.status,
          to: next.status,
          reason: next.reason,
          expected: next.expected,
          healthy: next.healthy
        })
      )
    })
    yield* recompute
    const changed = yield* Latch.make(false)
    yield* events.observe(() => changed.openUnsafe(), membershipTags)
    if (starting) {
      yield* Effect.sleep(options.startupWindow).pipe(
        Effect.andThen(
          Effect.sync(() => {
            starting = false
            changed.openUnsafe()
          })
        ),
        Effect.forkScoped
      )
    }
    yield* loop(
      "MeshHealth",
      Effect.andThen(
        Effect.sync(() => changed.closeUnsafe()),
        recompute
      ),
      { before: changed.await }
    )
  })

/** The node's health, as the mesh's API, its stats and its metrics read it. */
export interface HealthTrackerShape {
  readonly health: Effect.Effect<MeshHealth.Health>
  /** The health now, then every change. */
  readonly changes: Stream.Stream<MeshHealth.Health>
}

export class HealthTracker extends Context.Service<HealthTracker, HealthTrackerShape>()(
  "queen-mesh/internal/HealthTracker"
) {}

/** The tracker of a running mesh, for the life of the layer's scope. */
export const layer: Layer.Layer<
  HealthTracker,
  never,
  MeshConfig.MeshConfig | Peers | Liveness | RunningLane | Listener | MeshEvents
> = Layer.effect(
  HealthTracker,
  Effect.gen(function* () {
    const config = yield* MeshConfig.MeshConfig
    const ref = yield* MeshHealth.shared
    const lane = Option.getOrUndefined(yield* RunningLane)
    const peers = yield* Peers
    const active = Option.isSome((yield* Listener).port) || lane !== undefined
    if (active) {
      yield* track({
        health: ref,
        members: yield* MembershipModel.current,
        lane: lane === undefined ? Effect.succeed("none") : lane.status,
        discovery: Effect.map(peers.discovery, (d) =>
          Option.isNone(d) ? "none" : d.value.found ? "found" : "nothing_found"
        ),
        startupWindow: config.deadThreshold,
        events: yield* MeshEvents
      })
    } else {
      yield* SubscriptionRef.set(ref, MeshHealth.inactive(config.enabled))
    }
    return { health: SubscriptionRef.get(ref), changes: SubscriptionRef.changes(ref) }
  })
)
