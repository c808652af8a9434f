import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Schedule } from "effect"
import * as Dialer from "../src/Dialer.js"

const delays = (inputs: ReadonlyArray<boolean>, connectedOnly = false) =>
  Effect.gen(function* () {
    // Step the schedule by hand: no clock involved, just its decisions.
    const schedule = Schedule.delays(Dialer.reconnectSchedule)
    let state = schedule.initial
    let now = 0
    const out: Array<number> = []
    for (const connected of inputs) {
      const [next, delay] = yield* schedule.step(
        now,
        new Dialer.LinkDown({
          connected,
          established: connected && !connectedOnly,
          cause: "closed by peer"
        }),
        state
      )
      state = next
      const millis = Duration.toMillis(delay)
      out.push(millis)
      now += millis
    }
    return out
  })

describe("Dialer.reconnectSchedule", () => {
  it.effect("doubles from 250 ms, caps at 5 s, and restarts after a session that had connected", () =>
    Effect.gen(function* () {
      const failing = Array.from({ length: 9 }, () => false)
      assert.deepStrictEqual(yield* delays(failing), [250, 500, 1000, 2000, 4000, 5000, 5000, 5000, 5000])
      assert.deepStrictEqual(
        yield* delays([false, false, false, true, false, false]),
        [250, 500, 1000, 250, 500, 1000]
      )
      // A link refused right after its HELLO was connected but never established: no reset.
      assert.deepStrictEqual(yield* delays([false, true, true, true], true), [250, 500, 1000, 2000])
    })
  )
})
