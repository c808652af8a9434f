/**
 * `queen-mesh node` processes (the built `dist/cli.js`) on the PostgreSQL lane alone, over a real server
 * (embedded, or `QUEEN_MESH_TEST_PG_URL`): with only `QUEEN_MESH_PG_URL` set they bind no mesh port,
 * hear each other come up, wake each other, and each one's stats show the other two alive on the lane.
 * Bad lane variables exit 2 naming the variable, never echoing the connection string.
 */
import { assert } from "@effect/vitest"
import { Duration, Effect, Layer, Logger, Schema } from "effect"
import * as HttpRoutes from "../src/HttpRoutes.js"
import * as MeshStats from "../src/MeshStats.js"
import { type CliProcess, ensureBuilt, isListening, Listening, runCli, spawnCli } from "./fixtures/cli.js"
import { freePort } from "./fixtures/cluster.js"
import { layer } from "./fixtures/layer.js"
import * as Pg from "./fixtures/postgres.js"

const decodeStats = Schema.decodeUnknownSync(Schema.fromJsonString(MeshStats.StatsBody))
const decodeListening = Schema.decodeUnknownSync(Listening)

const getText = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(url)
    return { status: response.status, body: await response.text() }
  })

const STARTUP = Duration.seconds(60)

const laneEnv = (options: {
  readonly id: string
  readonly url: string
  readonly channel: string
  readonly http: number
}): Record<string, string> => ({
  QUEEN_SERVER_ID: options.id,
  QUEEN_MESH_PG_URL: options.url,
  QUEEN_MESH_PG_CHANNEL: options.channel,
  QUEEN_MESH_HTTP_PORT: String(options.http),
  QUEEN_MESH_HTTP_HOST: "127.0.0.1",
  QUEEN_SYNC_SECRET: "cli-lane-secret",
  QUEEN_SYNC_HEARTBEAT_MS: "200",
  // Well above a stalled process on a busy machine: the tests read liveness, never wait for a death.
  QUEEN_SYNC_DEAD_THRESHOLD_MS: "10000"
})

const expectLine = (node: CliProcess, expected: Record<string, unknown>, within = Duration.seconds(30)) =>
  node.waitForLine((line) => line === JSON.stringify(expected), within)

const TestLayer = Layer.merge(Pg.layer, Logger.layer([]))

