/**
 * The host's cache of per-queue settings that the mesh invalidates (spec "The frame set", tags 10 and
 * 11): after a `/configure` on one replica, its peers drop their cached lease time and encryption flag
 * for that queue and re-read PostgreSQL.
 *
 * The shipped `MemoryQueueConfigCache` files an absent tenant under the default tenant, upstream Queen's
 * `00000000-0000-0000-0000-000000000001` unless `defaultTenant` says otherwise, and keeps a UUID tenant
 * lowercased, so a UUID in any case is the same tenant. It is bounded by entries (`maxEntries`, default
 * 100,000) and by UTF-8 bytes of queue and tenant (`maxBytes`, default 8 MiB): a `set` past a bound
 * evicts the oldest entries (by last `set`), since a cache should keep what was read last and an
 * evicted entry costs one PostgreSQL read. A `set` naming anything over `MAX_NAME_CHARS` (255
 * characters, the wire's limit) is refused, and `get` of such a name finds nothing. Evictions and refusals are
 * counted in `dropped`.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type { QueueRef, QueueRefInput } from "./Frame.js"
import * as Names from "./internal/wire/names.js"

/**
 * What the mesh calls for every received `QUEUE_CONFIG_SET` or `QUEUE_CONFIG_DELETE`.
 *
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
export class QueueConfigCache extends Context.Service<QueueConfigCache, QueueConfigCacheShape>()(
  "queen-mesh/QueueConfigCache"
) {}

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
 * The shipped cache: read, fill and measure it.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryQueueConfigCacheShape extends QueueConfigCacheShape {
  /** The settings cached for `ref`; its tenant as the mesh's inputs take one (absent: the default tenant). */
  readonly get: (ref: QueueRefInput) => Effect.Effect<Option.Option<QueueSettings>>
  /** Caches `settings` for `ref`, evicting the oldest entries past a bound; refused for an over-long name. */
  readonly set: (ref: QueueRefInput, settings: QueueSettings) => Effect.Effect<void>
  readonly size: Effect.Effect<number>
  /** How many entries were evicted for a bound, plus sets refused for an over-long name. */
  readonly dropped: Effect.Effect<number>
}

/**
 * The shipped cache's default tenant and bounds.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryQueueConfigCacheOptions {
  /**
   * The tenant an absent one is filed under. Default upstream Queen's
   * `"00000000-0000-0000-0000-000000000001"`, which is what upstream peers send for it.
   */
  readonly defaultTenant?: string
  /** Entries kept before the oldest is evicted. Default 100,000. */
  readonly maxEntries?: number
  /** UTF-8 bytes of queue and tenant kept across the entries before the oldest is evicted. Default 8 MiB. */
  readonly maxBytes?: number
}

/**
 * The shipped in-memory cache.
 *
 * @since 0.1.0
 * @category tags
 */
export class MemoryQueueConfigCache extends Context.Service<
  MemoryQueueConfigCache,
  MemoryQueueConfigCacheShape
>()("queen-mesh/MemoryQueueConfigCache") {}

const byteLength = (text: string): number => Buffer.byteLength(text, "utf8")

