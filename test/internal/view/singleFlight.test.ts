/**
 * The cluster page's shared fetch under `TestClock`: one computation per ttl however many ask, the
 * latest value served at once while a newer one is computed, and never a value older than `maxAge`
 * (a view read after a pause must not show a peer killed meanwhile as up).
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { SingleFlight } from "../../../src/internal/view/singleFlight.js"

describe("SingleFlight", () => {
  it.effect("serves the latest value at once while a newer one is computed, within maxAge", () =>
    Effect.gen(function* () {
      let runs = 0
      const compute = Effect.sync(() => ++runs)
      const flight = new SingleFlight<number>(1_000, 2_000)
      assert.strictEqual(yield* flight.get(compute), 1)
      assert.strictEqual(yield* flight.get(compute), 1, "within the ttl: no new computation")
      yield* TestClock.adjust(1_500)
      // Due again, and the latest (1.5 s old) is young enough to serve while 2 is computed.
      assert.strictEqual(yield* flight.get(compute), 1)
      yield* Effect.yieldNow
      assert.strictEqual(runs, 2)
      assert.strictEqual(yield* flight.get(compute), 2)
    })
  )

  it.effect("after a pause longer than maxAge, the next caller waits for a fresh value", () =>
    Effect.gen(function* () {
      let runs = 0
      const slow = Effect.andThen(
        Effect.sleep(500),
        Effect.sync(() => ++runs)
      )
      const flight = new SingleFlight<number>(1_000, 2_000)
      const first = yield* Effect.forkChild(flight.get(slow))
      yield* TestClock.adjust(500)
      assert.strictEqual(yield* Fiber.join(first), 1)
      // Nobody asked for 8 s: the value is stale, so it is not served; the caller waits for 2.
      yield* TestClock.adjust(8_000)
      const second = yield* Effect.forkChild(flight.get(slow))
      yield* TestClock.adjust(499)
      assert.isUndefined(second.pollUnsafe(), "still waiting for the fresh value")
      yield* TestClock.adjust(1)
      assert.strictEqual(yield* Fiber.join(second), 2)
    })
  )
})
