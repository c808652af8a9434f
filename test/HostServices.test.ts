import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, SubscriptionRef } from "effect"
import * as Frame from "../src/Frame.js"
import * as HotList from "../src/HotList.js"
import * as MaintenanceFlags from "../src/MaintenanceFlags.js"
import * as QueueConfigCache from "../src/QueueConfigCache.js"

const settings = { leaseTimeSeconds: 30, encrypted: true }

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