/**
 * An empty shipped cache.
 *
 * @example
 * ```ts
 * import { strictEqual } from "node:assert"
 * import { Effect, Option } from "effect"
 * import { Frame, QueueConfigCache } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const cache = yield* QueueConfigCache.makeMemory()
 *   const ref = Frame.queueRef({ queue: "orders", tenant: "acme" })
 *   yield* cache.set(ref, { leaseTimeSeconds: 30, encrypted: false })
 *   strictEqual(Option.isSome(yield* cache.get(ref)), true)
 *   // What a QUEUE_CONFIG_SET from a peer does: the next read goes to PostgreSQL.
 *   yield* cache.invalidate(ref)
 *   strictEqual(Option.isNone(yield* cache.get(ref)), true)
 * })
 *
 * Effect.runPromise(program)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory = (options: MemoryQueueConfigCacheOptions = {}) =>
  Effect.sync((): MemoryQueueConfigCacheShape => {
    const given = options.defaultTenant === undefined ? undefined : Names.tenant(options.defaultTenant)
    const defaultTenant =
      given === undefined
        ? (options.defaultTenant ?? Names.DEFAULT_TENANT)
        : Option.getOrElse(given, () => Names.DEFAULT_TENANT)
    const maxEntries = options.maxEntries ?? 100_000
    const maxBytes = options.maxBytes ?? 8 * 1024 * 1024
    // queue -> tenant -> entry (nested, so no two names can collide), and every entry in a list, oldest
    // first (a list, not a Set: evicting from a Set's front walks the holes earlier deletes left).
    const entries = new Map<string, Map<string, Entry>>()
    let oldest: Entry | undefined
    let newest: Entry | undefined
    let count = 0
    let bytes = 0
    let dropped = 0

    /** The tenant `ref` names, absent as the default; `undefined` when a name is over-long. */
    const tenantOf = (ref: QueueRefInput): string | undefined => {
      if (!Names.fitsName(ref.queue)) return undefined
      const tenant = Names.tenantInput(ref.tenant)
      if (tenant === undefined) return undefined
      return Option.isSome(tenant) ? tenant.value : defaultTenant
    }

    const remove = (entry: Entry) => {
      if (entry.older === undefined) oldest = entry.newer
      else entry.older.newer = entry.newer
      if (entry.newer === undefined) newest = entry.older
      else entry.newer.older = entry.older
      count--
      bytes -= entry.bytes
      const byTenant = entries.get(entry.queue)
      byTenant?.delete(entry.tenant)
      if (byTenant?.size === 0) entries.delete(entry.queue)
    }

    return {
      get: (ref) =>
        Effect.sync(() => {
          const tenant = tenantOf(ref)
          return tenant === undefined
            ? Option.none()
            : Option.fromUndefinedOr(entries.get(ref.queue)?.get(tenant)?.settings)
        }),
      set: (ref, settings) =>
        Effect.sync(() => {
          const tenant = tenantOf(ref)
          const cost = tenant === undefined ? 0 : byteLength(ref.queue) + byteLength(tenant)
          if (tenant === undefined || maxEntries < 1 || cost > maxBytes) {
            dropped++
            return
          }
          const old = entries.get(ref.queue)?.get(tenant)
          if (old !== undefined) remove(old)
          while (oldest !== undefined && (count >= maxEntries || bytes + cost > maxBytes)) {
            remove(oldest)
            dropped++
          }
          const entry: Entry = {
            queue: ref.queue,
            tenant,
            settings,
            bytes: cost,
            older: newest,
            newer: undefined
          }
          if (newest === undefined) oldest = entry
          else newest.newer = entry
          newest = entry
          count++
          let byTenant = entries.get(ref.queue)
          if (byTenant === undefined) {
            byTenant = new Map()
            entries.set(ref.queue, byTenant)
          }
          byTenant.set(tenant, entry)
          bytes += cost
        }),
      invalidate: (ref) =>
        Effect.sync(() => {
          const byTenant = entries.get(ref.queue)
          if (byTenant === undefined) return
          if (Option.isNone(ref.tenant)) {
            for (const entry of [...byTenant.values()]) remove(entry)
            return
          }
          const tenant = tenantOf(ref)
          const entry = tenant === undefined ? undefined : byTenant.get(tenant)
          if (entry !== undefined) remove(entry)
        }),
      size: Effect.sync(() => count),
      dropped: Effect.sync(() => dropped)
    }
  })

interface Entry {
  readonly queue: string
  readonly tenant: string
  readonly settings: QueueSettings
  readonly bytes: number
  older: Entry | undefined
  newer: Entry | undefined
}

/**
 * The shipped cache, provided both as `MemoryQueueConfigCache` and as the `QueueConfigCache` the mesh
 * invalidates.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = (
  options: MemoryQueueConfigCacheOptions = {}
): Layer.Layer<MemoryQueueConfigCache | QueueConfigCache> =>
  Layer.effectContext(
    Effect.map(makeMemory(options), (cache) =>
      Context.make(MemoryQueueConfigCache, cache).pipe(Context.add(QueueConfigCache, cache))
    )
  )
