/**
 * A check that judges silence, woken late because this process was held up, reads what arrived
 * meanwhile first; woken on time, it judges at once. `until` waits out a silence whose start moves,
 * on the clock's fiber under `TestClock` and on one re-armed timer on the live clock. `within` waits
 * while the other side delivers, a window at a time, up to its windows.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, Fiber, Result } from "effect"
import { TestClock } from "effect/testing"
import * as Stall from "../../src/internal/stall.js"
import * as StalledClock from "../fixtures/stalledClock.js"

describe("Stall", () => {
  it.effect("a sleep woken late lets pending I/O run first; one on time does not wait for it", () =>
    Effect.gen(function* () {
      const clock = yield* StalledClock.make
      const order: Array<string> = []
      const check = (name: string) =>
        Effect.provideService(Stall.sleep("1 second"), Clock.Clock, clock).pipe(
          Effect.andThen(Effect.sync(() => order.push(name))),
          Effect.forkChild
        )
      // On time: judged within the timer's own turn, before an I/O callback queued meanwhile.
      const onTime = yield* check("on time")
      yield* TestClock.adjust(1)
      clock.stall(0, () => order.push("on-time read"))
      yield* TestClock.adjust(999)
      yield* Fiber.await(onTime)
      // Late by 5 s: the read that waited comes first.
      const late = yield* check("late")
      yield* TestClock.adjust(1)
      clock.stall(5000, () => order.push("late read"))
      yield* TestClock.adjust(999)
      yield* Fiber.await(late)
      assert.deepStrictEqual(order, ["on time", "on-time read", "late read", "late"])
    })
  )

  it.effect("until: a deadline that moves later is waited out, judged on the clock's time", () =>
    Effect.gen(function* () {
      let heard = 0
      const asked: Array<number> = []
      const done = yield* Effect.forkChild(
        Stall.until((now) => {
          asked.push(now)
          return heard + 1000 - now
        })
      )
      yield* TestClock.adjust(600)
      heard = 600
      yield* TestClock.adjust(400)
      assert.isUndefined(done.pollUnsafe())
      yield* TestClock.adjust(600)
      yield* Fiber.join(done)
      assert.deepStrictEqual(asked, [0, 1000, 1600])
    })
  )

  it.effect("until under a stalled clock reads what arrived meanwhile before it judges", () =>
    Effect.gen(function* () {
      const clock = yield* StalledClock.make
      let heard = 0
      const done = yield* Effect.forkChild(
        Effect.provideService(
          Stall.until((now) => heard + 1000 - now),
          Clock.Clock,
          clock
        )
      )
      yield* TestClock.adjust(1)
      clock.stall(10_000, () => {
        heard = clock.currentTimeMillisUnsafe()
      })
      yield* TestClock.adjust(999)
      assert.isUndefined(done.pollUnsafe())
      yield* TestClock.adjust(1000)
      yield* Fiber.join(done)
    })
  )

  it.effect("within: a deadline waits while the other side delivers, up to its windows, and no longer", () =>
    Effect.gen(function* () {
      let delivered = 0
      const busy: Stall.Busy = { progress: () => delivered, windows: 3 }
      const judged = (effect: Effect.Effect<void>) =>
        effect.pipe(
          Stall.within("1 second", () => "timed out" as const, busy),
          Effect.result,
          Effect.forkChild
        )
      // Delivering through the first window only: judged at the end of the second.
      const once = yield* judged(Effect.never)
      yield* TestClock.adjust(500)
      delivered++
      yield* TestClock.adjust(500)
      assert.isUndefined(once.pollUnsafe(), "the first window saw a delivery")
      yield* TestClock.adjust(1000)
      assert.deepStrictEqual(yield* Fiber.join(once), Result.fail("timed out" as const))
      // Delivering all the while: judged after three windows all the same.
      const always = yield* judged(Effect.never)
      const deliverWhile = (millis: number) =>
        Effect.andThen(
          TestClock.adjust(millis / 2),
          Effect.suspend(() => {
            delivered++
            return TestClock.adjust(millis / 2)
          })
        )
      for (let i = 0; i < 2; i++) {
        yield* deliverWhile(1000)
        assert.isUndefined(always.pollUnsafe(), `window ${i + 1}`)
      }
      yield* deliverWhile(1000)
      assert.deepStrictEqual(yield* Fiber.join(always), Result.fail("timed out" as const))
      // An answer in a later window wins.
      const answered = yield* judged(Effect.sleep("2500 millis"))
      yield* deliverWhile(1000)
      yield* deliverWhile(1500)
      assert.deepStrictEqual(yield* Fiber.join(answered), Result.succeed(undefined))
    })
  )

  it.live("isLive: the runtime's own clock is live", () =>
    Clock.clockWith((clock) => Effect.sync(() => assert.isTrue(Stall.isLive(clock))))
  )

  it.effect("isLive: a TestClock is not", () =>
    Clock.clockWith((clock) => Effect.sync(() => assert.isFalse(Stall.isLive(clock))))
  )

  it.live(
    "until on the live clock: asks again as its answers run out, and an interrupted wait asks no more",
    () =>
      Effect.gen(function* () {
        const clock = yield* Clock.Clock
        const start = clock.currentTimeMillisUnsafe()
        let asks = 0
        // Each answer moves the deadline: 5 ms more for the first three asks, then done.
        yield* Stall.until(() => (++asks <= 3 ? 5 : 0))
        assert.strictEqual(asks, 4)
        assert.isAtLeast(clock.currentTimeMillisUnsafe() - start, 15)
        let later = 0
        const waiting = yield* Effect.forkChild(
          Stall.until(() => {
            later++
            return 5
          })
        )
        yield* Effect.sleep("20 millis")
        yield* Fiber.interrupt(waiting)
        const seen = later
        yield* Effect.sleep("30 millis")
        assert.strictEqual(later, seen)
        assert.isAtLeast(seen, 2)
      })
  )
})
