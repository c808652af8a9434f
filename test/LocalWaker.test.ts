import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Option } from "effect"
import { TestClock } from "effect/testing"
import * as Frame from "../src/Frame.js"
import { DEFAULT_TENANT, MAX_NAME_CHARS } from "../src/internal/wire/names.js"
import * as LocalWaker from "../src/LocalWaker.js"
import * as Waker from "../src/Waker.js"
import { settle, settleUntil } from "./fixtures/memory.js"

const park = (waker: LocalWaker.LocalWakerShape, queue: string, tenant?: string) =>
  Effect.forkChild(waker.awaitWake({ queue, tenant: Frame.tenantOf(tenant) }, { maxWait: "10 seconds" }))

describe("LocalWaker", () => {
  it.effect("a named tenant wakes only that tenant's pops on that queue", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
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

  it.effect("an absent tenant fans out to every tenant parked on that queue name", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
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

  it.effect("a target takes its tenant as the mesh's inputs do: a string, an Option, or none", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
      const upper = "7F3A9C2E-1B4D-4E8F-A6B0-C2D4E6F80A1B"
      const byString = yield* Effect.forkChild(
        waker.awaitWake({ queue: "q", tenant: upper }, { maxWait: "10 seconds" })
      )
      const byDefault = yield* Effect.forkChild(waker.awaitWake({ queue: "q" }, { maxWait: "10 seconds" }))
      yield* settle
      yield* waker.wake(Frame.queueItem({ queue: "q", partition: "p1", tenant: upper.toLowerCase() }))
      assert.strictEqual(yield* Fiber.join(byString), "woken")
      yield* waker.wake(Frame.queueItem({ queue: "q", partition: "p2", tenant: DEFAULT_TENANT }))
      assert.strictEqual(yield* Fiber.join(byDefault), "woken")
      assert.deepStrictEqual(yield* waker.takePartitionHints({ queue: "q", tenant: Option.some(upper) }), [
        "p1"
      ])
      assert.deepStrictEqual(yield* waker.takePartitionHints({ queue: "q", tenant: null }), ["p2"])
    })
  )

  it.effect("with tenancy off an absent tenant names the default tenant", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make({ tenancy: false, defaultTenant: "main" })
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

  it.effect("a parked pop falls back to its own backoff when no wake comes", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
      const pop = yield* Effect.forkChild(
        waker.awaitWake({ queue: "q", tenant: Option.none() }, { maxWait: "2 seconds" })
      )
      yield* TestClock.adjust("1999 millis")
      assert.isUndefined(pop.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(yield* Fiber.join(pop), "timeout")
      assert.strictEqual(yield* waker.parked, 0)
    })
  )

  it.effect("an interrupted pop leaves the registry", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
      const pop = yield* park(waker, "q")
      yield* settle
      assert.strictEqual(yield* waker.parked, 1)
      yield* Fiber.interrupt(pop)
      assert.strictEqual(yield* waker.parked, 0)
    })
  )

  it.effect("partition hints are recorded per tenant and queue, bounded, and cleared on take", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make({ maxHintKeys: 2, maxHintsPerKey: 3 })
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

  it.effect(
    "with tenancy off, a wake naming the default-tenant UUID reaches the pops parked without a tenant",
    () =>
      Effect.gen(function* () {
        const waker = yield* LocalWaker.make({ tenancy: false })
        const bare = yield* park(waker, "orders")
        const named = yield* park(waker, "orders", DEFAULT_TENANT.toUpperCase())
        yield* settle
        yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p", tenant: DEFAULT_TENANT }))
        assert.strictEqual(yield* Fiber.join(bare), "woken")
        assert.strictEqual(yield* Fiber.join(named), "woken")
        assert.deepStrictEqual(yield* waker.takePartitionHints({ queue: "orders", tenant: Option.none() }), [
          "p"
        ])
      })
  )

  it.effect("with tenancy on, a UUID tenant is the same tenant in any case", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
      const upper = "7F3A9C2E-1B4D-4E8F-A6B0-C2D4E6F80A1B"
      const byDefault = yield* Effect.forkChild(
        waker.awaitWake(
          { queue: "orders", tenant: Option.some(DEFAULT_TENANT.toUpperCase()) },
          { maxWait: "10 seconds" }
        )
      )
      const bare = yield* park(waker, "orders")
      const mixed = yield* park(waker, "orders", upper)
      const other = yield* park(waker, "orders", "acme")
      yield* settle
      // What the decoder hands over: UUIDs lowercased.
      yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p", tenant: DEFAULT_TENANT }))
      assert.strictEqual(yield* Fiber.join(byDefault), "woken")
      assert.strictEqual(yield* Fiber.join(bare), "woken")
      assert.isUndefined(mixed.pollUnsafe())
      yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p2", tenant: upper.toLowerCase() }))
      assert.strictEqual(yield* Fiber.join(mixed), "woken")
      assert.deepStrictEqual(
        yield* waker.takePartitionHints({ queue: "orders", tenant: Option.some(upper) }),
        ["p2"]
      )
      assert.strictEqual(yield* waker.parked, 1)
      yield* TestClock.adjust("10 seconds")
      assert.strictEqual(yield* Fiber.join(other), "timeout")
    })
  )

  it.effect("partition hints stay within their byte bound, and over-long names are refused", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make({ maxHintKeys: 1_000_000 })
      const long = (prefix: string, i: number) => `${prefix}${i}`.padEnd(MAX_NAME_CHARS, "x")
      const sent = 20_000
      for (let i = 0; i < sent; i++) {
        Waker.syncWakeOf(waker)!(
          Frame.queueItem({ queue: long("q", i), partition: long("p", i), tenant: DEFAULT_TENANT })
        )
      }
      let kept = 0
      let bytes = 0
      for (let i = 0; i < sent; i++) {
        const queue = long("q", i)
        for (const partition of yield* waker.takePartitionHints({ queue, tenant: Option.none() })) {
          kept++
          bytes += Buffer.byteLength(queue) + Buffer.byteLength(DEFAULT_TENANT) + Buffer.byteLength(partition)
        }
      }
      assert.isAtMost(bytes, 4 * 1024 * 1024)
      assert.isAbove(kept, 7_000)
      assert.strictEqual(yield* waker.dropped, sent - kept)

      // Once taken, the bytes are free again.
      yield* waker.wake(Frame.queueItem({ queue: "q", partition: "p", tenant: "t" }))
      assert.deepStrictEqual(yield* waker.takePartitionHints({ queue: "q", tenant: Option.some("t") }), ["p"])

      const tooLong = "q".repeat(MAX_NAME_CHARS + 1)
      const before = yield* waker.dropped
      yield* waker.wake(Frame.queueItem({ queue: tooLong, partition: "p" }))
      const pop = yield* Effect.forkChild(
        waker.awaitWake({ queue: "q", tenant: Option.some(tooLong) }, { maxWait: "1 second" })
      )
      yield* settle
      assert.strictEqual(yield* waker.parked, 0)
      assert.deepStrictEqual(yield* waker.takePartitionHints({ queue: tooLong, tenant: Option.none() }), [])
      assert.strictEqual(yield* waker.dropped, before + 3)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(pop), "timeout")
    })
  )

  it.effect("a park with an earlier deadline wakes the reaper early", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
      const late = yield* Effect.forkChild(
        waker.awaitWake({ queue: "q", tenant: Option.none() }, { maxWait: "10 seconds" })
      )
      yield* TestClock.adjust(1)
      const early = yield* Effect.forkChild(
        waker.awaitWake({ queue: "q", tenant: Option.none() }, { maxWait: "1 second" })
      )
      yield* TestClock.adjust("1 second")
      assert.strictEqual(yield* Fiber.join(early), "timeout")
      assert.isUndefined(late.pollUnsafe())
      yield* TestClock.adjust("9 seconds")
      assert.strictEqual(yield* Fiber.join(late), "timeout")
    })
  )

  it.effect("pops due close together share one pass: never early, at most the resolution late", () =>
    Effect.gen(function* () {
      const timeOuts = (options: LocalWaker.LocalWakerOptions) =>
        Effect.gen(function* () {
          const waker = yield* LocalWaker.make(options)
          const start = yield* Clock.currentTimeMillis
          const target = { queue: "q", tenant: Option.none() }
          const ends: Array<number> = []
          const at = (maxWait: number) =>
            waker.awaitWake(target, { maxWait: Duration.millis(maxWait) }).pipe(
              Effect.andThen(Clock.currentTimeMillis),
              Effect.map((t) => ends.push(t - start)),
              Effect.forkChild
            )
          yield* at(100)
          yield* at(103)
          yield* at(125)
          yield* TestClock.adjust(200)
          return ends
        })
      assert.deepStrictEqual(yield* timeOuts({}), [100, 125, 125])
      assert.deepStrictEqual(yield* timeOuts({ timeoutResolution: "10 millis" }), [100, 110, 125])
      assert.deepStrictEqual(yield* timeOuts({ timeoutResolution: 0 }), [100, 103, 125])
    })
  )

  it.effect("a pop with no deadline never times out; one past the timer limit still does", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
      const target = { queue: "q", tenant: Option.none() }
      const forever = yield* Effect.forkChild(waker.awaitWake(target, { maxWait: Duration.infinity }))
      const month = yield* Effect.forkChild(waker.awaitWake(target, { maxWait: "30 days" }))
      yield* TestClock.adjust("30 days")
      assert.strictEqual(yield* Fiber.join(month), "timeout")
      assert.isUndefined(forever.pollUnsafe())
      assert.strictEqual(yield* waker.parked, 1)
      yield* waker.wake(Frame.queueItem({ queue: "q", partition: "" }))
      assert.strictEqual(yield* Fiber.join(forever), "woken")
    })
  )

  it.effect("after most pops are woken the heap is compacted and the rest still time out on time", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make({ timeoutResolution: 0 })
      const fibers = []
      for (let i = 0; i < 1_000; i++) {
        const queue = i % 10 === 0 ? "slow" : `q${i}`
        fibers.push(
          yield* Effect.forkChild(
            waker.awaitWake({ queue, tenant: Option.none() }, { maxWait: Duration.millis(1_000 + i) })
          )
        )
      }
      yield* settleUntil(Effect.map(waker.parked, (n) => n === 1_000))
      for (let i = 0; i < 1_000; i++) {
        if (i % 10 !== 0) yield* waker.wake(Frame.queueItem({ queue: `q${i}`, partition: "" }))
      }
      assert.strictEqual(yield* waker.parked, 100)
      yield* TestClock.adjust(999)
      assert.strictEqual(yield* waker.parked, 100)
      yield* TestClock.adjust(500)
      assert.strictEqual(yield* waker.parked, 50)
      yield* TestClock.adjust(500)
      assert.strictEqual(yield* waker.parked, 0)
      for (let i = 0; i < 1_000; i++) {
        assert.strictEqual(yield* Fiber.join(fibers[i]!), i % 10 === 0 ? "timeout" : "woken")
      }
    })
  )

  it.effect("10,000 pops with random deadlines time out exactly at their deadlines, in order", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
      const count = 10_000
      const queues = 100
      // A fixed LCG, so the test is the same every run.
      let seed = 12_345
      const random = (n: number) => {
        seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
        return seed % n
      }
      // Multiples of 25 ms, so the default resolution never merges two deadlines into one pass.
      const deadlines = Array.from({ length: count }, () => 25 * (1 + random(80)))
      const ended: Array<{
        readonly i: number
        readonly outcome: LocalWaker.WakeOutcome
        readonly at: number
      }> = []
      const fibers: Array<Fiber.Fiber<void>> = []
      for (let i = 0; i < count; i++) {
        const target = { queue: `q${i % queues}`, tenant: Option.none() }
        const pop = waker.awaitWake(target, { maxWait: Duration.millis(deadlines[i]!) }).pipe(
          Effect.flatMap((outcome) =>
            Effect.map(Clock.currentTimeMillis, (at) => ended.push({ i, outcome, at }))
          ),
          Effect.asVoid
        )
        fibers.push(yield* Effect.forkChild(pop))
      }
      yield* settleUntil(Effect.map(waker.parked, (n) => n === count))

      // Queues 0..9 are woken now, queues 10..19 half-way; pops i % 7 === 3 elsewhere are interrupted.
      const wokenEarly = (i: number) => i % queues < 10
      const wokenLater = (i: number) => i % queues >= 10 && i % queues < 20
      const interrupted = (i: number) => !wokenEarly(i) && !wokenLater(i) && i % 7 === 3
      for (let q = 0; q < 10; q++) yield* waker.wake(Frame.queueItem({ queue: `q${q}`, partition: "" }))
      yield* Fiber.interruptAll(fibers.filter((_, i) => interrupted(i)))
      const left = (at: number, laterWoken: boolean) =>
        deadlines.filter(
          (d, i) => !wokenEarly(i) && !interrupted(i) && !(laterWoken && wokenLater(i)) && d > at
        ).length
      yield* settle
      assert.strictEqual(yield* waker.parked, left(0, false))

      yield* TestClock.adjust(1_000)
      assert.strictEqual(yield* waker.parked, left(1_000, false))
      for (let q = 10; q < 20; q++) yield* waker.wake(Frame.queueItem({ queue: `q${q}`, partition: "" }))
      yield* settle
      assert.strictEqual(yield* waker.parked, left(1_000, true))
      yield* TestClock.adjust(1_000)
      assert.strictEqual(yield* waker.parked, 0)

      const byPop = new Map(ended.map((end) => [end.i, end]))
      assert.strictEqual(byPop.size, ended.length)
      for (let i = 0; i < count; i++) {
        const end = byPop.get(i)
        if (interrupted(i)) {
          assert.isUndefined(end)
        } else if (wokenEarly(i)) {
          assert.deepStrictEqual(end, { i, outcome: "woken", at: 0 })
        } else if (wokenLater(i) && deadlines[i]! > 1_000) {
          assert.deepStrictEqual(end, { i, outcome: "woken", at: 1_000 })
        } else {
          assert.deepStrictEqual(end, { i, outcome: "timeout", at: deadlines[i] })
        }
      }
      const timeouts = ended.filter((end) => end.outcome === "timeout")
      assert.isAbove(timeouts.length, count / 2)
      for (let k = 1; k < timeouts.length; k++) assert.isAtMost(timeouts[k - 1]!.at, timeouts[k]!.at)
    })
  )
})
