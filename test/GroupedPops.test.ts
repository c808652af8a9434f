/**
 * Grouped pops over the shipped waker: one claim in flight per queue (and tenant), its rows handed out
 * in arrival order, wakes folded, nothing stranded or given twice. Under `TestClock`, against an
 * in-memory queue whose claims the test completes by hand.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Deferred, Duration, Effect, Exit, Fiber, Option, Queue, type Scope } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import * as Frame from "../src/Frame.js"
import type * as GroupedPops from "../src/GroupedPops.js"
import * as LocalWaker from "../src/LocalWaker.js"
import { numRuns } from "./fixtures/budget.js"
import { settle, settleUntil } from "./fixtures/memory.js"

/** A row of the in-memory queue. */
interface Row {
  readonly id: number
}

class ClaimBroke {
  readonly _tag = "ClaimBroke"
}

/**
 * An in-memory queue of rows. Claims either complete at once (`gated: false`) or wait in `pending`
 * until the test lets them go, so a test chooses the interleaving.
 */
const makeQueue = (options: { readonly gated: boolean }) =>
  Effect.gen(function* () {
    const ready: Array<Row> = []
    const claimed = new Set<number>()
    const released: Array<number> = []
    const requests: Array<GroupedPops.ClaimRequest> = []
    const pending = yield* Queue.unbounded<Deferred.Deferred<boolean>>()
    let inFlight = 0
    let maxInFlight = 0
    let next = 0
    /** Claims up to `limit` of the rows that were there when the claim began (its snapshot). */
    const take = (limit: number, visibleBelow: number): Array<Row> => {
      const rows: Array<Row> = []
      for (let i = 0; i < ready.length && rows.length < limit; ) {
        if (ready[i]!.id < visibleBelow) rows.push(...ready.splice(i, 1))
        else i++
      }
      for (const row of rows) claimed.add(row.id)
      return rows
    }
    const claim = (request: GroupedPops.ClaimRequest): Effect.Effect<ReadonlyArray<Row>, ClaimBroke> =>
      Effect.gen(function* () {
        requests.push(request)
        const visibleBelow = next
        inFlight++
        maxInFlight = Math.max(maxInFlight, inFlight)
        let ok = true
        if (options.gated) {
          const gate = yield* Deferred.make<boolean>()
          yield* Queue.offer(pending, gate)
          ok = yield* Deferred.await(gate)
        }
        inFlight--
        if (!ok) return yield* Effect.fail(new ClaimBroke())
        // Rows pushed while it ran are not in its snapshot: only a follow-up claim finds them.
        return take(request.limit, visibleBelow)
      })
    const release = (_key: GroupedPops.GroupKey, rows: ReadonlyArray<Row>) =>
      Effect.sync(() => {
        for (const row of rows) {
          claimed.delete(row.id)
          released.push(row.id)
          ready.push(row)
        }
        ready.sort((a, b) => a.id - b.id)
      })
    return {
      ready,
      claimed,
      released,
      requests,
      pending,
      claim,
      release,
      get maxInFlight() {
        return maxInFlight
      },
      push: (n: number) => {
        for (let i = 0; i < n; i++) ready.push({ id: next++ })
      },
      /** Lets the oldest pending claim finish (or fail). */
      finishOne: (ok = true) =>
        Effect.flatMap(Queue.take(pending), (gate) => Deferred.succeed(gate, ok)).pipe(Effect.andThen(settle))
    }
  })

type TestQueue = Effect.Success<ReturnType<typeof makeQueue>>

const setup = (
  options: {
    readonly gated?: boolean
    readonly repoll?: Duration.Input
    readonly maxClaim?: number
    readonly followUpInterval?: Duration.Input
  } = {}
): Effect.Effect<
  { waker: LocalWaker.LocalWakerShape; pops: GroupedPops.GroupedPops<Row, ClaimBroke>; queue: TestQueue },
  never,
  Scope.Scope
