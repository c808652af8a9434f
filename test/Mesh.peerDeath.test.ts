/**
 * A peer that stops (its scope closed, as a crash would), under `TestClock` on the in-memory network:
 * the nodes left hear it dead within the dead threshold plus one heartbeat of its stop, whenever it stops
 * relative to the heartbeat tick, in either auth mode, with or without the peer list naming each node
 * itself, and on a link busy enough to skip its heartbeats. Dead means all of it: one `PeerDown`, the
 * server dead in the stats and the members, its link down, the health degraded.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Option, Scope } from "effect"
import { TestClock } from "effect/testing"
import type * as MeshConfig from "../src/MeshConfig.js"
import * as MeshTest from "../src/MeshTest.js"

const HEARTBEAT = 1000
const DEAD = 5000
const TENANT = "7e7e7e7e-0000-4000-8000-000000000001"

const names = ["a", "b", "c"] as const
type Name = (typeof names)[number]

/** Nodes a, b and c, each in a scope of its own, recording the `PeerDown`s each hears. */
const three = (auth: MeshConfig.AuthMode, selfListed: boolean) =>
  Effect.gen(function* () {
    const network = yield* MeshTest.network
    const scopes = { a: yield* Scope.make(), b: yield* Scope.make(), c: yield* Scope.make() }
    yield* Effect.addFinalizer(() => Effect.forEach(names, (name) => Scope.close(scopes[name], Exit.void)))
    const nodes = {} as Record<Name, MeshTest.Node>
    const downs: Array<string> = []
    for (const name of names) {
      nodes[name] = yield* MeshTest.node(network, {
        serverId: name,
        peers: names.filter((peer) => selfListed || peer !== name),
        config: {
          auth,
          heartbeatInterval: Duration.millis(HEARTBEAT),
          deadThreshold: Duration.millis(DEAD)
        }
      }).pipe(Scope.provide(scopes[name]))
      yield* nodes[name].mesh
        .observe(
          (event) => {
            if (event._tag === "PeerDown") downs.push(`${name}:${event.serverId}`)
          },
          ["PeerDown"]
        )
        .pipe(Scope.provide(scopes[name]))
    }
    return { nodes, scopes, downs }
  })

/** Moves the clock `millis` in steps of 100 ms, letting everything due run at each. */
const run = <E = never>(millis: number, each: Effect.Effect<void, E> = Effect.void) =>
  Effect.gen(function* () {
    for (let t = 0; t < millis; t += 100) {
      yield* each
      yield* TestClock.adjust("100 millis")
      yield* MeshTest.settle
    }
  })

/** Whether `node` holds `b` dead in every place it tells of it. */
const heardDead = (node: MeshTest.Node) =>
  Effect.gen(function* () {
    const stats = yield* node.mesh.stats
    if (!stats.enabled) return "mesh not running"
    const b = stats.servers.find((server) => server.server_id === "b")
    if (b === undefined || b.alive) return `b in the stats: ${JSON.stringify(b)}`
    for (const member of yield* node.mesh.members) {
      const isB =
        (Option.isSome(member.serverId) && member.serverId.value === "b") ||
        (Option.isSome(member.address) && member.address.value.host === "b")
      if (!isB) continue
      if (Option.isSome(member.link) && member.link.value.connected) return "b's link up"
      if (Option.isSome(member.heard) && member.heard.value.alive) return "b heard alive in the members"
    }
    const health = yield* node.mesh.health
    if (health.status !== "degraded") return `health ${JSON.stringify(health)}`
    return undefined
  })

describe("a peer that stops", () => {
  // On a tick and just before the next: the two ends of where a stop can fall against the heartbeat
  // (a stop between them was tried too, and behaves as one of the two).
  for (const auth of ["legacy", "permissive"] as const)
    for (const selfListed of [false, true])
      for (const offset of [0, HEARTBEAT - 1]) {
        it.effect(
          `is heard dead within the threshold and a heartbeat (${auth}, ${selfListed ? "each node listed by itself" : "peers only"}, ${offset} ms past a tick)`,
          () =>
            Effect.gen(function* () {
              const { nodes, scopes, downs } = yield* three(auth, selfListed)
              yield* run(2000)
              for (const name of ["a", "c"] as const) {
                assert.include(yield* nodes[name].mesh.stats, { servers_alive: 2, servers_dead: 0 }, name)
                assert.strictEqual((yield* nodes[name].mesh.health).status, "clustered", name)
              }
              // b stops `offset` ms past a whole second: at four points of its peers' heartbeat period.
              yield* TestClock.adjust(Duration.millis(offset))
              yield* MeshTest.settle
              yield* Scope.close(scopes.b, Exit.void)
              yield* MeshTest.settle
              yield* run(DEAD + HEARTBEAT)
              for (const name of ["a", "c"] as const)
                assert.isUndefined(yield* heardDead(nodes[name]), `${name} still holds b alive`)
              assert.deepStrictEqual([...downs].sort(), ["a:b", "c:b"])
            })
        )
      }

  it.effect("is heard dead as soon, when its links were busy and skipped their heartbeats", () =>
    Effect.gen(function* () {
      const { nodes, scopes, downs } = yield* three("legacy", false)
      yield* run(2000)
      // b wakes its peers every 100 ms: its links carry a frame every tick and send no heartbeat.
      let wakes = 0
      const wake = Effect.asVoid(
        nodes.b.mesh.messageAvailable({ queue: "q", partition: String(wakes++), tenant: TENANT })
      )
      const sentBefore = yield* nodes.b.mesh.stats
      yield* run(3050, wake)
      const sentAfter = yield* nodes.b.mesh.stats
      assert.isTrue(sentBefore.enabled && sentAfter.enabled)
      if (!sentBefore.enabled || !sentAfter.enabled) return
      // Only the wakes went out: two peers, 31 wakes each, no heartbeat.
      assert.strictEqual(sentAfter.messages_sent - sentBefore.messages_sent, 2 * 31)
      yield* Scope.close(scopes.b, Exit.void)
      yield* MeshTest.settle
      yield* run(DEAD + HEARTBEAT)
      for (const name of ["a", "c"] as const)
        assert.isUndefined(yield* heardDead(nodes[name]), `${name} still holds b alive`)
      assert.deepStrictEqual([...downs].sort(), ["a:b", "c:b"])
    })
  )
})
