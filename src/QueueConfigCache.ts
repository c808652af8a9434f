/**
 * The host's cache of per-queue settings that the mesh invalidates (spec "The frame set", tags 10 and
 * 11): after a `/configure` on one replica, its peers drop their cached lease time and encryption flag
 * for that queue and re-read PostgreSQL.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option } from "effect"
import type { QueueRef } from "./Frame.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface QueueConfigCacheShape {
  /** Drop the cached settings of `ref`; an absent tenant drops that queue for every tenant. */
  readonly invalidate: (ref: QueueRef) => Effect.Effect<void>
}

/**
 * The host's queue-config cache, as the mesh sees it.
 *
 * @since 0.1.0
 * @category tags
 */
export class QueueConfigCache extends Context.Tag("queen-mesh/QueueConfigCache")<
  QueueConfigCache,
  QueueConfigCacheShape
>() {}

/**
 * What the shipped cache keeps per queue.
 *
 * @since 0.1.0
 * @category models
 */
export interface QueueSettings {
  readonly leaseTimeSeconds: number
  readonly encrypted: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface MemoryQueueConfigCacheShape extends QueueConfigCacheShape {
  readonly get: (ref: QueueRef) => Effect.Effect<Option.Option<QueueSettings>>
  readonly set: (ref: QueueRef, settings: QueueSettings) => Effect.Effect<void>
  readonly size: Effect.Effect<number>
}

/**
 * The shipped in-memory cache.
 *
 * @since 0.1.0
 * @category tags
 */
export class MemoryQueueConfigCache extends Context.Tag("queen-mesh/MemoryQueueConfigCache")<
  MemoryQueueConfigCache,
  MemoryQueueConfigCacheShape
>() {}

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory = (options: { readonly defaultTenant?: string } = {}) =>
  Effect.sync((): MemoryQueueConfigCacheShape => {
    const defaultTenant = options.defaultTenant ?? "default"
    // queue -> tenant -> settings
    const entries = new Map<string, Map<string, QueueSettings>>()
    const tenantOf = (ref: QueueRef) => Option.getOrElse(ref.tenant, () => defaultTenant)
    return {
      get: (ref) => Effect.sync(() => Option.fromNullable(entries.get(ref.queue)?.get(tenantOf(ref)))),
      set: (ref, settings) =>
        Effect.sync(() => {
          let byTenant = entries.get(ref.queue)
          if (byTenant === undefined) {
            byTenant = new Map()
            entries.set(ref.queue, byTenant)
          }
          byTenant.set(tenantOf(ref), settings)
        }),
      invalidate: (ref) =>
        Effect.sync(() => {
          if (Option.isNone(ref.tenant)) {
            entries.delete(ref.queue)
            return
          }
          const byTenant = entries.get(ref.queue)
          byTenant?.delete(ref.tenant.value)
          if (byTenant?.size === 0) entries.delete(ref.queue)
        }),
      size: Effect.sync(() => {
        let n = 0
        for (const byTenant of entries.values()) n += byTenant.size
        return n
      })
    }
  })

/**
 * The shipped cache, provided both as `MemoryQueueConfigCache` and as the `QueueConfigCache` the mesh
 * invalidates.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = (
  options: { readonly defaultTenant?: string } = {}
): Layer.Layer<MemoryQueueConfigCache | QueueConfigCache> =>
  Layer.effectContext(
    Effect.map(makeMemory(options), (cache) =>
      Context.make(MemoryQueueConfigCache, cache).pipe(Context.add(QueueConfigCache, cache))
    )
  )
