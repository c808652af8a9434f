/**
 * QUEEN_MESH_TLS=psk end to end: nodes built by `Mesh.layerTcp` with `tls: "psk"` exchange wakes over
 * TLS 1.3; a node with another secret cannot link, and the refusal is counted.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import { eventually, freePort, tcpNode } from "./fixtures/cluster.js"
import { active } from "./fixtures/memory.js"

/** A tenant is a UUID (the default `tenants: "uuid"`). */
const ACME = "ac3e0000-0000-4000-8000-00000000ac3e"

describe("Mesh over TLS-PSK", () => {
  it.live("two nodes exchange wakes over TLS; another secret is refused and counted", () =>
    Effect.gen(function* () {
      const [portA, portB, portC] = [yield* freePort, yield* freePort, yield* freePort]
      const config = { tls: "psk" as const }
      const a = yield* tcpNode({ serverId: "tls-a", port: portA, peers: [portB], config })
      const b = yield* tcpNode({ serverId: "tls-b", port: portB, peers: [portA], config })
      yield* eventually(Effect.map(a.mesh.stats, (s) => s.enabled && s.peers.every((p) => p.connected)))
      yield* eventually(Effect.map(b.mesh.stats, (s) => s.enabled && s.servers_alive === 1))
      const pop = yield* Effect.forkChild(
        b.waker.awaitWake({ queue: "orders", tenant: Option.some(ACME) }, { maxWait: "30 seconds" })
      )
      yield* eventually(Effect.map(b.waker.parked, (n) => n === 1))
      yield* a.mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: ACME })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      assert.strictEqual(active(yield* b.mesh.stats).tls, "psk")

      // Another secret: its TLS handshake fails at b's listener, counted as a refusal.
      yield* tcpNode({ serverId: "tls-c", port: portC, peers: [portB], secret: "another", config })
      yield* eventually(Effect.map(b.mesh.stats, (s) => active(s).rejections.tls_handshake >= 1))
      const stats = active(yield* b.mesh.stats)
      assert.isAtLeast(stats.handshake_failures, 1)
      assert.deepStrictEqual(
        stats.servers.map((s) => s.server_id),
        ["tls-a"]
      )
    })
  )
})
