/**
 * The cluster view as `ClusterView.build` derives it, under `TestClock` on the in-memory network: real
 * stats and members of real nodes, the peers' stats handed in as the fetch would (or as its failures).
 * The page's HTTP side, the fetch and its hostile cases are in ClusterView.http.int.test.ts; the page in a
 * browser in view.int.test.ts.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Result, Schema, Scope } from "effect"
import { TestClock } from "effect/testing"
import * as ClusterView from "../src/ClusterView.js"
import * as PeerBook from "../src/internal/view/peerBook.js"
import { StatsFetchError } from "../src/internal/view/statsFetch.js"
import * as MeshConfig from "../src/MeshConfig.js"
import type * as MeshStats from "../src/MeshStats.js"
import * as MeshTest from "../src/MeshTest.js"

const durations = {
  heartbeatInterval: MeshConfig.defaults.heartbeatInterval,
  deadThreshold: MeshConfig.defaults.deadThreshold,
  // Nothing is announced: these nodes have no HTTP routes.
  advertiseHost: ""
}

const advance = (millis: number, step = 100) =>
  Effect.gen(function* () {
    for (let t = 0; t < millis; t += step) {
      yield* TestClock.adjust(step)
      yield* MeshTest.settle
    }
  })

const noMetrics: ClusterView.LocalMetrics = {
  wakesSent: new Map(),
  wakesReceived: new Map(),
  applySeconds: null
}

const ok = (
  serverId: string,
  stats: MeshStats.MeshStats,
  httpAddr: string | null = null
): ClusterView.Remote => ({
  serverId,
  httpAddr,
  stats: Result.succeed(stats),
  ms: 3
})

const failed = (
  serverId: string,
  status: Exclude<ClusterView.FetchStatus, "self" | "ok">,
  httpAddr: string | null = "http://127.0.0.1:1"
): ClusterView.Remote => ({ serverId, httpAddr, stats: Result.fail({ status, detail: status }), ms: null })

/** The view from `self`, with the given remotes. */
const viewFrom = (
  self: MeshTest.Node,
  remotes: ReadonlyArray<ClusterView.Remote>,
  addresses: ReadonlyMap<string, string> = new Map()
) =>
  Effect.gen(function* () {
    return ClusterView.build({
      self: yield* self.mesh.stats,
      members: yield* self.mesh.members,
      remotes,
      addresses,
      local: noMetrics,
      now: 0
    })
  })

const states = (view: ClusterView.View) => ({
  nodes: Object.fromEntries(view.nodes.map((node) => [node.id, node.state])),
  links: Object.fromEntries(view.links.map((link) => [`${link.from}->${link.to}`, link.state]))
})

const three = Effect.gen(function* () {
  const network = yield* MeshTest.network
  const names = ["a", "b", "c"]
  const [a, b, c] = (yield* Effect.forEach(names, (name) =>
    MeshTest.node(network, { serverId: name, peers: names.filter((n) => n !== name), config: durations })
  )) as [MeshTest.Node, MeshTest.Node, MeshTest.Node]
  yield* advance(1_500)
  return { network, a, b, c }
})

