/**
 * The two cluster-wide switches (spec "The frame set", tags 40 and 41): maintenance mode diverts pushes
 * to the disk spool, pop maintenance pauses consumption. Each is a `SubscriptionRef`, so the host can
 * read the current value and watch its changes.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, SubscriptionRef } from "effect"

/**
 * @since 0.1.0
 * @category models
 */
export interface MaintenanceFlagsShape {
  readonly maintenance: SubscriptionRef.SubscriptionRef<boolean>
  readonly popMaintenance: SubscriptionRef.SubscriptionRef<boolean>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class MaintenanceFlags extends Context.Tag("queen-mesh/MaintenanceFlags")<
  MaintenanceFlags,
  MaintenanceFlagsShape
>() {}

/**
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
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  initial: { readonly maintenance?: boolean; readonly popMaintenance?: boolean } = {}
): Layer.Layer<MaintenanceFlags> => Layer.effect(MaintenanceFlags, make(initial))
