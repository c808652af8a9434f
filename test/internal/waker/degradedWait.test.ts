import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, SubscriptionRef } from "effect"
import { TestClock } from "effect/testing"
import { DegradedWait } from "../../../src/internal/waker/degradedWait.js"
import { ParkedPops } from "../../../src/internal/waker/parkedPops.js"
import * as MeshHealth from "../../../src/MeshHealth.js"

const degraded: MeshHealth.Health = { ...MeshHealth.solo, status: "degraded", reason: "partial", expected: 2 }
const clustered: MeshHealth.Health = {
  ...MeshHealth.solo,
  status: "clustered",
  reason: "healthy",
  expected: 2
}

const ten = Duration.seconds(10)

/** A shortening of 1 s watching a health value the test sets, over an index with one pop parked. */
const setup = Effect.gen(function* () {
  const health = yield* SubscriptionRef.make(clustered)
  const pops = new ParkedPops()
  const wait = yield* DegradedWait.make(pops, "1 second").pipe(
    Effect.provideService(MeshHealth.MeshHealth, health)
  )
  const outcomes: Array<string> = []
  pops.park("q", "t", Number.POSITIVE_INFINITY, (outcome) => outcomes.push(Effect.runSync(outcome)))
  yield* TestClock.adjust(1)
  return { health, pops, wait, outcomes }
})

describe("DegradedWait", () => {
  it.effect("while the mesh is degraded a pop waits at most the short wait; trusted, what it asked", () =>
    Effect.gen(function* () {
      const { health, wait } = yield* setup
      assert.deepStrictEqual(wait.cap(ten), ten)
      yield* SubscriptionRef.set(health, degraded)
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(wait.cap(ten), Duration.seconds(1))
      assert.deepStrictEqual(wait.cap(Duration.millis(10)), Duration.millis(10))
      yield* SubscriptionRef.set(health, clustered)
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(wait.cap(ten), ten)
    })
  )

  it.effect("pops parked when the mesh degrades time out the short wait after it did", () =>
    Effect.gen(function* () {
      const { health, pops, outcomes } = yield* setup
      yield* SubscriptionRef.set(health, degraded)
      yield* TestClock.adjust(999)
      assert.deepStrictEqual(outcomes, [])
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(outcomes, ["timeout"])
      assert.strictEqual(pops.parked, 0)
    })
  )

  it.effect("trusted again before then, the parked pops keep waiting", () =>
    Effect.gen(function* () {
      const { health, pops, outcomes } = yield* setup
      yield* SubscriptionRef.set(health, degraded)
      yield* TestClock.adjust(500)
      yield* SubscriptionRef.set(health, clustered)
      yield* TestClock.adjust(5_000)
      assert.deepStrictEqual(outcomes, [])
      assert.strictEqual(pops.parked, 1)
    })
  )

  it.effect("without the health value, or without a short wait, it never shortens", () =>
    Effect.gen(function* () {
      const pops = new ParkedPops()
      const noHealth = yield* DegradedWait.make(pops, "1 second")
      noHealth.healthIs(false)
      assert.deepStrictEqual(noHealth.cap(ten), ten)
      const health = yield* SubscriptionRef.make(degraded)
      const noShort = yield* DegradedWait.make(pops, undefined).pipe(
        Effect.provideService(MeshHealth.MeshHealth, health)
      )
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(noShort.cap(ten), ten)
    })
  )
})
