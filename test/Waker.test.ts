import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, TestClock } from "effect"
import * as Frame from "../src/Frame.js"
import * as Waker from "../src/Waker.js"
import { settle } from "./fixtures/memory.js"

const park = (waker: Waker.LocalWakerShape, queue: string, tenant?: string) =>
  Effect.fork(waker.awaitWake({ queue, tenant: Frame.tenantOf(tenant) }, { maxWait: "10 seconds" }))

describe("LocalWaker", () => {
  it.scoped("a named tenant wakes only that tenant's pops on that queue", () =>
    Effect.gen(function* () {
      const waker = yield* Waker.makeLocal()
      const acme = yield* park(waker, "orders", "acme")
      const other = yield* park(waker, "orders", "globex")
      const otherQueue = yield* park(waker, "invoices", "acme")
      yield* settle
      assert.strictEqual(yield* waker.parked, 3)
      yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p1", tenant: "acme" }))
      assert.strictEqual(yield* Fiber.join(acme), "woken")
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(yield* Fiber.join(other), "timeout")
      assert.strictEqual(yield* Fiber.join(otherQueue), "timeout")
      assert.strictEqual(yield* waker.parked, 0)
    })
  )

  it.scoped("an absent tenant fans out to every tenant parked on that queue name", () =>
    Effect.gen(function* () {
      const waker = yield* Waker.makeLocal()
      const one = yield* park(waker, "orders", "t1")
      const two = yield* park(waker, "orders", "t2")
      const bare = yield* park(waker, "orders")
      const elsewhere = yield* park(waker, "other", "t1")
      yield* settle
      yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p" }))
      assert.strictEqual(yield* Fiber.join(one), "woken")
      assert.strictEqual(yield* Fiber.join(two), "woken")
      assert.strictEqual(yield* Fiber.join(bare), "woken")
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(yield* Fiber.join(elsewhere), "timeout")
      assert.deepStrictEqual(
        yield* waker.takePartitionHints({ queue: "orders", tenant: Option.some("t2") }),
        ["p"]
      )
    })
  )

  it.scoped("with tenancy off an absent tenant names the default tenant", () =>
    Effect.gen(function* () {
      const waker = yield* Waker.makeLocal({ tenancy: false, defaultTenant: "main" })
      const bare = yield* park(waker, "orders")
      const named = yield* park(waker, "orders", "main")
      const stray = yield* park(waker, "orders", "t1")
      yield* settle
      yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p" }))
      assert.strictEqual(yield* Fiber.join(bare), "woken")
      assert.strictEqual(yield* Fiber.join(named), "woken")
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(yield* Fiber.join(stray), "timeout")
    })
  )

  it.scoped("a parked pop falls back to its own backoff when no wake comes", () =>
    Effect.gen(function* () {
      const waker = yield* Waker.makeLocal()
      const pop = yield* Effect.fork(
        waker.awaitWake({ queue: "q", tenant: Option.none() }, { maxWait: "2 seconds" })
      )
      yield* TestClock.adjust("1999 millis")
      assert.isTrue(Option.isNone(yield* Fiber.poll(pop)))
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(pop), "timeout")
      assert.strictEqual(yield* waker.parked, 0)
    })
  )

  it.scoped("an interrupted pop leaves the registry", () =>
    Effect.gen(function* () {
      const waker = yield* Waker.makeLocal()
      const pop = yield* park(waker, "q")
      yield* settle
      assert.strictEqual(yield* waker.parked, 1)
      yield* Fiber.interrupt(pop)
      assert.strictEqual(yield* waker.parked, 0)
    })
  )

  it.scoped("partition hints are recorded per tenant and queue, bounded, and cleared on take", () =>
    Effect.gen(function* () {
      const waker = yield* Waker.makeLocal({ maxHintKeys: 2, maxHintsPerKey: 3 })
      for (const partition of ["a", "b", "a", "c", "d"]) {
        yield* waker.wake(Frame.queueItem({ queue: "q", partition, tenant: "t" }))
      }
      yield* waker.wake(Frame.queueItem({ queue: "q2", partition: "x", tenant: "t" }))
      yield* waker.wake(Frame.queueItem({ queue: "q3", partition: "y", tenant: "t" }))
      const target = { queue: "q", tenant: Option.some("t") }
      assert.deepStrictEqual(yield* waker.takePartitionHints(target), ["a", "b", "c"])
      assert.deepStrictEqual(yield* waker.takePartitionHints(target), [])
      assert.deepStrictEqual(yield* waker.takePartitionHints({ queue: "q3", tenant: Option.some("t") }), [])
    })
  )
})