> =>
  Effect.gen(function* () {
    const waker = yield* LocalWaker.make({ timeoutResolution: 0 })
    const queue = yield* makeQueue({ gated: options.gated ?? false })
    const pops = yield* waker.grouped({
      claim: queue.claim,
      release: queue.release,
      repoll: options.repoll ?? "10 seconds",
      ...(options.maxClaim === undefined ? {} : { maxClaim: options.maxClaim }),
      ...(options.followUpInterval === undefined ? {} : { followUpInterval: options.followUpInterval })
    })
    return { waker, pops, queue }
  })

const orders = { queue: "orders" }
const wakeOrders = Frame.queueItem({ queue: "orders", partition: "p1" })
const ids = (result: GroupedPops.PopResult<Row>) => result.rows.map((row) => row.id)

describe("GroupedPops", () => {
  it.effect("a hundred waiting pops cost one claim per wake, and the rows go out in arrival order", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup()
      const fibers = yield* Effect.forEach(Array.from({ length: 100 }), () =>
        Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      )
      yield* settleUntil(Effect.map(pops.waiting, (n) => n === 100))
      const before = queue.requests.length
      queue.push(3)
      yield* waker.wake(wakeOrders)
      yield* settleUntil(Effect.map(pops.waiting, (n) => n === 97))
      assert.strictEqual(queue.requests.length - before, 1)
      assert.strictEqual(queue.requests.at(-1)!.limit, 100)
      for (let i = 0; i < 3; i++) {
        const result = yield* Fiber.join(fibers[i]!)
        assert.deepStrictEqual(ids(result), [i])
        assert.strictEqual(result.wake, "woken")
      }
      assert.strictEqual(yield* waker.parked, 97)
    })
  )

  it.effect("a pop takes up to its batch; the next pop gets the rest of the claim", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup()
      const big = yield* Effect.forkChild(pops.pop(orders, { batch: 3, maxWait: "30 seconds" }))
      const small = yield* Effect.forkChild(pops.pop(orders, { batch: 2, maxWait: "30 seconds" }))
      const third = yield* Effect.forkChild(pops.pop(orders, { batch: 2, maxWait: "30 seconds" }))
      yield* settleUntil(Effect.map(pops.waiting, (n) => n === 3))
      queue.push(4)
      yield* waker.wake(wakeOrders)
      assert.deepStrictEqual(ids(yield* Fiber.join(big)), [0, 1, 2])
      assert.deepStrictEqual(ids(yield* Fiber.join(small)), [3])
      assert.strictEqual(queue.requests.at(-1)!.limit, 7)
      assert.isUndefined(third.pollUnsafe())
    })
  )

  it.effect("a pop that finds rows on arrival answers at once, with wake none", () =>
    Effect.gen(function* () {
      const { pops, queue } = yield* setup()
      queue.push(2)
      const result = yield* pops.pop(orders, { batch: 5, maxWait: "30 seconds" })
      assert.deepStrictEqual(ids(result), [0, 1])
      assert.strictEqual(result.wake, "none")
    })
  )

  it.effect("wakes and arrivals during a claim fold into one follow-up claim", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup({ gated: true })
      const first = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settle
      assert.strictEqual(queue.requests.length, 1)
      // While the arrival's claim runs: ten wakes and five more pops.
      for (let i = 0; i < 10; i++) yield* waker.wake(wakeOrders)
      const more = yield* Effect.forEach(Array.from({ length: 5 }), () =>
        Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      )
      yield* settle
      assert.strictEqual(queue.requests.length, 1, "one claim in flight")
      // Pushed while the arrival's claim runs: not in its snapshot, so only the follow-up finds them.
      queue.push(2)
      yield* queue.finishOne()
      assert.isUndefined(first.pollUnsafe())
      assert.strictEqual(queue.requests.length, 2, "one follow-up")
      assert.strictEqual(queue.requests[1]!.limit, 6)
      yield* queue.finishOne()
      assert.deepStrictEqual(ids(yield* Fiber.join(first)), [0])
      assert.deepStrictEqual(ids(yield* Fiber.join(more[0]!)), [1])
      assert.strictEqual(queue.requests.length, 2, "nothing more owed")
      for (const fiber of more.slice(1)) yield* Fiber.interrupt(fiber)
      assert.strictEqual(queue.maxInFlight, 1)
    })
  )

  it.effect("a claim that fills its limit is followed by another while pops wait", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup({ maxClaim: 2 })
      const fibers = yield* Effect.forEach(Array.from({ length: 5 }), () =>
        Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      )
      yield* settleUntil(Effect.map(pops.waiting, (n) => n === 5))
      const before = queue.requests.length
      queue.push(5)
      yield* waker.wake(wakeOrders)
      for (const fiber of fibers) assert.strictEqual((yield* Fiber.join(fiber)).rows.length, 1)
      assert.strictEqual(queue.requests.length - before, 3)
    })
  )

  it.effect("a pop times out at its maxWait without a claim of its own", () =>
    Effect.gen(function* () {
      const { pops, queue } = yield* setup({ repoll: "1 minute" })
      const short = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "2 seconds" }))
      const long = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "20 seconds" }))
      yield* settle
      const claims = queue.requests.length
      yield* TestClock.adjust("1999 millis")
      assert.isUndefined(short.pollUnsafe())
      yield* TestClock.adjust("1 millis")
      assert.deepStrictEqual(yield* Fiber.join(short), { rows: [], wake: "timeout" })
      assert.strictEqual(queue.requests.length, claims)
      assert.isUndefined(long.pollUnsafe())
      assert.strictEqual(yield* pops.waiting, 1)
    })
  )

  it.effect("a pop with no wait still gets its arrival claim's answer, however long the claim takes", () =>
    Effect.gen(function* () {
      const { pops, queue } = yield* setup({ gated: true })
      queue.push(1)
      const found = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: 0 }))
      const none = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "5 millis" }))
      yield* settle
      yield* TestClock.adjust("1 second")
      assert.isUndefined(found.pollUnsafe())
      yield* queue.finishOne()
      assert.deepStrictEqual(yield* Fiber.join(found), { rows: [{ id: 0 }], wake: "none" })
      // The second pop came during the first claim: its own is the follow-up, and then it times out.
      assert.isUndefined(none.pollUnsafe())
      yield* queue.finishOne()
      assert.deepStrictEqual(yield* Fiber.join(none), { rows: [], wake: "timeout" })
      assert.strictEqual(yield* pops.waiting, 0)
    })
  )

  it.effect("the group re-polls on its own while pops wait: one claim per interval, not one per pop", () =>
    Effect.gen(function* () {
      const { pops, queue } = yield* setup({ repoll: "1 second" })
      const fibers = yield* Effect.forEach(Array.from({ length: 50 }), () =>
        Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "1 minute" }))
      )
      yield* settleUntil(Effect.map(pops.waiting, (n) => n === 50))
      const claims = queue.requests.length
      yield* TestClock.adjust("5 seconds")
      assert.strictEqual(queue.requests.length - claims, 5)
      // A row pushed without a wake (a lost hint) is found by the re-poll.
      queue.push(1)
      yield* TestClock.adjust("1 second")
      const result = yield* Fiber.join(fibers[0]!)
      assert.deepStrictEqual(result, { rows: [{ id: 0 }], wake: "timeout" })
    })
  )

  it.effect("rows claimed for pops that left during the claim go to the next pop, or back at once", () =>
    Effect.gen(function* () {
      const { pops, queue } = yield* setup({ gated: true })
      queue.push(3)
      const gone = yield* Effect.forkChild(pops.pop(orders, { batch: 2, maxWait: "30 seconds" }))
      yield* settle
      const stays = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settle
      yield* Fiber.interrupt(gone)
      yield* queue.finishOne()
      // The arrival's claim (limit 2) took rows 0 and 1 for the pop that left: the one still waiting
      // gets row 0, and row 1 goes back at once.
      assert.deepStrictEqual(ids(yield* Fiber.join(stays)), [0])
      assert.deepStrictEqual(queue.released, [1])
      assert.deepStrictEqual(
        queue.ready.map((row) => row.id),
        [1, 2]
      )
      // The follow-up claim owed for the second arrival finds nobody waiting and is not run.
      assert.strictEqual(queue.requests.length, 1)
    })
  )

  it.effect("rows handed to a pop interrupted before it took them go back at once", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make({ timeoutResolution: 0 })
      const queue = yield* makeQueue({ gated: true })
      const holder: { fiber?: Fiber.Fiber<GroupedPops.PopResult<Row>, ClaimBroke> } = {}
      const pops = yield* waker.grouped({
        claim: queue.claim,
        // The release of the leftover row runs right after the hand-out, before the pop's fiber has
        // taken its row: interrupting it there is the narrowest window. The interrupt is sent once the
        // release is done, without waiting for the fiber, as effect 3's `interruptAsFork` landed.
        release: (key, rows) =>
          Effect.andThen(
            queue.release(key, rows),
            Effect.flatMap(Effect.fiberId, (id) => Effect.sync(() => holder.fiber?.interruptUnsafe(id)))
          )
      })
      holder.fiber = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      const leaves = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settle
      // The arrival claims find nothing.
      while ((yield* Queue.size(queue.pending)) > 0) yield* queue.finishOne()
      queue.push(2)
      yield* waker.wake(wakeOrders)
      yield* settle
      assert.strictEqual(queue.requests.at(-1)!.limit, 2)
      // One of the two leaves during the claim: its row is left over, and the other's is handed out.
      yield* Fiber.interrupt(leaves)
      yield* queue.finishOne()
      const exit = yield* Fiber.await(holder.fiber)
      assert.isTrue(Exit.hasInterrupts(exit))
      assert.deepStrictEqual(queue.released, [1, 0])
      assert.deepStrictEqual(queue.claimed.size, 0)
    })
  )

  it.effect("a claim that fails fails the pops it was for; pops that came during it get the next claim", () =>
    Effect.gen(function* () {
      const { pops, queue } = yield* setup({ gated: true })
      const early = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settle
      const late = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settle
      queue.push(1)
      yield* queue.finishOne(false)
      const exit = yield* Fiber.await(early)
      assert.isTrue(Exit.isFailure(exit) && Cause.findErrorOption(exit.cause).pipe(Option.isSome))
      assert.isUndefined(late.pollUnsafe())
      yield* queue.finishOne()
      assert.deepStrictEqual(ids(yield* Fiber.join(late)), [0])
    })
  )

  it.effect("releaseAll answers the waiting pops with shutdown; later pops wait as usual", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup()
      const fibers = yield* Effect.forEach(Array.from({ length: 3 }), () =>
        Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      )
      yield* settleUntil(Effect.map(pops.waiting, (n) => n === 3))
      assert.strictEqual(yield* waker.releaseAll, 3)
      for (const fiber of fibers)
        assert.deepStrictEqual(yield* Fiber.join(fiber), { rows: [], wake: "shutdown" })
      const later = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settle
      queue.push(1)
      yield* waker.wake(wakeOrders)
      assert.deepStrictEqual(ids(yield* Fiber.join(later)), [0])
    })
  )

  it.effect("after shutdown a pop answers at once; a claim in flight at shutdown gives its rows back", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup({ gated: true })
      queue.push(1)
      const waiting = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settle
      assert.strictEqual(yield* waker.shutdown, 1)
      assert.deepStrictEqual(yield* Fiber.join(waiting), { rows: [], wake: "shutdown" })
      yield* queue.finishOne()
      assert.deepStrictEqual(queue.released, [0])
      assert.deepStrictEqual(yield* pops.pop(orders, { batch: 1, maxWait: "30 seconds" }), {
        rows: [],
        wake: "shutdown"
      })
    })
  )

  it.effect("an absent tenant wakes every tenant's group on the queue; a named one only its own", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup()
      const acme = yield* Effect.forkChild(
        pops.pop({ queue: "orders", tenant: "acme" }, { batch: 1, maxWait: "1 minute" })
      )
      const globex = yield* Effect.forkChild(
        pops.pop({ queue: "orders", tenant: "globex" }, { batch: 1, maxWait: "1 minute" })
      )
      yield* settleUntil(Effect.map(pops.waiting, (n) => n === 2))
      const before = queue.requests.length
      yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p9", tenant: "acme" }))
      yield* settle
      assert.deepStrictEqual(
        queue.requests.slice(before).map((request) => [request.tenant, request.partitions]),
        [["acme", ["p9"]]]
      )
      yield* waker.wake(Frame.queueItem({ queue: "orders", partition: "p7" }))
      yield* settle
      assert.deepStrictEqual(
        queue.requests
          .slice(before + 1)
          .map((request) => request.tenant)
          .sort(),
        ["acme", "globex"]
      )
      yield* Fiber.interrupt(acme)
      yield* Fiber.interrupt(globex)
    })
  )

  it.effect(
    "offer: the pushing replica's pops claim first and say when they left nothing for the peers",
    () =>
      Effect.gen(function* () {
        const { pops, queue } = yield* setup()
        // No pop waits here: the peers must be told.
        queue.push(1)
        assert.isFalse(yield* pops.offer(orders))
        // Two pops wait here; one row pushed: claimed here, nothing left.
        queue.ready.length = 0
        const fibers = yield* Effect.forEach(Array.from({ length: 2 }), () =>
          Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
        )
        yield* settleUntil(Effect.map(pops.waiting, (n) => n === 2))
        queue.push(1)
        assert.isTrue(yield* pops.offer(orders))
        assert.strictEqual((yield* Fiber.join(fibers[0]!)).rows.length, 1)
        // One pop waits; three rows pushed: its claim fills its limit, so there may be more.
        queue.push(3)
        assert.isFalse(yield* pops.offer(orders))
        assert.strictEqual((yield* Fiber.join(fibers[1]!)).rows.length, 1)
      })
  )

  it.effect(
    "a claim that says it left nothing, though it filled its limit, is not followed and drains offer",
    () =>
      Effect.gen(function* () {
        const waker = yield* LocalWaker.make({ timeoutResolution: 0 })
        const queue = yield* makeQueue({ gated: false })
        const pops = yield* waker.grouped({
          // As a claim that picks one row more than it leases tells.
          claim: (request) =>
            Effect.map(queue.claim(request), (rows) => ({ rows, more: queue.ready.length > 0 })),
          release: queue.release
        })
        const one = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
        yield* settleUntil(Effect.map(waker.parked, (n) => n === 1))
        const before = queue.requests.length
        queue.push(1)
        assert.isTrue(yield* pops.offer(orders), "the one row was taken here: nothing for the peers")
        assert.deepStrictEqual(ids(yield* Fiber.join(one)), [0])
        assert.strictEqual(queue.requests.length - before, 1, "no follow-up after a claim that left nothing")
      })
  )

  it.effect("a pop that joins parked pops after a claim that left nothing makes no claim of its own", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup()
      const first = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settleUntil(Effect.map(waker.parked, (n) => n === 1))
      const claims = queue.requests.length
      const joiners = yield* Effect.forEach(Array.from({ length: 50 }), () =>
        Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      )
      yield* settleUntil(Effect.map(waker.parked, (n) => n === 51))
      assert.strictEqual(queue.requests.length, claims, "fifty re-pops, no claim")
      // A wake serves them as one group, in arrival order.
      queue.push(2)
      yield* waker.wake(wakeOrders)
      assert.deepStrictEqual(ids(yield* Fiber.join(first)), [0])
      assert.deepStrictEqual(yield* Fiber.join(joiners[0]!), { rows: [{ id: 1 }], wake: "woken" })
      assert.strictEqual(queue.requests.length, claims + 1)
      for (const fiber of joiners.slice(1)) yield* Fiber.interrupt(fiber)
    })
  )

  it.effect("ten thousand pops parked on one queue: one wake, one claim, one pop answered", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup()
      const fibers = yield* Effect.forEach(Array.from({ length: 10_000 }), () =>
        Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "1 minute" }))
      )
      yield* settleUntil(Effect.map(pops.waiting, (n) => n === 10_000))
      const before = queue.requests.length
      queue.push(1)
      yield* waker.wake(wakeOrders)
      assert.deepStrictEqual(ids(yield* Fiber.join(fibers[0]!)), [0])
      assert.strictEqual(queue.requests.length - before, 1)
      assert.strictEqual(yield* pops.waiting, 9_999)
      yield* TestClock.adjust("1 minute")
      assert.strictEqual(yield* pops.waiting, 0)
      assert.deepStrictEqual(yield* Fiber.join(fibers[9_999]!), { rows: [], wake: "timeout" })
    })
  )

  it.effect("bad options are refused with a clear defect", () =>
    Effect.gen(function* () {
      const waker = yield* LocalWaker.make()
      const refused = (options: Partial<GroupedPops.Options<never, never>>) =>
        Effect.map(
          Effect.exit(
            waker.grouped({ claim: () => Effect.succeed([]), release: () => Effect.void, ...options })
          ),
          (exit) => String(Cause.squash(Exit.isFailure(exit) ? exit.cause : Cause.empty))
        )
      assert.match(yield* refused({ maxClaim: 0 }), /maxClaim/)
      assert.match(yield* refused({ followUpInterval: Duration.infinity }), /followUpInterval/)
    })
  )
})

