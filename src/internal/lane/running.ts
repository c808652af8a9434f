/**
 * The lane of a running mesh: built in the runtime's scope from the host's `Lane` (a factory), when one
 * is provided and sync is on; none otherwise.
 *
 * @internal
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Lane from "../../Lane.js"
import * as MeshConfig from "../../MeshConfig.js"
import { MeshEvents } from "../../MeshEvent.js"
import { Dispatch } from "../mesh/dispatch.js"

export type LaneShape = Lane.Running
export type LaneMember = Lane.Member
export type LaneStatus = Lane.Status

/** The running lane of this mesh, if a factory was provided. */
export class RunningLane extends Context.Service<RunningLane, Option.Option<Lane.Running>>()(
  "queen-mesh/internal/RunningLane"
) {}

/** Builds the provided lane, if any, in the runtime's scope. */
export const layer: Layer.Layer<RunningLane, never, Dispatch | MeshEvents | MeshConfig.MeshConfig> =
  Layer.effect(
    RunningLane,
    Effect.gen(function* () {
      const factory = yield* Effect.serviceOption(Lane.Lane)
      const config = yield* MeshConfig.MeshConfig
      if (Option.isNone(factory) || !config.enabled) return Option.none<Lane.Running>()
      const dispatch = yield* Dispatch
      const events = yield* MeshEvents
      return Option.some(yield* factory.value.make({ apply: dispatch.apply, events, config }))
    })
  )
