/**
 * The background metrics sync: by default every 10 seconds (a sync reads every counter of the node,
 * so a shorter default was most of what an idle node spent), and every `metricsInterval` when the
 * host sets one. Frames go out meanwhile; the registry only follows at a sync.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer, Metric } from "effect"
import { TestClock } from "effect/testing"
import { DEFAULT_INTERVAL } from "../../../src/internal/metrics/metricsSync.js"
import * as Mesh from "../../../src/Mesh.js"
import { names } from "../../../src/MeshMetrics.js"
import { active, memoryConfig, memoryNetwork, settle } from "../../fixtures/memory.js"

/** Frames the registry says `serverId` wrote, every peer and tag summed. */
const framesSentInRegistry = (serverId: string): number => {
  let total = 0
  for (const snapshot of Metric.snapshotUnsafe(Context.empty())) {
    if (snapshot.id !== names.framesSent) continue
    if (snapshot.attributes?.server_id !== serverId) continue
    if (snapshot.type === "Counter") total += Number(snapshot.state.count)
  }
  return total
}

const pair = (prefix: string, options: Mesh.MeshOptions) =>
  Effect.gen(function* () {
    const { transportLayer } = yield* memoryNetwork
    const config = { heartbeatInterval: Duration.millis(400) }
    const node = (serverId: string, port: number, peer: number) =>
      Layer.build(
        Mesh.layerLocal(options).pipe(
          Layer.provide(memoryConfig({ serverId, port, peers: [peer], config })),
          Layer.provide(transportLayer)
        )
      )
    const a = yield* node(`${prefix}-a`, 7101, 7102)
    yield* node(`${prefix}-b`, 7102, 7101)
    yield* settle
    return (yield* Effect.provide(Mesh.Mesh, a)).stats
  })

describe("the background metrics sync", () => {
  it.effect("runs every 10 seconds by default, not sooner", () =>
    Effect.gen(function* () {
      assert.strictEqual(Duration.toMillis(DEFAULT_INTERVAL), 10_000)
      const stats = yield* pair("msync-default", {})
      yield* TestClock.adjust(Duration.millis(10_000 - 1))
      yield* settle
      const sent = active(yield* stats).messages_sent
      assert.isAtLeast(sent, 20)
      assert.strictEqual(framesSentInRegistry("msync-default-a"), 0)
      yield* TestClock.adjust(Duration.millis(1))
      yield* settle
      assert.strictEqual(framesSentInRegistry("msync-default-a"), active(yield* stats).messages_sent)
    })
  )

  it.effect("runs every metricsInterval when the host sets one", () =>
    Effect.gen(function* () {
      const stats = yield* pair("msync-one", { metricsInterval: Duration.seconds(1) })
      yield* TestClock.adjust(Duration.millis(999))
      yield* settle
      assert.strictEqual(framesSentInRegistry("msync-one-a"), 0)
      yield* TestClock.adjust(Duration.millis(1))
      yield* settle
      const sent = active(yield* stats).messages_sent
      assert.isAtLeast(sent, 1)
      assert.strictEqual(framesSentInRegistry("msync-one-a"), sent)
    })
  )

  it.effect("never runs in the background with an infinite interval", () =>
    Effect.gen(function* () {
      const stats = yield* pair("msync-off", { metricsInterval: Duration.infinity })
      yield* TestClock.adjust(Duration.minutes(1))
      yield* settle
      assert.isAtLeast(active(yield* stats).messages_sent, 100)
      assert.strictEqual(framesSentInRegistry("msync-off-a"), 0)
    })
  )
})
