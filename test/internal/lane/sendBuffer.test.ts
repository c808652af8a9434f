/**
 * The lane's send buffer: its bounds are high-water marks (a frame is taken while the buffer is under
 * both), so a frame larger than the byte bound (a batch of the largest size against the default 4 MiB)
 * goes out unless the buffer is backed up, a frame in flight beside it or not, and what it holds never
 * passes the byte bound by more than one frame.
 */
import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { SendBuffer } from "../../../src/internal/lane/sendBuffer.js"

const bytes = (n: number) => new Uint8Array(n)

/** The defaults: 1024 frames, 4 MiB; and the largest frame the lane carries, 16 MiB plus its prefix. */
const MAX_FRAMES = 1024
const MAX_BYTES = 4 * 1024 * 1024
const LARGEST = 16 * 1024 * 1024 + 4

describe("SendBuffer", () => {
  it("takes a frame larger than its byte bound into an empty buffer", () => {
    const buffer = new SendBuffer(MAX_FRAMES, MAX_BYTES)
    assert.isTrue(buffer.push(bytes(LARGEST), 0))
    assert.strictEqual(buffer.size, LARGEST)
  })

  it("takes it beside a heartbeat that waits, and beside one the sender holds in flight", () => {
    const waiting = new SendBuffer(MAX_FRAMES, MAX_BYTES)
    assert.isTrue(waiting.push(bytes(60), 0))
    assert.isTrue(waiting.push(bytes(LARGEST), 1))
    assert.strictEqual(waiting.length, 2)

    const held = new SendBuffer(MAX_FRAMES, MAX_BYTES)
    assert.isTrue(held.push(bytes(60), 0))
    assert.strictEqual(held.take().length, 1)
    assert.isTrue(held.push(bytes(LARGEST), 1), "a heartbeat in flight does not drop the batch")
    assert.deepStrictEqual(
      held.take().map((frame) => frame.length),
      [LARGEST]
    )
  })

  it("refuses once its bytes reach the bound, waiting or held, until the sender releases them", () => {
    const buffer = new SendBuffer(MAX_FRAMES, 1000)
    assert.isTrue(buffer.push(bytes(600), 0))
    assert.isTrue(buffer.push(bytes(600), 1), "under the mark: taken, though it crosses it")
    assert.isFalse(buffer.push(bytes(1), 2))
    buffer.take()
    assert.isFalse(buffer.push(bytes(1), 3), "held frames still count")
    buffer.release()
    assert.isTrue(buffer.push(bytes(1), 4))
  })

  it("refuses the frame past its frame bound", () => {
    const buffer = new SendBuffer(3, MAX_BYTES)
    for (let i = 0; i < 3; i++) assert.isTrue(buffer.push(bytes(1), i))
    assert.isFalse(buffer.push(bytes(1), 3))
    assert.strictEqual(buffer.length, 3)
  })

  it("never holds more than its byte bound plus one frame, nor more than its frame bound", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 1, max: 5000 }),
        fc.array(
          fc.oneof(
            fc.record({ op: fc.constant("push" as const), length: fc.integer({ min: 1, max: 3000 }) }),
            fc.record({ op: fc.constant("take" as const) }),
            fc.record({ op: fc.constant("release" as const) })
          ),
          { maxLength: 200 }
        ),
        (maxFrames, maxBytes, ops) => {
          const buffer = new SendBuffer(maxFrames, maxBytes)
          let largest = 0
          for (const [i, op] of ops.entries()) {
            if (op.op === "push") {
              const wasEmpty = buffer.length === 0
              const taken = buffer.push(bytes(op.length), i)
              if (wasEmpty) assert.isTrue(taken, "an empty buffer takes any frame")
              if (taken) largest = Math.max(largest, op.length)
            } else if (op.op === "take") buffer.take()
            else buffer.release()
            assert.isAtMost(buffer.length, maxFrames)
            assert.isBelow(buffer.size, maxBytes + largest + 1)
          }
        }
      )
    )
  })
})
