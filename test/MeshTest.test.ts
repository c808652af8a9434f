/**
 * The test kit a broker tests with: named nodes on one in-memory network (a listener is reached only
 * by dials to its own name), partitions and isolation in both directions, and what a host reads of
 * membership.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Layer, Option, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Frame from "../src/Frame.js"
import * as LocalWaker from "../src/LocalWaker.js"
import * as MemoryTransport from "../src/MemoryTransport.js"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import * as MeshTest from "../src/MeshTest.js"
import * as Waker from "../src/Waker.js"
import { active } from "./fixtures/memory.js"

const durations = {
  heartbeatInterval: MeshConfig.defaults.heartbeatInterval,
  deadThreshold: MeshConfig.defaults.deadThreshold
}

const advance = (millis: number, step = 100) =>
  Effect.gen(function* () {
    for (let t = 0; t < millis; t += step) {
      yield* TestClock.adjust(step)
      yield* MeshTest.settle
    }
  })

const alive = (node: MeshTest.Node) =>
  Effect.map(node.mesh.stats, (stats) =>
    active(stats)
      .servers.filter((server) => server.alive)
      .map((server) => server.server_id)
  )

describe("MeshTest", () => {
  it.effect("a listener is reached only by dials to its own name: no node links to itself by accident", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      // A node whose peer does not exist: before, a wildcard listener took dials to any host.
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["nobody"] })
      yield* advance(2_000)
      const stats = active(yield* a.mesh.stats)
      assert.isFalse(stats.peers[0]!.connected)
      assert.strictEqual(stats.inbound.authenticated_total, 0)
      assert.strictEqual(stats.peers[0]!.last_error, "refused")
    })
  )

  it.effect("isolate cuts a node off in both directions; heal brings it back", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const names = ["a", "b", "c"]
      const nodes = yield* Effect.forEach(names, (name) =>
        MeshTest.node(network, { serverId: name, peers: names.filter((n) => n !== name), config: durations })
      )
      const [a, b, c] = nodes as [MeshTest.Node, MeshTest.Node, MeshTest.Node]
      yield* advance(1_500)
      assert.deepStrictEqual(yield* alive(a), ["b", "c"])
      yield* network.network.isolate("c")
      // Past the dead threshold: c is dead to a and b, and a and b are dead to c. Its outbound links
      // were cut too, so nobody hears it over them.
      yield* advance(6_000)
      assert.deepStrictEqual(yield* alive(a), ["b"])
      assert.deepStrictEqual(yield* alive(b), ["a"])
      assert.deepStrictEqual(yield* alive(c), [])
      assert.isFalse(yield* MeshTest.linked(c))
      yield* network.network.heal
      yield* advance(7_000)
      assert.deepStrictEqual(yield* alive(a), ["b", "c"])
      assert.deepStrictEqual(yield* alive(c), ["a", "b"])
      assert.isTrue(yield* MeshTest.linked(c))
    })
  )

  it.effect("partition splits two groups both ways, and each side keeps its own links", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const names = ["a", "b", "c", "d"]
      const nodes = yield* Effect.forEach(names, (name) =>
        MeshTest.node(network, { serverId: name, peers: names.filter((n) => n !== name), config: durations })
      )
      const [a, , c] = nodes as [MeshTest.Node, MeshTest.Node, MeshTest.Node, MeshTest.Node]
      yield* advance(1_500)
      yield* network.network.partition(["a", "b"], ["c", "d"])
      yield* advance(6_000)
      assert.deepStrictEqual(yield* alive(a), ["b"])
      assert.deepStrictEqual(yield* alive(c), ["d"])
      // A wake on a reaches b, not c.
      const pop = yield* Effect.forkChild(
        c.waker.awaitWake({ queue: "orders", tenant: Option.none() }, { maxWait: "1 second" })
      )
      yield* MeshTest.settle
      yield* a.mesh.messageAvailable({ queue: "orders", partition: "p" })
      yield* advance(1_000)
      assert.strictEqual(yield* Fiber.join(pop), "timeout")
      yield* network.network.heal
      yield* advance(7_000)
      assert.deepStrictEqual(yield* alive(a), ["b", "c", "d"])
    })
  )
})

describe("the waker contract", () => {
  it.effect("a spread of the shipped waker with its own wake: the mesh calls that wake, never the copy", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const local = yield* LocalWaker.make()
      const seen: Array<string> = []
      // The trap of the old contract: `{ ...local, wake: mine }` kept `local`'s synchronous twin.
      const mine: Waker.WakerShape = {
        ...local,
        wake: (item) => Effect.sync(() => seen.push(item.queue))
      }
      const b = yield* Layer.build(
        Mesh.layer.pipe(
          Layer.provide(Layer.succeed(Waker.Waker, mine)),
          Layer.provide(Mesh.layerHostLocal()),
          Layer.provide(MemoryTransport.layer(network, { host: "b" })),
          Layer.provide(MeshConfig.layer({ serverId: "b", peers: [{ host: "a", port: 6633 }] }))
        )
      )
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"] })
      yield* TestClock.adjust("300 millis")
      yield* MeshTest.settleUntil(MeshTest.linked(a))
      yield* a.mesh.messageAvailable({ queue: "orders", partition: "p" })
      yield* MeshTest.settleUntil(Effect.sync(() => seen.length === 1))
      assert.deepStrictEqual(seen, ["orders"])
      void b
    })
  )

  it.effect("Waker.tap decorates the shipped waker and keeps it synchronous", () =>
    Effect.gen(function* () {
      const local = yield* LocalWaker.make()
      const seen: Array<string> = []
      const tapped = Waker.tap(local, (item) => seen.push(item.partition))
      assert.isDefined(Waker.syncWakeOf(tapped))
      const pop = yield* Effect.forkChild(
        local.awaitWake({ queue: "q", tenant: Option.none() }, { maxWait: "1 minute" })
      )
      yield* MeshTest.settleUntil(Effect.map(local.parked, (n) => n === 1))
      Waker.syncWakeOf(tapped)!(Frame.queueItem({ queue: "q", partition: "p1" }))
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      yield* tapped.wake(Frame.queueItem({ queue: "q", partition: "p2" }))
      assert.deepStrictEqual(seen, ["p1", "p2"])
    }).pipe(Effect.scoped)
  )

  it.effect("a waker without a twin is called through its effect", () =>
    Effect.gen(function* () {
      const seen: Array<string> = []
      const plain: Waker.WakerShape = { wake: (item) => Effect.sync(() => seen.push(item.queue)) }
      assert.isUndefined(Waker.syncWakeOf(plain))
      const tapped = Waker.tap(plain, (item) => seen.push(`tap:${item.queue}`))
      assert.isUndefined(Waker.syncWakeOf(tapped))
      yield* tapped.wake(Frame.queueItem({ queue: "q", partition: "" }))
      assert.deepStrictEqual(seen, ["tap:q", "q"])
    })
  )
})

describe("membership, typed", () => {
  it.effect("each configured peer and each server heard, with link, liveness and auth version", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const auth = { ...durations, auth: "permissive" } as const
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["a", "b"], config: auth })
      yield* MeshTest.node(network, { serverId: "b", peers: ["a"], config: auth })
      const seen: Array<number> = []
      yield* a.mesh.memberChanges.pipe(
        Stream.runForEach((members) => Effect.sync(() => seen.push(members.length))),
        Effect.forkScoped
      )
      // The members now first, as `healthChanges` starts with the health now.
      const first = yield* Stream.runHead(a.mesh.memberChanges)
      assert.deepStrictEqual(Option.getOrThrow(first), yield* a.mesh.members)
      yield* MeshTest.settle
      yield* advance(1_500)
      const members = yield* a.mesh.members
      // The entry naming a itself, then b: one member, since b's challenge told a its id.
      assert.deepStrictEqual(
        members.map((m) => [
          Option.getOrNull(m.serverId),
          Option.map(m.address, (address) => address.name).pipe(Option.getOrNull),
          m.foundBy,
          m.self,
          Option.map(m.link, (link) => link.connected).pipe(Option.getOrNull),
          Option.map(m.heard, (heard) => [heard.alive, heard.authVersion]).pipe(Option.getOrNull)
        ]),
        [
          ["a", "a:6633", "config", true, null, null],
          ["b", "b:6633", "config", false, true, [true, 2]]
        ]
      )
      // b's link up and b heard alive (and a's own entry, if recognised after subscribing): each a
      // change, each the whole member list as it was then.
      assert.isAtLeast(seen.length, 2)
    })
  )

  it.effect("in legacy auth the dialled peer and the server heard are two members", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"], config: durations })
      yield* MeshTest.node(network, { serverId: "b", peers: ["a"] })
      yield* advance(1_500)
      const members = yield* a.mesh.members
      assert.deepStrictEqual(
        members.map((m) => [Option.getOrNull(m.serverId), m.foundBy]),
        [
          [null, "config"],
          ["b", "inbound"]
        ]
      )
    })
  )
})
