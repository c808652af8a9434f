import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, SubscriptionRef } from "effect"
import * as Frame from "../src/Frame.js"
import * as HotList from "../src/HotList.js"
import { DEFAULT_TENANT, MAX_NAME_CHARS } from "../src/internal/wire/names.js"
import * as MaintenanceFlags from "../src/MaintenanceFlags.js"
import * as QueueConfigCache from "../src/QueueConfigCache.js"

const settings = { leaseTimeSeconds: 30, encrypted: true }
const UPPER_UUID = "7F3A9C2E-1B4D-4E8F-A6B0-C2D4E6F80A1B"
const long = (prefix: string, i: number) => `${prefix}${i}`.padEnd(MAX_NAME_CHARS, "x")

describe("QueueConfigCache (memory)", () => {
  it.effect("invalidating a named tenant drops only that entry", () =>
    Effect.gen(function* () {
      const cache = yield* QueueConfigCache.makeMemory()
      yield* cache.set(Frame.queueRef({ queue: "q", tenant: "a" }), settings)
      yield* cache.set(Frame.queueRef({ queue: "q", tenant: "b" }), settings)
      yield* cache.invalidate(Frame.queueRef({ queue: "q", tenant: "a" }))
      assert.isTrue(Option.isNone(yield* cache.get(Frame.queueRef({ queue: "q", tenant: "a" }))))
      assert.deepStrictEqual(
        yield* cache.get(Frame.queueRef({ queue: "q", tenant: "b" })),
        Option.some(settings)
      )
    })
  )

  it.effect("invalidating with an absent tenant drops that queue for every tenant", () =>
    Effect.gen(function* () {
      const cache = yield* QueueConfigCache.makeMemory()
      yield* cache.set(Frame.queueRef({ queue: "q", tenant: "a" }), settings)
      yield* cache.set(Frame.queueRef({ queue: "q", tenant: "b" }), settings)
      yield* cache.set(Frame.queueRef({ queue: "q" }), settings)
      yield* cache.set(Frame.queueRef({ queue: "other", tenant: "a" }), settings)
      yield* cache.invalidate(Frame.queueRef({ queue: "q" }))
      assert.strictEqual(yield* cache.size, 1)
      assert.isTrue(Option.isSome(yield* cache.get(Frame.queueRef({ queue: "other", tenant: "a" }))))
    })
  )

  it.effect(
    "an invalidation naming the default-tenant UUID drops what was cached for the default tenant",
    () =>
      Effect.gen(function* () {
        const cache = yield* QueueConfigCache.makeMemory()
        yield* cache.set(Frame.queueRef({ queue: "q" }), settings)
        yield* cache.set(Frame.queueRef({ queue: "q", tenant: "acme" }), settings)
        assert.deepStrictEqual(
          yield* cache.get(Frame.queueRef({ queue: "q", tenant: DEFAULT_TENANT })),
          Option.some(settings)
        )
        yield* cache.invalidate(Frame.queueRef({ queue: "q", tenant: DEFAULT_TENANT }))
        assert.isTrue(Option.isNone(yield* cache.get(Frame.queueRef({ queue: "q" }))))
        assert.strictEqual(yield* cache.size, 1)
      })
  )

  it.effect("get and set take a tenant as the mesh's inputs do: a string, an Option, or none", () =>
    Effect.gen(function* () {
      const cache = yield* QueueConfigCache.makeMemory()
      yield* cache.set({ queue: "q", tenant: UPPER_UUID }, settings)
      yield* cache.set({ queue: "q" }, { leaseTimeSeconds: 5, encrypted: false })
      assert.deepStrictEqual(
        yield* cache.get(Frame.queueRef({ queue: "q", tenant: UPPER_UUID.toLowerCase() })),
        Option.some(settings)
      )
      assert.deepStrictEqual(
        yield* cache.get({ queue: "q", tenant: Option.some(UPPER_UUID) }),
        Option.some(settings)
      )
      for (const none of [undefined, null, "", Option.none()]) {
        assert.deepStrictEqual(
          yield* cache.get({ queue: "q", tenant: none }),
          Option.some({ leaseTimeSeconds: 5, encrypted: false })
        )
      }
      assert.deepStrictEqual(
        yield* cache.get({ queue: "q", tenant: DEFAULT_TENANT }),
        Option.some({ leaseTimeSeconds: 5, encrypted: false })
      )
    })
  )

  it.effect("a UUID tenant is the same tenant in any case", () =>
    Effect.gen(function* () {
      const cache = yield* QueueConfigCache.makeMemory()
      yield* cache.set(Frame.queueRef({ queue: "q", tenant: UPPER_UUID }), settings)
      assert.deepStrictEqual(
        yield* cache.get(Frame.queueRef({ queue: "q", tenant: UPPER_UUID.toLowerCase() })),
        Option.some(settings)
      )
      // What the decoder hands over: UUIDs lowercased.
      yield* cache.invalidate(Frame.queueRef({ queue: "q", tenant: UPPER_UUID.toLowerCase() }))
      assert.isTrue(Option.isNone(yield* cache.get(Frame.queueRef({ queue: "q", tenant: UPPER_UUID }))))
    })
  )

  it.effect(
    "the cache is bounded by entries and by bytes, evicting the oldest; over-long names are refused",
    () =>
      Effect.gen(function* () {
        const small = yield* QueueConfigCache.makeMemory({ maxEntries: 3 })
        for (const queue of ["a", "b", "c"]) yield* small.set(Frame.queueRef({ queue }), settings)
        yield* small.set(Frame.queueRef({ queue: "a" }), settings) // a is now the newest
        yield* small.set(Frame.queueRef({ queue: "d" }), settings)
        assert.strictEqual(yield* small.size, 3)
        assert.isTrue(Option.isNone(yield* small.get(Frame.queueRef({ queue: "b" }))))
        assert.isTrue(Option.isSome(yield* small.get(Frame.queueRef({ queue: "a" }))))
        assert.strictEqual(yield* small.dropped, 1)

        const cache = yield* QueueConfigCache.makeMemory()
        const sent = 40_000
        for (let i = 0; i < sent; i++) {
          yield* cache.set(Frame.queueRef({ queue: long("q", i), tenant: long("t", i) }), settings)
        }
        const size = yield* cache.size
        assert.isAtMost(size * 2 * MAX_NAME_CHARS, 8 * 1024 * 1024)
        assert.isAbove(size, 16_000)
        assert.strictEqual(yield* cache.dropped, sent - size)
        const newest = Frame.queueRef({ queue: long("q", sent - 1), tenant: long("t", sent - 1) })
        assert.isTrue(Option.isSome(yield* cache.get(newest)))
        assert.isTrue(
          Option.isNone(yield* cache.get(Frame.queueRef({ queue: long("q", 0), tenant: long("t", 0) })))
        )

        const tooLong = "t".repeat(MAX_NAME_CHARS + 1)
        yield* cache.set(Frame.queueRef({ queue: "q", tenant: tooLong }), settings)
        yield* cache.set(Frame.queueRef({ queue: tooLong }), settings)
        assert.isTrue(Option.isNone(yield* cache.get(Frame.queueRef({ queue: "q", tenant: tooLong }))))
        assert.strictEqual(yield* cache.size, size)
        assert.strictEqual(yield* cache.dropped, sent - size + 2)
      })
  )
})

