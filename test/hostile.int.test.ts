/**
 * Hostile peers against a real `queen-mesh node` process over loopback: whatever arrives on the mesh
 * port, the process stays up and a good peer keeps being served.
 */
import * as Net from "node:net"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Redacted, Schema } from "effect"
import * as Frame from "../src/Frame.js"
import * as HttpRoutes from "../src/HttpRoutes.js"
import * as Handshake from "../src/internal/links/handshake.js"
import type { ActiveStats } from "../src/MeshStats.js"
import * as MeshStats from "../src/MeshStats.js"
import { ensureBuilt, isListening, Listening, spawnCli } from "./fixtures/cli.js"
import { eventually, freePort } from "./fixtures/cluster.js"

const SECRET = "hostile-test-secret"
const decodeListening = Schema.decodeUnknownSync(Listening)
const decodeStats = Schema.decodeUnknownSync(Schema.fromJsonString(MeshStats.StatsBody))

const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth)

const hello = (serverId: string) =>
  Frame.encode(Handshake.helloWithNonce(serverId, Redacted.make(SECRET), "ab".repeat(16)))

/**
 * Opens a connection to 127.0.0.1:port, writes `bytes`, and waits until the node closes it or `handled`
 * holds (the node's counters show it read them), then closes it: closing sooner could reset the
 * connection before the node read what was sent.
 */
const sendAndClose = (port: number, bytes: Uint8Array, handled: Effect.Effect<boolean>) =>
  Effect.gen(function* () {
    const socket = Net.createConnection({ host: "127.0.0.1", port })
    const closed = { value: false }
    socket.on("error", () => {})
    socket.on("close", () => {
      closed.value = true
    })
    socket.on("connect", () => socket.write(bytes))
    yield* eventually(
      Effect.map(handled, (ok) => ok || closed.value),
      "60 seconds"
    ).pipe(Effect.ensuring(Effect.sync(() => socket.destroy())))
  })

describe("hostile input against queen-mesh node", () => {
  it.live("deeply nested payloads before and after the HELLO do not crash the node", () =>
    Effect.gen(function* () {
      yield* ensureBuilt
      const port = yield* freePort
      const http = yield* freePort
      const node = yield* spawnCli(["node"], {
        QUEEN_SERVER_ID: "target",
        QUEEN_MESH_PORT: String(port),
        QUEEN_MESH_HTTP_PORT: String(http),
        QUEEN_MESH_BIND_ADDR: "127.0.0.1",
        QUEEN_MESH_HTTP_HOST: "127.0.0.1",
        // A peer nobody listens on: the mesh is active, its dialer just keeps retrying.
        QUEEN_MESH_PEERS: `127.0.0.1:${yield* freePort}`,
        QUEEN_SYNC_SECRET: SECRET
      })
      const listening = decodeListening(yield* node.waitForLine(isListening, Duration.seconds(60)))
      assert.strictEqual(listening.port, port)
      const stats = Effect.promise(() =>
        fetch(`http://127.0.0.1:${http}${HttpRoutes.paths.sharedStateStats}`).then(async (r) =>
          decodeStats(await r.text())
        )
      )
      const count = (read: (body: ActiveStats) => number) =>
        Effect.map(stats, (body) => (body.enabled ? read(body) : 0))
      /** The count `read` is one more than it is now. */
      const counted = (read: (body: ActiveStats) => number) =>
        Effect.map(count(read), (before) => Effect.map(count(read), (now) => now > before))
      const failures = (body: ActiveStats) => body.handshake_failures
      const rejected = (body: ActiveStats) => body.frames_invalid + body.frames_oversized

      // Unauthenticated: a first frame of 2,200 nested arrays, as a HELLO and as another tag.
      for (const tag of [Frame.Tag.HELLO, Frame.Tag.MESSAGE_AVAILABLE]) {
        yield* sendAndClose(port, Frame.frameBytes(tag, nested(2_200)), yield* counted(failures))
      }
      // Authenticated: 100,000 nested arrays in tags 1, 2 and 40.
      for (const tag of [
        Frame.Tag.MESSAGE_AVAILABLE,
        Frame.Tag.MESSAGE_AVAILABLE_BATCH,
        Frame.Tag.MAINTENANCE_MODE_SET
      ]) {
        yield* sendAndClose(
          port,
          Buffer.concat([hello("hostile"), Frame.frameBytes(tag, nested(100_000))]),
          yield* counted(rejected)
        )
      }

      assert.isNull(node.child.exitCode, `the node exited\n${node.stderr().slice(-2000)}`)
      // A good peer is still served: its HELLO verifies and its wake is applied.
      const woken = (line: string) => line.includes('"event":"wake"') && line.includes('"from":"good"')
      yield* sendAndClose(
        port,
        Buffer.concat([
          hello("good"),
          Frame.encode({ _tag: "MessageAvailable", ...Frame.queueItem({ queue: "orders", partition: "p0" }) })
        ]),
        Effect.sync(() => node.lines.some(woken))
      )
      yield* node.waitForLine(woken)
      const body = yield* stats
      assert.isTrue(body.enabled)
      if (body.enabled) {
        assert.isAtLeast(body.handshake_failures, 2)
        assert.isAtLeast(body.frames_invalid + body.frames_oversized, 3)
      }
      yield* eventually(Effect.sync(() => node.child.exitCode === null))
    })
  )
})
