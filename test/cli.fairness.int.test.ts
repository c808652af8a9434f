/**
 * `queen-mesh node`'s stdout under a flood from one peer: the bounded stdout budget is shared per
 * sender, so every wake a second peer sends during the flood is printed, and what is dropped is
 * counted for the flooder.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as Frame from "../src/Frame.js"
import { ensureBuilt, isListening, Listening, spawnCli } from "./fixtures/cli.js"
import { eventually, freePort } from "./fixtures/cluster.js"
import { SECRET } from "./fixtures/secret.js"
import { dialUpstream } from "./fixtures/upstream.js"

describe("queen-mesh node: stdout fairness", () => {
  it.live("a flooding peer cannot crowd another peer's wake lines out of stdout", () =>
    Effect.gen(function* () {
      yield* ensureBuilt
      const port = yield* freePort
      const node = yield* spawnCli(["node"], {
        QUEEN_SERVER_ID: "fair-node",
        QUEEN_MESH_PORT: String(port),
        QUEEN_MESH_BIND_ADDR: "127.0.0.1",
        QUEEN_MESH_PEERS: "127.0.0.1:1",
        QUEEN_SYNC_SECRET: SECRET,
        QUEEN_MESH_HTTP_PORT: "0",
        QUEEN_MESH_STDOUT_BUFFER: "65536",
        QUEEN_MESH_LOG_LEVEL: "error"
      })
      const http = Schema.decodeUnknownSync(Listening)(yield* node.waitForLine(isListening)).http_port
      const flooder = yield* dialUpstream({ port, serverId: "flooder", secret: SECRET })
      const good = yield* dialUpstream({ port, serverId: "good", secret: SECRET })
      // The reader is slow: it stops reading while the flood runs.
      node.pauseStdout()
      const batch = Frame.encode({
        _tag: "MessageAvailableBatch",
        items: Array.from({ length: 1000 }, (_, i) => Frame.queueItem({ queue: "flood", partition: `p${i}` }))
      })
      for (let round = 0; round < 69; round++) {
        // A thousand batches of a thousand wakes: a million lines the node cannot all print.
        yield* Effect.forEach(
          Array.from({ length: 15 }, () => batch),
          (bytes) => flooder.sendRaw(Buffer.from(bytes)),
          { discard: true }
        )
        yield* good.send(Frame.Tag.MESSAGE_AVAILABLE, { queue: "orders", partition: `good-${round}` })
        yield* Effect.sleep("10 millis")
      }
      const statsBody = Effect.promise(
        () =>
          fetch(`http://127.0.0.1:${http}/internal/api/shared-state/stats`).then((r) => r.json()) as Promise<{
            messages_received: number
            stdout_events_dropped: number
            stdout_events_dropped_by_source: Record<string, number>
          }>
      )
      // The reader comes back once the node has read the whole flood (69 rounds of 15 batches, and the
      // good peer's 69 wakes) while it was stalled.
      yield* eventually(
        Effect.map(statsBody, (body) => body.messages_received >= 69 * 16),
        "60 seconds"
      )
      node.resumeStdout()
      yield* node.waitForLine((line) => line.includes('"partition":"good-68"'), "60 seconds")
      const printed = node.lines.filter((line) => line.includes('"from":"good"'))
      assert.strictEqual(printed.length, 69)
      const stats = yield* statsBody
      assert.isAbove(stats.stdout_events_dropped_by_source.flooder ?? 0, 0)
      assert.strictEqual(stats.stdout_events_dropped_by_source.good, undefined)
      assert.strictEqual(
        stats.stdout_events_dropped,
        Object.values(stats.stdout_events_dropped_by_source).reduce((a, b) => a + b, 0)
      )
    })
  )
})