describe("HotList (memory)", () => {
  it.effect("marks are idempotent and commutative; the epoch moves only on news", () =>
    Effect.gen(function* () {
      const hot = yield* HotList.makeMemory()
      const x = Frame.queueItem({ queue: "q", partition: "1", tenant: "t" })
      const y = Frame.queueItem({ queue: "q", partition: "2" })
      yield* hot.markDirty([x, y])
      yield* hot.markDirty([y, x])
      assert.strictEqual(yield* hot.epoch, 1)
      assert.strictEqual((yield* hot.pending).length, 2)
      const other = yield* HotList.makeMemory()
      yield* other.markDirty([y])
      yield* other.markDirty([x])
      assert.sameDeepMembers([...(yield* other.take)], [...(yield* hot.take)])
      assert.strictEqual((yield* hot.pending).length, 0)
    })
  )

  it.effect("an absent tenant and a named one are different items; the pending set is bounded", () =>
    Effect.gen(function* () {
      const hot = yield* HotList.makeMemory({ maxPending: 2 })
      yield* hot.markDirty([
        Frame.queueItem({ queue: "q", partition: "1" }),
        Frame.queueItem({ queue: "q", partition: "1", tenant: "t" }),
        Frame.queueItem({ queue: "q", partition: "9" })
      ])
      assert.strictEqual((yield* hot.pending).length, 2)
    })
  )

  it.effect("a UUID tenant marked in either case is one pending item", () =>
    Effect.gen(function* () {
      const hot = yield* HotList.makeMemory()
      yield* hot.markDirty([Frame.queueItem({ queue: "q", partition: "1", tenant: UPPER_UUID })])
      yield* hot.markDirty([
        Frame.queueItem({ queue: "q", partition: "1", tenant: UPPER_UUID.toLowerCase() })
      ])
      assert.deepStrictEqual(yield* hot.take, [
        Frame.hotItem({ queue: "q", partition: "1", tenant: UPPER_UUID.toLowerCase() })
      ])
      assert.strictEqual(yield* hot.epoch, 1)
    })
  )

  it.effect("the pending set stays within its byte bound; over-long names are dropped", () =>
    Effect.gen(function* () {
      const hot = yield* HotList.makeMemory()
      const sent = 20_000
      for (let i = 0; i < sent; i++) {
        HotList.syncMarkOf(hot)!([
          Frame.queueItem({ queue: long("q", i), partition: long("p", i), tenant: long("t", i) })
        ])
      }
      const pending = yield* hot.pending
      let bytes = 0
      for (const item of pending) {
        bytes += Buffer.byteLength(item.queue) + Buffer.byteLength(item.partition)
        bytes += Option.isSome(item.tenant) ? Buffer.byteLength(item.tenant.value) : 0
      }
      assert.isAtMost(bytes, 8 * 1024 * 1024)
      assert.isAbove(pending.length, 10_000)
      assert.strictEqual(yield* hot.dropped, sent - pending.length)

      const tooLong = "p".repeat(MAX_NAME_CHARS + 1)
      yield* hot.markDirty([
        Frame.queueItem({ queue: "q", partition: tooLong }),
        Frame.queueItem({ queue: tooLong, partition: "p" }),
        Frame.queueItem({ queue: "q", partition: "p", tenant: tooLong })
      ])
      assert.strictEqual(yield* hot.dropped, sent - pending.length + 3)

      // Taking frees the bytes again.
      yield* hot.take
      yield* hot.markDirty([Frame.queueItem({ queue: "q", partition: "p" })])
      assert.strictEqual((yield* hot.pending).length, 1)
    })
  )
})