describe("ClusterView.build", () => {
  it.effect("three nodes linked both ways: three nodes up and six links, from any of them", () =>
    Effect.gen(function* () {
      const { a, b, c } = yield* three
      const [sa, sb, sc] = [yield* a.mesh.stats, yield* b.mesh.stats, yield* c.mesh.stats]
      const fromA = yield* viewFrom(a, [ok("b", sb), ok("c", sc)])
      assert.deepStrictEqual(states(fromA), {
        nodes: { a: "up", b: "up", c: "up" },
        links: {
          "a->b": "linked",
          "a->c": "linked",
          "b->a": "linked",
          "b->c": "linked",
          "c->a": "linked",
          "c->b": "linked"
        }
      })
      assert.deepStrictEqual(
        fromA.nodes.map((node) => [node.id, node.self, node.fetch.status]),
        [
          ["a", true, "self"],
          ["b", false, "ok"],
          ["c", false, "ok"]
        ]
      )
      assert.isTrue(fromA.links.every((link) => link.seen_by === "both" && link.queued === 0))
      const fromC = yield* viewFrom(c, [ok("a", sa), ok("b", sb)])
      assert.deepStrictEqual(states(fromC), states(fromA))
      assert.strictEqual(fromC.self, "c")
      // The view is what its Schema says.
      assert.isTrue(Result.isSuccess(Schema.decodeUnknownResult(ClusterView.View)(fromA)))
    })
  )

  it.effect("a node cut off: down once silent past the dead threshold, every link to and from it down", () =>
    Effect.gen(function* () {
      const { network, a, b } = yield* three
      // Heard, and dialled over a link that is up, but its stats not answering: it shows `no_answer`.
      // (Read before the cut: effect 4 resumes a fiber waiting on the cut wire at once, so the link a
      // dials to c is down as soon as `isolate` returns, and both of a's ways to c failing is `down`.)
      const early = yield* viewFrom(a, [ok("b", yield* b.mesh.stats), failed("c", "timeout")])
      assert.strictEqual(states(early).nodes.c, "no_answer")
      yield* network.network.isolate("c")
      yield* advance(6_000)
      const view = yield* viewFrom(a, [ok("b", yield* b.mesh.stats), failed("c", "timeout")])
      const { nodes, links } = states(view)
      assert.deepStrictEqual(nodes, { a: "up", b: "up", c: "down" })
      assert.strictEqual(links["a->b"], "linked")
      assert.strictEqual(links["b->a"], "linked")
      for (const key of ["a->c", "b->c", "c->a", "c->b"]) assert.notStrictEqual(links[key], "linked", key)
      const c = view.nodes.find((node) => node.id === "c")!
      assert.deepStrictEqual([c.fetch.status, c.heard?.alive, c.heard?.by], ["timeout", false, "a"])
      // Healed, it comes back.
      yield* network.network.heal
      yield* advance(7_000)
      const healed = yield* viewFrom(a, [ok("b", yield* b.mesh.stats), failed("c", "timeout")])
      assert.strictEqual(states(healed).nodes.c, "no_answer")
      assert.strictEqual(states(healed).links["c->a"], "linked")
    })
  )

  it.effect(
    "a peer with nothing to read (no address, an upstream body) is drawn from this node's own view",
    () =>
      Effect.gen(function* () {
        const { a } = yield* three
        const view = yield* viewFrom(a, [failed("b", "no_address", null), failed("c", "not_stats")])
        assert.deepStrictEqual(states(view), {
          nodes: { a: "up", b: "up", c: "up" },
          links: { "a->b": "linked", "a->c": "linked", "b->a": "linked", "c->a": "linked" }
        })
        assert.deepStrictEqual(
          view.links.map((link) => [link.from, link.to, link.seen_by]),
          [
            ["a", "b", "dialer"],
            ["a", "c", "dialer"],
            ["b", "a", "receiver"],
            ["c", "a", "receiver"]
          ]
        )
      })
  )

  it.effect("a dialer refused by its peer's listener: refused, with the refusals the listener counts", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const a = yield* MeshTest.node(network, {
        serverId: "a",
        peers: ["b"],
        config: durations,
        secret: "one"
      })
      const b = yield* MeshTest.node(network, {
        serverId: "b",
        peers: ["a"],
        config: durations,
        secret: "two"
      })
      yield* advance(4_000)
      const view = yield* viewFrom(a, [ok("b", yield* b.mesh.stats)])
      const ab = view.links.find((link) => link.from === "a" && link.to === "b")!
      const ba = view.links.find((link) => link.from === "b" && link.to === "a")!
      assert.strictEqual(ab.state, "refused")
      assert.include(ab.reason ?? "", "bad_mac")
      assert.strictEqual(ba.state, "refused")
      assert.include(ba.reason ?? "", "bad_mac")
    })
  )

  it.effect("an entry naming the node itself is a `self` link, not a node of its own", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["a", "b"], config: durations })
      const b = yield* MeshTest.node(network, { serverId: "b", peers: ["a", "b"], config: durations })
      yield* advance(2_000)
      const view = yield* viewFrom(a, [ok("b", yield* b.mesh.stats)])
      assert.deepStrictEqual(states(view), {
        nodes: { a: "up", b: "up" },
        links: { "a->a": "self", "a->b": "linked", "b->a": "linked", "b->b": "self" }
      })
    })
  )

  it.effect("peers listed by address are named by the host of their http_addr and their mesh port", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const hosts = { a: "127.0.0.11", b: "127.0.0.12", c: "127.0.0.13" } as const
      const names = ["a", "b", "c"] as const
      const [a, b, c] = (yield* Effect.forEach(names, (name) =>
        MeshTest.node(network, {
          serverId: name,
          host: hosts[name],
          peers: names.filter((n) => n !== name).map((n) => hosts[n]),
          config: durations
        })
      )) as [MeshTest.Node, MeshTest.Node, MeshTest.Node]
      yield* advance(1_500)
      const remotes = [
        ok("b", yield* b.mesh.stats, "http://127.0.0.12:6632"),
        ok("c", yield* c.mesh.stats, "127.0.0.13:6632")
      ]
      const first = yield* viewFrom(a, remotes)
      assert.deepStrictEqual(
        first.nodes.map((node) => node.id),
        ["a", "b", "c", "127.0.0.11:6633"],
        "a itself is known by the others' lists only: this machine's names are not 127.0.0.11"
      )
      assert.strictEqual(first.nodes.find((node) => node.id === "b")!.address, "127.0.0.12:6633")
      const hostsKnown = ClusterView.build({
        self: yield* a.mesh.stats,
        members: yield* a.mesh.members,
        remotes,
        addresses: new Map(),
        local: noMetrics,
        now: 0,
        hosts: ["127.0.0.11"]
      })
      assert.deepStrictEqual(
        hostsKnown.nodes.map((node) => node.id),
        ["a", "b", "c"]
      )
      assert.strictEqual(hostsKnown.links.length, 6)
      // c stops answering: what was learned keeps it at its address.
      const learned = new Map(
        ClusterView.learn({ self: yield* a.mesh.stats, members: yield* a.mesh.members, remotes })
      )
      const later = yield* viewFrom(a, [remotes[0]!, failed("c", "unreachable")], learned)
      assert.deepStrictEqual(
        later.nodes.map((node) => node.id),
        ["a", "b", "c", "127.0.0.11:6633"]
      )
      assert.strictEqual(later.nodes.find((node) => node.id === "c")!.state, "no_answer")
    })
  )

  it.effect(
    "a peer killed before the page is ever opened: three nodes, the dead one by its name, down at once",
    () =>
      Effect.gen(function* () {
        // Listed by address (not by server id), legacy auth: only a peer's own stats say which address
        // is which server, and a dead peer can no longer say it.
        const network = yield* MeshTest.network
        const hosts = { a: "127.0.0.11", b: "127.0.0.12", c: "127.0.0.13" } as const
        const names = ["a", "b", "c"] as const
        const scopes = { a: yield* Scope.make(), b: yield* Scope.make(), c: yield* Scope.make() }
        yield* Effect.addFinalizer(() =>
          Effect.forEach(names, (name) => Scope.close(scopes[name], Exit.void), { discard: true })
        )
        const nodes: Record<string, MeshTest.Node> = {}
        for (const name of names)
          nodes[name] = yield* MeshTest.node(network, {
            serverId: name,
            host: hosts[name],
            peers: names.filter((n) => n !== name).map((n) => hosts[n]),
            config: { ...durations, advertiseHost: hosts[name] }
          }).pipe(Scope.provide(scopes[name]))
        const [a, c] = [nodes.a!, nodes.c!]
        // c's stats route, as the page's request would reach each peer's: none once the peer is gone.
        const gone = new Set<string>()
        const ask: PeerBook.Ask = (serverId, httpAddr) => {
          const name = names.find((n) => httpAddr === `http://${hosts[n]}:6632`)
          return name === undefined || gone.has(name)
            ? Effect.fail(new StatsFetchError({ reason: "unreachable", detail: "ECONNREFUSED" }))
            : Effect.filterOrElse(
                nodes[name]!.mesh.stats,
                (stats) => stats.server_id === serverId,
                () => Effect.die(new Error("another node's stats"))
              )
        }
        yield* PeerBook.learn(c.mesh, { ask })
        yield* advance(1_500)
        // b is killed; nobody has opened c's page yet.
        gone.add("b")
        yield* Scope.close(scopes.b, Exit.void)
        yield* advance(300)

        const viewOfC = (addresses: ReadonlyMap<string, string>) =>
          Effect.gen(function* () {
            return ClusterView.build({
              self: yield* c.mesh.stats,
              members: yield* c.mesh.members,
              remotes: [
                ok("a", yield* a.mesh.stats, "http://127.0.0.11:6632"),
                failed("b", "unreachable", "http://127.0.0.12:6632")
              ],
              addresses,
              local: noMetrics,
              now: 0,
              hosts: [hosts.c]
            })
          })
        // What a page that learns only while open draws: b's entry as a fourth node, by its address.
        const lazy = yield* viewOfC(new Map())
        assert.deepStrictEqual(
          lazy.nodes.map((node) => node.id),
          ["c", "a", "b", "127.0.0.12:6633"]
        )

        // Within the dead threshold: c still hears b, but its stats and c's link to it both fail.
        const early = yield* viewOfC(PeerBook.bookOf(c.mesh).addresses)
        assert.deepStrictEqual(
          early.nodes.map((node) => [node.id, node.state, node.address]),
          [
            ["c", "up", "127.0.0.13:6633"],
            ["a", "up", "127.0.0.11:6633"],
            ["b", "down", "127.0.0.12:6633"]
          ]
        )
        const b = early.nodes.find((node) => node.id === "b")!
        assert.deepStrictEqual([b.fetch.status, b.heard?.alive], ["unreachable", true])
        const { links } = states(early)
        for (const key of ["a->b", "b->a", "b->c", "c->b"]) assert.strictEqual(links[key], "down", key)
        assert.strictEqual(links["a->c"], "linked")
        assert.strictEqual(links["c->a"], "linked")

        // Past the dead threshold: the same three, b heard dead.
        yield* advance(6_000)
        const late = yield* viewOfC(PeerBook.bookOf(c.mesh).addresses)
        assert.deepStrictEqual(states(late).nodes, { a: "up", b: "down", c: "up" })
        assert.strictEqual(late.nodes.find((node) => node.id === "b")!.heard?.alive, false)
      })
  )

  it.effect("a peer's body naming thousands of servers leaves the view at 256 nodes", () =>
    Effect.gen(function* () {
      const { a, b } = yield* three
      const honest = yield* b.mesh.stats
      if (!honest.enabled) return assert.fail("b is active")
      const servers = Array.from({ length: 5000 }, (_, i) => ({
        server_id: `ghost-${i}`,
        alive: true,
        last_seen_ms_ago: 1,
        key_id: null,
        heard_on: ["tcp" as const]
      }))
      const view = yield* viewFrom(a, [ok("b", { ...honest, servers: [...honest.servers, ...servers] })])
      assert.strictEqual(view.nodes.length, 256)
      assert.isTrue(view.links.every((link) => view.nodes.some((node) => node.id === link.from)))
    })
  )

  it.effect("the list's events: peers, links, health, members, refusals; wakes are not listed", () =>
    Effect.sync(() => {
      const line = (event: Parameters<typeof ClusterView.eventOf>[0]) => ClusterView.eventOf(event, "a", 5)
      assert.deepStrictEqual(line({ _tag: "PeerDown", serverId: "b" }), {
        at: 5,
        tag: "PeerDown",
        subject: "b",
        detail: "silent past the dead threshold: dead",
        tone: "bad"
      })
      assert.strictEqual(line({ _tag: "HealthChanged", from: "degraded", to: "clustered" })?.tone, "good")
      assert.strictEqual(line({ _tag: "HealthChanged", from: "clustered", to: "isolated" })?.tone, "bad")
      assert.include(
        line({ _tag: "HandshakeFailed", remote: "127.0.0.1:5", reason: "bad_mac" })?.detail ?? "",
        "bad_mac"
      )
      assert.strictEqual(line({ _tag: "MemberJoined", peer: "x:1", foundBy: "dns" })?.detail, "joined (dns)")
      assert.isUndefined(
        line({ _tag: "Wake", from: "b", item: { queue: "q", partition: "p", tenant: Option.none() } })
      )
      // A peer's long string is cut: a message stays small whatever a peer says.
      assert.isAtMost(line({ _tag: "LinkDown", peer: "x".repeat(5000), reason: "y" })!.subject.length, 201)
    })
  )
})
