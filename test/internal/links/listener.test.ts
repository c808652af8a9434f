import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option, Redacted } from "effect"
import { TestClock } from "effect/testing"
import * as Frame from "../../../src/Frame.js"
import * as Handshake from "../../../src/internal/links/handshake.js"
import { header, rawFrame } from "../../fixtures/frames.js"
import { active, memoryNetwork, memoryNode, settle, settleUntil } from "../../fixtures/memory.js"

const hello = (serverId: string, secret: string) =>
  Frame.encode(Handshake.helloWithNonce(serverId, Redacted.make(secret), "00112233445566778899aabbccddeeff"))

const wake = (queue: string) =>
  Frame.encode({ _tag: "MessageAvailable", ...Frame.queueItem({ queue, partition: "p" }) })

/** A mesh node on port 7100 whose only peer is an address nobody listens on, plus a raw client. */
const setup = Effect.gen(function* () {
  const { network, transport, transportLayer } = yield* memoryNetwork
  const node = yield* memoryNode(transportLayer, { serverId: "node", port: 7100, peers: [7199] })
  yield* settle
  return { network, transport, node }
})

describe("Listener", () => {
  it.effect("accepts a verified HELLO, then applies frames and refreshes liveness", () =>
    Effect.gen(function* () {
      const { transport, node } = yield* setup
      const connection = yield* transport.dial("127.0.0.1", 7100)
      const parked = yield* Effect.forkChild(
        node.waker.awaitWake({ queue: "q", tenant: Option.none() }, { maxWait: "1 hour" })
      )
      yield* settleUntil(Effect.map(node.waker.parked, (n) => n === 1))
      yield* connection.write(Buffer.concat([hello("peer", "s3cr3t"), wake("q")]))
      assert.strictEqual(yield* Fiber.join(parked), "woken")
      const stats = active(yield* node.mesh.stats)
      assert.include(stats, { servers_alive: 1, messages_received: 1, handshake_failures: 0 })
    })
  )

  it.effect("a wrong MAC is refused and counted, and nothing after it is applied", () =>
    Effect.gen(function* () {
      const { network, transport, node } = yield* setup
      const connection = yield* transport.dial("127.0.0.1", 7100)
      yield* connection.write(
        Buffer.concat([
          hello("intruder", "wrong"),
          Frame.encode({ _tag: "MaintenanceModeSet", enabled: true })
        ])
      )
      yield* settleUntil(Effect.map(node.mesh.stats, (s) => active(s).handshake_failures === 1))
      // Refused connections are held for the auth-failure delay, then closed.
      yield* TestClock.adjust("1 second")
      yield* settleUntil(Effect.map(network.openConnections(7100), (n) => n === 0))
      const stats = active(yield* node.mesh.stats)
      assert.include(stats, { maintenance_mode: false, messages_received: 0, servers_alive: 0 })
    })
  )

  it.effect("a first frame that is not a HELLO is refused", () =>
    Effect.gen(function* () {
      const { network, transport, node } = yield* setup
      const connection = yield* transport.dial("127.0.0.1", 7100)
      yield* connection.write(wake("q"))
      yield* settleUntil(Effect.map(node.mesh.stats, (s) => active(s).handshake_failures === 1))
      yield* TestClock.adjust("1 second")
      yield* settleUntil(Effect.map(network.openConnections(7100), (n) => n === 0))
    })
  )

  it.effect("no HELLO within the handshake timeout closes the connection", () =>
    Effect.gen(function* () {
      const { network, transport, node } = yield* setup
      yield* transport.dial("127.0.0.1", 7100)
      yield* settle
      yield* TestClock.adjust("4999 millis")
      yield* settle
      assert.strictEqual(yield* network.openConnections(7100), 1)
      assert.strictEqual(active(yield* node.mesh.stats).handshake_failures, 0)
      yield* TestClock.adjust("1 millis")
      yield* settleUntil(Effect.map(node.mesh.stats, (s) => active(s).handshake_failures === 1))
      yield* TestClock.adjust("1 second")
      yield* settleUntil(Effect.map(network.openConnections(7100), (n) => n === 0))
    })
  )

  it.effect("an invalid payload is counted and skipped, an unknown tag skipped, the link stays open", () =>
    Effect.gen(function* () {
      const { network, transport, node } = yield* setup
      const connection = yield* transport.dial("127.0.0.1", 7100)
      yield* connection.write(
        Buffer.concat([
          hello("peer", "s3cr3t"),
          Frame.frameBytes(Frame.Tag.MESSAGE_AVAILABLE, '{"queue":"","partition":"p"}'),
          rawFrame(Frame.Tag.MESSAGE_AVAILABLE, "not json"),
          Frame.frameBytes(99, '{"future":true}'),
          Frame.encode({ _tag: "MaintenanceModeSet", enabled: true })
        ])
      )
      yield* settleUntil(Effect.map(node.mesh.stats, (s) => active(s).maintenance_mode))
      const stats = active(yield* node.mesh.stats)
      assert.include(stats, {
        frames_invalid: 2,
        frames_unknown: 1,
        frames_dispatched: 1,
        messages_received: 4
      })
      assert.strictEqual(yield* network.openConnections(7100), 1)
    })
  )

  it.effect("a repeated heartbeat skips the decode, and any other heartbeat is still checked", () =>
    Effect.gen(function* () {
      const { transport, node } = yield* setup
      const connection = yield* transport.dial("127.0.0.1", 7100)
      const beat = Frame.encode(Frame.heartbeat("peer"))
      // The same heartbeat, split across chunks too: each is dispatched.
      yield* connection.write(Buffer.concat([hello("peer", "s3cr3t"), beat, beat]))
      yield* connection.write(Buffer.concat([beat, beat.subarray(0, 7)]))
      yield* connection.write(beat.subarray(7))
      yield* settleUntil(Effect.map(node.mesh.stats, (s) => active(s).messages_received === 4))
      assert.include(active(yield* node.mesh.stats), { frames_dispatched: 4, frames_invalid: 0 })
      // Other bytes under the heartbeat's tag go through the checks: valid, or counted invalid.
      yield* connection.write(
        Buffer.concat([
          Frame.encode(Frame.heartbeat("other")),
          Frame.frameBytes(Frame.Tag.HEARTBEAT, '{"server_id":7}'),
          rawFrame(Frame.Tag.HEARTBEAT, '{"server_id":"peer"'),
          beat
        ])
      )
      yield* settleUntil(Effect.map(node.mesh.stats, (s) => active(s).messages_received === 8))
      assert.include(active(yield* node.mesh.stats), {
        frames_dispatched: 6,
        frames_invalid: 2,
        servers_alive: 1
      })
    })
  )

  it.effect("a framing error closes only that connection", () =>
    Effect.gen(function* () {
      const { network, transport, node } = yield* setup
      const good = yield* transport.dial("127.0.0.1", 7100)
      yield* good.write(hello("good", "s3cr3t"))
      const bad = yield* transport.dial("127.0.0.1", 7100)
      yield* bad.write(Buffer.concat([hello("bad", "s3cr3t"), header(16 * 1024 * 1024 + 1)]))
      yield* settleUntil(Effect.map(network.openConnections(7100), (n) => n === 1))
      yield* good.write(Frame.encode({ _tag: "PopMaintenanceModeSet", enabled: true }))
      yield* settleUntil(Effect.map(node.mesh.stats, (s) => active(s).pop_maintenance_mode))
    })
  )

  it.effect("the stream ending inside a frame closes the connection; inbound links are never written", () =>
    Effect.gen(function* () {
      const { network, transport, node } = yield* setup
      const bytesBack = yield* Effect.scoped(
        Effect.gen(function* () {
          const connection = yield* transport.dial("127.0.0.1", 7100)
          let bytes = 0
          const back = yield* connection
            .read((chunk) => {
              bytes += chunk.length
              return undefined
            })
            .pipe(
              Effect.map(() => bytes),
              Effect.result,
              Effect.forkChild
            )
          yield* connection.write(Buffer.concat([hello("peer", "s3cr3t"), wake("q").subarray(0, 7)]))
          yield* settleUntil(Effect.map(node.mesh.stats, (s) => active(s).servers_alive === 1))
          return back
        })
      )
      // The client closed with half a frame sent: the listener drops the connection.
      yield* settleUntil(Effect.map(network.openConnections(7100), (n) => n === 0))
      const back = yield* Fiber.join(bytesBack)
      assert.isTrue(back._tag === "Failure" || back.success === 0, "the listener wrote on an inbound link")
      assert.strictEqual(active(yield* node.mesh.stats).messages_received, 0)
    })
  )

  it.effect("before the HELLO verifies, a large length prefix is refused without reserving it", () =>
    Effect.gen(function* () {
      const { network, transport, node } = yield* setup
      const big = yield* transport.dial("127.0.0.1", 7100)
      yield* big.write(header(1024 * 1024))
      const http = yield* transport.dial("127.0.0.1", 7100)
      yield* http.write(Buffer.from("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
      yield* settleUntil(Effect.map(node.mesh.stats, (s) => active(s).handshake_failures === 2))
      yield* TestClock.adjust("1 second")
      yield* settleUntil(Effect.map(network.openConnections(7100), (n) => n === 0))
      const rejections = active(yield* node.mesh.stats).rejections
      // "GET " read as a length prefix is far above a HELLO's cap, as is the 1 MiB one.
      assert.include(rejections, { oversized_hello: 2 })
    })
  )

  it.effect("after the HELLO, in the same chunk, large frames are accepted", () =>
    Effect.gen(function* () {
      const { transport, node } = yield* setup
      const connection = yield* transport.dial("127.0.0.1", 7100)
      const items = Array.from({ length: 20_000 }, (_, i) =>
        Frame.hotItem({ queue: "q", partition: String(i) })
      )
      const batch = Frame.encode({ _tag: "HotlistDirtyBatch", items })
      assert.isAbove(batch.length, 64 * 1024)
      yield* connection.write(Buffer.concat([hello("peer", "s3cr3t"), batch]))
      yield* settleUntil(Effect.map(node.mesh.stats, (s) => active(s).messages_received === 1))
      assert.strictEqual((yield* node.hotList.pending).length, 20_000)
    })
  )
})
