/**
 * The hot paths' histograms: a value observed is stored and lands in the Effect histogram at the next
 * metrics sync (`flushHistograms`), or as soon as 1,024 are waiting; none is lost, and no timer is set
 * per observation.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Metric } from "effect"
import { applyHistogram, flushHistograms, names } from "../../../src/internal/metrics/metricNames.js"

const countFor = (serverId: string) =>
  Effect.map(Metric.snapshot, (snapshots) => {
    for (const snapshot of snapshots) {
      if (snapshot.id !== names.applySeconds) continue
      if (snapshot.attributes?.server_id !== serverId) continue
      if (snapshot.type === "Histogram") return snapshot.state.count
    }
    return 0
  })

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe("hot-path histograms", () => {
  it("land at the next sync, or at once when 1,024 are waiting", async () => {
    const serverId = `histogram-test-${process.pid}`
    const observe = applyHistogram(serverId)
    for (let i = 0; i < 3; i++) observe(0.000_01)
    await nextTurn()
    // Nothing was scheduled: the values wait for the sync.
    assert.strictEqual(await Effect.runPromise(countFor(serverId)), 0)
    flushHistograms()
    assert.strictEqual(await Effect.runPromise(countFor(serverId)), 3)
    for (let i = 0; i < 1_500; i++) observe(0.001)
    // The first 1,024 are in already, the buffer never held more.
    assert.strictEqual(await Effect.runPromise(countFor(serverId)), 3 + 1_024)
    flushHistograms()
    assert.strictEqual(await Effect.runPromise(countFor(serverId)), 1_503)
    // A second flush with nothing waiting changes nothing.
    flushHistograms()
    assert.strictEqual(await Effect.runPromise(countFor(serverId)), 1_503)
  })
})
