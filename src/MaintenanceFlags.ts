/**
 * The two cluster-wide switches (spec "The frame set", tags 40 and 41): maintenance mode diverts pushes
 * to the disk spool, pop maintenance pauses consumption. Each is a `SubscriptionRef`, so the host can
 * read the current value and watch its changes.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as SubscriptionRef from "effect/SubscriptionRef"

/**
 * The two flags, each readable and watchable.
 *
 * @since 0.1.0
 * @category models
 */
export interface MaintenanceFlagsShape {
  readonly maintenance: SubscriptionRef.SubscriptionRef<boolean>
  readonly popMaintenance: SubscriptionRef.SubscriptionRef<boolean>
}

/**
 * The host's maintenance flags, which received tag 40 and 41 frames set.
 *
 * @since 0.1.0
 * @category tags
 */
export class MaintenanceFlags extends Context.Service<MaintenanceFlags, MaintenanceFlagsShape>()(
  "queen-mesh/MaintenanceFlags"
) {}

/**
 * Both flags, off unless `initial` says otherwise.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (initial: { readonly maintenance?: boolean; readonly popMaintenance?: boolean } = {}) =>
  Effect.all({
    maintenance: SubscriptionRef.make(initial.maintenance ?? false),
    popMaintenance: SubscriptionRef.make(initial.popMaintenance ?? false)
  })

/**
 * Both flags, off unless `initial` says otherwise.
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { Effect, SubscriptionRef } from "effect"
 * import { MaintenanceFlags } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const flags = yield* MaintenanceFlags.MaintenanceFlags
 *   strictEqual(yield* SubscriptionRef.get(flags.maintenance), true)
 *   strictEqual(yield* SubscriptionRef.get(flags.popMaintenance), false)
 * })
 *
 * Effect.runPromise(program.pipe(Effect.provide(MaintenanceFlags.layer({ maintenance: true }))))
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  initial: { readonly maintenance?: boolean; readonly popMaintenance?: boolean } = {}
): Layer.Layer<MaintenanceFlags> => Layer.effect(MaintenanceFlags, make(initial))