describe("GroupedPops, followUpInterval", () => {
  it.effect("a group with no claim in flight claims at once on a wake, even right after a claim", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup({ followUpInterval: "50 millis" })
      const waiting = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settleUntil(Effect.map(waker.parked, (n) => n === 1))
      // The arrival's claim found nothing a moment ago; the wake's claim does not wait for the interval.
      queue.push(1)
      yield* waker.wake(wakeOrders)
      yield* settle
      assert.strictEqual(queue.requests.length, 2)
      assert.deepStrictEqual(yield* Fiber.join(waiting), { rows: [{ id: 0 }], wake: "woken" })
    })
  )

  it.effect(
    "wakes and arrivals during a claim fold into one follow-up, no sooner than the interval after it began",
    () =>
      Effect.gen(function* () {
        const { waker, pops, queue } = yield* setup({ gated: true, followUpInterval: "50 millis" })
        const first = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
        yield* settle
        assert.strictEqual(queue.requests.length, 1)
        // While the arrival's claim runs: rows pushed (not in its snapshot), their wakes, another pop.
        queue.push(2)
        for (let i = 0; i < 5; i++) yield* waker.wake(wakeOrders)
        const second = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
        yield* TestClock.adjust("10 millis")
        yield* queue.finishOne()
        // The claim is done 10 ms after it began: its follow-up waits until 50 ms.
        assert.strictEqual(queue.requests.length, 1)
        // What lands while the follow-up waits folds into it: a row, its wake, a third pop.
        queue.push(1)
        yield* waker.wake(wakeOrders)
        const third = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
        yield* TestClock.adjust("39 millis")
        assert.strictEqual(queue.requests.length, 1)
        yield* TestClock.adjust("1 millis")
        assert.strictEqual(queue.requests.length, 2, "one follow-up, at 50 ms")
        assert.strictEqual(queue.requests[1]!.limit, 3)
        assert.deepStrictEqual(queue.requests[1]!.partitions, ["p1"])
        yield* queue.finishOne()
        // No wake lost: every row pushed meanwhile is claimed, in the pops' arrival order.
        assert.deepStrictEqual(ids(yield* Fiber.join(first)), [0])
        assert.deepStrictEqual(ids(yield* Fiber.join(second)), [1])
        assert.deepStrictEqual(ids(yield* Fiber.join(third)), [2])
        assert.strictEqual(queue.requests.length, 2, "nothing more owed")
        assert.strictEqual(queue.maxInFlight, 1)
      })
  )

  it.effect("a claim slower than the interval is followed at once", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup({ gated: true, followUpInterval: "50 millis" })
      const waiting = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settle
      queue.push(1)
      yield* waker.wake(wakeOrders)
      yield* TestClock.adjust("80 millis")
      yield* queue.finishOne()
      assert.strictEqual(queue.requests.length, 2)
      yield* queue.finishOne()
      assert.deepStrictEqual(ids(yield* Fiber.join(waiting)), [0])
    })
  )

  it.effect("a claim that filled its limit is followed at once, not after the interval", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup({ maxClaim: 2, followUpInterval: "1 second" })
      const fibers = yield* Effect.forEach(Array.from({ length: 5 }), () =>
        Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      )
      yield* settleUntil(Effect.map(pops.waiting, (n) => n === 5))
      const before = queue.requests.length
      queue.push(5)
      yield* waker.wake(wakeOrders)
      for (const fiber of fibers) assert.strictEqual((yield* Fiber.join(fiber)).rows.length, 1)
      assert.strictEqual(queue.requests.length - before, 3)
    })
  )

  it.effect("pops that all leave while the follow-up waits cancel it", () =>
    Effect.gen(function* () {
      const { waker, pops, queue } = yield* setup({ gated: true, followUpInterval: "50 millis" })
      const waiting = yield* Effect.forkChild(pops.pop(orders, { batch: 1, maxWait: "30 seconds" }))
      yield* settle
      yield* waker.wake(wakeOrders)
      yield* queue.finishOne()
      yield* Fiber.interrupt(waiting)
      yield* TestClock.adjust("1 second")
      assert.strictEqual(queue.requests.length, 1)
      assert.strictEqual(yield* pops.waiting, 0)
    })
  )
})

