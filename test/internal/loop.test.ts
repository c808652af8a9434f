/**
 * Background loops of one shape: a defect injected into each loop is caught, logged, and the loop
 * carries on doing its work.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Option } from "effect"
import { TestClock } from "effect/testing"
import { LoopFaults, loop, loopFaults } from "../../src/internal/loop.js"
import * as MeshTest from "../../src/MeshTest.js"
import { active } from "../fixtures/memory.js"

const config = { heartbeatInterval: Duration.millis(500), deadThreshold: Duration.seconds(2) }

describe("background loops", () => {
  it.effect("a loop survives a defect and keeps its schedule", () =>
    Effect.gen(function* () {
      let runs = 0
      const faults = new LoopFaults()
      faults.inject("test-loop", 2)
      yield* loop(
        "test-loop",
        Effect.sync(() => {
          runs++
        }),
        { sleep: "1 second" }
      ).pipe(Effect.provideService(loopFaults, faults))
      yield* MeshTest.settle
      for (let i = 0; i < 4; i++) {
        yield* TestClock.adjust("1 second")
        yield* MeshTest.settle
      }
      assert.strictEqual(faults.caught("test-loop"), 2)
      assert.strictEqual(runs, 3)
    })
  )

  it.effect("liveness: a defect in the monitor does not stop peers turning dead", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const faults = new LoopFaults()
      const b = yield* MeshTest.node(network, { serverId: "b", peers: ["a"], config }).pipe(
        Effect.provideService(loopFaults, faults)
      )
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"], config })
      yield* MeshTest.settleUntil(MeshTest.hears(b, 1))
      faults.inject("Liveness", 3)
      yield* network.network.stopReading("b:6633", true)
      for (let i = 0; i < 30; i++) {
        yield* TestClock.adjust("250 millis")
        yield* MeshTest.settle
      }
      assert.strictEqual(faults.caught("Liveness"), 3)
      assert.strictEqual(active(yield* b.mesh.stats).servers_dead, 1)
      assert.isTrue(a.mesh.active)
    })
  )

  it.effect("hot-list flush: a defect in one flush does not stop the next", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const faults = new LoopFaults()
      const b = yield* MeshTest.node(network, { serverId: "b", peers: ["a"], config })
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"], config }).pipe(
        Effect.provideService(loopFaults, faults)
      )
      yield* MeshTest.settleUntil(MeshTest.linked(a))
      faults.inject("HotListFlush", 1)
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "lost" })
      yield* TestClock.adjust("50 millis")
      yield* MeshTest.settle
      assert.strictEqual(faults.caught("HotListFlush"), 1)
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "p" })
      yield* TestClock.adjust("50 millis")
      yield* MeshTest.settleUntil(
        Effect.map(b.hotList.pending, (items) => items.some((i) => i.partition === "p"))
      )
    })
  )

  it.effect("metrics sync: a defect in one sync does not stop the next", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const faults = new LoopFaults()
      const a = yield* MeshTest.node(network, { serverId: "metrics-a", peers: ["nobody"], config }).pipe(
        Effect.provideService(loopFaults, faults)
      )
      faults.inject("MeshMetrics", 1)
      yield* TestClock.adjust("2 seconds")
      yield* MeshTest.settle
      assert.strictEqual(faults.caught("MeshMetrics"), 1)
      yield* a.mesh.syncMetrics
      assert.isTrue(Option.isNone(a.mesh.port) === false)
    })
  )
})
