/**
 * How well this node is connected, as one status a broker and an operator act on:
 *
 * - `clustered`: every expected peer is linked and heard, both ways (and the lane, if any, is up);
 * - `degraded`: some are not: hints to and from them arrive late (their pops fall back on backoff);
 * - `isolated`: none are (or the lane, the only carrier, is down; or a discovery source has never found
 *   a member): every remote push waits for backoff;
 * - `solo`: no peer is expected (no peers configured or discovered, no other node on the lane; or the
 *   mesh is off);
 * - `starting`: the start-up window, the dead threshold from the mesh's start: peers that start with
 *   this node have not had their chance to be dialled and heard yet, and a discovery source or a lane
 *   may still find some. Any status but `clustered` reads `starting` then, but for `solo` where nothing
 *   more could come (static peers all recognised as this node) and a lane that is down.
 *
 * With each status a `reason` (see {@link Reason}). The mesh publishes it as a `SubscriptionRef` shared
 * through this module's `MeshHealth` tag when the host provides one (`Mesh.layerLocal` and the layers
 * above it do), reads it with `Mesh.health` and watches it with `Mesh.healthChanges`; a
 * `HealthChanged` event marks every change of status, the metric `queen_mesh_health{status}` and the
 * stats body's `health` (the inactive body's too) carry it, and `/readyz` answers from it (503 only when
 * `isolated`). The shipped `LocalWaker` reads it (option `degradedMaxWait`) to shorten parked pops'
 * waits while the mesh cannot be trusted to wake them.
 *
 * "Both ways" is exact when the node knows which inbound server each link reaches (the v2 HELLO tells a
 * dialer, `QUEEN_MESH_AUTH=permissive` or `required`); with legacy HELLOs it is counted: as many servers
 * heard as links up.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SubscriptionRef from "effect/SubscriptionRef"
import type * as Membership from "./Membership.js"

/**
 * The statuses, one list for the type, the stats body, the metric's label and `/readyz`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Status = Schema.Literals(["clustered", "degraded", "isolated", "solo", "starting"])

/**
 * @since 0.1.0
 * @category models
 */
export type Status = typeof Status.Type

/**
 * Why the status is what it is:
 *
 * - `healthy`: every expected peer reached both ways (`clustered`);
 * - `partial`: some are not (`degraded`);
 * - `unreached`: none is (`isolated`);
 * - `lane_down`: the lane is down (`isolated` when it is the only carrier, else `degraded`);
 * - `nothing_found`: a discovery source has never found a member, this node included (`isolated`);
 * - `no_peers`: nothing to reach (`solo`);
 * - `disabled`: the mesh is off, `QUEEN_SYNC_ENABLED=false` (`solo`);
 * - `starting`: the start-up window (`starting`).
 *
 * @since 0.1.0
 * @category schemas
 */
export const Reason = Schema.Literals([
  "healthy",
  "partial",
  "unreached",
  "lane_down",
  "nothing_found",
  "no_peers",
  "disabled",
  "starting"
])

/**
 * @since 0.1.0
 * @category models
 */
export type Reason = typeof Reason.Type

/**
 * The lane's status as health reads it, `none` without a lane.
 *
 * @since 0.1.0
 * @category schemas
 */
export const LaneStatus = Schema.Literals(["none", "starting", "up", "down"])

/**
 * The health of a node now: what the stats body's `health` holds.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Health = Schema.Struct({
  status: Status,
  reason: Reason,
  /** Peers the node expects to reach: its links other than itself, and the other nodes on its lane. */
  expected: Schema.Number,
  /** Of those, the ones linked and heard both ways now. */
  healthy: Schema.Number,
  lane: LaneStatus
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Health extends Schema.Schema.Type<typeof Health> {}

/**
 * Whether pops can count on the mesh for their wakes: `clustered` or `solo` (never while `starting`).
 *
 * @since 0.1.0
 * @category predicates
 */
export const isTrusted = (health: Health): boolean =>
  health.status === "clustered" || health.status === "solo"

/**
 * A node's health as a shared, watchable value: provide it (`layer`) and the mesh and the shipped waker
 * share it; otherwise the mesh keeps its own.
 *
 * @since 0.1.0
 * @category tags
 */
export class MeshHealth extends Context.Service<MeshHealth, SubscriptionRef.SubscriptionRef<Health>>()(
  "queen-mesh/MeshHealth"
) {}

/**
 * What a node with no peers and no lane reports.
 *
 * @since 0.1.0
 * @category constructors
 */
export const solo: Health = { status: "solo", reason: "no_peers", expected: 0, healthy: 0, lane: "none" }

/**
 * What a node whose mesh does not run reports: `solo`, with no peers or with the mesh off.
 *
 * @since 0.1.0
 * @category constructors
 */
