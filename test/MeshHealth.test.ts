/**
 * Health and the degrade signal (`MeshHealth`), and outbound liveness, under `TestClock` over the
 * in-memory network: each status reached by cutting links with the network's partitions, with its
 * event, its metric and `/readyz`; the shipped waker's `degradedMaxWait` shortens parked pops only while
 * the mesh is degraded; a link into a black hole is closed and dialled again within the dead threshold
 * plus one heartbeat, and a slow but healthy one is not.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, Ref, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as HttpRoutes from "../src/HttpRoutes.js"
import * as MeshHealth from "../src/MeshHealth.js"
import * as MeshMetrics from "../src/MeshMetrics.js"
import type { ActiveStats, MeshStats } from "../src/MeshStats.js"
import * as MeshTest from "../src/MeshTest.js"

const active = (stats: MeshStats): ActiveStats => {
  if (!stats.enabled) throw new Error(`mesh not active: ${stats.reason}`)
  return stats
}

const advance = (millis: number, step = 250) =>
  Effect.gen(function* () {
    for (let done = 0; done < millis; done += step) {
      yield* TestClock.adjust(Duration.millis(step))
      yield* MeshTest.settle
    }
  })

const timing = {
  heartbeatInterval: Duration.seconds(1),
  deadThreshold: Duration.seconds(3)
}

/** Three nodes, each listing the other two. */
const trio = (
  options: { readonly auth?: "legacy" | "permissive"; readonly degradedMaxWait?: Duration.Duration } = {}
) =>
  Effect.gen(function* () {
    const network = yield* MeshTest.network
    const node = (serverId: string, peers: ReadonlyArray<string>) =>
      MeshTest.node(network, {
        serverId,
        peers,
        config: { ...timing, auth: options.auth ?? "legacy" },
        ...(options.degradedMaxWait === undefined
          ? {}
          : { options: { waker: { degradedMaxWait: options.degradedMaxWait } } })
      })
    const a = yield* node("a", ["b", "c"])
    const b = yield* node("b", ["a", "c"])
    const c = yield* node("c", ["a", "b"])
    yield* advance(2_000)
    return { network, a, b, c }
  })

const statusOf = (node: MeshTest.Node) => Effect.map(node.mesh.health, (health) => health.status)