// -----------------------------------------------------------------------------------------------
// the property: any interleaving of park, wake, claim, interrupt, timeout and shutdown
// -----------------------------------------------------------------------------------------------

type Step =
  | { readonly _tag: "park"; readonly batch: number; readonly wait: number }
  | { readonly _tag: "push"; readonly n: number; readonly hint: boolean }
  | { readonly _tag: "finish"; readonly ok: boolean }
  | { readonly _tag: "interrupt"; readonly pick: number }
  | { readonly _tag: "advance"; readonly millis: number }
  | { readonly _tag: "offer" }
  | { readonly _tag: "releaseAll" }
  | { readonly _tag: "shutdown" }

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc.record({
      _tag: fc.constant("park" as const),
      batch: fc.integer({ min: 1, max: 3 }),
      wait: fc.integer({ min: 0, max: 5_000 })
    })
  },
  {
    weight: 4,
    arbitrary: fc.record({
      _tag: fc.constant("push" as const),
      n: fc.integer({ min: 1, max: 4 }),
      hint: fc.boolean()
    })
  },
  {
    weight: 5,
    arbitrary: fc.record({
      _tag: fc.constant("finish" as const),
      ok: fc.integer({ min: 0, max: 9 }).map((n) => n < 8)
    })
  },
  { weight: 2, arbitrary: fc.record({ _tag: fc.constant("interrupt" as const), pick: fc.nat() }) },
  {
    weight: 3,
    arbitrary: fc.record({
      _tag: fc.constant("advance" as const),
      millis: fc.integer({ min: 1, max: 3_000 })
    })
  },
  { weight: 1, arbitrary: fc.constant({ _tag: "offer" as const }) },
  { weight: 1, arbitrary: fc.constant({ _tag: "releaseAll" as const }) },
  { weight: 1, arbitrary: fc.constant({ _tag: "shutdown" as const }) }
)

