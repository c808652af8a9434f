/**
 * The node's one heartbeat timer: every link that is up beats on the same tick, every interval; no
 * timer while no link is up; a beat that throws leaves the others theirs. Under `TestClock` it is a
 * fiber on the clock; on the live clock a plain timer, held to the same contract.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as Heartbeats from "../../../src/internal/links/heartbeats.js"
import { LoopFaults, loopFaults } from "../../../src/internal/loop.js"
import * as MeshTest from "../../../src/MeshTest.js"
import * as StalledClock from "../../fixtures/stalledClock.js"

const advance = (millis: number) => Effect.andThen(TestClock.adjust(millis), MeshTest.settle)

describe("Heartbeats", () => {
  it.effect("beats every link on one tick, every interval", () =>
    Effect.gen(function* () {
      const heartbeats = yield* Heartbeats.make(Duration.seconds(1))
      const seen: Array<readonly [string, number]> = []
      heartbeats.add((now) => seen.push(["a", now]))
      heartbeats.add((now) => seen.push(["b", now]))
      yield* MeshTest.settle
      yield* advance(999)
      assert.deepStrictEqual(seen, [])
      yield* advance(1)
      yield* advance(1000)
      assert.deepStrictEqual(seen, [
        ["a", 1000],
        ["b", 1000],
        ["a", 2000],
        ["b", 2000]
      ])
    })
  )

  it.effect("arms no timer while no link is up, and starts a full interval after the first one", () =>
    Effect.gen(function* () {
      const heartbeats = yield* Heartbeats.make(Duration.seconds(1))
      yield* advance(2500)
      const seen: Array<number> = []
      const remove = heartbeats.add((now) => seen.push(now))
      yield* MeshTest.settle
      yield* advance(1000)
      assert.deepStrictEqual(seen, [3500])
      remove()
      remove()
      assert.strictEqual(heartbeats.size, 0)
      yield* advance(5000)
      assert.deepStrictEqual(seen, [3500])
    })
  )

  it.effect("a beat may remove itself; one that throws leaves the others theirs, and the timer goes on", () =>
    Effect.gen(function* () {
      const faults = new LoopFaults()
      const heartbeats = yield* Effect.provideService(
        Heartbeats.make(Duration.seconds(1)),
        loopFaults,
        faults
      )
      const seen: Array<string> = []
      const once = heartbeats.add(() => {
        seen.push("once")
        once()
      })
      heartbeats.add(() => {
        throw new Error("a defect in one link's beat")
      })
      heartbeats.add(() => seen.push("steady"))
      yield* MeshTest.settle
      yield* advance(1000)
      yield* advance(1000)
      assert.deepStrictEqual(seen, ["once", "steady", "steady"])
      assert.strictEqual(faults.caught("Heartbeats"), 2)
    })
  )

  it("on the live clock the ticks fall on the clock's multiples of the interval, whenever a link came up", () => {
    // The first tick: the next multiple after now, never now itself.
    assert.strictEqual(Heartbeats.nextBoundary(12_345, 1000, false), 13_000)
    assert.strictEqual(Heartbeats.nextBoundary(13_000, 1000, false), 14_000)
    assert.strictEqual(Heartbeats.nextBoundary(13_999, 1000, false), 14_000)
    // After a tick, run a little late or early: the multiple one interval on, never a double beat.
    assert.strictEqual(Heartbeats.nextBoundary(13_004, 1000, true), 14_000)
    assert.strictEqual(Heartbeats.nextBoundary(12_999, 1000, true), 14_000)
    // Very late (a stalled process): the multiple nearest one interval on.
    assert.strictEqual(Heartbeats.nextBoundary(13_700, 1000, true), 15_000)
    // Two nodes whose links came up at different moments tick together.
    const a = Heartbeats.nextBoundary(1_000_123, 1000, false)
    const b = Heartbeats.nextBoundary(1_000_877, 1000, false)
    assert.strictEqual(a, b)
    assert.strictEqual(Heartbeats.nextBoundary(a + 2, 1000, true), Heartbeats.nextBoundary(b + 9, 1000, true))
  })

  // The tick runs the outbound liveness checks: after a stall of this process it must see the frames
  // that arrived meanwhile (here, one refreshing `heardAt`) before the beats judge.
  it.effect("a tick late after a stall of this process runs after what arrived meanwhile was read", () =>
    Effect.gen(function* () {
      const clock = yield* StalledClock.make
      const heartbeats = yield* Effect.provideService(
        Heartbeats.make(Duration.seconds(1)),
        Clock.Clock,
        clock
      )
      let heardAt = 0
      const silences: Array<number> = []
      heartbeats.add((now) => silences.push(now - heardAt))
      yield* MeshTest.settle
      yield* advance(1000)
      clock.stall(10_000, () => {
        heardAt = clock.currentTimeMillisUnsafe()
      })
      yield* advance(1000)
      assert.deepStrictEqual(silences, [1000, 0])
    })
  )

  it.live(
    "on the live clock: a plain timer beats every link, carries on past a defect, stops with the last link",
    () =>
      Effect.gen(function* () {
        const faults = new LoopFaults()
        faults.inject("Heartbeats", 1)
        const heartbeats = yield* Effect.provideService(
          Heartbeats.make(Duration.millis(5)),
          loopFaults,
          faults
        )
        const seen: Array<string> = []
        const a = heartbeats.add(() => seen.push("a"))
        const b = heartbeats.add(() => seen.push("b"))
        // Four ticks after the injected defect (bounded, so a timer that never fires fails the test).
        for (let waited = 0; seen.length < 8 && waited < 5000; waited += 5) yield* Effect.sleep("5 millis")
        assert.deepStrictEqual(seen.slice(0, 8), ["a", "b", "a", "b", "a", "b", "a", "b"])
        assert.strictEqual(faults.caught("Heartbeats"), 1)
        a()
        b()
        const count = seen.length
        yield* Effect.sleep("40 millis")
        assert.strictEqual(seen.length, count)
        // A link up again starts the timer again.
        heartbeats.add(() => seen.push("c"))
        for (let waited = 0; !seen.includes("c") && waited < 5000; waited += 5)
          yield* Effect.sleep("5 millis")
        assert.include(seen, "c")
      }).pipe(Effect.scoped)
  )

  it.live("on the live clock: closing the scope stops the timer", () =>
    Effect.gen(function* () {
      const scope = yield* Scope.make()
      const heartbeats = yield* Scope.provide(Heartbeats.make(Duration.millis(5)), scope)
      let beats = 0
      heartbeats.add(() => beats++)
      for (let waited = 0; beats < 2 && waited < 5000; waited += 5) yield* Effect.sleep("5 millis")
      yield* Scope.close(scope, Exit.void)
      const count = beats
      yield* Effect.sleep("40 millis")
      assert.strictEqual(beats, count)
    })
  )
})
