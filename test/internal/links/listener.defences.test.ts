/**
 * The listener's defences (hostile-input hardening), each under TestClock over the in-memory
 * transport: caps on connections, the first frame's cap, the pause before closing a refused
 * connection, the idle deadline, our own server id, oversized frames skipped without being buffered.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Option, Redacted } from "effect"
import { TestClock } from "effect/testing"
import * as Frame from "../../../src/Frame.js"
import * as Handshake from "../../../src/internal/links/handshake.js"
import * as MeshTest from "../../../src/MeshTest.js"
import { header } from "../../fixtures/frames.js"
import { active } from "../../fixtures/memory.js"

const hello = (serverId: string, secret = "s3cr3t") =>
  Frame.encode(Handshake.helloWithNonce(serverId, Redacted.make(secret), "00112233445566778899aabbccddeeff"))

const setup = (config: Parameters<typeof MeshTest.config>[0]["config"] = {}) =>
  Effect.gen(function* () {
    const network = yield* MeshTest.network
    // Its only peer never listens: the mesh is active, the listener bound.
    const node = yield* MeshTest.node(network, { serverId: "node", peers: ["nobody"], config })
    yield* MeshTest.settle
    const dial = () => network.transport.dial("node", MeshTest.PORT)
    const stats = Effect.map(node.mesh.stats, active)
    return { network, node, dial, stats }
  })

describe("Listener defences", () => {
  it.effect("inbound connections are capped; the extra ones are refused as too many", () =>
    Effect.gen(function* () {
      const { dial, stats } = yield* setup({ maxInbound: 3, maxUnauthenticatedPerAddress: 100 })
      for (let i = 0; i < 5; i++) yield* dial()
      yield* MeshTest.settleUntil(Effect.map(stats, (s) => s.rejections.too_many_connections === 2))
      assert.strictEqual((yield* stats).inbound.open, 3)
    })
  )

  it.effect("unauthenticated connections are capped per address; authenticating frees the slot", () =>
    Effect.gen(function* () {
      const { dial, stats } = yield* setup({ maxUnauthenticatedPerAddress: 2 })
      const first = yield* dial()
      yield* dial()
      yield* dial()
      yield* MeshTest.settleUntil(Effect.map(stats, (s) => s.rejections.too_many_connections === 1))
      yield* first.write(hello("peer"))
      yield* MeshTest.settleUntil(Effect.map(stats, (s) => s.inbound.authenticated === 1))
      yield* dial()
      yield* MeshTest.settle
      assert.strictEqual((yield* stats).rejections.too_many_connections, 1)
    })
  )

  it.effect("the first frame is refused as soon as its header exceeds the HELLO cap", () =>
    Effect.gen(function* () {
      const { dial, stats } = yield* setup({ helloMaxBytes: 4096 })
      const connection = yield* dial()
      // Only the header: the cap is judged before a byte of the payload arrives.
      yield* connection.write(header(4097, Frame.Tag.HELLO))
      yield* MeshTest.settleUntil(Effect.map(stats, (s) => s.rejections.oversized_hello === 1))
    })
  )

  it.effect("a refused connection is held for the failure delay, then closed", () =>
    Effect.gen(function* () {
      const { network, dial, stats } = yield* setup({ authFailureDelay: Duration.seconds(2) })
      const connection = yield* dial()
      yield* connection.write(hello("peer", "wrong"))
      yield* MeshTest.settleUntil(Effect.map(stats, (s) => s.rejections.bad_mac === 1))
      yield* TestClock.adjust("1999 millis")
      yield* MeshTest.settle
      assert.strictEqual(yield* network.network.openConnections("node:6633"), 1)
      yield* TestClock.adjust("1 millis")
      yield* MeshTest.settleUntil(Effect.map(network.network.openConnections("node:6633"), (n) => n === 0))
    })
  )

  it.effect("an authenticated link silent past the idle timeout is closed", () =>
    Effect.gen(function* () {
      const { network, dial, stats } = yield* setup({
        idleTimeout: Duration.seconds(3),
        deadThreshold: Duration.seconds(3),
        heartbeatInterval: Duration.seconds(1)
      })
      const connection = yield* dial()
      yield* connection.write(hello("peer"))
      yield* MeshTest.settleUntil(Effect.map(stats, (s) => s.inbound.authenticated === 1))
      yield* TestClock.adjust("2 seconds")
      yield* connection.write(Frame.encode(Frame.heartbeat("peer")))
      yield* TestClock.adjust("2999 millis")
      yield* MeshTest.settle
      assert.strictEqual((yield* stats).inbound.closed_idle, 0)
      yield* TestClock.adjust("1 millis")
      yield* MeshTest.settleUntil(Effect.map(stats, (s) => s.inbound.closed_idle === 1))
      yield* MeshTest.settleUntil(Effect.map(network.network.openConnections("node:6633"), (n) => n === 0))
    })
  )

  it.effect("a HELLO with our own server id is refused as own_server_id", () =>
    Effect.gen(function* () {
      const { dial, stats } = yield* setup()
      const connection = yield* dial()
      yield* connection.write(hello("node"))
      yield* MeshTest.settleUntil(Effect.map(stats, (s) => s.rejections.own_server_id === 1))
      assert.strictEqual((yield* stats).servers.length, 0)
    })
  )

  it.effect("a single-item frame over its tag's cap is skipped unbuffered; the link carries on", () =>
    Effect.gen(function* () {
      const { node, dial, stats } = yield* setup()
      const connection = yield* dial()
      const big = 8 * 1024 * 1024
      yield* connection.write(Buffer.concat([hello("peer"), header(big + 1, Frame.Tag.MESSAGE_AVAILABLE)]))
      // The payload arrives in pieces and is discarded as it comes: nothing of it is held.
      const piece = Buffer.alloc(1024 * 1024, 0x20)
      for (let i = 0; i < 8; i++) yield* connection.write(piece)
      yield* MeshTest.settleUntil(Effect.map(stats, (s) => s.frames_oversized === 1))
      const parked = yield* Effect.forkChild(
        node.waker.awaitWake({ queue: "q", tenant: Option.none() }, { maxWait: "1 hour" })
      )
      yield* MeshTest.settleUntil(Effect.map(node.waker.parked, (n) => n === 1))
      yield* connection.write(
        Frame.encode({ _tag: "MessageAvailable", ...Frame.queueItem({ queue: "q", partition: "p" }) })
      )
      yield* MeshTest.settleUntil(Effect.map(node.waker.parked, (n) => n === 0))
      yield* Effect.void.pipe(Effect.andThen(Effect.sync(() => parked)))
      const s = yield* stats
      assert.strictEqual(
        s.messages_received,
        s.frames_dispatched + s.frames_invalid + s.frames_unknown + s.frames_oversized
      )
    })
  )

  it.effect("the known-servers map stays bounded whatever ids peers announce", () =>
    Effect.gen(function* () {
      const { dial, stats } = yield* setup({ maxUnauthenticatedPerAddress: 10_000, maxInbound: 10_000 })
      for (let i = 0; i < 300; i++) {
        const connection = yield* dial()
        yield* connection.write(hello(`id-${i}-${"x".repeat(200)}`))
      }
      yield* MeshTest.settleUntil(
        Effect.map(stats, (s) => s.inbound.authenticated === 300),
        5000
      )
      const body = JSON.stringify(yield* stats)
      assert.isAtMost((yield* stats).servers.length, 256)
      // About 310 bytes a server (its id, liveness, key and carriers): bounded by the 256 kept.
      assert.isBelow(body.length, 256 * 330)
    })
  )
})
