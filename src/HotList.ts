/**
 * The host's hot-list of candidate partitions (spec "The frame set", tag 5). A `HOTLIST_DIRTY_BATCH`
 * marks items pending; marking is idempotent and commutative, and a lost mark is healed by the
 * hot-list's own periodic reseed.
 *
 * The shipped `MemoryHotList` is bounded by items (`maxPending`, default 100,000) and by UTF-8 bytes of
 * queue, tenant, partition and group (`maxPendingBytes`, default 8 MiB); a mark past a bound is dropped, as is
 * one naming anything over `MAX_NAME_CHARS` (255 characters, the wire's limit), and both are counted in
 * `dropped`. A UUID tenant is kept lowercased, so it is the same item in any case. A mark scoped to a
 * consumer group (`group` present: a seek or a group-delete repair on the sender) is a different item
 * from the unscoped mark of the same partition, which stands for every ring of the queue.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Latch from "effect/Latch"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import type { HotItem, QueueItem } from "./Frame.js"
import { loop } from "./internal/loop.js"
import * as EntryPoints from "./internal/synchronousEntryPoints.js"
import * as Names from "./internal/wire/names.js"

/**
 * A mark as the hot-list takes it: a queue item, scoped to one consumer group's ring when `group` is
 * present and `Some`. The mesh always passes `HotItem`s (its `group` an `Option`); an item built
 * without a group, as `Frame.queueItem` builds it, marks every ring.
 *
 * @since 0.1.0
 * @category models
 */
export type Mark = QueueItem & { readonly group?: Option.Option<string> }

/**
 * What the mesh calls for every received `HOTLIST_DIRTY_BATCH`.
 *
 * @since 0.1.0
 * @category models
 */
export interface HotListShape {
  /**
   * Mark `items` pending. Idempotent and commutative. An item whose `group` is present marks only that
   * consumer group's ring; absent, every ring of the queue.
   */
  readonly markDirty: (items: ReadonlyArray<Mark>) => Effect.Effect<void>
}

/**
 * A hot-list from one synchronous function; the mesh calls it straight from the receive path.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sync = (markDirty: (items: ReadonlyArray<Mark>) => void): HotListShape => ({
  markDirty: EntryPoints.register(
    (items: ReadonlyArray<Mark>) => Effect.sync(() => markDirty(items)),
    markDirty
  )
})

/**
 * The function the mesh calls to mark items without an effect, if `hotList` has one.
 *
 * @since 0.1.0
 * @category models
 */
export const syncMarkOf = (hotList: HotListShape): ((items: ReadonlyArray<Mark>) => void) | undefined =>
  EntryPoints.twinOf(hotList.markDirty)

/**
 * The host's hot-list, as the mesh sees it.
 *
 * @since 0.1.0
 * @category tags
 */
export class HotList extends Context.Service<HotList, HotListShape>()("queen-mesh/HotList") {}

/**
 * The shipped hot-list: read or take the pending items.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryHotListShape extends HotListShape {
  /** The pending items, without clearing them. */
  readonly pending: Effect.Effect<ReadonlyArray<HotItem>>
  /** Takes and clears the pending items. */
  readonly take: Effect.Effect<ReadonlyArray<HotItem>>
  /** Bumped by every mark that added at least one new pending item. */
  readonly epoch: Effect.Effect<number>
  /** How many marks were dropped, past a bound or for an over-long name, since the hot-list started. */
  readonly dropped: Effect.Effect<number>
}

/**
 * The shipped hot-list's bounds.
 *
 * @since 0.1.0
 * @category models
 */
export interface MemoryHotListOptions {
  /** Pending items kept before new marks are dropped. Default 100,000. */
  readonly maxPending?: number
  /** UTF-8 bytes of queue, tenant and partition kept across the pending items. Default 8 MiB. */
  readonly maxPendingBytes?: number
}

/**
 * The shipped in-memory hot-list.
 *
 * @since 0.1.0
 * @category tags
 */
export class MemoryHotList extends Context.Service<MemoryHotList, MemoryHotListShape>()(
  "queen-mesh/MemoryHotList"
) {}

const NO_GROUP: Option.Option<string> = Option.none()

/** The group of an item, none for a plain queue item (or a caller's item built without one). */
const groupOf = (item: Mark): Option.Option<string> =>
  item.group !== undefined && Option.isOption(item.group) ? item.group : NO_GROUP

/**
 * A stable key for a `{tenant, queue, partition, group?}` item; absent tenants never collide with
 * named ones, a scoped mark never with an unscoped one, and the names are length-prefixed so no choice
 * of characters makes two items share a key.
 *
 * @since 0.1.0
 * @category keys
 */
export const itemKey = (item: Mark): string => {
  const key = Option.isSome(item.tenant)
    ? `t${item.tenant.value.length}:${item.tenant.value}${item.queue.length}:${item.queue}${item.partition}`
    : `-${item.queue.length}:${item.queue}${item.partition}`
  const group = groupOf(item)
  return Option.isSome(group) ? `g${group.value.length}:${group.value}${key}` : key
}

const byteLength = (text: string): number => Buffer.byteLength(text, "utf8")

