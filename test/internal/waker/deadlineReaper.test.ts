import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect } from "effect"
import { TestClock } from "effect/testing"
import { DeadlineReaper } from "../../../src/internal/waker/deadlineReaper.js"
import { ParkedPops } from "../../../src/internal/waker/parkedPops.js"

/** An index, its reaper, and a way to park pops that note when (by the `Clock`) they ended, and how. */
const setup = (resolution: number) =>
  Effect.gen(function* () {
    const clock = yield* Clock.Clock
    const pops = new ParkedPops()
    const reaper = yield* DeadlineReaper.make(pops, resolution)
    const ended: Array<string> = []
    const park = (name: string, after: number, resume?: () => void) => {
      const deadline = clock.currentTimeMillisUnsafe() + after
      pops.park("q", name, deadline, (outcome) => {
        resume?.()
        ended.push(`${name}:${Effect.runSync(outcome)}@${clock.currentTimeMillisUnsafe()}`)
      })
      reaper.parked(deadline)
    }
    return { pops, reaper, ended, park }
  })

describe("DeadlineReaper", () => {
  it.effect("times pops out at their deadlines, passes at least the resolution apart", () =>
    Effect.gen(function* () {
      const { reaper, ended, park } = yield* setup(25)
      assert.strictEqual(reaper.nextWake, Number.POSITIVE_INFINITY)
      park("a", 100)
      assert.strictEqual(reaper.nextWake, 100)
      park("b", 103)
      park("c", 125)
      // A later park does not move the wake-up.
      assert.strictEqual(reaper.nextWake, 100)
      yield* TestClock.adjust(100)
      // b is due at 103, but the next pass is a resolution after the one that timed a out.
      assert.deepStrictEqual(ended, ["a:timeout@100"])
      assert.strictEqual(reaper.nextWake, 125)
      yield* TestClock.adjust(25)
      assert.deepStrictEqual(ended, ["a:timeout@100", "b:timeout@125", "c:timeout@125"])
      // Nothing left: the reaper ended.
      assert.strictEqual(reaper.nextWake, Number.POSITIVE_INFINITY)
    })
  )

  it.effect("an earlier park restarts it; with resolution 0 every pop ends exactly on time", () =>
    Effect.gen(function* () {
      const { reaper, ended, park } = yield* setup(0)
      park("late", 1_000)
      yield* TestClock.adjust(1)
      park("early", 10)
      assert.strictEqual(reaper.nextWake, 11)
      yield* TestClock.adjust(10)
      assert.deepStrictEqual(ended, ["early:timeout@11"])
      assert.strictEqual(reaper.nextWake, 1_000)
      yield* TestClock.adjust(989)
      assert.deepStrictEqual(ended, ["early:timeout@11", "late:timeout@1000"])
    })
  )

  it.effect("a pop woken before its deadline is skipped; one with no deadline never wakes it", () =>
    Effect.gen(function* () {
      const { pops, reaper, ended, park } = yield* setup(0)
      park("woken", 50)
      park("forever", Number.POSITIVE_INFINITY)
      pops.wake("q", "woken")
      yield* TestClock.adjust(50)
      assert.deepStrictEqual(ended, ["woken:woken@0"])
      assert.strictEqual(reaper.nextWake, Number.POSITIVE_INFINITY)
      assert.strictEqual(pops.parked, 1)
    })
  )

  it.effect("a pass that fails is logged, and the reaper carries on after a pause", () =>
    Effect.gen(function* () {
      const { ended, park } = yield* setup(0)
      park("throws", 10, () => {
        throw new Error("a defect in a resume")
      })
      park("next", 20)
      yield* TestClock.adjust(20)
      assert.deepStrictEqual(ended, [])
      // The pause after a failed pass is at least 100 ms.
      yield* TestClock.adjust(90)
      assert.deepStrictEqual(ended, ["next:timeout@110"])
    })
  )
})
