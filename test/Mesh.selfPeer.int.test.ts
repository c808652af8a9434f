/**
 * A peer list that names the node itself, as upstream Queen's Kubernetes recipe gives every replica
 * (`queen-0…,queen-1…,queen-2…` on all three): the entry is recognised as this node by its own HELLO,
 * never dialled again, said once at info level, and counts for nothing (not a link, not down, not in
 * readiness), while a peer that really shares our id is still refused and warned about.
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Logger, Option, References, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as HttpRoutes from "../src/HttpRoutes.js"
import type { ActiveStats } from "../src/MeshStats.js"
import * as MeshTest from "../src/MeshTest.js"
import { ensureBuilt, isListening, Listening, spawnCli } from "./fixtures/cli.js"
import { freePort } from "./fixtures/cluster.js"
import { active } from "./fixtures/memory.js"
import { SECRET } from "./fixtures/secret.js"

/** A tenant is a UUID (the default `tenants: "uuid"`). */
const ACME = "ac3e0000-0000-4000-8000-00000000ac3e"

interface Logged {
  readonly level: string
  readonly message: string
  readonly serverId: string
}

/** A logger that keeps every line with its level and the node's server id. */
const capture = Effect.sync(() => {
  const lines: Array<Logged> = []
  const logger = Logger.make(({ fiber, logLevel, message }) => {
    const serverId = fiber.getRef(References.CurrentLogAnnotations).server_id
    lines.push({
      // Effect 3's labels, as the assertions read them.
      level: logLevel.toUpperCase(),
      message: Array.isArray(message) ? String(message[0]) : String(message),
      serverId: serverId === undefined ? "" : String(serverId)
    })
  })
  return { lines, layer: Logger.layer([logger], { mergeWithExisting: true }) }
})

const advance = (millis: number, step = 50) =>
  Effect.gen(function* () {
    for (let t = 0; t < millis; t += step) {
      yield* TestClock.adjust(step)
      yield* MeshTest.settle
    }
  })

const statsOf = (node: MeshTest.Node): Effect.Effect<ActiveStats> => Effect.map(node.mesh.stats, active)