/**
 * `item` with its tenant normalised (a UUID lowercased) and its group read as the wire reads it (an
 * empty or over-long one is absent), or `undefined` when a name is over-long.
 */
const normalItem = (item: Mark): HotItem | undefined => {
  if (!Names.fitsName(item.queue) || !Names.fitsName(item.partition)) return undefined
  const given = groupOf(item)
  const group = Option.isSome(given) ? Names.group(given.value) : NO_GROUP
  if (Option.isNone(item.tenant))
    return { queue: item.queue, partition: item.partition, tenant: item.tenant, group }
  const tenant = Names.tenant(item.tenant.value)
  if (tenant === undefined) return undefined
  return { queue: item.queue, partition: item.partition, tenant, group }
}

/**
 * An empty shipped hot-list.
 *
 * @example
 * ```ts
 * import { deepStrictEqual } from "node:assert"
 * import { Effect } from "effect"
 * import { Frame, HotList } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const hotList = yield* HotList.makeMemory()
 *   const item = Frame.hotItem({ queue: "orders", partition: "p1" })
 *   // Marking is idempotent: the same item twice is one pending item.
 *   yield* hotList.markDirty([item])
 *   yield* hotList.markDirty([item])
 *   deepStrictEqual(yield* hotList.take, [item])
 *   deepStrictEqual(yield* hotList.pending, [])
 * })
 *
 * Effect.runPromise(program)
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory = (options: MemoryHotListOptions = {}) =>
  Effect.sync((): MemoryHotListShape => {
    const maxPending = options.maxPending ?? 100_000
    const maxPendingBytes = options.maxPendingBytes ?? 8 * 1024 * 1024
    const pending = new Map<string, HotItem>()
    let pendingBytes = 0
    let epoch = 0
    let dropped = 0
    const markDirtyUnsafe = (items: ReadonlyArray<Mark>): void => {
      let added = false
      for (const given of items) {
        const item = normalItem(given)
        if (item === undefined) {
          dropped++
          continue
        }
        const key = itemKey(item)
        if (pending.has(key)) continue
        const cost =
          byteLength(item.queue) +
          byteLength(item.partition) +
          (Option.isSome(item.tenant) ? byteLength(item.tenant.value) : 0) +
          (Option.isSome(item.group) ? byteLength(item.group.value) : 0)
        if (pending.size >= maxPending || pendingBytes + cost > maxPendingBytes) {
          dropped++
          continue
        }
        pending.set(key, item)
        pendingBytes += cost
        added = true
      }
      if (added) epoch++
    }
    return {
      ...sync(markDirtyUnsafe),
      pending: Effect.sync(() => [...pending.values()]),
      take: Effect.sync(() => {
        const items = [...pending.values()]
        pending.clear()
        pendingBytes = 0
        return items
      }),
      epoch: Effect.sync(() => epoch),
      dropped: Effect.sync(() => dropped)
    }
  })

/**
 * The shipped hot-list, provided both as `MemoryHotList` and as the `HotList` the mesh marks.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = (options: MemoryHotListOptions = {}): Layer.Layer<MemoryHotList | HotList> =>
  Layer.effectContext(
    Effect.map(makeMemory(options), (hot) => Context.make(MemoryHotList, hot).pipe(Context.add(HotList, hot)))
  )

// ---------------------------------------------------------------------------------------------
// the send side
// ---------------------------------------------------------------------------------------------

/**
 * The send side of hot-list hints (spec "The frame set", tag 5): marks are coalesced, so a partition
 * pushed a thousand times in one flush window produces one hint.
 *
 * @since 0.1.0
 * @category models
 */
export interface Coalescer {
  /**
   * Adds `item` to the window's distinct marks; it goes out with them when the window ends. A scoped
   * and an unscoped mark of the same partition are two marks.
   */
  readonly mark: (item: Mark) => Effect.Effect<void>
}

/**
 * Distinct marks the coalescer holds before it flushes at once, whatever the window.
 *
 * @since 0.1.0
 * @category constants
 */
export const FLUSH_AT = 10_000

/**
 * A coalescer that hands the distinct items marked within each `window` to `send`, once the window
 * ends (or at once past {@link FLUSH_AT} items). Its loop waits while nothing is marked, so an idle
 * node has no timer running; it stops with the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeCoalescer = (options: {
  readonly window: Duration.Input
  readonly send: (items: ReadonlyArray<HotItem>) => Effect.Effect<void>
}): Effect.Effect<Coalescer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const pending = new Map<string, HotItem>()
    const marked = yield* Latch.make(false)
    const flush = Effect.suspend(() => {
      marked.closeUnsafe()
      if (pending.size === 0) return Effect.void
      const items = [...pending.values()]
      pending.clear()
      return options.send(items)
    })
    yield* loop("HotListFlush", Effect.andThen(Effect.sleep(options.window), flush), {
      before: marked.await
    })
    return {
      mark: (item) =>
        Effect.suspend(() => {
          pending.set(itemKey(item), {
            queue: item.queue,
            partition: item.partition,
            tenant: item.tenant,
            group: groupOf(item)
          })
          marked.openUnsafe()
          return pending.size >= FLUSH_AT ? flush : Effect.void
        })
    }
  })