layer(TestLayer, { excludeTestServices: true, timeout: "180 seconds" })(
  "queen-mesh node on the lane",
  (it) => {
    it.effect(
      "three nodes with only QUEEN_MESH_PG_URL: no port bound, wakes cross, stats show the others alive",
      () =>
        Effect.gen(function* () {
          yield* ensureBuilt
          const server = yield* Pg.PgServer
          const channel = `qm_cli_lane_${process.pid}`
          const ids = ["lane-a", "lane-b", "lane-c"] as const
          const http = [yield* freePort, yield* freePort, yield* freePort] as const
          const nodes: Array<CliProcess> = []
          for (let i = 0; i < 3; i++) {
            nodes.push(
              yield* spawnCli(["node"], laneEnv({ id: ids[i]!, url: server.url, channel, http: http[i]! }))
            )
          }
          for (let i = 0; i < 3; i++) {
            const node = nodes[i]!
            const line = yield* node.waitForLine(isListening, STARTUP)
            assert.deepStrictEqual(decodeListening(line), {
              event: "listening",
              server_id: ids[i]!,
              port: null,
              http_port: http[i]!
            })
            assert.isTrue(isListening(node.lines[0] ?? ""))
          }
          // Every node hears the other two come up on the lane.
          for (let i = 0; i < 3; i++) {
            for (let j = 0; j < 3; j++) {
              if (i !== j) yield* expectLine(nodes[i]!, { event: "peer_up", server_id: ids[j]! }, STARTUP)
            }
          }
          // A push on each wakes the other two.
          for (let i = 0; i < 3; i++) {
            const queue = `orders-${ids[i]}`
            yield* nodes[i]!.send(JSON.stringify({ op: "message_available", queue, partition: "p0" }))
            for (let j = 0; j < 3; j++) {
              if (i === j) continue
              yield* expectLine(nodes[j]!, {
                event: "wake",
                from: ids[i]!,
                tenant: null,
                queue,
                partition: "p0"
              })
            }
          }
          for (let i = 0; i < 3; i++) {
            const body = yield* getText(`http://127.0.0.1:${http[i]}${HttpRoutes.paths.sharedStateStats}`)
            assert.strictEqual(body.status, 200)
            const stats = decodeStats(body.body)
            assert.isTrue(stats.enabled)
            if (!stats.enabled) continue
            assert.strictEqual(stats.port, null)
            assert.deepStrictEqual(stats.peers, [])
            assert.strictEqual(stats.lane?.status, "up")
            assert.strictEqual(stats.lane?.channel, channel)
            assert.strictEqual(stats.lane?.members_alive, 2)
            assert.deepStrictEqual(
              [stats.health.status, stats.health.expected, stats.health.healthy, stats.health.lane],
              ["clustered", 2, 2, "up"]
            )
            // Upstream's server fields count the lane's members: a dashboard built on them sees the cluster.
            assert.deepStrictEqual([stats.servers_alive, stats.servers_dead], [2, 0])
            assert.deepStrictEqual(
              stats.servers.map((server) => [server.server_id, server.alive, server.heard_on.join("+")]),
              ids.filter((_, j) => j !== i).map((id) => [id, true, "lane"])
            )
            assert.deepStrictEqual(
              stats.lane?.members.map((member) => [member.server_id, member.found_by]),
              ids.filter((_, j) => j !== i).map((id) => [id, "lane"])
            )
            const ready = yield* getText(`http://127.0.0.1:${http[i]}${HttpRoutes.paths.ready}`)
            assert.strictEqual(ready.status, 200, ready.body)
            // `queen-mesh stats` shows the lane: its state and channel, its members and their liveness.
            const shown = yield* runCli(["stats", `127.0.0.1:${http[i]}`])
            assert.strictEqual(shown.code, 0, shown.stderr)
            assert.include(shown.stdout, "health clustered")
            assert.include(shown.stdout, `lane pg up  channel ${channel}`)
            assert.include(shown.stdout, "lane refused: none")
            assert.match(shown.stdout, /servers alive\s+2/)
            assert.notInclude(shown.stdout, "(no peer heard from yet)")
            for (const [j, id] of ids.entries()) {
              if (j === i) continue
              assert.match(shown.stdout, new RegExp(`${id}\\s+yes\\s+\\d+ ms ago\\s+lane\\b`))
            }
            // The start-up log says the lane is on, and never shows the connection string.
            const stderr = nodes[i]!.stderr()
            assert.include(stderr, "PostgreSQL lane")
            assert.include(stderr, `lane="pg channel ${channel}"`)
            assert.notInclude(stderr, server.url)
          }
        }),
      180_000
    )

    it.effect(
      "queen-mesh demo --lane pg: three nodes over its own embedded PostgreSQL, node-c cut off and back",
      () =>
        Effect.gen(function* () {
          yield* ensureBuilt
          const result = yield* runCli(["demo", "--lane", "pg", "--duration", "5"], {}, Duration.seconds(150))
          assert.strictEqual(result.code, 0, result.stderr)
          assert.notInclude(result.stdout, "\x1b[")
          assert.include(result.stdout, "starting an embedded PostgreSQL")
          assert.include(result.stdout, "no mesh port")
          assert.include(result.stdout, "cut node-c's lane")
          assert.include(result.stdout, "lane up/down:")
          const wakes = /cross-replica wakes: (\d+) received over the lane/.exec(result.stdout)
          assert.isNotNull(wakes, result.stdout)
          assert.isAbove(Number(wakes![1]), 0)
          for (const line of result.stderr.split("\n").filter((l) => l !== "")) {
            assert.match(line, /level=(WARN|ERROR|FATAL) /, line)
          }
          const bad = yield* runCli(["demo", "--lane", "udp"])
          assert.strictEqual(bad.code, 2)
          assert.include(bad.stderr, "--lane takes tcp or pg")
        }),
      180_000
    )

    it.effect("bad lane variables exit 2 naming the variable, never echoing the connection string", () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        for (const [env, variable] of [
          [{ QUEEN_MESH_PG_URL: "mysql://user:hunter2@db/queen" }, "QUEEN_MESH_PG_URL"],
          [{ QUEEN_MESH_PG_URL: "user:hunter2@db" }, "QUEEN_MESH_PG_URL"],
          [
            {
              QUEEN_MESH_PG_URL: "postgres://user:hunter2@127.0.0.1:1/queen",
              QUEEN_MESH_PG_CHANNEL: "c".repeat(64)
            },
            "QUEEN_MESH_PG_CHANNEL"
          ]
        ] as const) {
          const result = yield* runCli(["node"], { ...env, QUEEN_MESH_HTTP_PORT: "0" })
          assert.strictEqual(result.code, 2, `${variable}: ${result.stderr}`)
          assert.include(result.stderr, variable)
          assert.notInclude(result.stderr + result.stdout, "hunter2")
        }
      })
    )
  }
)
