/**
 * The host's hot-list of candidate partitions (spec "The frame set", tag 5). A `HOTLIST_DIRTY_BATCH`
 * marks items pending; marking is idempotent and commutative, and a lost mark is healed by the
 * hot-list's own periodic reseed.
 *
 * @since 0.1.0
 */
import { Context, Effect, Layer, Option } from "effect"
import type { QueueItem } from "./Frame.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface HotListShape {
  /** Mark `items` pending. Idempotent and commutative. */
  readonly markDirty: (items: ReadonlyArray<QueueItem>) => Effect.Effect<void>
  /** Optional synchronous twin of `markDirty`, called straight from the receive path when present. */
  readonly unsafeMarkDirty?: (items: ReadonlyArray<QueueItem>) => void
}

/**
 * The host's hot-list, as the mesh sees it.
 *
 * @since 0.1.0
 * @category tags
 */
export class HotList extends Context.Tag("queen-mesh/HotList")<HotList, HotListShape>() {}

/**
 * @since 0.1.0
 * @category models
 */
export interface MemoryHotListShape extends HotListShape {
  /** The pending items, without clearing them. */
  readonly pending: Effect.Effect<ReadonlyArray<QueueItem>>
  /** Takes and clears the pending items. */
  readonly take: Effect.Effect<ReadonlyArray<QueueItem>>
  /** Bumped by every mark that added at least one new pending item. */
  readonly epoch: Effect.Effect<number>
}

/**
 * The shipped in-memory hot-list.
 *
 * @since 0.1.0
 * @category tags
 */
export class MemoryHotList extends Context.Tag("queen-mesh/MemoryHotList")<
  MemoryHotList,
  MemoryHotListShape
>() {}

/**
 * A stable key for a `{tenant, queue, partition}` item; absent tenants never collide with named ones.
 *
 * @since 0.1.0
 * @category keys
 */
export const itemKey = (item: QueueItem): string =>
  `${Option.isSome(item.tenant) ? `t:${item.tenant.value}` : "-"}\u0000${item.queue}\u0000${item.partition}`

/**
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory = (options: { readonly maxPending?: number } = {}) =>
  Effect.sync((): MemoryHotListShape => {
    const maxPending = options.maxPending ?? 100_000
    const pending = new Map<string, QueueItem>()
    let epoch = 0
    const unsafeMarkDirty = (items: ReadonlyArray<QueueItem>): void => {
      let added = false
      for (const item of items) {
        const key = itemKey(item)
        if (pending.has(key) || pending.size >= maxPending) continue
        pending.set(key, item)
        added = true
      }
      if (added) epoch++
    }
    return {
      markDirty: (items) => Effect.sync(() => unsafeMarkDirty(items)),
      unsafeMarkDirty,
      pending: Effect.sync(() => [...pending.values()]),
      take: Effect.sync(() => {
        const items = [...pending.values()]
        pending.clear()
        return items
      }),
      epoch: Effect.sync(() => epoch)
    }
  })

/**
 * The shipped hot-list, provided both as `MemoryHotList` and as the `HotList` the mesh marks.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = (
  options: { readonly maxPending?: number } = {}
): Layer.Layer<MemoryHotList | HotList> =>
  Layer.effectContext(
    Effect.map(makeMemory(options), (hot) => Context.make(MemoryHotList, hot).pipe(Context.add(HotList, hot)))
  )
