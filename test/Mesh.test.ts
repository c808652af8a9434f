import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Option, Ref, Stream, TestClock } from "effect"
import * as Frame from "../src/Frame.js"
import * as Mesh from "../src/Mesh.js"
import type { MeshEvent } from "../src/MeshEvent.js"
import * as Waker from "../src/Waker.js"
import { active, memoryConfig, memoryNetwork, memoryNode, settle, settleUntil } from "./fixtures/memory.js"

/** Two connected memory nodes, A (7201) and B (7202). */
const pair = Effect.gen(function* () {
  const { network, transportLayer } = yield* memoryNetwork
  const b = yield* memoryNode(transportLayer, { serverId: "b", port: 7202, peers: [7201] })
  const a = yield* memoryNode(transportLayer, { serverId: "a", port: 7201, peers: [7202] })
  yield* settleUntil(Effect.map(a.mesh.stats, (s) => active(s).peers.every((p) => p.connected)))
  yield* settleUntil(Effect.map(b.mesh.stats, (s) => active(s).servers_alive === 1))
  return { network, a, b }
})

const record = (events: Stream.Stream<MeshEvent>) =>
  Effect.gen(function* () {
    const seen = yield* Ref.make<ReadonlyArray<MeshEvent>>([])
    yield* events.pipe(
      Stream.runForEach((e) => Ref.update(seen, (all) => [...all, e])),
      Effect.forkScoped
    )
    yield* settle
    return seen
  })