describe("MaintenanceFlags", () => {
  it.effect("both flags start off and can be watched", () =>
    Effect.gen(function* () {
      const flags = yield* MaintenanceFlags.make()
      assert.isFalse(yield* SubscriptionRef.get(flags.maintenance))
      assert.isFalse(yield* SubscriptionRef.get(flags.popMaintenance))
      yield* SubscriptionRef.set(flags.popMaintenance, true)
      assert.isTrue(yield* SubscriptionRef.get(flags.popMaintenance))
    })
  )
})

describe("host services at the widest names (255 characters of 4 bytes each)", () => {
  /** 255 code points, 1,000 bytes and more: the widest name the wire accepts, distinct per `i`. */
  const widest = (prefix: string, i: number) => {
    const head = `${prefix}${i}`
    return head + "😀".repeat(MAX_NAME_CHARS - head.length)
  }

  it.effect("the hot-list's byte bound holds, the group counted too", () =>
    Effect.gen(function* () {
      const hot = yield* HotList.makeMemory()
      const sent = 4_000
      for (let i = 0; i < sent; i++) {
        HotList.syncMarkOf(hot)!([
          Frame.hotItem({
            queue: widest("q", i),
            partition: widest("p", i),
            tenant: widest("t", i),
            group: widest("g", i)
          })
        ])
      }
      const pending = yield* hot.pending
      let bytes = 0
      for (const item of pending) {
        bytes += Buffer.byteLength(item.queue) + Buffer.byteLength(item.partition)
        bytes += Option.isSome(item.tenant) ? Buffer.byteLength(item.tenant.value) : 0
        bytes += Option.isSome(item.group) ? Buffer.byteLength(item.group.value) : 0
      }
      assert.isAtMost(bytes, 8 * 1024 * 1024)
      assert.isAbove(pending.length, 1_500)
      assert.strictEqual(yield* hot.dropped, sent - pending.length)
      assert.isAbove(Buffer.byteLength(widest("q", 0)), 1_000)
    })
  )

  it.effect("the cache's byte bound holds", () =>
    Effect.gen(function* () {
      const cache = yield* QueueConfigCache.makeMemory()
      const sent = 8_000
      for (let i = 0; i < sent; i++) {
        yield* cache.set(Frame.queueRef({ queue: widest("q", i), tenant: widest("t", i) }), settings)
      }
      const size = yield* cache.size
      assert.isAtMost(size * 2 * 1_000, 8 * 1024 * 1024)
      assert.isAbove(size, 3_000)
      assert.strictEqual(yield* cache.dropped, sent - size)
    })
  )
})
