/**
 * Membership that changes without a restart, under `TestClock` over the in-memory network: a
 * programmable discovery (the DNS discovery's records, as a test sets them) drives the peer set.
 * Members join and leave as records change, a one-round blip or a failed round drops nothing, the
 * node's own entry is never dialled again, and a member that moves keeps its identity.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Option, Ref, Result, Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Discovery from "../src/Discovery.js"
import * as HttpRoutes from "../src/HttpRoutes.js"
import type * as Membership from "../src/Membership.js"
import * as MeshConfig from "../src/MeshConfig.js"
import type { MeshEvent } from "../src/MeshEvent.js"
import * as MeshHealth from "../src/MeshHealth.js"
import * as MeshMetrics from "../src/MeshMetrics.js"
import type { ActiveStats, MeshStats } from "../src/MeshStats.js"
import * as MeshTest from "../src/MeshTest.js"

const INTERVAL = Duration.seconds(5)
const PORT = MeshTest.PORT

const active = (stats: MeshStats): ActiveStats => {
  if (!stats.enabled) throw new Error(`mesh not active: ${stats.reason}`)
  return stats
}

const peersOf = (names: ReadonlyArray<string>): ReadonlyArray<MeshConfig.Peer> =>
  names.map((host) => ({ host, port: PORT }))

/** Moves the clock in small steps, letting the fibers run after each. */
const advance = (millis: number, step = 250) =>
  Effect.gen(function* () {
    for (let done = 0; done < millis; done += step) {
      yield* TestClock.adjust(Duration.millis(step))
      yield* MeshTest.settle
    }
  })

/** A node found only by discovery (no configured peers), sharing the records of `records`. */
const discovered = (
  network: MeshTest.Network,
  records: Discovery.Programmable,
  serverId: string,
  extra: { readonly host?: string; readonly auth?: MeshConfig.AuthMode } = {}
) =>
  MeshTest.node(network, {
    serverId,
    peers: [],
    ...(extra.host === undefined ? {} : { host: extra.host }),
    config: {
      discoveryInterval: INTERVAL,
      heartbeatInterval: Duration.seconds(1),
      deadThreshold: Duration.seconds(3),
      ...(extra.auth === undefined ? {} : { auth: extra.auth })
    },
    services: Discovery.layer(records.discovery)
  })

const linkNames = (node: MeshTest.Node) =>
  Effect.map(node.mesh.stats, (stats) =>
    active(stats)
      .peers.filter((peer) => !peer.self)
      .map((peer) => peer.host)
      .sort()
  )

const connectedNames = (node: MeshTest.Node) =>
  Effect.map(node.mesh.stats, (stats) =>
    active(stats)
      .peers.filter((peer) => peer.connected && !peer.self)
      .map((peer) => peer.host)
      .sort()
  )

const record = (node: MeshTest.Node) =>
  Effect.gen(function* () {
    const seen = yield* Ref.make<ReadonlyArray<MeshEvent>>([])
    yield* node.mesh.events.pipe(
      Stream.runForEach((event) => Ref.update(seen, (all) => [...all, event])),
      Effect.forkScoped
    )
    yield* MeshTest.settle
    return seen
  })

