/**
 * How well this node is connected, as one status a broker and an operator act on:
 *
 * - `clustered`: every expected peer is linked and heard, both ways (and the lane, if any, is up);
 * - `degraded`: some are not: hints to and from them arrive late (their pops fall back on backoff);
 * - `isolated`: none are (or the lane, the only carrier, is down): every remote push waits for backoff;
 * - `solo`: no peer is expected (no peers configured or discovered, no other node on the lane).
 *
 * The mesh publishes it as a `SubscriptionRef` (`Mesh.health`, and this module's `MeshHealth` tag when
 * the host provides one to share it with its own services), a `HealthChanged` event on every change, a
 * metric (`queen_mesh_health`), a field of the stats body, and it is what `/readyz` answers from. The
 * shipped `LocalWaker` reads it (option `degradedMaxWait`) to shorten parked pops' waits while the mesh
 * cannot be trusted to wake them.
 *
 * "Both ways" is exact when the node knows which inbound server each link reaches (the v2 HELLO tells a
 * dialer, `QUEEN_MESH_AUTH=permissive` or `required`); with legacy HELLOs it is counted: as many servers
 * heard as links up.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option, SubscriptionRef } from "effect"
import type * as Membership from "./Membership.js"

/**
 * @since 0.1.0
 * @category models
 */
export type Status = "clustered" | "degraded" | "isolated" | "solo"

/**
 * The health of a node now.
 *
 * @since 0.1.0
 * @category models
 */
export interface Health {
  readonly status: Status
  /** Peers the node expects to reach: its links other than itself, and the other nodes on its lane. */
  readonly expected: number
  /** Of those, the ones linked and heard both ways now. */
  readonly healthy: number
  /** The lane's status, `none` without a lane. */
  readonly lane: "none" | "starting" | "up" | "down"
}

/**
 * Whether pops can count on the mesh for their wakes: `clustered` or `solo`.
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
export class MeshHealth extends Context.Tag("queen-mesh/MeshHealth")<
  MeshHealth,
  SubscriptionRef.SubscriptionRef<Health>
>() {}

/**
 * What a node with no peers and no lane reports.
 *
 * @since 0.1.0
 * @category constructors
 */
export const solo: Health = { status: "solo", expected: 0, healthy: 0, lane: "none" }

/**
 * A fresh shared health value, `solo` until the mesh says otherwise.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<MeshHealth> = Layer.effect(MeshHealth, SubscriptionRef.make(solo))

/**
 * The health a membership and a lane status make:
 *
 * - each configured or discovered link (not the node itself) is one expected peer, healthy when the
 *   link is up and, where the node knows the server it reaches, that server is heard alive; links up
 *   to servers it cannot name count healthy only as far as there are servers heard it cannot place;
 * - each other node heard on the lane and not already a link is one expected peer, healthy while the
 *   lane is up and the node alive on it;
 * - no expected peer: `solo`, unless the lane is down (then `isolated`: the node cannot tell).
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { MeshHealth } from "queen-mesh"
 *
 * strictEqual(MeshHealth.compute([], "none").status, "solo")
 * strictEqual(MeshHealth.compute([], "down").status, "isolated")
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const compute = (members: ReadonlyArray<Membership.Member>, lane: Health["lane"]): Health => {
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
  const status: Status =
    expected === 0
      ? lane === "down"
        ? "isolated"
        : "solo"
      : healthy === expected && lane !== "down"
        ? "clustered"
        : healthy === 0
          ? "isolated"
          : "degraded"
  return { status, expected, healthy, lane }
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
