/**
 * A lane: a carrier of the mesh's frames beside the TCP links, the PostgreSQL lane (`queen-mesh/Postgres`)
 * being the one shipped. A lane module provides the `Lane` service (a factory); the mesh looks it up
 * when it starts and builds the lane in its own scope, handing it what a carrier needs: the function
 * that applies a received frame (the TCP receive path's), the event hub and the configuration. The mesh
 * then hands every broadcast frame to the lane too, and reads its members, its status and its counters
 * into membership, health, the stats body and the metrics.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import type * as Stream from "effect/Stream"
import type { Frame } from "./Frame.js"
import type { MeshConfigShape } from "./MeshConfig.js"
import type { MeshEventsShape } from "./MeshEvent.js"
import type { LaneStats } from "./MeshStats.js"

/**
 * Whether the lane can carry frames now.
 *
 * @since 0.1.0
 * @category models
 */
export type Status = "starting" | "up" | "down"

/**
 * One other node as the lane knows it, by the server id of its authenticated notifications.
 *
 * @since 0.1.0
 * @category models
 */
export interface Member {
  readonly serverId: string
  /** Heard on the lane within the dead threshold. */
  readonly alive: boolean
  readonly lastSeenMsAgo: number
  /** Its boot epoch, as its notifications carry it. */
  readonly epoch: string
}

/**
 * A running lane.
 *
 * @since 0.1.0
 * @category models
 */
export interface Running {
  readonly kind: "pg"
  /** Hands one encoded frame to the lane: never blocks; false when it was dropped (and counted). */
  readonly offer: (bytes: Uint8Array) => boolean
  readonly status: Effect.Effect<Status>
  /** The status now, then every change. */
  readonly statusChanges: Stream.Stream<Status>
  /** Every other node heard on the lane, sorted by server id (bounded). */
  readonly members: Effect.Effect<ReadonlyArray<Member>>
  /** The lane's part of the stats body. */
  readonly stats: Effect.Effect<LaneStats>
}

/**
 * What the mesh hands a lane it builds.
 *
 * @since 0.1.0
 * @category models
 */
export interface BuildContext {
  /** Applies a frame received from `from` (a server id), as the TCP receive path does. */
  readonly apply: (from: string, frame: Frame) => Effect.Effect<void> | undefined
  readonly events: MeshEventsShape
  readonly config: MeshConfigShape
}

/**
 * How a lane module joins the mesh: its kind and how to build it.
 *
 * @since 0.1.0
 * @category models
 */
export interface LaneShape {
  readonly kind: "pg"
  readonly make: (context: BuildContext) => Effect.Effect<Running, never, Scope.Scope>
}

/**
 * A lane module's factory, provided beside the host services (`Postgres.layer` provides it).
 *
 * @since 0.1.0
 * @category tags
 */
export class Lane extends Context.Service<Lane, LaneShape>()("queen-mesh/Lane") {}
