/**
 * Dispatch alone: the spec's "effect on receipt" column applied to the host's services, with the
 * synchronous fast path where the host offers it and effects, in order, where it does not.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, SubscriptionRef } from "effect"
import * as EphemeralAdmin from "../../../src/EphemeralAdmin.js"
import * as Frame from "../../../src/Frame.js"
import * as HotList from "../../../src/HotList.js"
import * as Dispatch from "../../../src/internal/mesh/dispatch.js"
import * as LocalWaker from "../../../src/LocalWaker.js"
import * as MaintenanceFlags from "../../../src/MaintenanceFlags.js"
import * as MeshConfig from "../../../src/MeshConfig.js"
import * as MeshEvent from "../../../src/MeshEvent.js"
import * as QueueConfigCache from "../../../src/QueueConfigCache.js"
import * as Waker from "../../../src/Waker.js"

const item = Frame.queueItem({ queue: "q", partition: "p", tenant: "t" })
const TENANT = "7f9c24e8-3b12-4fef-91e0-66ca3c8b3a4f"

/** The runtime's own service the dispatch reads: its configuration. */
const runtime = (tenants: MeshConfig.TenantRule) => MeshConfig.layer({ serverId: "self", tenants })

/** The dispatch over `hosts` (a waker, and anything beside it) and the other shipped host services. */
const dispatchContext = <A>(tenants: MeshConfig.TenantRule, hosts: Layer.Layer<A>) =>
  Layer.build(
    Dispatch.layer.pipe(
      Layer.provideMerge(
        Layer.mergeAll(
          hosts,
          QueueConfigCache.layerMemory(),
          HotList.layerMemory(),
          MaintenanceFlags.layer(),
          MeshEvent.layer,
          runtime(tenants)
        )
      )
    )
  )

describe("Dispatch", () => {
  it.effect("applies every frame of the table to the shipped host services", () =>
    Effect.gen(function* () {
      const context = yield* dispatchContext("any", LocalWaker.layer())
      const { apply } = yield* Effect.provide(Dispatch.Dispatch, context)
      const hot = yield* Effect.provide(HotList.MemoryHotList, context)
      const cache = yield* Effect.provide(QueueConfigCache.MemoryQueueConfigCache, context)
      const flags = yield* Effect.provide(MaintenanceFlags.MaintenanceFlags, context)
      const waker = yield* Effect.provide(LocalWaker.LocalWaker, context)
      const events = yield* Effect.provide(MeshEvent.MeshEvents, context)
      const seen: Array<string> = []
      yield* events.observe((event) => seen.push(event._tag))

      // The synchronous twins: no effect is returned.
      assert.isUndefined(apply("peer", { _tag: "MessageAvailable", ...item }))
      assert.deepStrictEqual(yield* waker.takePartitionHints({ queue: "q", tenant: Option.some("t") }), ["p"])
      assert.isUndefined(
        apply("peer", { _tag: "HotlistDirtyBatch", items: [{ ...item, group: Option.none() }] })
      )
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
      // No EphemeralAdmin provided: published and counted, applied to nothing.
      yield* apply("peer", { _tag: "EphAdmin", op: "reset", tenant: TENANT, queue: "tmp" }) ?? Effect.void
      assert.strictEqual(
        (yield* Effect.provide(Dispatch.Dispatch, context)).ephAdmin.snapshot().received.reset,
        1
      )
      assert.deepStrictEqual(seen, [
        "Wake",
        "HotlistDirty",
        "QueueConfigInvalidated",
        "Maintenance",
        "PopMaintenance",
        "EphAdmin"
      ])
    })
  )

  it.effect("a waker with only the effectful wake gets an effect per frame, items in order", () =>
    Effect.gen(function* () {
      const woken: Array<string> = []
      const context = yield* dispatchContext(
        "uuid",
        Layer.succeed(Waker.Waker, { wake: (i) => Effect.sync(() => woken.push(i.partition)) })
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

  it.effect("an EphemeralAdmin provided beside the host services gets every EPH_ADMIN, with its sender", () =>
    Effect.gen(function* () {
      const applied: Array<string> = []
      const context = yield* dispatchContext(
        "uuid",
        Layer.merge(
          LocalWaker.layer(),
          EphemeralAdmin.layer((command, from) =>
            Effect.sync(() => applied.push(`${from} ${command.op} ${command.tenant} ${command.queue}`))
          )
        )
      )
      const { apply } = yield* Effect.provide(Dispatch.Dispatch, context)
      for (const op of ["reset", "delete", "config_set"] as const) {
        yield* apply("queen-b", { _tag: "EphAdmin", op, tenant: TENANT, queue: "tmp" }) ?? Effect.void
      }
      assert.deepStrictEqual(applied, [
        `queen-b reset ${TENANT} tmp`,
        `queen-b delete ${TENANT} tmp`,
        `queen-b config_set ${TENANT} tmp`
      ])
      const counts = (yield* Effect.provide(Dispatch.Dispatch, context)).ephAdmin.snapshot()
      assert.deepStrictEqual(counts.received, { reset: 1, delete: 1, config_set: 1 })
    })
  )

  it.effect(
    "tenants: uuid reads a tenant that is not a UUID as absent in every frame kind, as upstream does",
    () =>
      Effect.gen(function* () {
        const context = yield* dispatchContext("uuid", LocalWaker.layer())
        const { apply } = yield* Effect.provide(Dispatch.Dispatch, context)
        const events = yield* Effect.provide(MeshEvent.MeshEvents, context)
        const tenants: Array<string | null> = []
        yield* events.observe((event) => {
          if (event._tag === "Wake" || event._tag === "HotlistDirty")
            tenants.push(Option.getOrNull(event.item.tenant))
          if (event._tag === "QueueConfigInvalidated") tenants.push(Option.getOrNull(event.ref.tenant))
        })
        const named = Frame.queueItem({ queue: "q", partition: "p", tenant: "acme" })
        const uuid = Frame.queueItem({ queue: "q", partition: "p", tenant: TENANT })
        const frames: ReadonlyArray<Frame.Frame> = [
          { _tag: "MessageAvailable", ...named },
          { _tag: "MessageAvailableBatch", items: [named, uuid] },
          { _tag: "HotlistDirtyBatch", items: [{ ...named, group: Option.some("g") }] },
          { _tag: "QueueConfigSet", ...Frame.queueRef({ queue: "q", tenant: "acme" }) },
          { _tag: "QueueConfigDelete", ...Frame.queueRef({ queue: "q", tenant: TENANT }) }
        ]
        for (const frame of frames) yield* apply("peer", frame) ?? Effect.void
        assert.deepStrictEqual(tenants, [null, null, TENANT, null, null, TENANT])
      })
  )
})