/** Runs the steps, then drains; returns the violations found (none expected). */
const runSteps = (steps: ReadonlyArray<Step>, followUpMillis = 0) =>
  Effect.gen(function* () {
    const { waker, pops, queue } = yield* setup({
      gated: true,
      repoll: "1 second",
      followUpInterval: Duration.millis(followUpMillis)
    })
    const fibers: Array<Fiber.Fiber<GroupedPops.PopResult<Row>, ClaimBroke>> = []
    const delivered = new Map<number, number>()
    const violations: Array<string> = []
    const collect = Effect.gen(function* () {
      for (const fiber of fibers.splice(0)) {
        const exit = yield* Fiber.await(fiber)
        if (Exit.isSuccess(exit)) {
          for (const row of exit.value.rows) delivered.set(row.id, (delivered.get(row.id) ?? 0) + 1)
        }
      }
    })
    const noLostWake = Effect.gen(function* () {
      // Quiescent (no claim pending): pops waiting and rows ready is a wake lost.
      if ((yield* Queue.size(queue.pending)) > 0) return
      if ((yield* pops.waiting) > 0 && queue.ready.length > 0)
        violations.push(`${yield* pops.waiting} pops wait while ${queue.ready.length} rows are ready`)
    })
    for (const s of steps) {
      switch (s._tag) {
        case "park":
          fibers.push(
            yield* Effect.forkChild(pops.pop(orders, { batch: s.batch, maxWait: Duration.millis(s.wait) }))
          )
          break
        case "push":
          queue.push(s.n)
          // A push without a hint stands for a lost one: the re-poll must find it.
          if (s.hint) yield* waker.wake(wakeOrders)
          break
        case "finish":
          if ((yield* Queue.size(queue.pending)) > 0) yield* queue.finishOne(s.ok)
          break
        case "interrupt": {
          const live = []
          for (const fiber of fibers) if (fiber.pollUnsafe() === undefined) live.push(fiber)
          if (live.length > 0) yield* Fiber.interrupt(live[s.pick % live.length]!)
          break
        }
        case "advance":
          yield* TestClock.adjust(Duration.millis(s.millis))
          break
        case "offer":
          yield* Effect.forkChild(pops.offer(orders))
          break
        case "releaseAll":
          yield* waker.releaseAll
          break
        case "shutdown":
          yield* waker.shutdown
          break
      }
      yield* settle
      if (s._tag === "push" && s.hint) {
        // A hinted push: the claims it starts run to the end (a spaced follow-up once its interval has
        // passed), then nothing may be left for a waiting pop.
        for (;;) {
          while ((yield* Queue.size(queue.pending)) > 0) yield* queue.finishOne(true)
          if (followUpMillis === 0) break
          yield* TestClock.adjust(Duration.millis(followUpMillis))
          yield* settle
          if ((yield* Queue.size(queue.pending)) === 0) break
        }
        yield* noLostWake
      }
      if (queue.maxInFlight > 1) violations.push("two claims in flight")
      // Parked: waiting pops whose arrival claim has run; all of them once no claim is pending (and,
      // with spaced follow-ups, none waits for its interval: so after a hinted push's drain).
      const [parked, waiting, pending] = [
        yield* waker.parked,
        yield* pops.waiting,
        yield* Queue.size(queue.pending)
      ]
      const noFollowUpWaits = followUpMillis === 0 || (s._tag === "push" && s.hint)
      if (parked < 0 || parked > waiting) violations.push(`parked ${parked} of ${waiting} waiting`)
      if (pending === 0 && noFollowUpWaits && parked !== waiting)
        violations.push(`parked ${parked} of ${waiting}, no claim pending`)
    }
    // Drain: every claim finishes, every deadline passes.
    for (let round = 0; round < 200; round++) {
      while ((yield* Queue.size(queue.pending)) > 0) yield* queue.finishOne(true)
      if ((yield* pops.waiting) === 0) break
      yield* TestClock.adjust("1 second")
      yield* settle
    }
    yield* collect
    for (const [id, times] of delivered) if (times > 1) violations.push(`row ${id} delivered ${times} times`)
    // Every claimed row reached a pop that returned it; the rest went back to the queue.
    for (const id of queue.claimed) if (!delivered.has(id)) violations.push(`row ${id} claimed but stranded`)
    for (const id of delivered.keys())
      if (!queue.claimed.has(id)) violations.push(`row ${id} delivered unclaimed`)
    if ((yield* pops.waiting) !== 0) violations.push("pops still waiting after the drain")
    return violations
  })

describe("GroupedPops, over random interleavings", () => {
  it("no wake lost, no row stranded or given twice, one claim in flight", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), async (steps) => {
        const violations = await Effect.runPromise(
          Effect.scoped(runSteps(steps)).pipe(Effect.provide(TestClock.layer()))
        )
        assert.deepStrictEqual(violations, [])
      }),
      { numRuns: numRuns(500) }
    )
  })

  it("the same with follow-ups spaced by an interval", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 60 }), async (steps) => {
        const violations = await Effect.runPromise(
          Effect.scoped(runSteps(steps, 100)).pipe(Effect.provide(TestClock.layer()))
        )
        assert.deepStrictEqual(violations, [])
      }),
      { numRuns: numRuns(300) }
    )
  })
})