describe("MeshHealth", () => {
  for (const auth of ["legacy", "permissive"] as const) {
    it.effect(`${auth}: clustered, degraded, isolated and back, with events, the metric and /readyz`, () =>
      Effect.gen(function* () {
        const { network, a } = yield* trio({ auth })
        const changes = yield* Ref.make<ReadonlyArray<string>>([])
        yield* a.mesh.events.pipe(
          Stream.runForEach((event) =>
            event._tag === "HealthChanged"
              ? Ref.update(changes, (all) => [...all, `${event.from}>${event.to}`])
              : Effect.void
          ),
          Effect.forkScoped
        )
        yield* MeshTest.settle
        assert.strictEqual(yield* statusOf(a), "clustered")
        assert.deepStrictEqual(active(yield* a.mesh.stats).health, {
          status: "clustered",
          reason: "healthy",
          expected: 2,
          healthy: 2,
          lane: "none"
        })
        assert.strictEqual(HttpRoutes.readiness(yield* a.mesh.stats).ready, true)

        // c is cut off from a (both ways): a reaches b only.
        yield* network.network.partition(["a"], ["c"])
        yield* advance(4_000)
        assert.strictEqual(yield* statusOf(a), "degraded")
        const degraded = HttpRoutes.readiness(yield* a.mesh.stats)
        assert.deepStrictEqual(
          [degraded.ready, degraded.status, degraded.reason, degraded.healthy],
          [true, "degraded", "partial", 1]
        )

        // a is cut off from everyone: isolated, and /readyz says 503.
        yield* network.network.isolate("a")
        yield* advance(4_000)
        assert.strictEqual(yield* statusOf(a), "isolated")
        const isolated = HttpRoutes.readiness(yield* a.mesh.stats)
        assert.deepStrictEqual(
          [isolated.ready, isolated.status, isolated.reason],
          [false, "isolated", "unreached"]
        )
        yield* a.mesh.syncMetrics
        const gauge = MeshMetrics.seriesValue("queen_mesh_health", { server_id: "a", status: "isolated" })
        assert.include(JSON.stringify(Option.getOrNull(gauge)), '"value":1')

        yield* network.network.heal
        yield* advance(8_000)
        assert.strictEqual(yield* statusOf(a), "clustered")
        assert.deepStrictEqual(yield* Ref.get(changes), [
          "clustered>degraded",
          "degraded>isolated",
          ...(yield* Ref.get(changes)).slice(2)
        ])
        assert.strictEqual((yield* Ref.get(changes)).at(-1)?.endsWith(">clustered"), true)
      })
    )
  }

  it.effect("solo: no peer expected; a node whose peers are not up yet is starting, then isolated", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const alone = yield* MeshTest.node(network, { serverId: "alone", peers: [] })
      assert.deepStrictEqual(yield* alone.mesh.health, MeshHealth.solo)
      const early = yield* MeshTest.node(network, { serverId: "early", peers: ["late"], config: timing })
      const changes = yield* Ref.make<ReadonlyArray<string>>([])
      yield* early.mesh.events.pipe(
        Stream.runForEach((event) =>
          event._tag === "HealthChanged"
            ? Ref.update(changes, (all) => [...all, `${event.from}>${event.to}`])
            : Effect.void
        ),
        Effect.forkScoped
      )
      // Within the dead threshold its peer has not had its chance: starting, ready, not trusted.
      yield* advance(1_000)
      const starting = yield* early.mesh.health
      assert.deepStrictEqual([starting.status, starting.reason], ["starting", "starting"])
      assert.isTrue(HttpRoutes.readiness(yield* early.mesh.stats).ready)
      assert.isFalse(MeshHealth.isTrusted(starting))
      // The window closes with no peer reached: isolated, and /readyz says 503.
      yield* advance(Duration.toMillis(timing.deadThreshold))
      const isolated = yield* early.mesh.health
      assert.deepStrictEqual([isolated.status, isolated.reason], ["isolated", "unreached"])
      assert.isFalse(HttpRoutes.readiness(yield* early.mesh.stats).ready)
      // Its peer comes: clustered.
      yield* MeshTest.node(network, { serverId: "late", peers: ["early"], config: timing })
      // Its dialer is in backoff (at most 5 s): within a few seconds of test time, linked both ways.
      for (let step = 0; step < 40 && (yield* statusOf(early)) !== "clustered"; step++) yield* advance(250)
      assert.strictEqual(yield* statusOf(early), "clustered")
      assert.deepStrictEqual(yield* Ref.get(changes), ["starting>isolated", "isolated>clustered"])
      assert.deepStrictEqual(MeshHealth.compute([], "none"), MeshHealth.solo)
    })
  )

  it.effect("a node started with its peers is never isolated on its way to clustered", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const seen: Array<string> = []
      const nodes: Array<MeshTest.Node> = []
      for (const [id, peers] of [
        ["a", ["b", "c"]],
        ["b", ["a", "c"]],
        ["c", ["a", "b"]]
      ] as const) {
        const node = yield* MeshTest.node(network, { serverId: id, peers, config: timing })
        yield* node.mesh.healthChanges.pipe(
          Stream.runForEach((health) => Effect.sync(() => seen.push(`${id}:${health.status}`))),
          Effect.forkScoped
        )
        nodes.push(node)
      }
      for (let step = 0; step < 20; step++) {
        for (const node of nodes) assert.isTrue(HttpRoutes.readiness(yield* node.mesh.stats).ready)
        yield* advance(250)
      }
      for (const node of nodes) assert.strictEqual(yield* statusOf(node), "clustered")
      assert.deepStrictEqual(
        seen.filter((entry) => !entry.endsWith(":starting") && !entry.endsWith(":clustered")),
        [],
        "only starting, then clustered"
      )
    })
  )

  it.effect("compute: the start-up window, discovery that never found anyone, the lane", () =>
    Effect.sync(() => {
      const nothing = { starting: false, discovery: "nothing_found" } as const
      assert.deepStrictEqual(MeshHealth.compute([], "none", nothing), {
        status: "isolated",
        reason: "nothing_found",
        expected: 0,
        healthy: 0,
        lane: "none"
      })
      assert.isFalse(MeshHealth.isTrusted(MeshHealth.compute([], "none", nothing)))
      assert.strictEqual(
        MeshHealth.compute([], "none", { starting: false, discovery: "found" }).status,
        "solo"
      )
      // Within the window: nothing is final while a discovery source or a lane may still find someone.
      for (const [lane, discovery] of [
        ["none", "nothing_found"],
        ["none", "found"],
        ["up", "none"],
        ["starting", "none"]
      ] as const) {
        assert.strictEqual(MeshHealth.compute([], lane, { starting: true, discovery }).status, "starting")
      }
      // ...but with nothing that could change it, solo is solo at once.
      assert.deepStrictEqual(
        MeshHealth.compute([], "none", { starting: true, discovery: "none" }),
        MeshHealth.solo
      )
      assert.deepStrictEqual(MeshHealth.inactive(false), { ...MeshHealth.solo, reason: "disabled" })
      assert.strictEqual(MeshHealth.compute([], "down").reason, "lane_down")
      // A lane that is down is known at once, window or not.
      assert.strictEqual(
        MeshHealth.compute([], "down", { starting: true, discovery: "none" }).status,
        "isolated"
      )
    })
  )

  it.effect("degradedMaxWait shortens a parked pop's wait only while the mesh is degraded", () =>
    Effect.gen(function* () {
      const { network, a } = yield* trio({ degradedMaxWait: Duration.seconds(1) })
      const target = { queue: "orders", tenant: Option.none() }
      // Clustered: a pop waits its whole maxWait.
      const clustered = yield* Effect.forkChild(a.waker.awaitWake(target, { maxWait: "10 seconds" }))
      yield* advance(9_000)
      assert.isUndefined(clustered.pollUnsafe())
      yield* advance(1_500)
      assert.strictEqual(yield* Fiber.join(clustered), "timeout")

      // A pop parked, then the mesh degrades: the pop is timed out a second after it did.
      const parked = yield* Effect.forkChild(a.waker.awaitWake(target, { maxWait: "60 seconds" }))
      yield* MeshTest.settle
      yield* network.network.partition(["a"], ["c"])
      yield* advance(4_000)
      assert.strictEqual(yield* statusOf(a), "degraded")
      assert.strictEqual(yield* Fiber.join(parked), "timeout")
      // While degraded, a new pop waits a second, not its minute.
      const short = yield* Effect.forkChild(a.waker.awaitWake(target, { maxWait: "60 seconds" }))
      yield* advance(1_250)
      assert.strictEqual(yield* Fiber.join(short), "timeout")

      // Clustered again: the whole wait is back.
      yield* network.network.heal
      yield* advance(8_000)
      assert.strictEqual(yield* statusOf(a), "clustered")
      const again = yield* Effect.forkChild(a.waker.awaitWake(target, { maxWait: "10 seconds" }))
      yield* advance(5_000)
      assert.isUndefined(again.pollUnsafe())
    })
  )
})

