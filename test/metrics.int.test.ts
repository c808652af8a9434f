/**
 * The operator's endpoints of a running `queen-mesh node`: `/metrics` parsed by a strict Prometheus
 * text-format parser (every metric present with its type, counters equal to the stats body), and
 * `/healthz` / `/readyz` through a peer's loss and return.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Schema, type Scope } from "effect"
import * as HttpRoutes from "../src/HttpRoutes.js"
import { names } from "../src/MeshMetrics.js"
import * as MeshStats from "../src/MeshStats.js"
import { type CliProcess, ensureBuilt, isListening, spawnCli } from "./fixtures/cli.js"
import { eventually, freePort } from "./fixtures/cluster.js"
import { parse } from "./fixtures/prometheus.js"

/** A tenant is a UUID (the default `tenants: "uuid"`). */
const ACME = "ac3e0000-0000-4000-8000-00000000ac3e"

const decodeStats = Schema.decodeUnknownSync(Schema.fromJsonString(MeshStats.StatsBody))

const get = (url: string) =>
  Effect.promise(async () => {
    const response = await fetch(url)
    return {
      status: response.status,
      type: response.headers.get("content-type"),
      body: await response.text()
    }
  })

const start = (
  id: string,
  port: number,
  http: number,
  peers: ReadonlyArray<number>
): Effect.Effect<CliProcess, Error, Scope.Scope> =>
  Effect.gen(function* () {
    const node = yield* spawnCli(["node"], {
      QUEEN_SERVER_ID: id,
      QUEEN_MESH_PORT: String(port),
      QUEEN_MESH_HTTP_PORT: String(http),
      QUEEN_MESH_BIND_ADDR: "127.0.0.1",
      QUEEN_MESH_HTTP_HOST: "127.0.0.1",
      QUEEN_MESH_PEERS: peers.map((p) => `127.0.0.1:${p}`).join(","),
      QUEEN_SYNC_SECRET: "metrics-secret",
      QUEEN_SYNC_HEARTBEAT_MS: "200",
      // Well above a stalled process on a busy machine: a peer's loss here is a closed link.
      QUEEN_SYNC_DEAD_THRESHOLD_MS: "5000"
    })
    yield* node.waitForLine(isListening, Duration.seconds(60))
    return node
  })

const sum = (family: ReturnType<typeof parse> extends Map<string, infer F> ? F | undefined : never) =>
  (family?.samples ?? []).reduce((total, sample) => total + sample.value, 0)

