/**
 * DNS discovery on real processes: `queen-mesh node` processes on 127.0.0.2, 127.0.0.3 and 127.0.0.4,
 * one mesh port, each with `QUEEN_MESH_DISCOVERY=dns:<one name>` resolving to all three through a hosts
 * file (a private mount namespace with its own /etc/hosts, which needs root: where it cannot run, the
 * test says why it skipped, and `test/Discovery.test.ts` runs the same behaviour under `TestClock`).
 * They link as a full mesh with no self link; a fourth node added to the name is found and linked by
 * all. How soon (within two discovery intervals) is a matter of time, checked exactly under `TestClock`
 * in `test/Discovery.test.ts`; here the processes run on a machine that may be busy.
 */
import { execFileSync } from "node:child_process"
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import type { ActiveStats } from "../src/MeshStats.js"
import * as MeshTest from "../src/MeshTest.js"
import { ensureBuilt, isListening, Listening, spawnCli } from "./fixtures/cli.js"
import { freePort } from "./fixtures/cluster.js"
import { SECRET } from "./fixtures/secret.js"

const NAME = "queen-mesh-headless.test"
const ADDRESSES = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"] as const
const INTERVAL_MS = 1_000

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

const statsOf = (http: number) =>
  Effect.promise(() =>
    fetch(`http://127.0.0.1:${http}/internal/api/shared-state/stats`).then(
      (response) => response.json() as Promise<ActiveStats>
    )
  )

const linkedTo = (stats: ActiveStats) =>
  stats.peers
    .filter((peer) => peer.connected && !peer.self)
    .map((peer) => peer.host)
    .sort()

describe("DNS discovery across processes", () => {
  it.skipIf(namespaceUnavailable !== undefined)(
    `three nodes found by one name link as a full mesh; a fourth added to the name is found and linked by all${namespaceUnavailable === undefined ? "" : ` (skipped: ${namespaceUnavailable})`}`,
    () =>
      Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            yield* ensureBuilt
            const dir = mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-dns-"))
            yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
            const hosts = Path.join(dir, "hosts")
            // One name, one line per address (glibc returns them all with `multi on`, its default here).
            writeFileSync(
              hosts,
              `127.0.0.1 localhost\n${ADDRESSES.slice(0, 3)
                .map((address) => `${address} ${NAME}`)
                .join("\n")}\n`
            )
            const conf = Path.join(dir, "host.conf")
            writeFileSync(conf, "multi on\n")
            const wrap = [
              "unshare",
              "-m",
              "--propagation",
              "private",
              "sh",
              "-c",
              'mount --bind "$0" /etc/hosts && mount --bind "$1" /etc/host.conf && shift && exec "$@"',
              hosts,
              conf
            ]
            const port = yield* freePort
            const start = (i: number) =>
              Effect.gen(function* () {
                const node = yield* spawnCli(
                  ["node", "--quiet"],
                  {
                    QUEEN_SERVER_ID: `queen-${i}`,
                    QUEEN_MESH_PORT: String(port),
                    QUEEN_MESH_BIND_ADDR: ADDRESSES[i]!,
                    QUEEN_MESH_DISCOVERY: `dns:${NAME}`,
                    QUEEN_MESH_DISCOVERY_INTERVAL_MS: String(INTERVAL_MS),
                    QUEEN_SYNC_SECRET: SECRET,
                    QUEEN_MESH_HTTP_PORT: "0",
                    QUEEN_MESH_LOG_FORMAT: "json"
                  },
                  wrap
                )
                const line = yield* node.waitForLine(isListening)
                return { node, http: Schema.decodeUnknownSync(Listening)(line).http_port }
              })
            const nodes = yield* Effect.forEach([0, 1, 2], start)
            yield* MeshTest.eventually(
              Effect.map(
                Effect.forEach(nodes, (n) => statsOf(n.http)),
                (all) =>
                  all.every((stats, i) => {
                    const others = ADDRESSES.slice(0, 3).filter((_, j) => j !== i)
                    return (
                      JSON.stringify(linkedTo(stats)) === JSON.stringify([...others]) &&
                      stats.servers_alive === 2
                    )
                  })
              ),
              "60 seconds"
            )
            for (const [i, n] of nodes.entries()) {
              const stats = yield* statsOf(n.http)
              // The own address is an entry recognised as this node: never a link, dialled once.
              assert.deepStrictEqual(
                stats.peers.filter((peer) => peer.self).map((peer) => peer.host),
                [ADDRESSES[i] ?? ""]
              )
              assert.isTrue(stats.peers.every((peer) => peer.found_by === "dns"))
              assert.strictEqual(stats.inbound.self_dials, 1)
              assert.strictEqual(stats.health.status, "clustered")
            }

            // A fourth replica: its record first, then the process, as a headless Service publishes it.
            appendFileSync(hosts, `${ADDRESSES[3]} ${NAME}\n`)
            const fourth = yield* start(3)
            const all = [...nodes, fourth]
            // Every node links to it, found by a discovery round, and it to every node.
            yield* MeshTest.eventually(
              Effect.map(
                Effect.forEach(all, (n) => statsOf(n.http)),
                (stats) => stats.every((s) => linkedTo(s).length === 3)
              ),
              "60 seconds"
            )
            for (const n of nodes) {
              const fourthSeen = (yield* statsOf(n.http)).peers.find((peer) => peer.host === ADDRESSES[3])
              assert.deepStrictEqual([fourthSeen?.connected, fourthSeen?.found_by], [true, "dns"])
            }
          })
        )
      ),
    180_000
  )
})