describe("Mesh", () => {
  it.scoped("with no peers nothing binds and nothing is sent, but local wakes work", () =>
    Effect.gen(function* () {
      const { network, transport, transportLayer } = yield* memoryNetwork
      const node = yield* memoryNode(transportLayer, { serverId: "solo", port: 7300, peers: [] })
      assert.isFalse(node.mesh.active)
      assert.isTrue(Option.isNone(node.mesh.port))
      const dial = yield* Effect.exit(Effect.scoped(transport.dial("127.0.0.1", 7300)))
      assert.isTrue(Exit.isFailure(dial))
      const pop = yield* Effect.fork(
        node.waker.awaitWake({ queue: "q", tenant: Option.none() }, { maxWait: "1 hour" })
      )
      yield* settleUntil(Effect.map(node.waker.parked, (n) => n === 1))
      yield* node.mesh.messageAvailable({ queue: "q", partition: "p" })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      yield* node.mesh.setMaintenance(true)
      assert.deepStrictEqual(yield* node.mesh.stats, {
        enabled: false,
        reason: "no_peers",
        server_id: "solo",
        transport: "tcp-mesh",
        version: "0.1.0",
        uptime_ms: 0,
        maintenance_mode: true,
        pop_maintenance_mode: false
      })
      assert.strictEqual((yield* network.dials).length, 1)
    })
  )

  it.scoped("with sync off nothing binds even with peers, and the reason says so", () =>
    Effect.gen(function* () {
      const { network, transportLayer } = yield* memoryNetwork
      const node = yield* memoryNode(transportLayer, {
        serverId: "off",
        port: 7301,
        peers: [7302],
        config: { enabled: false }
      })
      yield* node.mesh.messageAvailable({ queue: "q", partition: "p" })
      yield* TestClock.adjust("10 seconds")
      const stats = yield* node.mesh.stats
      assert.isFalse(stats.enabled)
      assert.strictEqual(stats.enabled === false && stats.reason, "disabled")
      assert.strictEqual((yield* network.dials).length, 0)
    })
  )

  it.scoped("hot-list marks within one flush window go out once, as one batch of distinct items", () =>
    Effect.gen(function* () {
      const { a, b } = yield* pair
      const before = active(yield* b.mesh.stats).messages_received
      for (let i = 0; i < 1000; i++) yield* a.mesh.hotlistDirty({ queue: "q", partition: "hot", tenant: "t" })
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "warm", tenant: "t" })
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "hot" })
      yield* settle
      assert.strictEqual(active(yield* b.mesh.stats).messages_received, before)
      yield* TestClock.adjust("20 millis")
      yield* settleUntil(Effect.map(b.mesh.stats, (s) => active(s).messages_received === before + 1))
      const pending = yield* b.hotList.pending
      assert.sameDeepMembers(
        pending.map((i) => [i.queue, i.partition, Option.getOrNull(i.tenant)]),
        [
          ["q", "hot", "t"],
          ["q", "warm", "t"],
          ["q", "hot", null]
        ]
      )
      // Nothing pending: the next windows send nothing.
      yield* TestClock.adjust("100 millis")
      yield* settle
      assert.strictEqual(active(yield* b.mesh.stats).messages_received, before + 1)
    })
  )

  it.scoped("every API call reaches the peer's host services and shows as an event", () =>
    Effect.gen(function* () {
      const { a, b } = yield* pair
      const seen = yield* record(b.mesh.events)
      yield* b.cache.set(Frame.queueRef({ queue: "cfg", tenant: "t" }), {
        leaseTimeSeconds: 5,
        encrypted: false
      })
      yield* b.cache.set(Frame.queueRef({ queue: "gone", tenant: "t" }), {
        leaseTimeSeconds: 5,
        encrypted: false
      })
      yield* a.mesh.messageAvailable({ queue: "q", partition: "0", tenant: "t" })
      yield* a.mesh.messageAvailableBatch([
        { queue: "q", partition: "1" },
        { queue: "r", partition: "2", tenant: "u" }
      ])
      yield* a.mesh.messageAvailableBatch([])
      yield* a.mesh.queueConfigSet({ queue: "cfg", tenant: "t" })
      yield* a.mesh.queueConfigDelete({ queue: "gone" })
      yield* a.mesh.setMaintenance(true)
      yield* a.mesh.setPopMaintenance(true)
      yield* settleUntil(Effect.map(b.mesh.stats, (s) => active(s).pop_maintenance_mode))
      assert.strictEqual(active(yield* a.mesh.stats).messages_sent, 6)
      assert.strictEqual(yield* b.cache.size, 0)
      yield* settleUntil(Effect.map(Ref.get(seen), (all) => all.length >= 7))
      const tags = (yield* Ref.get(seen)).map((e) =>
        e._tag === "Wake"
          ? `wake:${e.from}:${e.item.queue}/${e.item.partition}/${Option.getOrElse(e.item.tenant, () => "-")}`
          : e._tag === "QueueConfigInvalidated"
            ? `cfg:${e.op}:${e.ref.queue}`
            : e._tag
      )
      assert.deepStrictEqual(tags, [
        "wake:a:q/0/t",
        "wake:a:q/1/-",
        "wake:a:r/2/u",
        "cfg:set:cfg",
        "cfg:delete:gone",
        "Maintenance",
        "PopMaintenance"
      ])
    })
  )

  it.scoped("input no peer would accept fails with a typed error and sends nothing", () =>
    Effect.gen(function* () {
      const { a } = yield* pair
      const sent = active(yield* a.mesh.stats).messages_sent
      const bad = yield* Effect.flip(a.mesh.messageAvailable({ queue: "", partition: "p" }))
      assert.strictEqual(bad._tag, "InvalidInputError")
      const badBatch = yield* Effect.flip(
        a.mesh.messageAvailableBatch([
          { queue: "ok", partition: "p" },
          { queue: "", partition: "p" }
        ])
      )
      assert.strictEqual(badBatch._tag, "InvalidInputError")
      assert.strictEqual((yield* Effect.flip(a.mesh.queueConfigSet({ queue: "" })))._tag, "InvalidInputError")
      assert.strictEqual(
        (yield* Effect.flip(a.mesh.hotlistDirty({ queue: "", partition: "p" })))._tag,
        "InvalidInputError"
      )
      yield* settle
      assert.strictEqual(active(yield* a.mesh.stats).messages_sent, sent)
    })
  )

  it.scoped("a batch larger than the frame cap is split, not dropped", () =>
    Effect.gen(function* () {
      const { a, b } = yield* pair
      const long = "q".repeat(250)
      const items = Array.from({ length: 40_000 }, (_, i) => ({ queue: long, partition: `${long}${i}` }))
      yield* a.mesh.messageAvailableBatch(items)
      yield* settleUntil(
        Effect.map(b.mesh.stats, (s) => active(s).messages_received >= 2),
        5000
      )
      const stats = active(yield* a.mesh.stats)
      assert.strictEqual(stats.messages_dropped, 0)
      assert.strictEqual(stats.messages_sent, 2)
    })
  )

  it.scoped("a waker with only the effectful wake gets every wake, in order", () =>
    Effect.gen(function* () {
      const { transportLayer } = yield* memoryNetwork
      const woken: Array<string> = []
      const effectOnly = Layer.succeed(Waker.Waker, {
        wake: (item) => Effect.sync(() => woken.push(`${item.queue}/${item.partition}`))
      })
      const b = yield* Layer.build(
        Mesh.layer.pipe(
          Layer.provide(effectOnly),
          Layer.provide(Mesh.layerHostLocal()),
          Layer.provide(memoryConfig({ serverId: "b", port: 7402, peers: [7401] })),
          Layer.provide(transportLayer)
        )
      ).pipe(Effect.map((context) => Context.get(context, Mesh.Mesh)))
      const a = yield* memoryNode(transportLayer, { serverId: "a", port: 7401, peers: [7402] })
      yield* settleUntil(Effect.map(a.mesh.stats, (s) => active(s).peers.every((p) => p.connected)))
      yield* a.mesh.messageAvailable({ queue: "q", partition: "1" })
      yield* a.mesh.messageAvailableBatch([
        { queue: "q", partition: "2" },
        { queue: "r", partition: "3" }
      ])
      yield* a.mesh.messageAvailable({ queue: "q", partition: "4" })
      yield* settleUntil(Effect.map(b.stats, (s) => active(s).messages_received === 3))
      assert.deepStrictEqual(woken, ["q/1", "q/2", "r/3", "q/4"])
    })
  )
})
