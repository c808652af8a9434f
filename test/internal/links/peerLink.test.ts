/**
 * PeerLink alone: the bounded send queue (frames and bytes), the direct path of an idle link, the
 * accounting identity over every sequence the writer protocol allows, the snapshot, self marking and
 * the learned id. No transport and no fiber: the link is driven through its methods, as `Peers` and
 * the dialer drive it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Fiber, Option } from "effect"
import * as fc from "fast-check"
import * as Frame from "../../../src/Frame.js"
import { PeerLink, type PeerLinkState } from "../../../src/internal/links/peerLink.js"
import { numRuns } from "../../fixtures/budget.js"

const PEER = { host: "b", port: 6633 }

/** A wake for `queue`: frame sizes grow with the name. */
const wake = (queue = "q") =>
  Frame.encode({ _tag: "MessageAvailable", ...Frame.queueItem({ queue, partition: "p" }) })
const maintenance = Frame.encode({ _tag: "MaintenanceModeSet", enabled: true })
const heartbeat = Frame.encode(Frame.heartbeat("a"))

const link = (options: { capacity?: number; bytes?: number; observe?: (frames: number) => void } = {}) =>
  new PeerLink(PEER, "b:6633", options.capacity ?? 1024, options.bytes ?? 1 << 20, options.observe)

/** The accounting identity of the module comment. */
const balanced = (state: PeerLinkState): boolean =>
  state.counters.handed ===
  state.counters.written +
    state.counters.dropped_full +
    state.counters.dropped_down +
    state.counters.discarded +
    state.counters.queued

const sum = (rows: ReadonlyArray<readonly [number, number]>) => rows.reduce((total, [, n]) => total + n, 0)

/** One turn of the event loop: the direct path's per-turn write observation runs on `setImmediate`. */
const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