describe("operator endpoints of queen-mesh node", () => {
  it.live("/metrics has every metric with its type, and its counters match the stats body", () =>
    Effect.gen(function* () {
      yield* ensureBuilt
      const [portA, portB, httpA, httpB] = [
        yield* freePort,
        yield* freePort,
        yield* freePort,
        yield* freePort
      ]
      const b = yield* start("metrics-b", portB, httpB, [portA])
      const a = yield* start("metrics-a", portA, httpA, [portB])
      yield* a.waitForLine((line) => line.includes('"peer_up"'), Duration.seconds(60))
      yield* b.waitForLine((line) => line.includes('"peer_up"'), Duration.seconds(60))
      for (let i = 0; i < 20; i++) {
        yield* a.send(
          JSON.stringify({ op: "message_available", queue: "orders", partition: `p${i}`, tenant: ACME })
        )
      }
      yield* b.waitForLine((line) => line.includes('"partition":"p19"'), Duration.seconds(60))

      const metrics = yield* get(`http://127.0.0.1:${httpB}${HttpRoutes.paths.metrics}`)
      const stats = decodeStats(
        (yield* get(`http://127.0.0.1:${httpB}${HttpRoutes.paths.sharedStateStats}`)).body
      )
      assert.strictEqual(metrics.status, 200)
      assert.include(metrics.type ?? "", "text/plain")
      assert.include(metrics.type ?? "", "version=0.0.4")
      const families = parse(metrics.body)
      const types: Record<string, string> = {
        [names.framesSent]: "counter",
        [names.framesReceived]: "counter",
        [names.drops]: "counter",
        [names.framesRejected]: "counter",
        [names.rejections]: "counter",
        [names.handshakeFailures]: "counter",
        [names.connectionsOpen]: "gauge",
        [names.peersAlive]: "gauge",
        [names.peersDead]: "gauge",
        [names.queueDepth]: "gauge",
        [names.reconnects]: "counter",
        [names.applySeconds]: "histogram",
        [names.writeFrames]: "histogram"
      }
      // A sent the wakes, B received them: between the two every metric has samples.
      const sentOnA = parse((yield* get(`http://127.0.0.1:${httpA}${HttpRoutes.paths.metrics}`)).body)
      for (const [name, type] of Object.entries(types)) {
        assert.strictEqual(
          (families.get(name) ?? sentOnA.get(name))?.type,
          type,
          `${name} should be a ${type}`
        )
      }
      assert.isFalse([...families.keys()].some((name) => name.startsWith("effect_fiber_")))
      assert.isTrue(stats.enabled)
      if (!stats.enabled) return
      // Every series carries the node's server id.
      for (const family of families.values()) {
        for (const sample of family.samples) assert.strictEqual(sample.labels.server_id, "metrics-b")
      }
      // Counters read a moment apart from the stats body: heartbeats move them, so compare the stable ones
      // exactly and the moving ones as at least.
      assert.isAtLeast(sum(families.get(names.framesReceived)), 20)
      assert.isAtMost(sum(families.get(names.framesReceived)), stats.messages_received)
      assert.strictEqual(sum(families.get(names.handshakeFailures)), stats.handshake_failures)
      assert.strictEqual(
        sum(families.get(names.framesRejected)),
        stats.frames_invalid + stats.frames_unknown + stats.frames_oversized
      )
      const alive = families.get(names.peersAlive)?.samples[0]?.value
      assert.strictEqual(alive, stats.servers_alive)
      const wakes = families
        .get(names.framesReceived)
        ?.samples.find((sample) => sample.labels.tag === "MESSAGE_AVAILABLE")?.value
      assert.strictEqual(wakes, 20)
      const sentWakes = sentOnA
        .get(names.framesSent)
        ?.samples.find((sample) => sample.labels.tag === "MESSAGE_AVAILABLE")?.value
      assert.strictEqual(sentWakes, 20)
      // The histograms wait for a sync, and a scrape syncs: every chunk B applied and every write A made
      // is counted at the scrape.
      const count = (family: ReturnType<typeof families.get>) =>
        (family?.samples ?? [])
          .filter((sample) => sample.name.endsWith("_count"))
          .reduce((total, sample) => total + sample.value, 0)
      assert.isAtLeast(count(families.get(names.applySeconds)), 1)
      assert.isAtLeast(count(sentOnA.get(names.writeFrames)), 1)
    })
  )

  it.live(
    "/healthz answers while the process serves; /readyz follows the links through a peer's loss and return",
    () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        const [portA, portB, httpA, httpB] = [
          yield* freePort,
          yield* freePort,
          yield* freePort,
          yield* freePort
        ]
        const a = yield* start("ready-a", portA, httpA, [portB])
        const base = `http://127.0.0.1:${httpA}`
        assert.strictEqual((yield* get(`${base}${HttpRoutes.paths.health}`)).status, 200)
        /** Waits until `/readyz` answers `status` (and, with a health given, that health). */
        const ready = (status: number, health?: string) =>
          eventually(
            Effect.map(
              get(`${base}${HttpRoutes.paths.ready}`),
              (r) =>
                r.status === status &&
                (health === undefined || (JSON.parse(r.body) as { status?: unknown }).status === health)
            ),
            "60 seconds"
          )
        yield* ready(503)
        const b = yield* Effect.acquireRelease(start("ready-b", portB, httpB, [portA]), (node) =>
          Effect.sync(() => node.child.kill("SIGKILL"))
        )
        yield* ready(200, "clustered")
        b.child.kill("SIGKILL")
        yield* ready(503)
        yield* start("ready-b", portB, httpB, [portA])
        yield* ready(200)
        assert.strictEqual((yield* get(`${base}${HttpRoutes.paths.health}`)).status, 200)
        assert.isNull(a.child.exitCode)
      })
  )
})