describe("a peer list that names the node itself", () => {
  it.effect("three nodes with one uniform list link as a full mesh of the other two, quietly", () =>
    Effect.gen(function* () {
      const log = yield* capture
      const network = yield* MeshTest.network
      const names = ["queen-0", "queen-1", "queen-2"]
      const nodes: Array<MeshTest.Node> = []
      for (const name of names) {
        nodes.push(
          yield* MeshTest.node(network, { serverId: name, peers: names }).pipe(
            Effect.provide(log.layer),
            Effect.provideService(References.MinimumLogLevel, "Debug")
          )
        )
      }
      yield* TestClock.adjust(1)
      yield* MeshTest.settle
      // Readiness is sampled all along: once both others are up it never says otherwise.
      let readySince: number | undefined
      for (let t = 0; t < 120_000; t += 500) {
        yield* TestClock.adjust(500)
        yield* MeshTest.settle
        const ready = yield* Effect.forEach(nodes, (node) =>
          Effect.map(statsOf(node), (stats) => HttpRoutes.readiness(stats))
        )
        const allUp = ready.every((r) => r.ready && r.links_up === 2 && r.peer_count === 2)
        if (readySince === undefined && allUp) readySince = t
        if (readySince !== undefined)
          assert.isTrue(allUp, `readiness changed at ${t} ms: ${JSON.stringify(ready)}`)
      }
      assert.isDefined(readySince)
      assert.isBelow(readySince!, 2_000)

      for (const [i, node] of nodes.entries()) {
        const stats = yield* statsOf(node)
        const self = stats.peers.filter((peer) => peer.self)
        assert.deepStrictEqual(
          self.map((peer) => [peer.host, peer.connected, peer.handed, peer.reconnects]),
          [[names[i], false, 0, 0]]
        )
        for (const peer of stats.peers.filter((p) => !p.self)) {
          assert.isTrue(peer.connected)
          assert.strictEqual(peer.reconnects, 0)
        }
        assert.strictEqual(stats.handshake_failures, 0)
        assert.strictEqual(stats.rejections.own_server_id, 0)
        assert.strictEqual(stats.inbound.self_dials, 1)
        // Self is not a server heard from: the others only, both alive.
        assert.deepStrictEqual(
          stats.servers.map((server) => [server.server_id, server.alive]),
          names.filter((name) => name !== names[i]).map((name) => [name, true])
        )
        assert.strictEqual(stats.servers_alive, 2)
        assert.strictEqual(stats.servers_dead, 0)
      }
      // One connection to each node from each node, itself included, in two minutes.
      const dials = yield* network.network.dials
      for (const name of names) {
        assert.strictEqual(
          dials.filter((dial) => dial.host === name && dial.outcome === "connected").length,
          3
        )
      }

      const lines = log.lines
      for (const name of names) {
        const own = lines.filter((line) => line.serverId === name)
        const warnings = own.filter((line) => line.level === "WARN" || line.level === "ERROR")
        assert.isAtMost(warnings.length, 1, JSON.stringify(warnings))
        // Said once at info level (the listener's side of it is a debug line).
        const said = own.filter((line) => line.level === "INFO" && line.message.includes("names this node"))
        assert.strictEqual(said.length, 1)
      }
    })
  )

  it.effect("wakes cross between the nodes of a uniform list; nothing is sent to self", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const names = ["a", "b", "c"]
      const a = yield* MeshTest.node(network, { serverId: "a", peers: names })
      const b = yield* MeshTest.node(network, { serverId: "b", peers: names })
      yield* MeshTest.node(network, { serverId: "c", peers: names })
      yield* advance(1_000)
      const pop = yield* Effect.forkChild(
        b.waker.awaitWake({ queue: "orders", tenant: Option.some(ACME) }, { maxWait: "1 minute" })
      )
      yield* MeshTest.settle
      yield* a.mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: ACME })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      const stats = yield* statsOf(a)
      const self = stats.peers.find((peer) => peer.self)!
      assert.strictEqual(self.handed, 0)
      assert.strictEqual(self.dropped_down, 0)
      assert.strictEqual(stats.messages_dropped, 0)
    })
  )

  it.effect("in every auth mode, over TLS-free in-memory links, self is recognised", () =>
    Effect.gen(function* () {
      for (const auth of ["legacy", "permissive", "required"] as const) {
        const network = yield* MeshTest.network
        const a = yield* MeshTest.node(network, { serverId: "a", peers: ["a", "b"], config: { auth } })
        yield* MeshTest.node(network, { serverId: "b", peers: ["a", "b"], config: { auth } })
        yield* advance(3_000)
        const stats = yield* statsOf(a)
        assert.deepStrictEqual(
          stats.peers.map((peer) => [peer.host, peer.self, peer.connected]),
          [
            ["a", true, false],
            ["b", false, true]
          ],
          auth
        )
        assert.strictEqual(stats.handshake_failures, 0, auth)
      }
    })
  )

  it.effect("a node whose only peer is itself is ready, with no other peer to wait for", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["a"] })
      yield* advance(5_000)
      const stats = yield* statsOf(a)
      assert.deepStrictEqual(HttpRoutes.readiness(stats), {
        ready: true,
        status: "solo",
        reason: "no_peers",
        links_up: 0,
        peer_count: 0,
        expected: 0,
        healthy: 0
      })
      assert.strictEqual(stats.handshake_failures, 0)
      assert.strictEqual((yield* network.network.dials).length, 1)
    })
  )

  it.effect("another node that shares our server id is still refused, and warned about once a minute", () =>
    Effect.gen(function* () {
      const log = yield* capture
      const network = yield* MeshTest.network
      const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"] }).pipe(
        Effect.provide(log.layer),
        Effect.provideService(References.MinimumLogLevel, "Debug")
      )
      // A second node announcing the id "a" (misconfigured), listening as "a2" and dialling a.
      yield* MeshTest.node(network, { serverId: "a", peers: ["a"], config: { bindHost: "a2" } })
      yield* advance(130_000, 1_000)
      const stats = yield* statsOf(a)
      assert.isAbove(stats.rejections.own_server_id, 10)
      assert.strictEqual(stats.inbound.self_dials, 0)
      const warned = log.lines.filter(
        (line) => line.serverId === "a" && line.level === "WARN" && line.message.includes("server id")
      )
      assert.strictEqual(warned.length, 3)
    })
  )
})

