import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Exit, Fiber, Layer, Option, Ref, Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Frame from "../src/Frame.js"
import * as Membership from "../src/Membership.js"
import * as Mesh from "../src/Mesh.js"
import type { MeshEvent } from "../src/MeshEvent.js"
import * as Waker from "../src/Waker.js"
import { active, memoryConfig, memoryNetwork, memoryNode, settle, settleUntil } from "./fixtures/memory.js"

/** Tenants are UUIDs, as upstream reads them (the default `tenants: "uuid"`). */
const TENANT_T = "7e7e7e7e-0000-4000-8000-000000000001"
const TENANT_U = "0b0b0b0b-0000-4000-8000-000000000002"

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
  it.effect("with no peers nothing binds and nothing is sent, but local wakes work", () =>
    Effect.gen(function* () {
      const { network, transport, transportLayer } = yield* memoryNetwork
      const node = yield* memoryNode(transportLayer, { serverId: "solo", port: 7300, peers: [] })
      assert.isFalse(node.mesh.active)
      assert.isTrue(Option.isNone(node.mesh.port))
      const dial = yield* Effect.exit(Effect.scoped(transport.dial("127.0.0.1", 7300)))
      assert.isTrue(Exit.isFailure(dial))
      const pop = yield* Effect.forkChild(
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
        health: { status: "solo", reason: "no_peers", expected: 0, healthy: 0, lane: "none" },
        maintenance_mode: true,
        pop_maintenance_mode: false
      })
      assert.strictEqual((yield* network.dials).length, 1)
    })
  )

  it.effect("with sync off nothing binds even with peers, and the reason says so", () =>
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

  it.effect("hot-list marks within one flush window go out once, as one batch of distinct items", () =>
    Effect.gen(function* () {
      const { a, b } = yield* pair
      const before = active(yield* b.mesh.stats).messages_received
      for (let i = 0; i < 1000; i++)
        yield* a.mesh.hotlistDirty({ queue: "q", partition: "hot", tenant: TENANT_T })
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "warm", tenant: TENANT_T })
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "hot" })
      yield* settle
      assert.strictEqual(active(yield* b.mesh.stats).messages_received, before)
      yield* TestClock.adjust("20 millis")
      yield* settleUntil(Effect.map(b.mesh.stats, (s) => active(s).messages_received === before + 1))
      const pending = yield* b.hotList.pending
      assert.sameDeepMembers(
        pending.map((i) => [i.queue, i.partition, Option.getOrNull(i.tenant)]),
        [
          ["q", "hot", TENANT_T],
          ["q", "warm", TENANT_T],
          ["q", "hot", null]
        ]
      )
      // Nothing pending: the next windows send nothing.
      yield* TestClock.adjust("100 millis")
      yield* settle
      assert.strictEqual(active(yield* b.mesh.stats).messages_received, before + 1)
    })
  )

  it.effect("every API call reaches the peer's host services and shows as an event", () =>
    Effect.gen(function* () {
      const { a, b } = yield* pair
      const seen = yield* record(b.mesh.events)
      yield* b.cache.set(Frame.queueRef({ queue: "cfg", tenant: TENANT_T }), {
        leaseTimeSeconds: 5,
        encrypted: false
      })
      yield* b.cache.set(Frame.queueRef({ queue: "gone", tenant: TENANT_T }), {
        leaseTimeSeconds: 5,
        encrypted: false
      })
      yield* a.mesh.messageAvailable({ queue: "q", partition: "0", tenant: TENANT_T })
      yield* a.mesh.messageAvailableBatch([
        { queue: "q", partition: "1" },
        { queue: "r", partition: "2", tenant: TENANT_U }
      ])
      yield* a.mesh.messageAvailableBatch([])
      yield* a.mesh.queueConfigSet({ queue: "cfg", tenant: TENANT_T })
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
        `wake:a:q/0/${TENANT_T}`,
        "wake:a:q/1/-",
        `wake:a:r/2/${TENANT_U}`,
        "cfg:set:cfg",
        "cfg:delete:gone",
        "Maintenance",
        "PopMaintenance"
      ])
    })
  )

  it.effect("input no peer would accept fails with a typed error and sends nothing", () =>
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

  it.effect("a batch larger than the frame cap is split, not dropped", () =>
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

  it.effect("a waker with only the effectful wake gets every wake, in order", () =>
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

describe("Mesh: upstream's current wire", () => {
  it.effect("a scoped and an unscoped mark of one partition are two hints; the group reaches the peer", () =>
    Effect.gen(function* () {
      const { a, b } = yield* pair
      const seen = yield* record(b.mesh.events)
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "p", group: "billing" })
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "p", group: "billing" })
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "p" })
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "p", group: "" })
      yield* a.mesh.hotlistDirty({ queue: "q", partition: "p", group: Option.some("audit") })
      yield* TestClock.adjust("20 millis")
      yield* settleUntil(Effect.map(b.hotList.pending, (pending) => pending.length === 3))
      assert.sameMembers(
        (yield* b.hotList.pending).map((item) => Option.getOrElse(item.group, () => "*")),
        ["billing", "*", "audit"]
      )
      yield* settleUntil(Effect.map(Ref.get(seen), (all) => all.length === 3))
      const groups = (yield* Ref.get(seen)).map((e) =>
        e._tag === "HotlistDirty" ? Option.getOrElse(e.item.group, () => "*") : e._tag
      )
      assert.sameMembers(groups, ["billing", "*", "audit"])
      const refused = yield* Effect.flip(
        a.mesh.hotlistDirty({ queue: "q", partition: "p", group: "g".repeat(256) })
      )
      assert.include(refused.message, "group is longer than 255 characters")
    })
  )

  it.effect("ephemeralAdmin reaches every peer's EphemeralAdmin and is counted per op on both sides", () =>
    Effect.gen(function* () {
      const { a, b } = yield* pair
      const seen = yield* record(b.mesh.events)
      const tenant = TENANT_T.toUpperCase()
      yield* a.mesh.ephemeralAdmin({ op: "reset", tenant, queue: "tmp" })
      yield* a.mesh.ephemeralAdmin({ op: "config_set", tenant, queue: "tmp" })
      yield* settleUntil(Effect.map(b.mesh.stats, (s) => active(s).eph_admin.received.config_set === 1))
      assert.deepStrictEqual(active(yield* a.mesh.stats).eph_admin.sent, {
        reset: 1,
        delete: 0,
        config_set: 1
      })
      assert.deepStrictEqual(active(yield* b.mesh.stats).eph_admin.received, {
        reset: 1,
        delete: 0,
        config_set: 1
      })
      yield* settleUntil(Effect.map(Ref.get(seen), (all) => all.length === 2))
      assert.deepStrictEqual(yield* Ref.get(seen), [
        { _tag: "EphAdmin", from: "a", op: "reset", tenant: TENANT_T, queue: "tmp" },
        { _tag: "EphAdmin", from: "a", op: "config_set", tenant: TENANT_T, queue: "tmp" }
      ])
      // Upstream's rules at the API: a UUID tenant, a known op, a queue.
      for (const bad of [
        { op: "reset", tenant: "acme", queue: "tmp" },
        { op: "reset", tenant: "", queue: "tmp" },
        { op: "reset", tenant: TENANT_T, queue: "" },
        { op: "drop", tenant: TENANT_T, queue: "tmp" }
      ] as const) {
        // The op is typed; a caller from JavaScript can still pass anything.
        const input: { op: Frame.EphOp; tenant: string; queue: string } = JSON.parse(JSON.stringify(bad))
        assert.strictEqual((yield* Effect.flip(a.mesh.ephemeralAdmin(input)))._tag, "InvalidInputError")
      }
    })
  )

  it.effect("tenants: uuid refuses a named tenant at the API; any sends it as before", () =>
    Effect.gen(function* () {
      const { a } = yield* pair
      const refused = yield* Effect.flip(
        a.mesh.messageAvailable({ queue: "q", partition: "p", tenant: "acme" })
      )
      assert.strictEqual(refused._tag, "InvalidInputError")
      assert.include(refused.message, '"acme"')
      assert.throws(() => a.mesh.unsafeMessageAvailable({ queue: "q", partition: "p", tenant: "acme" }))
      assert.strictEqual(
        (yield* Effect.flip(a.mesh.queueConfigSet({ queue: "q", tenant: "acme" })))._tag,
        "InvalidInputError"
      )
      assert.strictEqual(
        (yield* Effect.flip(a.mesh.hotlistDirty({ queue: "q", partition: "p", tenant: "acme" })))._tag,
        "InvalidInputError"
      )

      const { transportLayer } = yield* memoryNetwork
      const d = yield* memoryNode(transportLayer, {
        serverId: "d",
        port: 7402,
        peers: [7401],
        config: { tenants: "any" }
      })
      const c = yield* memoryNode(transportLayer, {
        serverId: "c",
        port: 7401,
        peers: [7402],
        config: { tenants: "any" }
      })
      yield* settleUntil(Effect.map(c.mesh.stats, (s) => active(s).peers.every((p) => p.connected)))
      const pop = yield* Effect.forkChild(
        d.waker.awaitWake({ queue: "q", tenant: Option.some("acme") }, { maxWait: "1 hour" })
      )
      yield* settleUntil(Effect.map(d.waker.parked, (n) => n === 1))
      yield* c.mesh.messageAvailable({ queue: "q", partition: "p", tenant: "acme" })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
    })
  )

  it.effect(
    "HELLO v2: each node advertises http_addr and its epoch; eph_members counts the alive, capable peers",
    () =>
      Effect.gen(function* () {
        const { transportLayer } = yield* memoryNetwork
        const config = (host: string, epoch: string) => ({
          advertiseHost: host,
          httpPort: 6632,
          ephEpoch: epoch
        })
        const scopeB = yield* Scope.make()
        const b = yield* Scope.provide(
          memoryNode(transportLayer, {
            serverId: "b",
            port: 7502,
            peers: [7501, 7503],
            config: config("queen-b", "b0b")
          }),
          scopeB
        )
        const c = yield* memoryNode(transportLayer, {
          serverId: "c",
          port: 7503,
          peers: [7501, 7502],
          config: config("", "c0c")
        })
        const a = yield* memoryNode(transportLayer, {
          serverId: "a",
          port: 7501,
          peers: [7502, 7503],
          config: config("queen-a", "a0a")
        })
        // b and c dialled a before it listened: their next dial comes after the first backoff.
        yield* TestClock.adjust("1 second")
        yield* settleUntil(Effect.map(a.mesh.stats, (s) => active(s).servers_alive === 2))
        yield* settleUntil(Effect.map(b.mesh.stats, (s) => active(s).servers_alive === 2))
        yield* settleUntil(Effect.map(c.mesh.stats, (s) => active(s).servers_alive === 2))
        // c advertises nothing, so nobody counts it; a and b count each other.
        assert.strictEqual(active(yield* a.mesh.stats).eph_members, 1)
        assert.strictEqual(active(yield* b.mesh.stats).eph_members, 1)
        assert.strictEqual(active(yield* c.mesh.stats).eph_members, 2)
        assert.deepStrictEqual(Membership.ephemeralMembers(yield* c.mesh.members), [
          { serverId: "a", httpAddr: "http://queen-a:6632", epoch: "a0a" },
          { serverId: "b", httpAddr: "http://queen-b:6632", epoch: "b0b" }
        ])
        const heardB = (yield* a.mesh.members).find(
          (m) => Option.getOrNull(m.serverId) === "b" && Option.isSome(m.heard)
        )
        assert.isTrue(
          heardB !== undefined && Option.isSome(heardB.heard) && heardB.heard.value.ephemeralCapable
        )
        // A peer that goes silent past the dead threshold is not counted.
        yield* Scope.close(scopeB, Exit.void)
        yield* TestClock.adjust("6 seconds")
        yield* settleUntil(Effect.map(c.mesh.stats, (s) => active(s).servers_alive === 1))
        assert.strictEqual(active(yield* c.mesh.stats).eph_members, 1)
      })
  )
})
