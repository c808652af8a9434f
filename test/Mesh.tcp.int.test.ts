import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Option, Scope, SubscriptionRef } from "effect"
import {
  allConnected,
  eventually,
  freePort,
  hearsFrom,
  type Node,
  SECRET,
  tcpNode
} from "./fixtures/cluster.js"

/** A tenant is a UUID (the default `tenants: "uuid"`). */
const TENANT_T = "7e7e7e7e-0000-4000-8000-000000000001"
const ACME = "ac3e0000-0000-4000-8000-00000000ac3e"

const cluster = (secrets: readonly [string, string, string] = [SECRET, SECRET, SECRET]) =>
  Effect.gen(function* () {
    const ports = [yield* freePort, yield* freePort, yield* freePort] as const
    const nodes: Array<Node> = []
    for (let i = 0; i < 3; i++) {
      nodes.push(
        yield* tcpNode({
          serverId: `node-${"abc"[i]}`,
          port: ports[i]!,
          peers: ports.filter((_, j) => j !== i),
          secret: secrets[i]!
        })
      )
    }
    return { nodes, ports }
  })

const tcpHandles = () =>
  process.getActiveResourcesInfo().filter((r) => r === "TCPServerWrap" || r === "TCPSocketWrap").length

describe("Mesh over loopback TCP", () => {
  it.live("closing the scope closes the listeners and every connection", () =>
    Effect.gen(function* () {
      // First in this file, so no earlier test's sockets are still closing.
      const before = tcpHandles()
      const scope = yield* Scope.make()
      const { nodes } = yield* Scope.provide(cluster(), scope)
      for (const node of nodes) yield* eventually(allConnected(node))
      for (const node of nodes) yield* eventually(hearsFrom(node, 2))
      // Three listeners and, between three nodes, six connections seen from both ends.
      assert.strictEqual(tcpHandles() - before, 3 + 12)
      yield* Scope.close(scope, Exit.void)
      yield* eventually(Effect.sync(() => tcpHandles() <= before))
    })
  )

  it.live("a push on A wakes pops parked on B and on C", () =>
    Effect.gen(function* () {
      const { nodes } = yield* cluster()
      const [a, b, c] = nodes as [Node, Node, Node]
      for (const node of nodes) yield* eventually(allConnected(node))
      const parkB = yield* Effect.forkChild(
        b.waker.awaitWake({ queue: "orders", tenant: Option.some(ACME) }, { maxWait: "60 seconds" })
      )
      const parkC = yield* Effect.forkChild(
        c.waker.awaitWake({ queue: "orders", tenant: Option.some(ACME) }, { maxWait: "60 seconds" })
      )
      yield* eventually(
        Effect.map(Effect.all([b.waker.parked, c.waker.parked]), ([x, y]) => x === 1 && y === 1)
      )
      yield* a.mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: ACME })
      assert.strictEqual(yield* Fiber.join(parkB), "woken")
      assert.strictEqual(yield* Fiber.join(parkC), "woken")
      assert.deepStrictEqual(
        yield* b.waker.takePartitionHints({ queue: "orders", tenant: Option.some(ACME) }),
        ["p0"]
      )
    })
  )

  it.live("an absent-tenant wake reaches pops of two tenants; maintenance flips everywhere", () =>
    Effect.gen(function* () {
      const { nodes } = yield* cluster()
      const [a, b] = nodes as [Node, Node, Node]
      for (const node of nodes) yield* eventually(allConnected(node))
      const one = yield* Effect.forkChild(
        b.waker.awaitWake({ queue: "q", tenant: Option.some("t1") }, { maxWait: "60 seconds" })
      )
      const two = yield* Effect.forkChild(
        b.waker.awaitWake({ queue: "q", tenant: Option.some("t2") }, { maxWait: "60 seconds" })
      )
      yield* eventually(Effect.map(b.waker.parked, (n) => n === 2))
      yield* a.mesh.messageAvailable({ queue: "q", partition: "p" })
      assert.strictEqual(yield* Fiber.join(one), "woken")
      assert.strictEqual(yield* Fiber.join(two), "woken")

      yield* a.mesh.setMaintenance(true)
      for (const node of nodes) yield* eventually(SubscriptionRef.get(node.flags.maintenance))
      yield* b.mesh.setPopMaintenance(true)
      for (const node of nodes) yield* eventually(SubscriptionRef.get(node.flags.popMaintenance))
    })
  )

  it.live("a wrong secret is refused, counted, and wakes nobody", () =>
    Effect.gen(function* () {
      const { nodes } = yield* cluster([SECRET, SECRET, "wrong"])
      const [a, b, c] = nodes as [Node, Node, Node]
      // C dials A and B with the wrong secret: both count handshake failures.
      yield* eventually(Effect.map(a.mesh.stats, (s) => s.enabled && s.handshake_failures > 0))
      yield* eventually(Effect.map(b.mesh.stats, (s) => s.enabled && s.handshake_failures > 0))
      yield* eventually(allConnected(a))
      yield* eventually(hearsFrom(b, 1))
      const parked = yield* Effect.forkChild(
        b.waker.awaitWake({ queue: "q", tenant: Option.none() }, { maxWait: "60 seconds" })
      )
      yield* eventually(Effect.map(b.waker.parked, (n) => n === 1))
      yield* c.mesh.messageAvailable({ queue: "q", partition: "p" })
      // A's push is the control: it does wake B, and C's earlier push never did.
      const stats = yield* b.mesh.stats
      assert.isTrue(stats.enabled && stats.servers_alive === 1)
      assert.isUndefined(parked.pollUnsafe())
      yield* a.mesh.messageAvailable({ queue: "q", partition: "p" })
      assert.strictEqual(yield* Fiber.join(parked), "woken")
    })
  )

  it.live("a node restarted on the same port is re-dialled and works again", () =>
    Effect.gen(function* () {
      const portA = yield* freePort
      const portB = yield* freePort
      const a = yield* tcpNode({ serverId: "node-a", port: portA, peers: [portB] })
      const firstScope = yield* Scope.make()
      yield* Scope.provide(tcpNode({ serverId: "node-b", port: portB, peers: [portA] }), firstScope)
      yield* eventually(allConnected(a))
      yield* Scope.close(firstScope, Exit.void)
      yield* eventually(Effect.map(allConnected(a), (ok) => !ok))
      const b = yield* tcpNode({ serverId: "node-b", port: portB, peers: [portA] })
      yield* eventually(allConnected(a))
      const parked = yield* Effect.forkChild(
        b.waker.awaitWake({ queue: "q", tenant: Option.none() }, { maxWait: "60 seconds" })
      )
      yield* eventually(Effect.map(b.waker.parked, (n) => n === 1))
      yield* a.mesh.messageAvailable({ queue: "q", partition: "p" })
      assert.strictEqual(yield* Fiber.join(parked), "woken")
    })
  )

  it.live("counters add up over TCP: sent on A = received on B", () =>
    Effect.gen(function* () {
      const portA = yield* freePort
      const portB = yield* freePort
      const slow = { heartbeatInterval: Duration.hours(1), deadThreshold: Duration.hours(2) }
      const b = yield* tcpNode({ serverId: "node-b", port: portB, peers: [portA], config: slow })
      const a = yield* tcpNode({ serverId: "node-a", port: portA, peers: [portB], config: slow })
      yield* eventually(allConnected(a))
      yield* eventually(hearsFrom(b, 1))
      for (let i = 0; i < 5000; i++) {
        yield* a.mesh.messageAvailable({ queue: "q", partition: String(i % 7), tenant: TENANT_T })
        // Paced below the 1024-frame queue, so that nothing is dropped.
        if (i % 500 === 499)
          yield* eventually(Effect.map(a.mesh.stats, (s) => s.enabled && s.peers[0]!.queued === 0))
      }
      yield* eventually(
        Effect.map(b.mesh.stats, (s) => s.enabled && s.messages_received === 5000),
        "60 seconds"
      )
      const sent = yield* a.mesh.stats
      assert.isTrue(sent.enabled && sent.messages_dropped === 0 && sent.messages_sent === 5000)
    })
  )
})
