/**
 * The hook by which a lane (a carrier of the mesh's frames beside the TCP links: the PostgreSQL lane)
 * joins a running mesh. A lane module provides a `LaneFactory`; the runtime looks it up when it starts
 * and builds the lane in its own scope, handing it what a carrier needs: the dispatch that applies a
 * received frame, the event hub and the configuration. The mesh then hands every broadcast frame to the
 * lane too, and reads its members, its status and its counters into membership, health, the stats body
 * and the metrics. Nothing here knows PostgreSQL.
 *
 * @internal
 */

import { Context, Effect, Layer, Option, type Scope, type Stream } from "effect"
import * as MeshConfig from "../../MeshConfig.js"
import { MeshEvents, type MeshEventsShape } from "../../MeshEvent.js"
import type * as MeshStats from "../../MeshStats.js"
import { Dispatch } from "../mesh/dispatch.js"
import type * as Frames from "../wire/frames.js"

/** Whether the lane can carry frames now. */
export type LaneStatus = "starting" | "up" | "down"

/** One other node as the lane knows it, by the server id of its authenticated notifications. */
export interface LaneMember {
  readonly serverId: string
  /** Heard on the lane within the dead threshold. */
  readonly alive: boolean
  readonly lastSeenMsAgo: number
  /** Its boot epoch, as its notifications carry it. */
  readonly epoch: string
}

/** A running lane. */
export interface LaneShape {
  readonly kind: "pg"
  /** Hands one encoded frame to the lane: never blocks; false when it was dropped (and counted). */
  readonly offer: (bytes: Uint8Array) => boolean
  readonly status: Effect.Effect<LaneStatus>
  /** The status now, then every change. */
  readonly statusChanges: Stream.Stream<LaneStatus>
  /** Every other node heard on the lane, sorted by server id (bounded). */
  readonly members: Effect.Effect<ReadonlyArray<LaneMember>>
  /** The lane's part of the stats body. */
  readonly stats: Effect.Effect<MeshStats.LaneStats>
}

/** What the runtime hands a lane it builds. */
export interface LaneContext {
  /** Applies a frame received from `from` (a server id), as the TCP receive path does. */
  readonly apply: (from: string, frame: Frames.Frame) => Effect.Effect<void> | undefined
  readonly events: MeshEventsShape
  readonly config: MeshConfig.MeshConfigShape
}

/** How a lane module joins the mesh. */
export interface LaneFactoryShape {
  readonly kind: "pg"
  readonly make: (context: LaneContext) => Effect.Effect<LaneShape, never, Scope.Scope>
}

/** A lane module's factory, provided beside the host services. */
export class LaneFactory extends Context.Tag("queen-mesh/LaneFactory")<LaneFactory, LaneFactoryShape>() {}

/** The running lane of this mesh, if a factory was provided. */
export class Lane extends Context.Tag("queen-mesh/internal/Lane")<Lane, Option.Option<LaneShape>>() {}

/** Builds the provided lane, if any, in the runtime's scope. */
export const layer: Layer.Layer<Lane, never, Dispatch | MeshEvents | MeshConfig.MeshConfig> = Layer.scoped(
  Lane,
  Effect.gen(function* () {
    const factory = yield* Effect.serviceOption(LaneFactory)
    const config = yield* MeshConfig.MeshConfig
    if (Option.isNone(factory) || !config.enabled) return Option.none<LaneShape>()
    const dispatch = yield* Dispatch
    const events = yield* MeshEvents
    return Option.some(yield* factory.value.make({ apply: dispatch.apply, events, config }))
  })
)