describe("a discovery name that never resolves, on a real process", () => {
  it.skipIf(namespaceUnavailable !== undefined)(
    `the node is starting, then isolated with reason nothing_found: /readyz 503, stats and /metrics agree${namespaceUnavailable === undefined ? "" : ` (skipped: ${namespaceUnavailable})`}`,
    () =>
      Effect.runPromise(
        Effect.scoped(
          Effect.gen(function* () {
            yield* ensureBuilt
            const dir = mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-dns-"))
            yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(dir, { recursive: true, force: true })))
            // No DNS query leaves the machine: the resolver asks loopback, where nothing answers.
            const hosts = Path.join(dir, "hosts")
            writeFileSync(hosts, "127.0.0.1 localhost\n")
            const resolv = Path.join(dir, "resolv.conf")
            writeFileSync(resolv, "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n")
            const wrap = [
              "unshare",
              "-m",
              "--propagation",
              "private",
              "sh",
              "-c",
              'mount --bind "$0" /etc/hosts && mount --bind "$1" /etc/resolv.conf && shift && exec "$@"',
              hosts,
              resolv
            ]
            const node = yield* spawnCli(
              ["node", "--quiet"],
              {
                QUEEN_SERVER_ID: "queen-lost",
                QUEEN_MESH_PORT: String(yield* freePort),
                QUEEN_MESH_BIND_ADDR: "127.0.0.2",
                QUEEN_MESH_DISCOVERY: "dns:nothing.invalid",
                QUEEN_MESH_DISCOVERY_INTERVAL_MS: "500",
                QUEEN_SYNC_DEAD_THRESHOLD_MS: "2000",
                QUEEN_SYNC_SECRET: SECRET,
                QUEEN_MESH_HTTP_PORT: "0",
                QUEEN_MESH_LOG_FORMAT: "json"
              },
              wrap
            )
            const http = Schema.decodeUnknownSync(Listening)(yield* node.waitForLine(isListening)).http_port
            const get = (path: string) =>
              Effect.promise(() =>
                fetch(`http://127.0.0.1:${http}${path}`).then(async (r) => ({
                  status: r.status,
                  text: await r.text()
                }))
              )
            yield* MeshTest.eventually(
              Effect.map(get("/readyz"), (r) => r.status === 503),
              "20 seconds"
            )
            const ready = JSON.parse((yield* get("/readyz")).text) as { status: string; reason: string }
            assert.deepStrictEqual([ready.status, ready.reason], ["isolated", "nothing_found"])
            const stats = yield* statsOf(http)
            assert.deepStrictEqual([stats.health.status, stats.health.reason], ["isolated", "nothing_found"])
            assert.isAbove(stats.discovery?.failed_rounds ?? 0, 0)
            const metrics = (yield* get("/metrics")).text
            assert.match(metrics, /queen_mesh_health\{[^}]*status="isolated"[^}]*\} 1/)
            assert.match(metrics, /queen_mesh_health\{[^}]*status="solo"[^}]*\} 0/)
          })
        )
      ),
    60_000
  )
})
