/**
 * The real CLI (`dist/cli.js`, built by `npm run build` / `npm ci`) as child processes over loopback:
 * the stdin/stdout contract of `node`, its routes, its exits, `stats`, and a brief `demo`.
 */
import * as Os from "node:os"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Schedule, Schema } from "effect"
import * as HttpRoutes from "../src/HttpRoutes.js"
import * as MeshStats from "../src/MeshStats.js"
import { type CliProcess, ensureBuilt, isListening, Listening, runCli, spawnCli } from "./fixtures/cli.js"
import { freePort } from "./fixtures/cluster.js"

/** Tenants are UUIDs (the default `tenants: "uuid"`). */
const ACME = "ac3e0000-0000-4000-8000-00000000ac3e"
const GLOBEX = "910be000-0000-4000-8000-0000000910be"

const decodeJson = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Unknown))
/** The body without what moves between two requests: how long ago each peer was heard, the uptime. */
const sinceless = (body: string) => body.replace(/"(last_seen_ms_ago|uptime_ms)":\d+/g, '"$1":0')
const decodeStats = Schema.decodeUnknownSync(Schema.fromJsonString(MeshStats.StatsBody))
const decodeListening = Schema.decodeUnknownSync(Listening)

const getText = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(url)
    return { status: response.status, body: await response.text() }
  })

/** Waits for exactly this stdout line: the documented key order is part of the contract. */
const expectLine = (
  node: CliProcess,
  expected: Record<string, unknown>,
  within: Duration.Input = Duration.seconds(30)
) => node.waitForLine((line) => line === JSON.stringify(expected), within)

/** Start-up and the first dial can take a while on a loaded machine (dial backoff runs to 5 s). */
const STARTUP = Duration.seconds(60)

const nodeEnv = (options: {
  readonly id: string
  readonly port: number
  readonly http: number
  readonly peers?: ReadonlyArray<number>
}): Record<string, string> => ({
  QUEEN_SERVER_ID: options.id,
  QUEEN_MESH_PORT: String(options.port),
  QUEEN_MESH_HTTP_PORT: String(options.http),
  QUEEN_MESH_BIND_ADDR: "127.0.0.1",
  QUEEN_MESH_HTTP_HOST: "127.0.0.1",
  QUEEN_MESH_PEERS: (options.peers ?? []).map((port) => `127.0.0.1:${port}`).join(","),
  QUEEN_SYNC_SECRET: "cli-test-secret",
  // Idle links stay quiet during the test, so the counters hold still between two requests.
  QUEEN_SYNC_HEARTBEAT_MS: "60000",
  QUEEN_SYNC_DEAD_THRESHOLD_MS: "120000"
})

/** Every stdin command kind, from `from` to `to`, with the lines `to` must print. */
const exchange = (from: CliProcess, fromId: string, to: CliProcess, queue: string) =>
  Effect.gen(function* () {
    const sends: Array<[Record<string, unknown>, ReadonlyArray<Record<string, unknown>>]> = [
      [
        { op: "message_available", queue, partition: "p0", tenant: ACME },
        [{ event: "wake", from: fromId, tenant: ACME, queue, partition: "p0" }]
      ],
      [
        { op: "message_available", queue, partition: "p1" },
        [{ event: "wake", from: fromId, tenant: null, queue, partition: "p1" }]
      ],
      [
        {
          op: "message_available_batch",
          items: [
            { queue, partition: "b0", tenant: GLOBEX },
            { queue, partition: "b1", tenant: null }
          ]
        },
        [
          { event: "wake", from: fromId, tenant: GLOBEX, queue, partition: "b0" },
          { event: "wake", from: fromId, tenant: null, queue, partition: "b1" }
        ]
      ],
      [
        { op: "hotlist_dirty", queue, partition: "h0", tenant: ACME },
        [{ event: "hotlist_dirty", from: fromId, tenant: ACME, queue, partition: "h0" }]
      ],
      [
        { op: "queue_config_set", queue, tenant: ACME },
        [{ event: "queue_config_invalidated", from: fromId, op: "set", tenant: ACME, queue }]
      ],
      [
        { op: "queue_config_delete", queue },
        [{ event: "queue_config_invalidated", from: fromId, op: "delete", tenant: null, queue }]
      ],
      [{ op: "maintenance", enabled: true }, [{ event: "maintenance", from: fromId, enabled: true }]],
      [{ op: "pop_maintenance", enabled: true }, [{ event: "pop_maintenance", from: fromId, enabled: true }]]
    ]
    for (const [command] of sends) yield* from.send(JSON.stringify(command))
    for (const [, expected] of sends) {
      for (const line of expected) yield* expectLine(to, line)
    }
  })