describe("PeerLink", () => {
  describe("the send queue", () => {
    it("is bounded in frames: past the capacity a frame is dropped as full, and said so", () => {
      const l = link({ capacity: 3 })
      l.up("10.0.0.2", undefined)
      const taken = [wake(), wake(), wake(), wake(), maintenance].map((bytes) => l.offer(bytes))
      assert.deepStrictEqual(taken, [true, true, true, false, false])
      const state = l.snapshot()
      assert.include(state.counters, { handed: 5, queued: 3, dropped_full: 2, written: 0 })
      assert.strictEqual(state.counters.queued_bytes, 3 * wake().length)
      // Dropped frames are counted by tag as well.
      assert.deepStrictEqual(state.droppedByTag, [
        [Frame.Tag.MESSAGE_AVAILABLE, 1],
        [Frame.Tag.MAINTENANCE_MODE_SET, 1]
      ])
    })

    it("is bounded in bytes: a frame that would pass the byte bound is dropped, a smaller one fits", () => {
      const big = wake("x".repeat(100))
      const l = link({ bytes: 2 * big.length + heartbeat.length })
      l.up(undefined, undefined)
      assert.isTrue(l.offer(big))
      assert.isTrue(l.offer(big))
      assert.isFalse(l.offer(big))
      // Exactly at the bound still fits.
      assert.isTrue(l.offer(heartbeat))
      assert.isFalse(l.offer(heartbeat))
      const state = l.snapshot()
      assert.include(state.counters, {
        queued: 3,
        dropped_full: 2,
        queued_bytes: 2 * big.length + heartbeat.length
      })
      assert.isTrue(balanced(state))
    })

    it("counts the frames the writer holds against both bounds until it wrote them", () => {
      const l = link({ capacity: 2, bytes: 2 * wake().length })
      l.up(undefined, undefined)
      l.offer(wake())
      l.offer(wake())
      const held = l.takeAll(0)
      assert.strictEqual(held.length, 2)
      assert.include(l.snapshot().counters, { queued: 2, queued_bytes: 2 * wake().length })
      assert.isFalse(l.offer(wake()), "the writer's frames still fill the queue")
      l.wrote(held)
      assert.isTrue(l.offer(wake()))
      assert.include(l.snapshot().counters, { written: 2, dropped_full: 1, queued: 1, handed: 4 })
    })

    it("takes every waiting frame oldest first, and marks the write as started", () => {
      const l = link()
      l.up(undefined, undefined)
      const frames = [wake("a"), maintenance, wake("b"), heartbeat]
      for (const frame of frames) l.offer(frame)
      assert.strictEqual(l.writeStartedAt, undefined)
      const taken = l.takeAll(1234)
      assert.deepStrictEqual(taken, frames)
      assert.strictEqual(l.writeStartedAt, 1234)
      // Nothing waits now; a second take while writing is not part of the protocol, so wrote first.
      l.wrote(taken)
      assert.strictEqual(l.writeStartedAt, undefined)
      assert.deepStrictEqual(l.snapshot().writtenByTag, [
        [Frame.Tag.MESSAGE_AVAILABLE, 2],
        [Frame.Tag.HEARTBEAT, 1],
        [Frame.Tag.MAINTENANCE_MODE_SET, 1]
      ])
    })

    it("drops at once while down, never queueing a frame that would be stale by the reconnect", () => {
      const l = link()
      assert.isFalse(l.offer(wake()))
      l.up(undefined, undefined)
      l.down()
      assert.isFalse(l.offer(heartbeat))
      const state = l.snapshot()
      assert.include(state, { connected: false })
      assert.include(state.counters, { handed: 2, dropped_down: 2, queued: 0 })
      assert.isTrue(balanced(state))
    })

    it("discards what waits and what the writer holds when the link breaks, and counts a reconnect", () => {
      const l = link()
      l.up("10.0.0.2", undefined)
      l.offer(wake())
      l.offer(wake())
      l.takeAll(5)
      l.offer(maintenance)
      l.down()
      const state = l.snapshot()
      assert.include(state, { connected: false })
      assert.include(state.counters, { discarded: 3, queued: 0, queued_bytes: 0, reconnects: 1 })
      assert.strictEqual(l.writeStartedAt, undefined)
      assert.isTrue(Option.isNone(state.resolvedIp))
      assert.deepStrictEqual(state.lastResolvedIp, Option.some("10.0.0.2"))
      assert.strictEqual(sum(state.droppedByTag), 3)
      // A second down of a link already down is no reconnect.
      l.down()
      assert.strictEqual(l.snapshot().counters.reconnects, 1)
    })
  })

  describe("the direct path", () => {
    it.effect("writes a frame on an idle link at once, and observes the frames of a tick as one write", () =>
      Effect.gen(function* () {
        const writes: Array<number> = []
        const direct: Array<Uint8Array> = []
        const l = link({ observe: (frames) => writes.push(frames) })
        l.up("10.0.0.2", (bytes) => {
          direct.push(bytes)
          return true
        })
        assert.isTrue(l.offer(wake()))
        assert.isTrue(l.offer(maintenance))
        assert.isTrue(l.offer(heartbeat))
        assert.strictEqual(direct.length, 3)
        assert.include(l.snapshot().counters, { written: 3, queued: 0, handed: 3 })
        assert.deepStrictEqual(writes, [])
        yield* nextTurn
        assert.deepStrictEqual(writes, [3])
        // The next tick's lone frame is a write of its own.
        l.offer(wake())
        yield* nextTurn
        assert.deepStrictEqual(writes, [3, 1])
        // A write through the queue is observed with the frames it carried.
        l.down()
        l.up(undefined, undefined)
        l.offer(wake())
        l.offer(heartbeat)
        l.wrote(l.takeAll(0))
        assert.deepStrictEqual(writes, [3, 1, 2])
      })
    )

    it("queues when the transport cannot take the frame now, and keeps order behind the queue", () => {
      let accept = false
      const direct: Array<Uint8Array> = []
      const l = link()
      l.up(undefined, (bytes) => {
        if (accept) direct.push(bytes)
        return accept
      })
      const first = wake("first")
      const second = wake("second")
      assert.isTrue(l.offer(first))
      assert.strictEqual(l.snapshot().counters.queued, 1)
      // The transport could take it now, but a frame waits: this one goes behind it.
      accept = true
      assert.isTrue(l.offer(second))
      assert.deepStrictEqual(direct, [])
      const taken = l.takeAll(0)
      assert.deepStrictEqual(taken, [first, second])
      // While the writer writes, frames queue behind what it holds.
      assert.isTrue(l.offer(heartbeat))
      assert.deepStrictEqual(direct, [])
      l.wrote(taken)
      assert.deepStrictEqual(l.takeAll(1), [heartbeat])
    })

    it("is gone once the link is down, and back only with the next link's", () => {
      const direct: Array<string> = []
      const l = link()
      l.up(undefined, () => {
        direct.push("old")
        return true
      })
      l.down()
      assert.isFalse(l.offer(wake()))
      l.up(undefined, undefined)
      assert.isTrue(l.offer(wake()))
      assert.deepStrictEqual(direct, [])
      assert.strictEqual(l.snapshot().counters.queued, 1)
    })
  })

  describe("available", () => {
    it.effect("completes at once when a frame waits, else on the next offer", () =>
      Effect.gen(function* () {
        const l = link()
        l.up(undefined, undefined)
        const waiter = yield* Effect.forkChild(l.available)
        yield* Effect.yieldNow
        assert.isUndefined(waiter.pollUnsafe())
        l.offer(wake())
        yield* Fiber.join(waiter)
        // A frame waits: no suspension.
        yield* l.available
      })
    )

    it.effect("an interrupted wait is forgotten: a later offer resumes nothing", () =>
      Effect.gen(function* () {
        const l = link()
        l.up(undefined, undefined)
        const waiter = yield* Effect.forkChild(l.available)
        yield* Effect.yieldNow
        yield* Fiber.interrupt(waiter)
        assert.isTrue(l.offer(wake()))
        assert.strictEqual(l.snapshot().counters.queued, 1)
      })
    )
  })

  describe("self marking", () => {
    it("an entry naming this node takes no frame and counts none, is never connected, never reconnects", () => {
      const l = link()
      l.up("10.0.0.1", undefined)
      l.offer(wake())
      l.markSelf()
      assert.isTrue(l.isSelf)
      assert.isFalse(l.isConnected)
      assert.isFalse(l.offer(wake()))
      assert.isFalse(l.offer(heartbeat))
      // The frame queued before it was recognised is discarded with the link; the two after were never
      // handed.
      l.down()
      const state = l.snapshot()
      assert.include(state, { self: true, connected: false })
      assert.include(state.counters, {
        handed: 1,
        discarded: 1,
        dropped_down: 0,
        dropped_full: 0,
        reconnects: 0
      })
      assert.isTrue(balanced(state))
    })
  })

  describe("what it knows of the peer", () => {
    it("the learned id and the address it is up to, an IPv4-mapped address as IPv4", () => {
      const l = link()
      assert.deepStrictEqual(l.identity, { learnedId: undefined, host: undefined })
      l.up("::ffff:10.0.0.2", undefined)
      assert.deepStrictEqual(l.identity, { learnedId: undefined, host: "10.0.0.2" })
      l.learned("queen-b")
      assert.deepStrictEqual(l.identity, { learnedId: "queen-b", host: "10.0.0.2" })
      // A later challenge names the server anew.
      l.learned("queen-b2")
      assert.deepStrictEqual(l.snapshot().learnedId, Option.some("queen-b2"))
      // The id outlives the link; the address does not.
      l.down()
      assert.deepStrictEqual(l.identity, { learnedId: "queen-b2", host: undefined })
      l.up("fd00::2", undefined)
      assert.strictEqual(l.identity.host, "fd00::2")
    })
  })

  describe("snapshot", () => {
    it("is a copy of every field, taken at once", () => {
      const l = new PeerLink({ host: "fd00::2", port: 7000 }, "[fd00::2]:7000", 4, 1 << 20, undefined, "dns")
      const empty = l.snapshot()
      assert.deepStrictEqual(empty, {
        host: "fd00::2",
        port: 7000,
        name: "[fd00::2]:7000",
        connected: false,
        self: false,
        foundBy: "dns",
        learnedId: Option.none(),
        resolvedIp: Option.none(),
        lastResolvedIp: Option.none(),
        counters: {
          handed: 0,
          written: 0,
          dropped_full: 0,
          dropped_down: 0,
          discarded: 0,
          queued: 0,
          queued_bytes: 0,
          reconnects: 0,
          silent_closes: 0,
          stalled_closes: 0
        },
        lastError: Option.none(),
        writtenByTag: [],
        droppedByTag: []
      })
      l.failed("refused")
      l.up("fd00::2", undefined)
      l.learned("queen-b")
      l.offer(wake())
      l.wrote(l.takeAll(0))
      l.offer(maintenance)
      l.closedBy("peer silent")
      l.closedBy("write stalled")
      l.closedBy("write stalled")
      const state = l.snapshot()
      assert.deepStrictEqual(state, {
        ...empty,
        connected: true,
        learnedId: Option.some("queen-b"),
        resolvedIp: Option.some("fd00::2"),
        lastResolvedIp: Option.some("fd00::2"),
        counters: {
          ...empty.counters,
          silent_closes: 1,
          stalled_closes: 2,
          queued: 1,
          queued_bytes: maintenance.length,
          handed: 2,
          written: 1
        },
        lastError: Option.some("refused"),
        writtenByTag: [[Frame.Tag.MESSAGE_AVAILABLE, 1]]
      })
      // Later changes leave the copy alone.
      l.offer(wake())
      l.down()
      assert.include(state, { connected: true })
      assert.include(state.counters, { queued: 1, handed: 2, discarded: 0 })
      assert.deepStrictEqual(state.droppedByTag, [])
    })
  })

  describe("accounting", () => {
    /** What the dialer, its writer and `Peers` do to a link. */
    type Op =
      | { readonly op: "offer"; readonly kind: "wake" | "maintenance" | "heartbeat"; readonly pad: number }
      | { readonly op: "up"; readonly direct: "none" | "takes" | "full" }
      | { readonly op: "down" | "takeAll" | "wrote" | "markSelf" | "learned" | "failed" | "closedBy" }
    const op: fc.Arbitrary<Op> = fc.oneof(
      {
        weight: 6,
        arbitrary: fc.record({
          op: fc.constant("offer" as const),
          kind: fc.constantFrom("wake" as const, "maintenance" as const, "heartbeat" as const),
          pad: fc.nat({ max: 80 })
        })
      },
      {
        weight: 2,
        arbitrary: fc.record({
          op: fc.constant("up" as const),
          direct: fc.constantFrom("none" as const, "takes" as const, "full" as const)
        })
      },
      { weight: 2, arbitrary: fc.record({ op: fc.constant("takeAll" as const) }) },
      { weight: 2, arbitrary: fc.record({ op: fc.constant("wrote" as const) }) },
      { weight: 1, arbitrary: fc.record({ op: fc.constant("down" as const) }) },
      {
        weight: 1,
        arbitrary: fc.record({
          op: fc.constantFrom("markSelf" as const, "learned" as const, "failed" as const, "closedBy" as const)
        })
      }
    )
    /** Wakes of every size the ops name, encoded once. */
    const wakes = Array.from({ length: 81 }, (_, pad) => wake(`q${"x".repeat(pad)}`))
    const bytesOf = (offer: Extract<Op, { op: "offer" }>) =>
      offer.kind === "wake" ? wakes[offer.pad]! : offer.kind === "maintenance" ? maintenance : heartbeat

    it("handed = written + dropped_full + dropped_down + discarded + queued, after every step of every sequence", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.integer({ min: 1, max: 8 }),
            fc.integer({ min: 0, max: 600 }),
            fc.array(op, { maxLength: 100, size: "medium" })
          ),
          ([capacity, capacityBytes, ops]) => {
            const l = link({ capacity, bytes: capacityBytes })
            // The model: what waits and what the writer holds, each frame by its bytes, oldest first.
            let waiting: Array<Uint8Array> = []
            let held: Array<Uint8Array> | undefined
            let connected = false
            let self = false
            let ups = 0
            let reconnects = 0
            const size = (frames: ReadonlyArray<Uint8Array>) => frames.reduce((n, f) => n + f.length, 0)
            for (const step of ops) {
              const before = l.snapshot()
              switch (step.op) {
                case "offer": {
                  const bytes = bytesOf(step)
                  const taken = l.offer(bytes)
                  const after = l.snapshot()
                  if (self) {
                    assert.isFalse(taken)
                    assert.strictEqual(
                      after.counters.handed,
                      before.counters.handed,
                      "an entry naming this node is handed nothing"
                    )
                    break
                  }
                  assert.strictEqual(after.counters.handed, before.counters.handed + 1)
                  const inQueue = waiting.length + (held?.length ?? 0)
                  const full =
                    inQueue >= capacity || size(waiting) + size(held ?? []) + bytes.length > capacityBytes
                  if (!connected) {
                    assert.isFalse(taken)
                    assert.strictEqual(after.counters.dropped_down, before.counters.dropped_down + 1)
                  } else if (after.counters.written === before.counters.written + 1) {
                    // Only an idle link writes directly: nothing waits and the writer holds nothing.
                    assert.isTrue(taken)
                    assert.isTrue(
                      waiting.length === 0 && held === undefined,
                      "a direct write jumped the queue"
                    )
                  } else if (full) {
                    assert.isFalse(taken)
                    assert.strictEqual(after.counters.dropped_full, before.counters.dropped_full + 1)
                  } else {
                    assert.isTrue(taken, "a frame within both bounds was dropped")
                    waiting.push(bytes)
                  }
                  break
                }
                case "up":
                  // A new session: the dialer marks the link down when the last one ended.
                  if (connected) {
                    if (!self) reconnects++
                    l.down()
                    waiting = []
                    held = undefined
                  }
                  l.up(`10.0.0.${++ups}`, step.direct === "none" ? undefined : () => step.direct === "takes")
                  connected = true
                  break
                case "down":
                  if (connected && !self) reconnects++
                  l.down()
                  connected = false
                  waiting = []
                  // The session ended: its writer is gone with what it held.
                  held = undefined
                  break
                case "takeAll":
                  // The writer takes only while its session lives, and one batch at a time.
                  if (!connected || held !== undefined) break
                  held = l.takeAll(0)
                  assert.deepStrictEqual(held, waiting, "the writer takes what waits, oldest first")
                  waiting = []
                  break
                case "wrote":
                  if (held === undefined) break
                  l.wrote(held)
                  assert.strictEqual(l.snapshot().counters.written, before.counters.written + held.length)
                  held = undefined
                  break
                case "markSelf":
                  l.markSelf()
                  self = true
                  break
                case "learned":
                  l.learned("queen-b")
                  break
                case "failed":
                  l.failed("refused")
                  break
                case "closedBy":
                  l.closedBy("peer silent")
                  break
              }
              const state = l.snapshot()
              assert.isTrue(balanced(state), `unbalanced after ${step.op}: ${JSON.stringify(state)}`)
              assert.strictEqual(state.counters.queued, waiting.length + (held?.length ?? 0))
              assert.strictEqual(state.counters.queued_bytes, size(waiting) + size(held ?? []))
              assert.isAtMost(state.counters.queued, capacity)
              assert.isAtMost(state.counters.queued_bytes, capacityBytes)
              assert.strictEqual(sum(state.writtenByTag), state.counters.written)
              assert.strictEqual(
                sum(state.droppedByTag),
                state.counters.dropped_full + state.counters.dropped_down + state.counters.discarded
              )
              assert.strictEqual(state.counters.reconnects, reconnects)
              assert.strictEqual(state.connected, connected && !self)
            }
          }
        ),
        { numRuns: numRuns(500) }
      )
    })
  })
})
