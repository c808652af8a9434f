/**
 * A check that judges silence, woken late because this process was held up, reads what arrived
 * meanwhile first; woken on time, it judges at once. `until` waits out a silence whose start moves,
 * on the clock's fiber under `TestClock` and on one re-armed timer on the live clock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, TestClock } from "effect"
import * as Stall from "../../src/internal/stall.js"
import * as StalledClock from "../fixtures/stalledClock.js"

describe("Stall", () => {
  it.scoped("a sleep woken late lets pending I/O run first; one on time does not wait for it", () =>
    Effect.gen(function* () {
      const clock = yield* StalledClock.make
      const order: Array<string> = []
      const check = (name: string) =>
        Effect.withClock(Stall.sleep("1 second"), clock).pipe(
          Effect.zipRight(Effect.sync(() => order.push(name))),
          Effect.fork
        )
      // On time: judged within the timer's own turn, before an I/O callback queued meanwhile.
      const onTime = yield* check("on time")
      yield* TestClock.adjust(1)
      clock.stall(0, () => order.push("on-time read"))
      yield* TestClock.adjust(999)
      yield* onTime.await
      // Late by 5 s: the read that waited comes first.
      const late = yield* check("late")
      yield* TestClock.adjust(1)
      clock.stall(5000, () => order.push("late read"))
      yield* TestClock.adjust(999)
      yield* late.await
      assert.deepStrictEqual(order, ["on time", "on-time read", "late read", "late"])
    })
  )

  it.scoped("until: a deadline that moves later is waited out, judged on the clock's time", () =>
    Effect.gen(function* () {
      let heard = 0
      const asked: Array<number> = []
      const done = yield* Effect.fork(
        Stall.until((now) => {
          asked.push(now)
          return heard + 1000 - now
        })
      )
      yield* TestClock.adjust(600)
      heard = 600
      yield* TestClock.adjust(400)
      assert.strictEqual((yield* Fiber.poll(done))._tag, "None")
      yield* TestClock.adjust(600)
      yield* Fiber.join(done)
      assert.deepStrictEqual(asked, [0, 1000, 1600])
    })
  )

  it.scoped("until under a stalled clock reads what arrived meanwhile before it judges", () =>
    Effect.gen(function* () {
      const clock = yield* StalledClock.make
      let heard = 0
      const done = yield* Effect.fork(
        Effect.withClock(
          Stall.until((now) => heard + 1000 - now),
          clock
        )
      )
      yield* TestClock.adjust(1)
      clock.stall(10_000, () => {
        heard = clock.unsafeCurrentTimeMillis()
      })
      yield* TestClock.adjust(999)
      assert.strictEqual((yield* Fiber.poll(done))._tag, "None")
      yield* TestClock.adjust(1000)
      yield* Fiber.join(done)
    })
  )

  it.live("isLive: the runtime's own clock is live", () =>
    Effect.map(Effect.clock, (clock) => assert.isTrue(Stall.isLive(clock)))
  )

  it.effect("isLive: a TestClock is not", () =>
    Effect.map(Effect.clock, (clock) => assert.isFalse(Stall.isLive(clock)))
  )

  it.live(
    "until on the live clock: asks again as its answers run out, and an interrupted wait asks no more",
    () =>
      Effect.gen(function* () {
        const clock = yield* Effect.clock
        const start = clock.unsafeCurrentTimeMillis()
        let asks = 0
        // Each answer moves the deadline: 5 ms more for the first three asks, then done.
        yield* Stall.until(() => (++asks <= 3 ? 5 : 0))
        assert.strictEqual(asks, 4)
        assert.isAtLeast(clock.unsafeCurrentTimeMillis() - start, 15)
        let later = 0
        const waiting = yield* Effect.fork(
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
