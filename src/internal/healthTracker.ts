/**
 * Keeps the node's health (`MeshHealth`) current: recomputed from the membership and the lane's status
 * on every membership change (events of those kinds only, coalesced: a burst is one recomputation),
 * published when it changes, with a `HealthChanged` event and a log line (a change for the worse a
 * warning, one for the better info, the verdict at start neither).
 *
 * @internal
 */
import { Effect, type Scope, SubscriptionRef } from "effect"
import type * as Membership from "../Membership.js"
import { type MeshEventsShape, membershipTags } from "../MeshEvent.js"
import * as MeshHealth from "../MeshHealth.js"
import { loop } from "./loop.js"

/** How bad a status is, for the direction of a change. */
const RANK: Readonly<Record<MeshHealth.Status, number>> = { clustered: 0, solo: 0, degraded: 1, isolated: 2 }

const same = (a: MeshHealth.Health, b: MeshHealth.Health): boolean =>
  a.status === b.status && a.expected === b.expected && a.healthy === b.healthy && a.lane === b.lane

/** Computes the health now, then keeps `health` current for as long as the scope lasts. */
export const track = (options: {
  readonly health: SubscriptionRef.SubscriptionRef<MeshHealth.Health>
  readonly members: Effect.Effect<ReadonlyArray<Membership.Member>>
  readonly lane: Effect.Effect<MeshHealth.Health["lane"]>
  readonly events: MeshEventsShape
}): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const { health, events } = options
    let first = true
    const recompute = Effect.gen(function* () {
      const next = MeshHealth.compute(yield* options.members, yield* options.lane)
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
          expected: next.expected,
          healthy: next.healthy
        })
      )
    })
    yield* recompute
    const changed = yield* Effect.makeLatch(false)
    yield* events.observe(() => changed.unsafeOpen(), membershipTags)
    yield* loop(
      "MeshHealth",
      Effect.zipRight(
        Effect.sync(() => changed.unsafeClose()),
        recompute
      ),
      { before: changed.await }
    )
  })
