import { assert, describe, it } from "@effect/vitest"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import * as HttpEffect from "effect/http/HttpEffect"
import * as HttpRoutes from "../src/HttpRoutes.js"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import * as MeshStats from "../src/MeshStats.js"
import { allConnected, eventually, freePort, hearsFrom, tcpNode } from "./fixtures/cluster.js"

const Json = Schema.fromJsonString(Schema.Unknown)
const decodeJson = Schema.decodeUnknownSync(Json)
const sinceless = (body: string) =>
  body.replace(/"last_seen_ms_ago":\d+/g, '"last_seen_ms_ago":0').replace(/"uptime_ms":\d+/g, '"uptime_ms":0')
const decodeStats = Schema.decodeUnknownSync(Schema.fromJsonString(MeshStats.StatsBody))

/** The routes as a fetch-style handler over `mesh`: no socket needed. */
const handlerFor = (mesh: Mesh.MeshShape) =>
  HttpEffect.toWebHandler(HttpRoutes.app.pipe(Effect.provideService(Mesh.Mesh, mesh)))

const get = (handler: (request: Request) => Promise<Response>, path: string, method = "GET") =>
  Effect.promise(async () => {
    const response = await handler(new Request(`http://mesh.test${path}`, { method }))
    return {
      status: response.status,
      type: response.headers.get("content-type"),
      body: await response.text()
    }
  })

/** A node with no peers: the mesh does not run, nothing binds. */
const soloMesh = Effect.map(
  Layer.build(Mesh.layerTcp().pipe(Layer.provide(MeshConfig.layer({ serverId: "solo", peers: [] })))),
  (context) => Context.get(context, Mesh.Mesh)
)