export const inactive = (enabled: boolean): Health => (enabled ? solo : { ...solo, reason: "disabled" })

/**
 * What else than the membership the health depends on.
 *
 * @since 0.1.0
 * @category models
 */
export interface Conditions {
  /** The start-up window is open (the dead threshold from the mesh's start). */
  readonly starting: boolean
  /** Whether the node has a discovery source, and whether it has ever found a member (itself counts). */
  readonly discovery: "none" | "found" | "nothing_found"
}

/**
 * A node past its start-up window with no discovery source.
 *
 * @since 0.1.0
 * @category constructors
 */
export const settled: Conditions = { starting: false, discovery: "none" }

/**
 * A fresh shared health value, `solo` until the mesh says otherwise.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<MeshHealth> = Layer.effect(MeshHealth, SubscriptionRef.make(solo))

/**
 * The health a membership, a lane status and the {@link Conditions} make:
 *
 * - each configured or discovered link (not the node itself) is one expected peer, healthy when the
 *   link is up and, where the node knows the server it reaches, that server is heard alive; links up
 *   to servers it cannot name count healthy only as far as there are servers heard it cannot place;
 * - each other node heard on the lane and not already a link is one expected peer, healthy while the
 *   lane is up and the node alive on it;
 * - no expected peer: `solo`, unless the lane is down or discovery has never found anyone (then
 *   `isolated`: the node cannot tell);
 * - within the start-up window, anything but `clustered` is `starting`, except a `solo` that nothing
 *   could change (no lane, no discovery) and a lane that is down (the database is no peer that may be
 *   starting too).
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { MeshHealth } from "queen-mesh"
 *
 * strictEqual(MeshHealth.compute([], "none").status, "solo")
 * strictEqual(MeshHealth.compute([], "down").status, "isolated")
 * strictEqual(MeshHealth.compute([], "none", { starting: false, discovery: "nothing_found" }).reason, "nothing_found")
 * strictEqual(MeshHealth.compute([], "up", { starting: true, discovery: "none" }).status, "starting")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const compute = (
  members: ReadonlyArray<Membership.Member>,
  lane: Health["lane"],
  conditions: Conditions = settled
): Health => {
  let expected = 0
  let healthy = 0
  // Links up whose server is unknown, and servers heard alive that no link claims: the legacy count.
  let anonymousUp = 0
  let unplacedAlive = 0
  for (const member of members) {
    if (member.self) continue
    const link = Option.getOrUndefined(member.link)
    const heard = Option.getOrUndefined(member.heard)
    const onLane = Option.getOrUndefined(member.lane)
    if (link !== undefined) {
      expected++
      if (!link.connected) continue
      if (heard !== undefined) {
        if (heard.alive) healthy++
      } else if (Option.isSome(member.serverId)) {
        // Its id is known but it never dialled us: not heard both ways.
        if (onLane?.alive === true && lane === "up") healthy++
      } else {
        anonymousUp++
      }
      continue
    }
    if (heard !== undefined && member.foundBy === "inbound") {
      if (heard.alive) unplacedAlive++
      if (onLane === undefined) continue
    }
    if (onLane !== undefined) {
      expected++
      if (lane === "up" && onLane.alive) healthy++
    }
  }
  healthy += Math.min(anonymousUp, unplacedAlive)
  const verdict = (status: Status, reason: Reason): Health => ({ status, reason, expected, healthy, lane })
  let health: Health
  if (expected === 0) {
    health =
      lane === "down"
        ? verdict("isolated", "lane_down")
        : conditions.discovery === "nothing_found"
          ? verdict("isolated", "nothing_found")
          : verdict("solo", "no_peers")
  } else if (healthy === expected && lane !== "down") health = verdict("clustered", "healthy")
  else if (healthy === 0) health = verdict("isolated", lane === "down" ? "lane_down" : "unreached")
  else health = verdict("degraded", lane === "down" ? "lane_down" : "partial")
  // A lane that is down is known, not waited for: the database is no peer that may be starting too.
  if (!conditions.starting || health.status === "clustered" || health.reason === "lane_down") return health
  const nothingMoreToCome = lane === "none" && conditions.discovery === "none"
  if (health.status === "solo" && nothingMoreToCome) return health
  return verdict("starting", "starting")
}

/**
 * The shared value if the host provided one, else a fresh one.
 *
 * @since 0.1.0
 * @category constructors
 */
export const shared: Effect.Effect<SubscriptionRef.SubscriptionRef<Health>> = Effect.flatMap(
  Effect.serviceOption(MeshHealth),
  Option.match({ onNone: () => SubscriptionRef.make(solo), onSome: Effect.succeed })
)