describe("Discovery", () => {
  it.effect("three nodes found by one name link as a full mesh; the own entry is never dialled again", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const records = yield* Discovery.makeProgrammable(peersOf(["a", "b", "c"]))
      const a = yield* discovered(network, records, "a")
      const b = yield* discovered(network, records, "b")
      const c = yield* discovered(network, records, "c")
      yield* advance(3_000)
      for (const [node, others] of [
        [a, ["b", "c"]],
        [b, ["a", "c"]],
        [c, ["a", "b"]]
      ] as const) {
        assert.deepStrictEqual(yield* connectedNames(node), [...others])
        const stats = active(yield* node.mesh.stats)
        assert.deepStrictEqual(
          stats.peers.map((peer) => [peer.host, peer.found_by, peer.self]),
          ["a", "b", "c"].map((host) => [host, "discovery", host === node.serverId])
        )
        assert.strictEqual(stats.servers_alive, 2)
        assert.strictEqual(stats.health.status, "clustered")
        assert.strictEqual(stats.discovery?.source, "programmable")
      }
      // Many rounds later, each node dialled itself once: the entry that names it is never dialled again.
      yield* advance(30_000, 1_000)
      const dials = yield* network.network.dials
      for (const name of ["a", "b", "c"]) {
        assert.strictEqual(dials.filter((dial) => dial.from === name && dial.host === name).length, 1)
      }
    })
  )

  it.effect(
    "a fourth node added to the records is linked within two intervals; a removed one leaves after two",
    () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        const records = yield* Discovery.makeProgrammable(peersOf(["a", "b", "c"]))
        const a = yield* discovered(network, records, "a")
        const b = yield* discovered(network, records, "b")
        const cScope = yield* Scope.make()
        yield* Scope.provide(discovered(network, records, "c"), cScope)
        yield* advance(3_000)
        const events = yield* record(a)

        const d = yield* discovered(network, records, "d")
        yield* records.set(peersOf(["a", "b", "c", "d"]))
        yield* advance(2 * Duration.toMillis(INTERVAL))
        assert.deepStrictEqual(yield* connectedNames(a), ["b", "c", "d"])
        assert.deepStrictEqual(yield* connectedNames(d), ["a", "b", "c"])
        yield* MeshTest.settleUntil(Effect.map(b.mesh.stats, (s) => active(s).servers_alive === 3))

        // c goes away and its record with it: after one round its link is still there (a blip drops
        // nothing), after the second it is closed, and the node says so.
        yield* Scope.close(cScope, Exit.void)
        yield* records.set(peersOf(["a", "b", "d"]))
        yield* advance(Duration.toMillis(INTERVAL))
        assert.deepStrictEqual(yield* linkNames(a), ["b", "c", "d"])
        yield* advance(Duration.toMillis(INTERVAL))
        assert.deepStrictEqual(yield* linkNames(a), ["b", "d"])
        const membership = (yield* Ref.get(events)).flatMap((event) =>
          event._tag === "MemberJoined" || event._tag === "MemberLeft" ? [`${event._tag}:${event.peer}`] : []
        )
        assert.deepStrictEqual(membership, [`MemberJoined:d:${PORT}`, `MemberLeft:c:${PORT}`])
        const stats = active(yield* a.mesh.stats)
        assert.strictEqual(stats.members_joined.discovery, 4)
        assert.strictEqual(stats.members_left.discovery, 1)
      })
  )

  it.effect(
    "a source that has never found anyone is not trusted: starting, then isolated (nothing_found) and unready; healthy once it finds",
    () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        const records = yield* Discovery.makeProgrammable()
        yield* records.fail("nothing.invalid: not found")
        const a = yield* discovered(network, records, "a")
        yield* advance(1_000)
        assert.strictEqual((yield* a.mesh.health).status, "starting")
        assert.isTrue(HttpRoutes.readiness(yield* a.mesh.stats).ready)
        // Past the start-up window (the dead threshold, 3 s here), every round failed: isolated.
        yield* advance(3_000)
        const health = yield* a.mesh.health
        assert.deepStrictEqual([health.status, health.reason], ["isolated", "nothing_found"])
        assert.isFalse(MeshHealth.isTrusted(health))
        const ready = HttpRoutes.readiness(yield* a.mesh.stats)
        assert.deepStrictEqual(
          [ready.ready, ready.status, ready.reason],
          [false, "isolated", "nothing_found"]
        )
        yield* a.mesh.syncMetrics
        assert.include(
          JSON.stringify(
            Option.getOrNull(
              MeshMetrics.seriesValue("queen_mesh_health", { server_id: "a", status: "isolated" })
            )
          ),
          '"value":1'
        )
        // An answer of no records at all is no better than a failure.
        yield* records.set([])
        yield* advance(Duration.toMillis(INTERVAL))
        assert.strictEqual((yield* a.mesh.health).reason, "nothing_found")
        // Only itself: a single replica, solo (and trusted).
        yield* records.set(peersOf(["a"]))
        yield* advance(Duration.toMillis(INTERVAL))
        assert.deepStrictEqual((yield* a.mesh.health).status, "solo")
        // A peer comes: clustered.
        yield* discovered(network, records, "b")
        yield* records.set(peersOf(["a", "b"]))
        yield* advance(2 * Duration.toMillis(INTERVAL))
        assert.strictEqual((yield* a.mesh.health).status, "clustered")
      })
  )

  it.effect("a record missing from one round only, or a failed round, drops nothing", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const records = yield* Discovery.makeProgrammable(peersOf(["a", "b"]))
      const a = yield* discovered(network, records, "a")
      yield* discovered(network, records, "b")
      yield* advance(3_000)
      assert.deepStrictEqual(yield* connectedNames(a), ["b"])
      for (let blip = 0; blip < 3; blip++) {
        yield* records.set(peersOf(["a"]))
        yield* advance(Duration.toMillis(INTERVAL))
        yield* records.set(peersOf(["a", "b"]))
        yield* advance(Duration.toMillis(INTERVAL))
        assert.deepStrictEqual(yield* connectedNames(a), ["b"])
      }
      yield* records.fail("SERVFAIL")
      yield* advance(4 * Duration.toMillis(INTERVAL), 1_000)
      assert.deepStrictEqual(yield* connectedNames(a), ["b"])
      const stats = active(yield* a.mesh.stats)
      assert.strictEqual(stats.members_left.discovery, 0)
      assert.isAtLeast(stats.discovery?.failed_rounds ?? 0, 4)
      assert.strictEqual(stats.discovery?.last_error, "discovery programmable: SERVFAIL")
    })
  )

  it.effect("a member that comes back on a new address is the same member, by its server id", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const records = yield* Discovery.makeProgrammable(peersOf(["a", "b-1"]))
      const a = yield* discovered(network, records, "a", { auth: "permissive" })
      const bScope = yield* Scope.make()
      yield* Scope.provide(discovered(network, records, "b", { host: "b-1", auth: "permissive" }), bScope)
      yield* advance(3_000)
      const bOf = (members: ReadonlyArray<Membership.Member>) =>
        members.filter((member) => Option.getOrNull(member.serverId) === "b")
      let members = bOf(yield* a.mesh.members)
      assert.strictEqual(members.length, 1)
      assert.strictEqual(Option.getOrNull(Option.map(members[0]!.address, (address) => address.host)), "b-1")

      // b restarts on another address, as a pod does; the records follow.
      yield* Scope.close(bScope, Exit.void)
      yield* discovered(network, records, "b", { host: "b-2", auth: "permissive" })
      yield* records.set(peersOf(["a", "b-2"]))
      yield* advance(3 * Duration.toMillis(INTERVAL), 500)
      members = bOf(yield* a.mesh.members)
      assert.strictEqual(members.length, 1)
      const member = members[0]!
      assert.strictEqual(Option.getOrNull(Option.map(member.address, (address) => address.host)), "b-2")
      assert.isTrue(Option.isSome(member.heard) && member.heard.value.alive)
      assert.isTrue(Option.isSome(member.link) && member.link.value.connected)
      assert.strictEqual(active(yield* a.mesh.stats).health.status, "clustered")
    })
  )

  it("dns: A/AAAA names, SRV names, repeats merged, and a failure is a DiscoveryError", () => {
    const lookup: Discovery.DnsLookup = {
      addresses: (name) =>
        name === "gone"
          ? Effect.fail(new Error("ENOTFOUND gone"))
          : Effect.succeed(["10.0.0.2", "10.0.0.2", "fd00::3"]),
      srv: () => Effect.succeed([{ name: "queen-0.queen", port: 7000 }])
    }
    assert.deepStrictEqual(Effect.runSync(Discovery.dns("queen", 6633, lookup).peers), [
      { host: "10.0.0.2", port: 6633 },
      { host: "fd00::3", port: 6633 }
    ])
    assert.deepStrictEqual(Effect.runSync(Discovery.dns("_mesh._tcp.queen", 6633, lookup).peers), [
      { host: "queen-0.queen", port: 7000 }
    ])
    const failed = Effect.runSync(Effect.result(Discovery.dns("gone", 6633, lookup).peers))
    assert.isTrue(Result.isFailure(failed) && failed.failure._tag === "DiscoveryError")
  })

  it("QUEEN_MESH_DISCOVERY turns the mesh on with no peers, and names the variable when malformed", () => {
    const config = MeshConfig.unsafeMake({
      serverId: "a",
      discovery: Option.some({ name: "queen-headless", port: 6633 })
    })
    assert.isTrue(MeshConfig.isActive(config))
    assert.deepStrictEqual(
      MeshConfig.parseDiscovery("dns:queen-headless", 6633),
      Result.succeed({ name: "queen-headless", port: 6633 })
    )
    assert.deepStrictEqual(
      MeshConfig.parseDiscovery("DNS:queen:7000", 6633),
      Result.succeed({ name: "queen", port: 7000 })
    )
    assert.isTrue(Result.isFailure(MeshConfig.parseDiscovery("dns:10.0.0.1", 6633)))
    assert.isTrue(Result.isFailure(MeshConfig.parseDiscovery("srv:queen", 6633)))
    assert.isTrue(Result.isFailure(MeshConfig.parseDiscovery("dns:queen:99999", 6633)))
    assert.isTrue(Result.isFailure(MeshConfig.parseDiscovery("dns:queen", 0)))
  })
})
