/**
 * A check that judges silence, woken late because this process was held up, reads what arrived
 * meanwhile first; woken on time, it judges at once. `until` waits out a silence whose start moves,
 * on the clock's fiber under `TestClock` and on one re-armed timer on the live clock. `within` waits
 * while the other side delivers, a window at a time, up to its windows.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, TestClock } from "effect"
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

  it.scoped("within: a deadline waits while the other side delivers, up to its windows, and no longer", () =>
    Effect.gen(function* () {
      let delivered = 0
      const busy: Stall.Busy = { progress: () => delivered, windows: 3 }
      const judged = (effect: Effect.Effect<void>) =>
        effect.pipe(
          Stall.within("1 second", () => "timed out" as const, busy),
          Effect.either,
          Effect.fork
        )
      // Delivering through the first window only: judged at the end of the second.
      const once = yield* judged(Effect.never)
      yield* TestClock.adjust(500)
      delivered++
      yield* TestClock.adjust(500)
      assert.strictEqual((yield* Fiber.poll(once))._tag, "None", "the first window saw a delivery")
      yield* TestClock.adjust(1000)
      assert.deepStrictEqual(yield* Fiber.join(once), Either.left("timed out" as const))
      // Delivering all the while: judged after three windows all the same.
      const always = yield* judged(Effect.never)
      const deliverWhile = (millis: number) =>
        Effect.zipRight(
          TestClock.adjust(millis / 2),
          Effect.suspend(() => {
            delivered++
            return TestClock.adjust(millis / 2)
          })
        )
      for (let i = 0; i < 2; i++) {
        yield* deliverWhile(1000)
        assert.strictEqual((yield* Fiber.poll(always))._tag, "None", `window ${i + 1}`)
      }
      yield* deliverWhile(1000)
      assert.deepStrictEqual(yield* Fiber.join(always), Either.left("timed out" as const))
      // An answer in a later window wins.
      const answered = yield* judged(Effect.sleep("2500 millis"))
      yield* deliverWhile(1000)
      yield* deliverWhile(1500)
      assert.deepStrictEqual(yield* Fiber.join(answered), Either.right(undefined))
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
