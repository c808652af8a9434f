/**
 * Reliability under faults, on the in-memory transport under `TestClock` (issue "Reliability under
 * faults", items 3i and 4): what needs many seconds of protocol time runs here in virtual time, at the
 * real defaults (1 s heartbeat, 5 s dead threshold, 5 s idle timeout), so the figures are the real ones.
 */
import * as v8 from "node:v8"
import * as vm from "node:vm"
import { assert, describe, it } from "@effect/vitest"
import { Clock, Context, Effect, Fiber, Latch, Layer, Option, type Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as HotList from "../src/HotList.js"
import * as LocalWaker from "../src/LocalWaker.js"
import * as MaintenanceFlags from "../src/MaintenanceFlags.js"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import type { MeshConfigError, TransportError } from "../src/MeshError.js"
import type { ActiveStats, MeshStats } from "../src/MeshStats.js"
import * as MeshTest from "../src/MeshTest.js"
import * as QueueConfigCache from "../src/QueueConfigCache.js"
import { type Connection, Transport, type TransportShape } from "../src/Transport.js"
import * as StalledClock from "./fixtures/stalledClock.js"

v8.setFlagsFromString("--expose-gc")
const gcFunction: unknown = vm.runInNewContext("gc")
const heapAfterGc = (): number => {
  if (typeof gcFunction === "function") {
    gcFunction()
    gcFunction()
  }
  return process.memoryUsage().heapUsed
}
const MB = 1024 * 1024
const report = (line: string) => {
  if (process.env.FAULTS_REPORT !== undefined) console.info(line)
}

const active = (stats: MeshStats): ActiveStats => {
  if (!stats.enabled) throw new Error(`mesh not active: ${stats.reason}`)
  return stats
}

/** The two accounting equations of one node (spec "Observing it"); returns what is broken. */
const brokenEquations = (node: MeshTest.Node): Effect.Effect<ReadonlyArray<string>> =>
  Effect.map(node.mesh.stats, (raw) => {
    const stats = active(raw)
    const broken: Array<string> = []
    const frames =
      stats.frames_dispatched + stats.frames_invalid + stats.frames_unknown + stats.frames_oversized
    if (stats.messages_received !== frames) {
      broken.push(`${node.serverId}: messages_received ${stats.messages_received} != ${frames}`)
    }
    for (const peer of stats.peers) {
      const sum = peer.written + peer.dropped_full + peer.dropped_down + peer.discarded + peer.queued
      if (peer.handed !== sum) {
        broken.push(
          `${node.serverId}->${peer.host}: handed ${peer.handed} != written ${peer.written} + dropped_full ${peer.dropped_full} + dropped_down ${peer.dropped_down} + discarded ${peer.discarded} + queued ${peer.queued}`
        )
      }
    }
    return broken
  })

const aliveOf = (node: MeshTest.Node, serverId: string): Effect.Effect<boolean> =>
  Effect.map(node.mesh.stats, (raw) => active(raw).servers.some((s) => s.server_id === serverId && s.alive))

const heardDead = (node: MeshTest.Node, serverId: string): Effect.Effect<boolean> =>
  Effect.map(node.mesh.stats, (raw) => active(raw).servers.some((s) => s.server_id === serverId && !s.alive))

/** Moves the clock in `step` ms steps, settling after each, until `check` holds (at most `steps`). */
const stepUntil = (check: Effect.Effect<boolean>, step = 100, steps = 600) =>
  Effect.gen(function* () {
    for (let i = 0; i < steps; i++) {
      if (yield* check) return i
      yield* TestClock.adjust(step)
      yield* MeshTest.settle
    }
    return yield* Effect.fail(
      new MeshTest.NotReached({ detail: `not reached within ${step * steps} ms of virtual time` })
    )
  })

/**
 * A node whose every write waits while `gate` is closed: with the network's `stopReading` on its
 * listener, that is a paused process as its neighbours see it (nothing read, nothing sent). The memory
 * network's controls address listeners only, so they cannot silence the node's own outbound links.
 */
const pausableNode = (
  net: MeshTest.Network,
  gate: Latch.Latch,
  options: MeshTest.NodeOptions
): Effect.Effect<MeshTest.Node, TransportError | MeshConfigError, Scope.Scope> => {
  const gated = (connection: Connection): Connection => ({
    remoteAddress: connection.remoteAddress,
    read: connection.read,
    write: (bytes) => Effect.andThen(gate.await, connection.write(bytes))
  })
  const own = net.transportOf(options.serverId)
  const transport: TransportShape = {
    dial: (host, port) => Effect.map(own.dial(host, port), gated),
    listen: (listenOptions, onConnection) =>
      own.listen(listenOptions, (connection) => onConnection(gated(connection)))
  }
  return Effect.map(
    Layer.build(
      Mesh.layerLocal(options.options).pipe(
        Layer.provide(Layer.succeed(Transport, transport)),
        Layer.provide(MeshConfig.layer(MeshTest.config(options)))
      )
    ),
    (context) => ({
      serverId: options.serverId,
      mesh: Context.get(context, Mesh.Mesh),
      waker: Context.get(context, LocalWaker.LocalWaker),
      cache: Context.get(context, QueueConfigCache.MemoryQueueConfigCache),
      hotList: Context.get(context, HotList.MemoryHotList),
      flags: Context.get(context, MaintenanceFlags.MaintenanceFlags)
    })
  )
}

const target = (queue: string) => ({ queue, tenant: Option.none<string>() })

/** Parks a pop on `node`, waits until it is parked, wakes it from `from`, and returns its outcome. */
const wakeThrough = (from: MeshTest.Node, node: MeshTest.Node, queue: string) =>
  Effect.gen(function* () {
    const before = yield* node.waker.parked
    const pop = yield* Effect.forkChild(node.waker.awaitWake(target(queue), { maxWait: "60 seconds" }))
    yield* MeshTest.settleUntil(Effect.map(node.waker.parked, (n) => n > before))
    yield* from.mesh.messageAvailable({ queue, partition: "p" })
    // The in-memory network has no delay: the wake lands within a few settles, or never.
    yield* stepUntil(
      Effect.sync(() => pop.pollUnsafe() !== undefined),
      1,
      50
    )
    return yield* Fiber.join(pop)
  })

describe("faults over the in-memory transport (TestClock)", () => {
  // Real-world scenario: a replica frozen (SIGSTOP) past the dead threshold, then resumed. Its timers
  // run before it reads what its peer sent meanwhile; they must not judge that peer silent for time it
  // spent stopped: no link closed, no peer marked dead, on either side.
  it.effect("a replica resumed after a stall past the dead threshold reads its peer before judging it", () =>
    Effect.gen(function* () {
      const net = yield* MeshTest.network
      const clock = yield* StalledClock.make
      const a = yield* MeshTest.node(net, { serverId: "a", peers: ["b"] })
      const b = yield* Effect.provideService(
        MeshTest.node(net, { serverId: "b", peers: ["a"] }),
        Clock.Clock,
        clock
      )
      yield* TestClock.adjust(1)
      const linkedAndHeard = Effect.map(
        Effect.all(
          [a, b].map((n) => Effect.zipWith(MeshTest.linked(n), MeshTest.hears(n, 1), (x, y) => x && y))
        ),
        (all) => all.every(Boolean)
      )
      yield* stepUntil(linkedAndHeard)
      const linkOf = (node: MeshTest.Node, host: string) =>
        Effect.map(node.mesh.stats, (raw) => {
          const link = active(raw).peers.find((p) => p.host === host)!
          return {
            reconnects: link.reconnects,
            silent_closes: link.silent_closes,
            stalled: link.stalled_closes
          }
        })
      const before = [yield* linkOf(a, "b"), yield* linkOf(b, "a")]
      const downs: Array<string> = []
      for (const node of [a, b]) {
        yield* node.mesh.events.pipe(
          Stream.runForEach((event) =>
            Effect.sync(() => {
              if (event._tag === "PeerDown" || event._tag === "LinkDown")
                downs.push(`${node.serverId}: ${event._tag}`)
            })
          ),
          Effect.forkScoped
        )
      }
      yield* MeshTest.settle
      // b stops reading; a's next heartbeat reaches b's socket and waits there.
      yield* net.network.stopReading("b", true)
      yield* TestClock.adjust(1000)
      yield* MeshTest.settle
      // b is stopped for 10 s (twice the dead threshold); it reads again once it runs.
      clock.stall(10_000, () => Effect.runSync(net.network.stopReading("b", false)))
      for (let i = 0; i < 30; i++) {
        yield* TestClock.adjust(100)
        yield* MeshTest.settle
      }
      assert.deepStrictEqual(downs, [])
      assert.isTrue(yield* aliveOf(b, "a"))
      assert.isTrue(yield* aliveOf(a, "b"))
      assert.deepStrictEqual([yield* linkOf(a, "b"), yield* linkOf(b, "a")], before)
      assert.isTrue(yield* linkedAndHeard)
    })
  )

  // Real-world scenario: a peer paused (SIGSTOP, a long GC, a stuck VM) for 30 s, then resumed. Here:
  // its readers stopped for a full 30 s of virtual time at the spec's default timings, while a neighbour
  // keeps broadcasting 10 wakes per 100 ms. The paused peer's own timers still run (as they would not
  // under SIGSTOP), which is the harder case: its idle timeout and handshake timeout fire meanwhile.
  it.effect(
    "a peer paused for 30 s: neighbours see it dead, keep serving each other, and it comes back",
    () =>
      Effect.gen(function* () {
        const net = yield* MeshTest.network
        const config = { sendQueueCapacity: 64 }
        const a = yield* MeshTest.node(net, { serverId: "a", peers: ["b", "c"], config })
        const gate = yield* Latch.make(true)
        const b = yield* pausableNode(net, gate, { serverId: "b", peers: ["a", "c"], config })
        const c = yield* MeshTest.node(net, { serverId: "c", peers: ["a", "b"], config })
        const nodes = [a, b, c]
        yield* TestClock.adjust(1)
        yield* stepUntil(
          Effect.map(
            Effect.all(
              nodes.map((n) => Effect.zipWith(MeshTest.linked(n), MeshTest.hears(n, 2), (x, y) => x && y))
            ),
            (all) => all.every(Boolean)
          )
        )
        const heapBefore = heapAfterGc()

        yield* net.network.stopReading("b", true)
        yield* gate.close
        let sent = 0
        let deadSeenAtMs: number | undefined
        for (let step = 0; step < 300; step++) {
          for (let i = 0; i < 10; i++) {
            yield* a.mesh.messageAvailable({ queue: "flood", partition: `p${sent++ % 100}` })
          }
          yield* TestClock.adjust(100)
          yield* MeshTest.settle
          if (deadSeenAtMs === undefined && (yield* heardDead(a, "b")) && (yield* heardDead(c, "b"))) {
            deadSeenAtMs = (step + 1) * 100
          }
        }
        // Both neighbours declared it dead, within the dead threshold plus a heartbeat (and settling).
        assert.isDefined(deadSeenAtMs)
        assert.isAtMost(deadSeenAtMs!, 5000 + 1000 + 500)
        // The good peers keep being served, both ways, while b is still paused.
        assert.strictEqual(yield* wakeThrough(a, c, "during-a-to-c"), "woken")
        assert.strictEqual(yield* wakeThrough(c, a, "during-c-to-a"), "woken")
        // What a could not get to b was never buffered without bound: its link's queue holds at most 64,
        // and the liveness check closed the link to the silent peer (what the connection held goes with
        // it; frames queued at that moment are counted as discarded).
        const toB = active(yield* a.mesh.stats).peers.find((p) => p.host === "b")!
        assert.isAbove(toB.silent_closes + toB.stalled_closes, 0)
        assert.isAtMost(toB.queued, 64)
        const heapPaused = heapAfterGc()

        yield* net.network.stopReading("b", false)
        yield* gate.open
        yield* stepUntil(
          Effect.map(
            Effect.all([
              aliveOf(a, "b"),
              aliveOf(c, "b"),
              aliveOf(b, "a"),
              aliveOf(b, "c"),
              MeshTest.linked(a),
              MeshTest.linked(b),
              MeshTest.linked(c)
            ]),
            (all) => all.every(Boolean)
          )
        )
        assert.strictEqual(yield* wakeThrough(a, b, "after-a-to-b"), "woken")
        assert.strictEqual(yield* wakeThrough(b, c, "after-b-to-c"), "woken")
        for (const node of nodes) assert.deepStrictEqual(yield* brokenEquations(node), [])
        // 3,000 wakes handed to b's link while it was paused: a bounded queue holds at most 64 of them.
        // 16 MB is far above what the three nodes' state needs and far below what keeping them would.
        const growth = heapPaused - heapBefore
        report(
          `memory 30 s pause: dead seen after ${deadSeenAtMs} ms; a->b ${JSON.stringify(toB)}; heap growth ${(growth / MB).toFixed(2)} MB`
        )
        assert.isBelow(growth, 16 * MB, `heap grew ${(growth / MB).toFixed(2)} MB while b was paused`)
      })
  )

  // Item 4, the fallback is real: a parked pop returns by its own deadline (the host's
  // POP_WAIT_MAX_INTERVAL_MS, 2000 ms here) when the mesh cannot carry the wake, and returns "woken" on
  // the wake when it can.
  it.effect("a parked pop times out within its bound with the mesh cut, and is woken with the mesh up", () =>
    Effect.gen(function* () {
      const POP_WAIT_MAX_INTERVAL_MS = 2000
      const net = yield* MeshTest.network
      const a = yield* MeshTest.node(net, { serverId: "a", peers: ["b"] })
      const b = yield* MeshTest.node(net, { serverId: "b", peers: ["a"] })
      yield* TestClock.adjust(1)
      yield* stepUntil(Effect.zipWith(MeshTest.linked(a), MeshTest.linked(b), (x, y) => x && y))

      // The mesh cut: every link to b broken, and b refusing new ones.
      yield* net.network.refuse("b", true)
      yield* net.network.cut("b")
      yield* MeshTest.settle
      yield* stepUntil(
        Effect.map(MeshTest.linked(a), (up) => !up),
        1,
        50
      )
      const parkedAt = yield* Clock.currentTimeMillis
      const cut = yield* Effect.forkChild(
        b.waker.awaitWake(target("orders"), { maxWait: POP_WAIT_MAX_INTERVAL_MS })
      )
      yield* MeshTest.settleUntil(Effect.map(b.waker.parked, (n) => n === 1))
      yield* a.mesh.messageAvailable({ queue: "orders", partition: "p0" })
      const steps = yield* stepUntil(
        Effect.sync(() => cut.pollUnsafe() !== undefined),
        100,
        100
      )
      assert.strictEqual(yield* Fiber.join(cut), "timeout")
      const returnedAfter = (yield* Clock.currentTimeMillis) - parkedAt
      assert.isAtLeast(returnedAfter, POP_WAIT_MAX_INTERVAL_MS)
      // Within the bound, give or take one clock step and the waker's 10 ms reaper resolution.
      assert.isAtMost(returnedAfter, POP_WAIT_MAX_INTERVAL_MS + 100 + 10)
      assert.isAtMost(steps, 21)

      // The mesh up again: the same kind of pop is woken by the wake, long before its deadline.
      yield* net.network.refuse("b", false)
      yield* stepUntil(MeshTest.linked(a))
      const upAt = yield* Clock.currentTimeMillis
      const up = yield* Effect.forkChild(
        b.waker.awaitWake(target("orders"), { maxWait: POP_WAIT_MAX_INTERVAL_MS })
      )
      yield* MeshTest.settleUntil(Effect.map(b.waker.parked, (n) => n === 1))
      yield* a.mesh.messageAvailable({ queue: "orders", partition: "p1" })
      yield* MeshTest.settleUntil(Effect.sync(() => up.pollUnsafe() !== undefined))
      assert.strictEqual(yield* Fiber.join(up), "woken")
      assert.strictEqual((yield* Clock.currentTimeMillis) - upAt, 0)
    })
  )
})
