/**
 * Dispatch alone: the spec's "effect on receipt" column applied to the host's services, with the
 * synchronous fast path where the host offers it and effects, in order, where it does not.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, SubscriptionRef } from "effect"
import * as Frame from "../../src/Frame.js"
import * as HotList from "../../src/HotList.js"
import * as Dispatch from "../../src/internal/dispatch.js"
import * as MaintenanceFlags from "../../src/MaintenanceFlags.js"
import * as MeshEvent from "../../src/MeshEvent.js"
import * as QueueConfigCache from "../../src/QueueConfigCache.js"
import * as Waker from "../../src/Waker.js"

const item = Frame.queueItem({ queue: "q", partition: "p", tenant: "t" })

describe("Dispatch", () => {
  it.scoped("applies every frame of the table to the shipped host services", () =>
    Effect.gen(function* () {
      const context = yield* Layer.build(
        Dispatch.layer.pipe(
          Layer.provideMerge(
            Layer.mergeAll(
              Waker.layerLocal(),
              QueueConfigCache.layerMemory(),
              HotList.layerMemory(),
              MaintenanceFlags.layer(),
              MeshEvent.layer
            )
          )
        )
      )
      const { apply } = yield* Effect.provide(Dispatch.Dispatch, context)
      const hot = yield* Effect.provide(HotList.MemoryHotList, context)
      const cache = yield* Effect.provide(QueueConfigCache.MemoryQueueConfigCache, context)
      const flags = yield* Effect.provide(MaintenanceFlags.MaintenanceFlags, context)
      const waker = yield* Effect.provide(Waker.LocalWaker, context)
      const events = yield* Effect.provide(MeshEvent.MeshEvents, context)
      const seen: Array<string> = []
      yield* events.observe((event) => seen.push(event._tag))

      // The synchronous twins: no effect is returned.
      assert.isUndefined(apply("peer", { _tag: "MessageAvailable", ...item }))
      assert.deepStrictEqual(yield* waker.takePartitionHints({ queue: "q", tenant: Option.some("t") }), ["p"])
      assert.isUndefined(apply("peer", { _tag: "HotlistDirtyBatch", items: [item] }))
      assert.strictEqual((yield* hot.pending).length, 1)
      assert.isUndefined(apply("peer", { _tag: "Heartbeat", server_id: Option.none() }))

      yield* cache.set(Frame.queueRef({ queue: "q", tenant: "t" }), {
        leaseTimeSeconds: 30,
        encrypted: false
      })
      yield* apply("peer", { _tag: "QueueConfigSet", ...Frame.queueRef({ queue: "q", tenant: "t" }) }) ??
        Effect.void
      assert.strictEqual(yield* cache.size, 0)
      yield* apply("peer", { _tag: "MaintenanceModeSet", enabled: true }) ?? Effect.void
      yield* apply("peer", { _tag: "PopMaintenanceModeSet", enabled: true }) ?? Effect.void
      assert.isTrue(yield* SubscriptionRef.get(flags.maintenance))
      assert.isTrue(yield* SubscriptionRef.get(flags.popMaintenance))
      assert.deepStrictEqual(seen, [
        "Wake",
        "HotlistDirty",
        "QueueConfigInvalidated",
        "Maintenance",
        "PopMaintenance"
      ])
    })
  )

  it.scoped("a waker with only the effectful wake gets an effect per frame, items in order", () =>
    Effect.gen(function* () {
      const woken: Array<string> = []
      const context = yield* Layer.build(
        Dispatch.layer.pipe(
          Layer.provide(
            Layer.mergeAll(
              Layer.succeed(Waker.Waker, { wake: (i) => Effect.sync(() => woken.push(i.partition)) }),
              QueueConfigCache.layerMemory(),
              HotList.layerMemory(),
              MaintenanceFlags.layer(),
              MeshEvent.layer
            )
          )
        )
      )
      const { apply } = yield* Effect.provide(Dispatch.Dispatch, context)
      const batch: Frame.Frame = {
        _tag: "MessageAvailableBatch",
        items: ["a", "b", "c"].map((partition) => Frame.queueItem({ queue: "q", partition }))
      }
      const effect = apply("peer", batch)
      assert.isDefined(effect)
      yield* effect ?? Effect.void
      assert.deepStrictEqual(woken, ["a", "b", "c"])
    })
  )
})
