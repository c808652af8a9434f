import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Metric, Ref, Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import { active, memoryNetwork, memoryNode, settle, settleUntil } from "./fixtures/memory.js"

/** A tenant is a UUID (the default `tenants: "uuid"`). */
const TENANT_T = "7e7e7e7e-0000-4000-8000-000000000001"

describe("Mesh over the in-memory transport (TestClock)", () => {
  it.effect("dial retries wait 250, 500, 1000, 2000, 4000, 5000, 5000 ms and reset after a connect", () =>
    Effect.gen(function* () {
      const { network, transportLayer } = yield* memoryNetwork
      yield* memoryNode(transportLayer, { serverId: "b", port: 7002, peers: [7001] })
      yield* network.refuse(7002, true)
      yield* memoryNode(transportLayer, { serverId: "a", port: 7001, peers: [7002] })
      yield* settle
      // Walk the clock far enough for eight attempts.
      // Every retry falls on a multiple of 250 ms, so stepping by 250 ms observes each one exactly.
      for (let i = 0; i < 80; i++) {
        yield* TestClock.adjust("250 millis")
        yield* settle
      }
      const refused = (yield* network.dials).filter((d) => d.port === 7002)
      const gaps = refused.slice(1).map((d, i) => d.at - refused[i]!.at)
      assert.deepStrictEqual(gaps.slice(0, 7), [250, 500, 1000, 2000, 4000, 5000, 5000])

      // Let it connect, then break the link: the next retry starts again at 250 ms.
      yield* network.refuse(7002, false)
      for (let i = 0; i < 30 && (yield* network.openConnections(7002)) === 0; i++) {
        yield* TestClock.adjust("250 millis")
        yield* settle
      }
      assert.strictEqual(yield* network.openConnections(7002), 1)
      // Established: up for a heartbeat interval past the listener's auth-failure delay.
      yield* TestClock.adjust("2 seconds")
      yield* settle
      yield* network.refuse(7002, true)
      const before = (yield* network.dials).length
      const cutAt = yield* Clock.currentTimeMillis
      yield* network.cut(7002)
      yield* settle
      for (let i = 0; i < 8; i++) {
        yield* TestClock.adjust("250 millis")
        yield* settle
      }
      const retries = (yield* network.dials).slice(before).filter((d) => d.port === 7002)
      assert.strictEqual(retries[0]!.at - cutAt, 250)
      assert.deepStrictEqual(
        retries.slice(1, 3).map((d, i) => d.at - retries[i]!.at),
        [500, 1000]
      )
    })
  )

  it.effect("a peer that refuses our HELLO is redialled on the growing backoff, not in a tight loop", () =>
    Effect.gen(function* () {
      const { network, transportLayer } = yield* memoryNetwork
      const b = yield* memoryNode(transportLayer, {
        serverId: "b",
        port: 7062,
        peers: [7061],
        secret: "other"
      })
      yield* memoryNode(transportLayer, { serverId: "a", port: 7061, peers: [7062] })
      yield* settle
      for (let i = 0; i < 40; i++) {
        yield* TestClock.adjust("250 millis")
        yield* settle
      }
      const dials = (yield* network.dials).filter((d) => d.port === 7062)
      assert.isTrue(dials.every((d) => d.outcome === "connected"))
      // Each refused link stays up for the listener's 1 s auth-failure delay, then the backoff grows.
      assert.deepStrictEqual(
        dials.slice(1, 5).map((d, i) => d.at - dials[i]!.at),
        [1250, 1500, 2000, 3000]
      )
      assert.strictEqual(active(yield* b.mesh.stats).handshake_failures, dials.length)
    })
  )

  it.effect("heartbeats go out at the configured cadence on an idle link", () =>
    Effect.gen(function* () {
      const { transportLayer } = yield* memoryNetwork
      const b = yield* memoryNode(transportLayer, {
        serverId: "b",
        port: 7012,
        peers: [7011],
        config: { heartbeatInterval: Duration.millis(400) }
      })
      const a = yield* memoryNode(transportLayer, {
        serverId: "a",
        port: 7011,
        peers: [7012],
        config: { heartbeatInterval: Duration.millis(400) }
      })
      yield* settle
      assert.strictEqual(active(yield* b.mesh.stats).messages_received, 0)
      for (const expected of [1, 2, 3, 4]) {
        yield* TestClock.adjust("399 millis")
        yield* settle
        assert.strictEqual(active(yield* b.mesh.stats).messages_received, expected - 1)
        yield* TestClock.adjust("1 millis")
        yield* settle
        assert.strictEqual(active(yield* b.mesh.stats).messages_received, expected)
      }
      assert.strictEqual(active(yield* a.mesh.stats).messages_sent, 4)
    })
  )

  it.effect("a link busy within the interval skips its heartbeat; both ends stay alive all along", () =>
    Effect.gen(function* () {
      const { network, transportLayer } = yield* memoryNetwork
      const config = { heartbeatInterval: Duration.millis(1000), deadThreshold: Duration.millis(3000) }
      const b = yield* memoryNode(transportLayer, { serverId: "b", port: 7092, peers: [7091], config })
      const a = yield* memoryNode(transportLayer, { serverId: "a", port: 7091, peers: [7092], config })
      const transitions = yield* Ref.make<ReadonlyArray<string>>([])
      for (const node of [a, b]) {
        yield* node.mesh.events.pipe(
          Stream.runForEach((e) =>
            e._tag === "PeerDown"
              ? Ref.update(transitions, (all) => [...all, `${e._tag}:${e.serverId}`])
              : Effect.void
          ),
          Effect.forkScoped
        )
      }
      // B dialled before A listened: linked after its first retry.
      for (let i = 0; i < 4; i++) {
        yield* TestClock.adjust("250 millis")
        yield* settle
      }
      const dials = (yield* network.dials).length
      const alive = Effect.gen(function* () {
        for (const node of [a, b])
          assert.include(active(yield* node.mesh.stats), { servers_alive: 1, servers_dead: 0 })
      })
      yield* alive
      // A pushes half-way through every interval for 10 s; B only heartbeats.
      const sentBefore = [
        active(yield* a.mesh.stats).messages_sent,
        active(yield* b.mesh.stats).messages_sent
      ]
      const receivedBefore = active(yield* b.mesh.stats).messages_received
      yield* TestClock.adjust("500 millis")
      yield* settle
      for (let i = 0; i < 10; i++) {
        yield* a.mesh.messageAvailable({ queue: "q", partition: String(i), tenant: TENANT_T })
        yield* settle
        yield* TestClock.adjust("1000 millis")
        yield* settle
        yield* alive
      }
      // A's link carried its ten wakes and no heartbeat; B's quiet link beat on every tick of its timer
      // (its link came up at 250 ms: 1.25 s to 11.25 s).
      assert.strictEqual(active(yield* a.mesh.stats).messages_sent - sentBefore[0]!, 10)
      assert.strictEqual(active(yield* b.mesh.stats).messages_received - receivedBefore, 10)
      assert.strictEqual(active(yield* b.mesh.stats).messages_sent - sentBefore[1]!, 11)
      // Quiet again: A's heartbeats come back from the first tick that finds no wake since the last, and nobody was ever declared dead or closed as idle.
      for (let i = 0; i < 6; i++) {
        yield* TestClock.adjust("1000 millis")
        yield* settle
        yield* alive
      }
      assert.strictEqual(active(yield* a.mesh.stats).messages_sent - sentBefore[0]!, 16)
      assert.deepStrictEqual(yield* Ref.get(transitions), [])
      for (const node of [a, b]) assert.strictEqual(active(yield* node.mesh.stats).inbound.closed_idle, 0)
      assert.strictEqual((yield* network.dials).length, dials)
    })
  )

  it.effect("a peer turns dead one threshold after its last frame, and alive on its next", () =>
    Effect.gen(function* () {
      const { network, transportLayer } = yield* memoryNetwork
      const config = { heartbeatInterval: Duration.millis(1000), deadThreshold: Duration.millis(3000) }
      const b = yield* memoryNode(transportLayer, { serverId: "b", port: 7022, peers: [7021], config })
      const transitions = yield* Ref.make<ReadonlyArray<string>>([])
      yield* b.mesh.events.pipe(
        Stream.runForEach((e) =>
          e._tag === "PeerUp" || e._tag === "PeerDown"
            ? Ref.update(transitions, (all) => [...all, `${e._tag}:${e.serverId}`])
            : Effect.void
        ),
        Effect.forkScoped
      )
      yield* settle
      yield* memoryNode(transportLayer, { serverId: "a", port: 7021, peers: [7022], config })
      yield* settle
      assert.strictEqual(active(yield* b.mesh.stats).servers_alive, 1)
      // Heartbeats at 1000 and 2000 arrive; then B stops reading, so 2000 is the last frame heard.
      yield* TestClock.adjust("2000 millis")
      yield* settle
      yield* network.stopReading(7022, true)
      yield* TestClock.adjust("2999 millis")
      yield* settle
      assert.include(active(yield* b.mesh.stats), { servers_alive: 1, servers_dead: 0 })
      yield* TestClock.adjust("1 millis")
      yield* settle
      assert.include(active(yield* b.mesh.stats), { servers_alive: 0, servers_dead: 1 })
      // More silence changes nothing and publishes nothing more.
      yield* TestClock.adjust("5000 millis")
      yield* settle
      yield* network.stopReading(7022, false)
      yield* settle
      assert.include(active(yield* b.mesh.stats), { servers_alive: 1, servers_dead: 0 })
      assert.deepStrictEqual(yield* Ref.get(transitions), ["PeerUp:a", "PeerDown:a", "PeerUp:a"])
    })
  )

  it.effect("a peer that stops reading costs drops, never memory, and broadcasts return at once", () =>
    Effect.gen(function* () {
      const { network, transportLayer } = yield* memoryNetwork
      yield* memoryNode(transportLayer, { serverId: "b", port: 7032, peers: [7031] })
      const a = yield* memoryNode(transportLayer, { serverId: "a", port: 7031, peers: [7032] })
      yield* settle
      yield* network.stopReading(7032, true)
      // Pump until the stalled pipe has filled and the send queue is full.
      let calls = 0
      for (let round = 0; round < 200; round++) {
        for (let i = 0; i < 100; i++) {
          yield* a.mesh.messageAvailable({ queue: "q", partition: String(calls++) })
        }
        yield* settle
        if (active(yield* a.mesh.stats).peers[0]!.queued === 1024) break
      }
      const full = active(yield* a.mesh.stats)
      assert.strictEqual(full.peers[0]!.queued, 1024)
      // From here every broadcast is dropped and counted, at once, without the clock moving.
      for (let i = 0; i < 10_000; i++) {
        yield* a.mesh.messageAvailable({ queue: "q", partition: "x" })
      }
      yield* settle
      const after = active(yield* a.mesh.stats)
      assert.strictEqual(after.messages_dropped - full.messages_dropped, 10_000)
      assert.strictEqual(after.peers[0]!.queued, 1024)
      assert.strictEqual(after.messages_sent, full.messages_sent)
    })
  )

  it.effect("counters add up: frames sent on A = frames received on B", () =>
    Effect.gen(function* () {
      const { transportLayer } = yield* memoryNetwork
      const b = yield* memoryNode(transportLayer, { serverId: "b", port: 7042, peers: [7041] })
      const a = yield* memoryNode(transportLayer, { serverId: "a", port: 7041, peers: [7042] })
      yield* settle
      for (let i = 0; i < 500; i++) {
        yield* a.mesh.messageAvailable({ queue: "q", partition: String(i), tenant: TENANT_T })
        if (i % 50 === 0) yield* settle
      }
      yield* a.mesh.messageAvailableBatch([
        { queue: "q", partition: "1" },
        { queue: "q", partition: "2" }
      ])
      yield* a.mesh.queueConfigSet({ queue: "q" })
      yield* a.mesh.setMaintenance(true)
      yield* settleUntil(Effect.map(b.mesh.stats, (s) => active(s).messages_received >= 503))
      yield* settle
      const sent = active(yield* a.mesh.stats)
      const received = active(yield* b.mesh.stats)
      assert.strictEqual(sent.messages_dropped, 0)
      assert.strictEqual(sent.messages_sent, 503)
      assert.strictEqual(received.messages_received, 503)
    })
  )

  it.effect("closing the scope ends every fiber and connection", () =>
    Effect.gen(function* () {
      const { network, transportLayer } = yield* memoryNetwork
      // Effect 4 has no `Supervisor`: the nodes' fibers are counted by the runtime metrics, in a
      // registry of this test's own (`child_fibers_active`: every fiber forked under it, not ended).
      const registry: Metric.MetricRegistry = new Map()
      const supervisor = {
        value: Effect.map(
          Metric.snapshot.pipe(Effect.provideService(Metric.MetricRegistry, registry)),
          (all) => {
            const fibers = all.find((metric) => metric.id === "child_fibers_active")
            return Array.from({ length: fibers?.type === "Gauge" ? Number(fibers.state.value) : 0 })
          }
        )
      }
      const scope = yield* Scope.make()
      yield* Effect.gen(function* () {
        yield* memoryNode(transportLayer, { serverId: "b", port: 7052, peers: [7051] })
        yield* memoryNode(transportLayer, { serverId: "a", port: 7051, peers: [7052] })
      }).pipe(
        Scope.provide(scope),
        Metric.enableRuntimeMetrics,
        Effect.provideService(Metric.MetricRegistry, registry)
      )
      yield* settle
      yield* TestClock.adjust("3 seconds")
      yield* settle
      assert.strictEqual(yield* network.openConnections(7052), 1)
      assert.isAbove((yield* supervisor.value).length, 0)
      yield* Scope.close(scope, Exit.void)
      yield* settle
      assert.strictEqual(yield* network.openConnections(7051), 0)
      assert.strictEqual(yield* network.openConnections(7052), 0)
      const alive = (yield* supervisor.value).length
      assert.strictEqual(alive, 0)
    })
  )
})
