/**
 * Peers alone, over the in-memory transport under TestClock: one dialer per configured peer, the
 * reconnect schedule as an option, and the per-link accounting.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Schedule } from "effect"
import { TestClock } from "effect/testing"
import * as Frame from "../../../src/Frame.js"
import * as Liveness from "../../../src/internal/links/liveness.js"
import * as Peers from "../../../src/internal/links/peers.js"
import * as SelfDials from "../../../src/internal/links/selfDials.js"
import * as MemoryTransport from "../../../src/MemoryTransport.js"
import * as MeshConfig from "../../../src/MeshConfig.js"
import * as MeshEvent from "../../../src/MeshEvent.js"
import * as MeshTest from "../../../src/MeshTest.js"

describe("Peers", () => {
  it.effect(
    "dials each peer once (repeats merged), on the reconnect schedule given, and accounts for every frame",
    () =>
      Effect.gen(function* () {
        const network = yield* MemoryTransport.makeNetwork
        const config = MeshTest.config({ serverId: "a", peers: ["b", "b", "c"] })
        const peers = yield* Peers.make({ reconnectSchedule: Schedule.spaced("100 millis") }).pipe(
          Effect.provide(
            Layer.mergeAll(MemoryTransport.layer(network), Liveness.layer(), SelfDials.layer).pipe(
              Layer.provideMerge(Layer.merge(MeshConfig.layer(config), MeshEvent.layer))
            )
          )
        )
        assert.strictEqual(peers.size, 2)
        yield* MeshTest.settle
        for (let i = 0; i < 10; i++) {
          yield* TestClock.adjust("100 millis")
          yield* MeshTest.settle
        }
        const dials = (yield* network.network.dials).filter((d) => d.host === "b")
        // A dial at start, then one every 100 ms: the schedule given, not the default backoff.
        assert.isAtLeast(dials.length, 10)
        assert.deepStrictEqual(
          dials.slice(1, 4).map((d, i) => d.at - dials[i]!.at),
          [100, 100, 100]
        )
        // Down links drop at once, and say so.
        const bytes = Frame.encode({ _tag: "MaintenanceModeSet", enabled: true })
        assert.strictEqual(peers.broadcast(bytes), 0)
        const links = yield* peers.links
        for (const { counters } of links) {
          assert.strictEqual(
            counters.handed,
            counters.written +
              counters.dropped_full +
              counters.dropped_down +
              counters.discarded +
              counters.queued
          )
          assert.strictEqual(counters.dropped_down, 1)
        }
      })
  )
})