// ---------------------------------------------------------------------------------------------
// real processes
// ---------------------------------------------------------------------------------------------

const ADDRESSES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"] as const

/** A private mount namespace with its own hosts file needs root and `unshare`; why not, or undefined. */
const namespaceUnavailable = ((): string | undefined => {
  if (process.getuid?.() !== 0)
    return "not root: a private mount namespace with its own hosts file needs root"
  try {
    execFileSync("unshare", ["-m", "--propagation", "private", "true"], { stdio: "ignore" })
    return undefined
  } catch (error) {
    return `unshare -m failed here: ${error instanceof Error ? error.message : String(error)}`
  }
})()

const fetchJson = (url: string) =>
  Effect.promise(() =>
    fetch(url).then(async (response) => ({ status: response.status, body: await response.json() }))
  )

/**
 * Three `queen-mesh node` processes on 127.0.0.2-4, one mesh port, all given the same peer list
 * (`peers`), each naming itself too; `wrap` runs each inside a command (a namespace).
 */
const uniformCluster = (peersOf: (port: number) => string, wrap: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    yield* ensureBuilt
    const port = yield* freePort
    const nodes = yield* Effect.forEach(ADDRESSES, (address, i) =>
      spawnCli(
        ["node", "--quiet"],
        {
          QUEEN_SERVER_ID: `queen-${i}`,
          QUEEN_MESH_PORT: String(port),
          QUEEN_MESH_BIND_ADDR: address,
          QUEEN_MESH_PEERS: peersOf(port),
          QUEEN_SYNC_SECRET: SECRET,
          QUEEN_MESH_HTTP_PORT: "0",
          QUEEN_MESH_LOG_FORMAT: "json",
          // The start-up window, long enough that a busy machine links well within it.
          QUEEN_SYNC_DEAD_THRESHOLD_MS: "15000"
        },
        wrap
      )
    )
    const http: Array<number> = []
    for (const node of nodes) {
      const line = yield* node.waitForLine(isListening)
      http.push(Schema.decodeUnknownSync(Listening)(line).http_port)
    }
    const stats = (i: number) =>
      Effect.map(
        fetchJson(`http://127.0.0.1:${http[i]}/internal/api/shared-state/stats`),
        (r) => r.body as ActiveStats
      )
    const ready = (i: number) => fetchJson(`http://127.0.0.1:${http[i]}/readyz`)
    // Started together, each is ready from its first answer on, starting until clustered: a rolling
    // restart's readiness probe never sees a healthy node as unready.
    const seen = new Set<string>()
    yield* MeshTest.eventually(
      Effect.map(Effect.forEach([0, 1, 2], ready), (answers) => {
        for (const answer of answers) {
          const body = answer.body as { readonly status: string }
          seen.add(`${answer.status} ${body.status}`)
        }
        return answers.every((answer) => (answer.body as { readonly status: string }).status === "clustered")
      }),
      "20 seconds"
    )
    assert.deepStrictEqual(
      [...seen].filter((entry) => entry !== "200 starting" && entry !== "200 clustered"),
      [],
      "only starting, then clustered, always ready"
    )
    // Each node links to the two others and hears them.
    yield* MeshTest.eventually(
      Effect.map(Effect.forEach([0, 1, 2], stats), (all) =>
        all.every((s) => s.peers.filter((p) => p.connected).length === 2 && s.servers_alive === 2)
      ),
      "60 seconds"
    )
    // Past a few heartbeats (two more frames from each peer, counted by every node), nothing flapped:
    // the counters below are totals since start, so a refusal or reconnect at any moment shows.
    const received = yield* Effect.forEach([0, 1, 2], (i) => Effect.map(stats(i), (s) => s.messages_received))
    yield* MeshTest.eventually(
      Effect.map(Effect.forEach([0, 1, 2], stats), (all) =>
        all.every((s, i) => s.messages_received >= received[i]! + 4)
      ),
      "60 seconds"
    )
    // "mesh link up" is said once a link has been up past the moment a refusing listener would have
    // closed it (a heartbeat interval and the auth-failure delay): a link that came up last may not
    // have said it yet when the frames above arrived.
    const linkUpsOf = (i: number) =>
      nodes[i]!.stderr()
        .split("\n")
        .filter((line) => line.includes('"mesh link up"'))
    yield* MeshTest.eventually(
      Effect.sync(() => [0, 1, 2].every((i) => linkUpsOf(i).length >= 2)),
      "30 seconds"
    )
    for (const i of [0, 1, 2]) {
      const r = yield* ready(i)
      assert.strictEqual(r.status, 200)
      assert.deepStrictEqual(r.body, {
        ready: true,
        status: "clustered",
        reason: "healthy",
        links_up: 2,
        peer_count: 2,
        expected: 2,
        healthy: 2
      })
    }
    for (const i of [0, 1, 2]) {
      const s = yield* stats(i)
      assert.strictEqual(s.peers.filter((peer) => peer.self).length, 1, JSON.stringify(s.peers))
      assert.strictEqual(s.handshake_failures, 0)
      assert.strictEqual(s.rejections.own_server_id, 0)
      assert.strictEqual(s.inbound.self_dials, 1)
      assert.deepStrictEqual(
        s.peers.map((peer) => peer.reconnects),
        [0, 0, 0]
      )
      const warnings = nodes[i]!.stderr()
        .split("\n")
        .filter((line) => line.includes('"level":"WARN"') || line.includes('"level":"ERROR"'))
      assert.deepStrictEqual(warnings, [])
      assert.strictEqual(
        nodes[i]!.stderr()
          .split("\n")
          .filter((line) => line.includes("names this node")).length,
        1
      )
      // The self entry is never logged as a link; the two real links are, once established.
      const linkUps = linkUpsOf(i)
      assert.strictEqual(linkUps.length, 2, linkUps.join("\n"))
      assert.isTrue(
        linkUps.every((line) => !line.includes(`queen-${i}.`) && !line.includes(`"${ADDRESSES[i]}:`)),
        linkUps.join("\n")
      )
    }
  })

describe("a uniform peer list across three processes over loopback TCP", () => {
  it.live("the three addresses listed, each node's own included", () =>
    uniformCluster((port) => ADDRESSES.map((address) => `${address}:${port}`).join(","), [])
  )

  it.skipIf(namespaceUnavailable !== undefined)(
    `names from a hosts file, as in upstream's Kubernetes recipe${namespaceUnavailable === undefined ? "" : ` (skipped: ${namespaceUnavailable})`}`,
    () =>
      Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            const dir = mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-hosts-"))
            yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
            const hosts = Path.join(dir, "hosts")
            writeFileSync(
              hosts,
              `127.0.0.1 localhost\n${ADDRESSES.map((address, i) => `${address} queen-${i}.queen-mesh`).join("\n")}\n`
            )
            const wrap = [
              "unshare",
              "-m",
              "--propagation",
              "private",
              "sh",
              "-c",
              'mount --bind "$0" /etc/hosts && exec "$@"',
              hosts
            ]
            yield* uniformCluster(
              (port) => ADDRESSES.map((_, i) => `queen-${i}.queen-mesh:${port}`).join(","),
              wrap
            )
          })
        )
      ),
    180_000
  )
})