describe("queen-mesh node", () => {
  it.live(
    "two nodes exchange every command kind in both directions and serve the stats routes",
    () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        const [portA, portB, httpA, httpB] = [
          yield* freePort,
          yield* freePort,
          yield* freePort,
          yield* freePort
        ]
        const a = yield* spawnCli(
          ["node"],
          nodeEnv({ id: "node-a", port: portA, http: httpA, peers: [portB] })
        )
        const b = yield* spawnCli(
          ["node"],
          nodeEnv({ id: "node-b", port: portB, http: httpB, peers: [portA] })
        )

        // `listening` comes first, once both listeners are up.
        yield* expectLine(
          a,
          { event: "listening", server_id: "node-a", port: portA, http_port: httpA },
          STARTUP
        )
        yield* expectLine(
          b,
          { event: "listening", server_id: "node-b", port: portB, http_port: httpB },
          STARTUP
        )
        assert.isTrue(isListening(a.lines[0] ?? ""))
        assert.isTrue(isListening(b.lines[0] ?? ""))
        yield* expectLine(a, { event: "peer_up", server_id: "node-b" }, STARTUP)
        yield* expectLine(b, { event: "peer_up", server_id: "node-a" }, STARTUP)

        yield* exchange(a, "node-a", b, "orders")
        yield* exchange(b, "node-b", a, "payments")

        // A bad line is refused on stderr and the node carries on.
        yield* a.send("this is not json")
        yield* a.send(JSON.stringify({ op: "maintenance" }))
        yield* a.waitForStderr(
          (text) => text.includes("ignored a bad stdin command") && text.includes("enabled")
        )
        yield* a.send(JSON.stringify({ op: "maintenance", enabled: false }))
        yield* expectLine(b, { event: "maintenance", from: "node-a", enabled: false })

        // The stats routes: the same body on both, decoded by the documented Schema.
        const first = yield* getText(`http://127.0.0.1:${httpA}${HttpRoutes.paths.sharedStateStats}`)
        const second = yield* getText(`http://127.0.0.1:${httpA}${HttpRoutes.paths.interInstanceStats}`)
        assert.strictEqual(first.status, 200)
        // The same body, but for how long ago each peer was last heard, which moves between the two requests.
        assert.deepStrictEqual(decodeJson(sinceless(first.body)), decodeJson(sinceless(second.body)))
        const stats = decodeStats(first.body)
        assert.isTrue(stats.enabled)
        if (stats.enabled) {
          assert.strictEqual(stats.server_id, "node-a")
          assert.strictEqual(stats.port, portA)
          assert.deepStrictEqual(
            stats.peers.map((peer) => [peer.host, peer.port, peer.connected]),
            [["127.0.0.1", portB, true]]
          )
          assert.strictEqual(stats.servers_alive, 1)
          assert.isAtLeast(stats.messages_sent, 8)
          assert.isAtLeast(stats.messages_received, 8)
          // B set both flags on A; A then turned maintenance off again, locally and on B.
          assert.isFalse(stats.maintenance_mode)
          assert.isTrue(stats.pop_maintenance_mode)
        }
        const shared = yield* getText(`http://127.0.0.1:${httpB}${HttpRoutes.paths.sharedState}`)
        assert.strictEqual(shared.status, 200)
        assert.deepStrictEqual(decodeJson(shared.body), {
          enabled: false,
          reason: "single_node_segments_broker",
          maintenance_mode: false,
          pop_maintenance_mode: true
        })
        const missing = yield* getText(`http://127.0.0.1:${httpB}/nope`)
        assert.strictEqual(missing.status, 404)
        assert.deepStrictEqual(decodeJson(missing.body), { error: "not_found", method: "GET", path: "/nope" })

        // `queen-mesh stats`: a table, and the raw body with --json.
        const table = yield* runCli(["stats", `127.0.0.1:${httpA}`])
        assert.strictEqual(table.code, 0, table.stderr)
        for (const text of [
          "node-a",
          `127.0.0.1:${portB}`,
          "CONNECTED",
          "yes",
          "servers alive",
          "pop maintenance on"
        ]) {
          assert.include(table.stdout, text)
        }
        const raw = yield* runCli(["stats", "--json", `http://127.0.0.1:${httpB}`])
        assert.strictEqual(raw.code, 0, raw.stderr)
        assert.strictEqual(decodeStats(raw.stdout).server_id, "node-b")
        const unreachable = yield* runCli(["stats", `127.0.0.1:${yield* freePort}`])
        assert.notStrictEqual(unreachable.code, 0)
        assert.include(unreachable.stderr, "queen-mesh stats:")

        // stdout carried nothing but JSON lines.
        for (const node of [a, b]) for (const line of node.lines) decodeJson(line)

        a.child.kill("SIGTERM")
        b.child.kill("SIGTERM")
        assert.deepStrictEqual(yield* a.waitForExit(), { code: 0, signal: null })
        assert.deepStrictEqual(yield* b.waitForExit(), { code: 0, signal: null })
      }),
    180_000
  )

  it.live(
    "--quiet prints only listening and peer lines; EOF on stdin does not stop the node; SIGTERM exits 0",
    () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        const [portQ, portP] = [yield* freePort, yield* freePort]
        // Fast heartbeats, so a peer that goes away is reported dead within seconds; a dead threshold that
        // a stalled process on a busy machine does not reach while the peer is up.
        const fast = { QUEEN_SYNC_HEARTBEAT_MS: "100", QUEEN_SYNC_DEAD_THRESHOLD_MS: "5000" }
        // HTTP on ephemeral ports: the listening line says which.
        const quiet = yield* spawnCli(["node", "--quiet"], {
          ...nodeEnv({ id: "quiet", port: portQ, http: 0, peers: [portP] }),
          ...fast
        })
        const loud = yield* spawnCli(["node"], {
          ...nodeEnv({ id: "loud", port: portP, http: 0, peers: [portQ] }),
          ...fast
        })
        const listening = decodeListening(yield* quiet.waitForLine(isListening, STARTUP))
        assert.strictEqual(listening.port, portQ)
        assert.isAbove(listening.http_port, 0)
        yield* expectLine(quiet, { event: "peer_up", server_id: "loud" }, STARTUP)
        yield* expectLine(loud, { event: "peer_up", server_id: "quiet" }, STARTUP)

        quiet.child.stdin?.end()
        yield* loud.send(JSON.stringify({ op: "message_available", queue: "q", partition: "p" }))
        yield* loud.send(JSON.stringify({ op: "maintenance", enabled: true }))
        // After EOF the quiet node still applies frames (its flag flips) and serves, printing nothing.
        const sharedState = `http://127.0.0.1:${listening.http_port}${HttpRoutes.paths.sharedState}`
        const decodeShared = Schema.decodeUnknownSync(Schema.fromJsonString(HttpRoutes.SharedStateBody))
        yield* Effect.flatMap(getText(sharedState), ({ body }) =>
          decodeShared(body).maintenance_mode
            ? Effect.void
            : Effect.fail(new Error("maintenance not applied"))
        ).pipe(Effect.retry({ times: 1200, schedule: Schedule.spaced(Duration.millis(50)) }), Effect.orDie)
        const expected: Array<unknown> = [
          { event: "listening", server_id: "quiet", port: portQ, http_port: listening.http_port },
          { event: "peer_up", server_id: "loud" }
        ]
        assert.deepStrictEqual(
          quiet.lines.map((line) => decodeJson(line)),
          expected
        )
        assert.strictEqual(quiet.child.exitCode, null)

        // SIGINT stops the loud node; the quiet one still reports the peer going dead.
        loud.child.kill("SIGINT")
        assert.deepStrictEqual(yield* loud.waitForExit(), { code: 0, signal: null })
        yield* expectLine(quiet, { event: "peer_down", server_id: "loud" })
        assert.deepStrictEqual(
          quiet.lines.map((line) => decodeJson(line)),
          [...expected, { event: "peer_down", server_id: "loud" }]
        )
        quiet.child.kill("SIGTERM")
        assert.deepStrictEqual(yield* quiet.waitForExit(), { code: 0, signal: null })
      }),
    180_000
  )

  it.live(
    "http_addr names where the routes answer: the bound port (ephemeral too) unless PORT is set",
    () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        const [portA, portB, portC] = [yield* freePort, yield* freePort, yield* freePort]
        // a: routes on an ephemeral port, no PORT; c: PORT set, upstream's meaning (the broker's server).
        const a = yield* spawnCli(["node"], nodeEnv({ id: "node-a", port: portA, http: 0, peers: [portB] }))
        const c = yield* spawnCli(["node"], {
          ...nodeEnv({ id: "node-c", port: portC, http: 0, peers: [portB] }),
          PORT: "7199"
        })
        const b = yield* spawnCli(
          ["node", "--ack"],
          nodeEnv({ id: "node-b", port: portB, http: 0, peers: [portA, portC] })
        )
        const httpA = decodeListening(yield* a.waitForLine(isListening, STARTUP)).http_port
        yield* c.waitForLine(isListening, STARTUP)
        yield* b.waitForLine(isListening, STARTUP)
        assert.notStrictEqual(httpA, 6632)
        yield* expectLine(b, { event: "peer_up", server_id: "node-a" }, STARTUP)
        yield* expectLine(b, { event: "peer_up", server_id: "node-c" }, STARTUP)
        yield* b.send(JSON.stringify({ op: "eph_members" }))
        const listed = yield* b.waitForLine((line) => line.startsWith('{"event":"eph_members"'))
        const members = (
          decodeJson(listed) as { members: ReadonlyArray<{ server_id: string; http_addr: string }> }
        ).members
        assert.deepStrictEqual(
          members.map((member) => [member.server_id, member.http_addr]),
          [
            ["node-a", `http://127.0.0.1:${httpA}`],
            ["node-c", `http://${Os.hostname()}:7199`]
          ]
        )
        // What a advertises answers: its stats route, on the port it was given.
        const answered = yield* getText(`http://127.0.0.1:${httpA}${HttpRoutes.paths.sharedStateStats}`)
        assert.strictEqual(answered.status, 200)
        const stats = decodeStats(answered.body)
        assert.strictEqual(stats.server_id, "node-a")
        // The start-up log says the same address.
        assert.include(a.stderr(), `http_addr=http://127.0.0.1:${httpA}`)
      }),
    60_000
  )

  it.live("a node without peers binds no mesh port and says so", () =>
    Effect.gen(function* () {
      yield* ensureBuilt
      const solo = yield* spawnCli(["node"], {
        QUEEN_SERVER_ID: "solo",
        QUEEN_MESH_PORT: "0",
        QUEEN_MESH_HTTP_PORT: "0"
      })
      const listening = decodeListening(yield* solo.waitForLine(isListening, STARTUP))
      assert.strictEqual(listening.port, null)
      const stats = yield* getText(
        `http://127.0.0.1:${listening.http_port}${HttpRoutes.paths.interInstanceStats}`
      )
      assert.deepInclude(decodeJson(stats.body), {
        enabled: false,
        reason: "no_peers",
        server_id: "solo",
        transport: "tcp-mesh",
        maintenance_mode: false,
        pop_maintenance_mode: false
      })
      solo.child.kill("SIGTERM")
      assert.deepStrictEqual(yield* solo.waitForExit(), { code: 0, signal: null })
    })
  )

  it.live("a bad environment value exits non-zero with one line naming the variable", () =>
    Effect.gen(function* () {
      yield* ensureBuilt
      const cases = [
        ["QUEEN_MESH_PORT", "abc"],
        ["QUEEN_MESH_HTTP_PORT", "70000"],
        ["QUEEN_SYNC_DEAD_THRESHOLD_MS", "soon"]
      ] as const
      const results = yield* Effect.forEach(cases, ([name, value]) => runCli(["node"], { [name]: value }), {
        concurrency: "unbounded"
      })
      results.forEach((result, i) => {
        const name = cases[i]![0]
        assert.strictEqual(result.code, 2, result.stderr)
        assert.strictEqual(result.stdout, "")
        const lines = result.stderr.trim().split("\n")
        assert.strictEqual(lines.length, 1, result.stderr)
        assert.include(lines[0], name)
      })
    })
  )
})

describe("queen-mesh demo", () => {
  it.live(
    "runs to completion off a TTY, in plain lines, and wakes cross replicas",
    () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        const result = yield* runCli(["demo", "--duration", "3"], {}, Duration.seconds(120))
        assert.strictEqual(result.code, 0, result.stderr)
        // Plain lines: no cursor movement or colour off a TTY.
        assert.notInclude(result.stdout, "\x1b[")
        const wakes = /cross-replica wakes: (\d+) received/.exec(result.stdout)
        const seen = /healthy mesh: (\d+) remote messages seen by parked pops/.exec(result.stdout)
        assert.isNotNull(wakes, result.stdout)
        assert.isNotNull(seen, result.stdout)
        assert.isAbove(Number(wakes![1]), 0)
        assert.isAbove(Number(seen![1]), 0)
        assert.include(result.stdout, "cut node-c's mesh link")
        // A legend of the columns; logs on stderr only, and only warnings and above.
        assert.include(result.stdout, "linked/unlinked:")
        assert.include(result.stdout, "backoff only:")
        for (const line of result.stderr.split("\n").filter((l) => l !== "")) {
          assert.match(line, /level=(WARN|ERROR|FATAL) /, line)
        }
      }),
    180_000
  )
})
