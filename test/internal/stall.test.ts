/**
 * A check that judges silence, woken late because this process was held up, reads what arrived
 * meanwhile first; woken on time, it judges at once.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, TestClock } from "effect"
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
})
