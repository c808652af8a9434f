/**
 * The host's hot-list of candidate partitions (spec "The frame set", tag 5). A `HOTLIST_DIRTY_BATCH`
 * marks items pending; marking is idempotent and commutative, and a lost mark is healed by the
 * hot-list's own periodic reseed.
 *
 * The shipped `MemoryHotList` is bounded by items (`maxPending`, default 100,000) and by UTF-8 bytes of
 * queue, tenant and partition (`maxPendingBytes`, default 8 MiB); a mark past a bound is dropped, as is
 * one naming anything over `MAX_NAME_BYTES` (256 bytes, the wire's limit), and both are counted in
 * `dropped`. A UUID tenant is kept lowercased, so it is the same item in any case.
 *
 * @since 0.1.0
 */
import { Context, type Duration, Effect, Layer, Option, type Scope } from "effect"
import type { QueueItem } from "./Frame.js"
import { loop } from "./internal/loop.js"
import * as rules from "./internal/rules.js"
import * as SyncTwin from "./internal/syncTwin.js"

/**
 * What the mesh calls for every received `HOTLIST_DIRTY_BATCH`.
 *
 * @since 0.1.0
 * @category models
 */
export interface HotListShape {
  /** Mark `items` pending. Idempotent and commutative. */
  readonly markDirty: (items: ReadonlyArray<QueueItem>) => Effect.Effect<void>
  /**
   * @deprecated Build the hot-list with {@link sync} instead: a field of its own is copied by a spread
   * and would bypass a wrapper that replaces `markDirty` alone. Still honoured when `markDirty` has no
   * twin.
   */
  readonly unsafeMarkDirty?: (items: ReadonlyArray<QueueItem>) => void
}

/**
 * A hot-list from one synchronous function; the mesh calls it straight from the receive path.
 *
 * @since 0.1.0
 * @category constructors
 */
export const sync = (markDirty: (items: ReadonlyArray<QueueItem>) => void): HotListShape => ({
  markDirty: SyncTwin.register(
    (items: ReadonlyArray<QueueItem>) => Effect.sync(() => markDirty(items)),
    markDirty
  )
})

/**
 * The function the mesh calls to mark items without an effect, if `hotList` has one.
 *
 * @since 0.1.0
 * @category models
 */
export const syncMarkOf = (hotList: HotListShape): ((items: ReadonlyArray<QueueItem>) => void) | undefined =>
  SyncTwin.twinOf(hotList.markDirty) ?? hotList.unsafeMarkDirty

/**
 * The host's hot-list, as the mesh sees it.
 *
 * @since 0.1.0
 * @category tags
 */
export class HotList extends Context.Tag("queen-mesh/HotList")<HotList, HotListShape>() {}

/**
 * The shipped hot-list: read or take the pending items.
 *
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
export class MemoryHotList extends Context.Tag("queen-mesh/MemoryHotList")<
  MemoryHotList,
  MemoryHotListShape
>() {}

/**
 * A stable key for a `{tenant, queue, partition}` item; absent tenants never collide with named ones,
 * and the names are length-prefixed so no choice of characters makes two items share a key.
 *
 * @since 0.1.0
 * @category keys
 */
export const itemKey = (item: QueueItem): string =>
  Option.isSome(item.tenant)
    ? `t${item.tenant.value.length}:${item.tenant.value}${item.queue.length}:${item.queue}${item.partition}`
    : `-${item.queue.length}:${item.queue}${item.partition}`

const byteLength = (text: string): number => Buffer.byteLength(text, "utf8")

/** `item` with its tenant normalised (a UUID lowercased), or `undefined` when a name is over-long. */
const normalItem = (item: QueueItem): QueueItem | undefined => {
  if (
    !rules.fitsBytes(item.queue, rules.MAX_NAME_BYTES) ||
    !rules.fitsBytes(item.partition, rules.MAX_NAME_BYTES)
  ) {
    return undefined
  }
  if (Option.isNone(item.tenant)) return item
  const tenant = rules.tenant(item.tenant.value)
  if (tenant === undefined) return undefined
  return Option.isSome(tenant) && tenant.value === item.tenant.value ? item : { ...item, tenant }
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
 *   const item = Frame.queueItem({ queue: "orders", partition: "p1" })
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
    const pending = new Map<string, QueueItem>()
    let pendingBytes = 0
    let epoch = 0
    let dropped = 0
    const unsafeMarkDirty = (items: ReadonlyArray<QueueItem>): void => {
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
          (Option.isSome(item.tenant) ? byteLength(item.tenant.value) : 0)
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
      ...sync(unsafeMarkDirty),
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
  /** Adds `item` to the window's distinct marks; it goes out with them when the window ends. */
  readonly mark: (item: QueueItem) => Effect.Effect<void>
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
  readonly window: Duration.DurationInput
  readonly send: (items: ReadonlyArray<QueueItem>) => Effect.Effect<void>
}): Effect.Effect<Coalescer, never, Scope.Scope> =>
  Effect.gen(function* () {
    const pending = new Map<string, QueueItem>()
    const marked = yield* Effect.makeLatch(false)
    const flush = Effect.suspend(() => {
      marked.unsafeClose()
      if (pending.size === 0) return Effect.void
      const items = [...pending.values()]
      pending.clear()
      return options.send(items)
    })
    yield* loop("HotListFlush", Effect.zipRight(Effect.sleep(options.window), flush), {
      before: marked.await
    })
    return {
      mark: (item) =>
        Effect.suspend(() => {
          pending.set(itemKey(item), item)
          marked.unsafeOpen()
          return pending.size >= FLUSH_AT ? flush : Effect.void
        })
    }
  })