describe("MeshHealth and grouped pops", () => {
  it.effect("while the mesh is degraded a group re-polls within degradedMaxWait, not its own interval", () =>
    Effect.gen(function* () {
      const { network, a } = yield* trio({ degradedMaxWait: Duration.seconds(1) })
      let claims = 0
      const pops = yield* a.waker.grouped({
        claim: () =>
          Effect.sync(() => {
            claims++
            return []
          }),
        release: () => Effect.void,
        repoll: "1 minute"
      })
      const waiting = yield* Effect.forkChild(
        pops.pop({ queue: "orders" }, { batch: 1, maxWait: "10 minutes" })
      )
      yield* MeshTest.settle
      const start = claims
      // Clustered: no re-poll inside its minute.
      yield* advance(20_000)
      assert.strictEqual(claims, start)
      // Degraded: a re-poll within a second of it, then every second.
      yield* network.network.partition(["a"], ["c"])
      yield* advance(4_000)
      assert.strictEqual(yield* statusOf(a), "degraded")
      const degradedAt = claims
      yield* advance(5_000)
      assert.isAtLeast(claims - degradedAt, 4)
      assert.isUndefined(waiting.pollUnsafe())
      // Clustered again: back to the minute.
      yield* network.network.heal
      yield* advance(8_000)
      assert.strictEqual(yield* statusOf(a), "clustered")
      const healed = claims
      yield* advance(20_000)
      assert.isAtMost(claims - healed, 1)
      yield* Fiber.interrupt(waiting)
    })
  )
})

describe("outbound liveness", () => {
  it.effect(
    "a link into a black hole is closed and dialled again within the dead threshold plus a heartbeat",
    () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        // The listeners' idle timeout is long, so the close is the dialer's own doing, as behind a real
        // black hole where no close from the other end ever arrives.
        const config = { ...timing, idleTimeout: Duration.minutes(1), auth: "permissive" as const }
        const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"], config })
        yield* MeshTest.node(network, { serverId: "b", peers: ["a"], config })
        yield* advance(2_000)
        assert.isTrue(active(yield* a.mesh.stats).peers[0]!.connected)
        // Nothing either node receives is read any more: a black hole both ways, the links still "up".
        yield* network.network.stopReading("a", true)
        yield* network.network.stopReading("b", true)
        const dialsBefore = (yield* network.network.dials).filter((dial) => dial.from === "a").length
        // Within the dead threshold the link stays.
        yield* advance(2_500)
        assert.strictEqual(active(yield* a.mesh.stats).peers[0]!.silent_closes, 0)
        // By the dead threshold plus one heartbeat, it is closed and dialled again at once.
        yield* advance(
          Duration.toMillis(timing.deadThreshold) + Duration.toMillis(timing.heartbeatInterval) - 2_500
        )
        const peer = active(yield* a.mesh.stats).peers[0]!
        assert.strictEqual(peer.silent_closes, 1)
        assert.isAbove((yield* network.network.dials).filter((dial) => dial.from === "a").length, dialsBefore)
      })
  )

  it.effect("a slow but healthy peer keeps its link", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const config = { ...timing, auth: "permissive" as const }
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"], config })
      yield* MeshTest.node(network, { serverId: "b", peers: ["a"], config })
      yield* advance(2_000)
      // Every byte takes 1.5 s: slow, yet the gap a heartbeat leaves stays under the 3 s dead threshold.
      yield* network.network.setDelay("1500 millis")
      yield* advance(30_000, 500)
      const peer = active(yield* a.mesh.stats).peers[0]!
      assert.deepStrictEqual(
        [peer.connected, peer.silent_closes, peer.stalled_closes, peer.reconnects],
        [true, 0, 0, 0]
      )
      assert.strictEqual(yield* statusOf(a), "clustered")
    })
  )
})