describe("HttpRoutes", () => {
  it.live(
    "both stats routes answer Mesh.stats; the inactive body says no_peers and solo, as /readyz does",
    () =>
      Effect.gen(function* () {
        const mesh = yield* soloMesh
        const handler = handlerFor(mesh)
        const expected = {
          enabled: false,
          reason: "no_peers",
          server_id: "solo",
          transport: "tcp-mesh",
          version: "0.1.0",
          health: { status: "solo", reason: "no_peers", expected: 0, healthy: 0, lane: "none" },
          maintenance_mode: false,
          pop_maintenance_mode: false
        }
        const ready = yield* get(handler, HttpRoutes.paths.ready)
        assert.strictEqual(ready.status, 200)
        assert.deepStrictEqual(decodeJson(ready.body), {
          ready: true,
          status: "solo",
          reason: "no_peers",
          links_up: 0,
          peer_count: 0,
          expected: 0,
          healthy: 0
        })
        for (const path of [HttpRoutes.paths.sharedStateStats, HttpRoutes.paths.interInstanceStats]) {
          const response = yield* get(handler, path)
          assert.strictEqual(response.status, 200)
          assert.strictEqual(response.type, "application/json")
          const body = decodeJson(response.body)
          assert.deepStrictEqual(
            { ...(body as object), uptime_ms: undefined },
            { ...expected, uptime_ms: undefined }
          )
        }
      })
  )

  it.live("an active mesh: peers, liveness and counters, the same body on both routes", () =>
    Effect.gen(function* () {
      const portA = yield* freePort
      const portB = yield* freePort
      // Slow heartbeats keep the counters still between the two requests.
      const config = { heartbeatInterval: Duration.seconds(60), deadThreshold: Duration.seconds(120) }
      const a = yield* tcpNode({ serverId: "node-a", port: portA, peers: [portB], config })
      yield* tcpNode({ serverId: "node-b", port: portB, peers: [portA], config })
      yield* eventually(allConnected(a))
      yield* eventually(hearsFrom(a, 1))
      const handler = handlerFor(a.mesh)
      const first = yield* get(handler, HttpRoutes.paths.sharedStateStats)
      const second = yield* get(handler, HttpRoutes.paths.interInstanceStats)
      assert.strictEqual(first.status, 200)
      // The same body, but for how long ago each peer was last heard, which moves between the two requests.
      assert.deepStrictEqual(decodeJson(sinceless(first.body)), decodeJson(sinceless(second.body)))
      const stats = decodeStats(first.body)
      assert.isTrue(stats.enabled)
      if (!stats.enabled) return
      assert.strictEqual(stats.server_id, "node-a")
      assert.strictEqual(stats.transport, "tcp-mesh")
      assert.strictEqual(stats.port, portA)
      assert.strictEqual(stats.peer_count, 1)
      assert.deepStrictEqual(
        stats.peers.map((peer) => [peer.host, peer.port, peer.connected, peer.resolved_ip]),
        [["127.0.0.1", portB, true, "127.0.0.1"]]
      )
      assert.strictEqual(stats.servers_alive, 1)
      assert.strictEqual(stats.servers_dead, 0)
      assert.strictEqual(stats.messages_dropped, 0)
      assert.strictEqual(stats.handshake_failures, 0)
    })
  )

  it.live("shared-state is always disabled and carries the two maintenance flags", () =>
    Effect.gen(function* () {
      const mesh = yield* soloMesh
      const handler = handlerFor(mesh)
      const before = yield* get(handler, HttpRoutes.paths.sharedState)
      assert.strictEqual(before.status, 200)
      assert.strictEqual(
        before.body,
        '{"enabled":false,"reason":"single_node_segments_broker","maintenance_mode":false,"pop_maintenance_mode":false}'
      )
      yield* mesh.setMaintenance(true)
      assert.deepStrictEqual(decodeJson((yield* get(handler, HttpRoutes.paths.sharedState)).body), {
        enabled: false,
        reason: "single_node_segments_broker",
        maintenance_mode: true,
        pop_maintenance_mode: false
      })
      yield* mesh.setPopMaintenance(true)
      yield* mesh.setMaintenance(false)
      assert.deepStrictEqual(decodeJson((yield* get(handler, HttpRoutes.paths.sharedState)).body), {
        enabled: false,
        reason: "single_node_segments_broker",
        maintenance_mode: false,
        pop_maintenance_mode: true
      })
    })
  )

  it.live("unknown paths and methods get a JSON 404", () =>
    Effect.gen(function* () {
      const handler = handlerFor(yield* soloMesh)
      const missing = yield* get(handler, "/internal/api/nope?x=1")
      assert.strictEqual(missing.status, 404)
      assert.strictEqual(missing.type, "application/json")
      assert.deepStrictEqual(decodeJson(missing.body), {
        error: "not_found",
        method: "GET",
        path: "/internal/api/nope"
      })
      const posted = yield* get(handler, HttpRoutes.paths.sharedStateStats, "POST")
      assert.strictEqual(posted.status, 404)
      assert.deepStrictEqual(decodeJson(posted.body), {
        error: "not_found",
        method: "POST",
        path: HttpRoutes.paths.sharedStateStats
      })
    })
  )

  it.live("serve binds a real server on an ephemeral port", () =>
    Effect.gen(function* () {
      const mesh = yield* soloMesh
      const port = yield* HttpRoutes.serve({ host: "127.0.0.1", port: 0 }).pipe(
        Effect.provideService(Mesh.Mesh, mesh)
      )
      assert.isAbove(port, 0)
      const body = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}${HttpRoutes.paths.interInstanceStats}`).then((r) => r.text())
      )
      const stats = decodeStats(body)
      assert.strictEqual(stats.server_id, "solo")
      assert.isFalse(stats.enabled)
    })
  )
})

describe("HttpRoutes.serve under a slow client flood", () => {
  it.live("the stats route stays answerable while 400 trickling connections are open", () =>
    Effect.gen(function* () {
      const mesh = yield* soloMesh
      const port = yield* HttpRoutes.serve({ host: "127.0.0.1", port: 0, maxConnections: 64 }).pipe(
        Effect.provideService(Mesh.Mesh, mesh)
      )
      const sockets = yield* Effect.acquireRelease(
        Effect.promise(async () => {
          const opened: Array<import("node:net").Socket> = []
          const Net = await import("node:net")
          for (let i = 0; i < 400; i++) {
            const socket = Net.createConnection({ host: "127.0.0.1", port })
            socket.on("error", () => {})
            // A slowloris: the start of a request, never finished.
            socket.write("GET /internal/api/shared-state/stats HTTP/1.1\r\nHost: x\r\n")
            opened.push(socket)
          }
          return opened
        }),
        (opened) =>
          Effect.sync(() => {
            for (const socket of opened) socket.destroy()
          })
      )
      // The server took them all and, at its cap of 64, closed the oldest idle ones: 336 at least.
      yield* eventually(
        Effect.sync(
          () => sockets.filter((socket) => socket.destroyed || socket.readyState !== "open").length >= 336
        ),
        "60 seconds"
      )
      // Requests are still answered, each taking the slot of the oldest trickling connection.
      for (let i = 0; i < 5; i++) {
        const response = yield* Effect.promise(() =>
          fetch(`http://127.0.0.1:${port}${HttpRoutes.paths.sharedStateStats}`).then((r) => r.status)
        )
        assert.strictEqual(response, 200)
      }
    })
  )
})
