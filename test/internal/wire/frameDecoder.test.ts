/**
 * Streaming reassembly (spec "Framing"): any frame sequence cut any way decodes to itself, arbitrary
 * bytes never throw, the decoder holds at most one partial frame, and bad prefixes are rejected before
 * anything is allocated.
 */
import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import * as fc from "fast-check"
import * as Frame from "../../../src/Frame.js"
import * as FrameDecoder from "../../../src/internal/wire/frameDecoder.js"
import { FramingError } from "../../../src/MeshError.js"
import * as Arb from "../../fixtures/arbitraries.js"
import { numRuns } from "../../fixtures/budget.js"
import { assertEqual } from "../../fixtures/equality.js"

const MAX = Frame.MAX_FRAME_LENGTH

interface RawFrame {
  readonly tag: number
  readonly payload: Uint8Array
}

/** Pushes every chunk, collecting frames (copied: the payload view is valid only during the call). */
const pushAll = (decoder: FrameDecoder.FrameDecoder, chunks: ReadonlyArray<Uint8Array>) => {
  const frames: Array<RawFrame> = []
  for (const chunk of chunks) {
    const error = decoder.push(chunk, (tag, payload) => frames.push({ tag, payload: payload.slice() }))
    if (error !== undefined) return { frames, error }
  }
  return { frames, error: undefined }
}

/** Asserts a FramingError of the given reason and length. */
const assertFraming = (
  error: FramingError | undefined,
  reason: FramingError["reason"],
  length?: number
): FramingError => {
  assert.instanceOf(error, FramingError)
  if (error === undefined) return assert.fail("unreachable")
  assert.strictEqual(error.reason, reason)
  if (length !== undefined) assert.strictEqual(error.length, length)
  return error
}

// ---------------------------------------------------------------------------------------------
// reference model: parse a whole byte array at once
// ---------------------------------------------------------------------------------------------

interface Reference {
  readonly frames: ReadonlyArray<RawFrame>
  /** Offsets at which each frame starts, plus the offset after the last complete frame. */
  readonly boundaries: ReadonlyArray<number>
  /** A bad prefix: its reason, its length, and the stream offset just after its last byte. */
  readonly rejected:
    | { readonly reason: "EmptyFrame" | "FrameTooLarge"; readonly length: number; readonly at: number }
    | undefined
  /** Bytes of an incomplete frame left at the end of a stream without a bad prefix. */
  readonly trailing: number
}

const reference = (bytes: Uint8Array): Reference => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  const frames: Array<RawFrame> = []
  const boundaries: Array<number> = [0]
  let at = 0
  while (bytes.length - at >= 4) {
    const length = view.getUint32(at)
    if (length === 0)
      return { frames, boundaries, rejected: { reason: "EmptyFrame", length, at: at + 4 }, trailing: 0 }
    if (length > MAX)
      return { frames, boundaries, rejected: { reason: "FrameTooLarge", length, at: at + 4 }, trailing: 0 }
    if (bytes.length - at - 4 < length) break
    frames.push({ tag: bytes[at + 4]!, payload: bytes.slice(at + 5, at + 4 + length) })
    at += 4 + length
    boundaries.push(at)
  }
  return { frames, boundaries, rejected: undefined, trailing: bytes.length - at }
}

/** Pieces of a hostile or corrupt stream. */
const segment: fc.Arbitrary<Uint8Array> = fc.oneof(
  {
    arbitrary: fc
      .tuple(fc.integer({ min: 0, max: 255 }), fc.uint8Array({ maxLength: 40 }))
      .map(([tag, payload]) => Arb.rawFrame(tag, payload)),
    weight: 8
  },
  { arbitrary: Arb.frame.map(Frame.encode), weight: 3 },
  { arbitrary: fc.uint8Array({ maxLength: 24 }), weight: 3 },
  { arbitrary: fc.constant(Arb.header(0)), weight: 1 },
  {
    arbitrary: fc
      .oneof(fc.constant(MAX + 1), fc.constant(0xffffffff), fc.integer({ min: MAX + 1, max: 0xffffffff }))
      .map(Arb.header),
    weight: 1
  },
  { arbitrary: fc.integer({ min: 1, max: 300 }).map(Arb.header), weight: 1 }
)

const stream: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.array(segment, { maxLength: 12 }).map(Arb.concat),
  fc.uint8Array({ maxLength: 256 })
)

describe("FrameDecoder", () => {
  describe("round trip", () => {
    it("any frame list, encoded, concatenated and cut any way, decodes to the same frames", () => {
      fc.assert(
        fc.property(fc.array(Arb.wireFrame, { maxLength: 12 }), Arb.chunking, (frames, how) => {
          const decoder = new FrameDecoder.FrameDecoder()
          const out: Array<Frame.Frame | Frame.UnknownFrame> = []
          for (const chunk of Arb.cut(Arb.concat(frames.map(Arb.encodeWire)), how)) {
            const error = decoder.push(chunk, (tag, payload) => {
              const frame = Result.getOrThrow(Frame.decodePayload(tag, payload))
              out.push(frame._tag === "Unknown" ? { ...frame, payload: payload.slice() } : frame)
            })
            assert.isUndefined(error)
            // A socket may reuse its buffer: the decoder must not keep pointing into a pushed chunk.
            chunk.fill(0xa5)
          }
          assert.isUndefined(decoder.end())
          assert.strictEqual(decoder.buffered, 0)
          assertEqual(out, frames)
        }),
        { numRuns: numRuns(250) }
      )
    })

    it("decodes one frame split across many chunks, holding exactly the bytes seen so far", () => {
      const frame: Frame.Frame = {
        _tag: "MessageAvailableBatch",
        items: Array.from({ length: 100 }, (_, i) =>
          Frame.queueItem({ queue: `queue-${i}`, partition: `p-${i}`, tenant: "ten😀nt" })
        )
      }
      const bytes = Frame.encode(frame)
      const decoder = new FrameDecoder.FrameDecoder()
      const out: Array<Frame.Frame | Frame.UnknownFrame> = []
      let fed = 0
      for (const chunk of Arb.cut(bytes, { _tag: "Sizes", sizes: [3, 1, 7] })) {
        assert.isUndefined(
          decoder.push(chunk, (tag, payload) =>
            out.push(Result.getOrThrow(Frame.decodePayload(tag, payload)))
          )
        )
        fed += chunk.length
        assert.strictEqual(decoder.buffered, fed === bytes.length ? 0 : fed)
        assert.strictEqual(out.length, fed === bytes.length ? 1 : 0)
      }
      assertEqual(out, [frame])
    })

    it("decodes many frames from one chunk, in order", () => {
      const frames: Array<Frame.Frame | Frame.UnknownFrame> = Array.from({ length: 50 }, (_, i) => ({
        _tag: "MaintenanceModeSet",
        enabled: i % 3 === 0
      }))
      const decoder = new FrameDecoder.FrameDecoder()
      const out: Array<Frame.Frame | Frame.UnknownFrame> = []
      decoder.push(Arb.concat(frames.map(Arb.encodeWire)), (tag, payload) =>
        out.push(Result.getOrThrow(Frame.decodePayload(tag, payload)))
      )
      assertEqual(out, frames)
      assert.strictEqual(decoder.buffered, 0)
    })

    it("hands on the tag byte and payload bytes of each frame", () => {
      const decoder = new FrameDecoder.FrameDecoder()
      const { frames, error } = pushAll(decoder, [
        Uint8Array.of(0, 0, 0, 1, 3, 0, 0, 0, 4, 99, 1, 2),
        Uint8Array.of(3, 0, 0),
        Uint8Array.of(0, 2, 7),
        Uint8Array.of(8)
      ])
      assert.isUndefined(error)
      assertEqual(frames, [
        { tag: 3, payload: new Uint8Array(0) },
        { tag: 99, payload: Uint8Array.of(1, 2, 3) },
        { tag: 7, payload: Uint8Array.of(8) }
      ])
    })

    it("ignores empty chunks", () => {
      const decoder = new FrameDecoder.FrameDecoder()
      const bytes = Frame.encode(Frame.heartbeat("x"))
      const { frames, error } = pushAll(decoder, [
        new Uint8Array(0),
        bytes.slice(0, 2),
        new Uint8Array(0),
        bytes.slice(2)
      ])
      assert.isUndefined(error)
      assert.strictEqual(frames.length, 1)
      assert.isUndefined(decoder.end())
    })
  })

  describe("hostile input", () => {
    it("arbitrary bytes in arbitrary chunks never throw and match a whole-buffer parse", () => {
      fc.assert(
        fc.property(stream, Arb.chunking, (bytes, how) => {
          const expected = reference(bytes)
          const decoder = new FrameDecoder.FrameDecoder()
          const frames: Array<RawFrame> = []
          let fed = 0
          let failure: FramingError | undefined
          for (const chunk of Arb.cut(bytes, how)) {
            const seen = frames.length
            const error = decoder.push(chunk, (tag, payload) =>
              frames.push({ tag, payload: payload.slice() })
            )
            fed += chunk.length
            assert.isAtMost(decoder.buffered, 4 + MAX)
            if (failure !== undefined) {
              // After an error every push returns that same error and delivers nothing.
              assert.strictEqual(error, failure)
              assert.strictEqual(frames.length, seen)
            } else if (error !== undefined) {
              failure = error
              // Rejected in the push that completed the bad prefix, not later.
              assert.isDefined(expected.rejected)
              assert.isAtLeast(fed, expected.rejected!.at)
              assert.isBelow(fed - chunk.length, expected.rejected!.at)
              assert.strictEqual(decoder.buffered, 0)
            } else {
              // At most one partial frame: exactly the bytes since the last frame boundary.
              const boundary = expected.boundaries.filter((b) => b <= fed).at(-1) ?? 0
              assert.strictEqual(decoder.buffered, fed - boundary)
            }
            chunk.fill(0x5a)
          }
          assertEqual(frames, expected.frames)
          const end = decoder.end()
          if (expected.rejected !== undefined) {
            assertFraming(failure, expected.rejected.reason, expected.rejected.length)
            assert.strictEqual(end, failure)
            assert.strictEqual(
              decoder.push(Uint8Array.of(0, 0, 0, 1, 3), () => assert.fail("delivered")),
              failure
            )
          } else {
            assert.isUndefined(failure)
            if (expected.trailing === 0) assert.isUndefined(end)
            else assertFraming(end, "Truncated", expected.trailing)
          }
        }),
        { numRuns: numRuns(400) }
      )
    })

    it("rejects the 4-byte header 0xFFFFFFFF immediately, holding nothing", () => {
      const decoder = new FrameDecoder.FrameDecoder()
      const error = decoder.push(Uint8Array.of(0xff, 0xff, 0xff, 0xff), () => assert.fail("delivered"))
      assertFraming(error, "FrameTooLarge", 0xffffffff)
      assert.strictEqual(decoder.buffered, 0)
      assert.include(error!.message, String(0xffffffff))
    })

    it("allocates nothing for an oversized prefix (and the full length for an allowed one)", () => {
      // Record every `new Uint8Array(n)` the decoder makes, by swapping the global constructor.
      const Original = globalThis.Uint8Array
      const sizes: Array<number> = []
      globalThis.Uint8Array = new Proxy(Original, {
        construct(target, args, newTarget) {
          if (typeof args[0] === "number") sizes.push(args[0])
          return Reflect.construct(target, args, newTarget)
        }
      })
      let tooLarge: FramingError | undefined
      let allowed: FramingError | undefined
      let allowedSizes: Array<number> = []
      try {
        tooLarge = new FrameDecoder.FrameDecoder().push(Original.of(0xff, 0xff, 0xff, 0xff, 4, 0), () => {})
        const large = sizes.filter((size) => size > 1024)
        allowed = new FrameDecoder.FrameDecoder().push(Original.of(0x01, 0, 0, 0, 4, 0), () => {})
        allowedSizes = sizes.filter((size) => size > 1024)
        assert.deepStrictEqual(large, [])
      } finally {
        globalThis.Uint8Array = Original
      }
      assertFraming(tooLarge, "FrameTooLarge", 0xffffffff)
      assert.isUndefined(allowed)
      // The spy does see the decoder's allocations: a 16 MiB prefix buys its payload (16 MiB less the tag).
      assert.deepStrictEqual(allowedSizes, [0x01000000 - 1])
    })

    it("rejects an oversized prefix fed one byte at a time, at its last byte", () => {
      const decoder = new FrameDecoder.FrameDecoder()
      const header = Arb.header(MAX + 1)
      for (let i = 0; i < 3; i++) {
        assert.isUndefined(decoder.push(header.subarray(i, i + 1), () => assert.fail("delivered")))
        assert.strictEqual(decoder.buffered, i + 1)
      }
      assertFraming(
        decoder.push(header.subarray(3), () => assert.fail("delivered")),
        "FrameTooLarge",
        MAX + 1
      )
      assert.strictEqual(decoder.buffered, 0)
    })

    it("rejects an oversized prefix behind good frames in the same chunk, after delivering them", () => {
      const decoder = new FrameDecoder.FrameDecoder()
      const good = Frame.encode(Frame.heartbeat())
      const { frames, error } = pushAll(decoder, [Arb.concat([good, good, Arb.header(0x80000000), good])])
      assert.strictEqual(frames.length, 2)
      assertFraming(error, "FrameTooLarge", 0x80000000)
      assert.strictEqual(decoder.buffered, 0)
    })

    it("accepts a frame of exactly 16 MiB, holding at most 4 + 16 MiB while it arrives", () => {
      const decoder = new FrameDecoder.FrameDecoder()
      assert.isUndefined(decoder.push(Arb.header(MAX), () => assert.fail("early")))
      assert.strictEqual(decoder.buffered, 4)
      const body = new Uint8Array(MAX)
      body[0] = 200
      body[MAX - 1] = 7
      const step = 4 * 1024 * 1024
      let delivered: RawFrame | undefined
      for (let at = 0; at < MAX; at += step) {
        assert.isUndefined(
          decoder.push(body.subarray(at, at + step), (tag, payload) => {
            delivered = { tag, payload: payload.slice(payload.length - 1) }
            assert.strictEqual(payload.length, MAX - 1)
          })
        )
        assert.strictEqual(decoder.buffered, at + step === MAX ? 0 : 4 + at + step)
        assert.isAtMost(decoder.buffered, 4 + MAX)
      }
      assertEqual(delivered, { tag: 200, payload: Uint8Array.of(7) })
    })

    it("a lower maxFrameLength caps the prefix the same way; a higher one is clamped to 16 MiB", () => {
      const small = new FrameDecoder.FrameDecoder({ maxFrameLength: 64 })
      assertFraming(
        small.push(Arb.header(65), () => assert.fail("delivered")),
        "FrameTooLarge",
        65
      )
      assert.strictEqual(small.buffered, 0)
      const exact = new FrameDecoder.FrameDecoder({ maxFrameLength: 64 })
      const { frames, error } = pushAll(exact, [Arb.rawFrame(7, new Uint8Array(63))])
      assert.isUndefined(error)
      assert.strictEqual(frames.length, 1)
      const clamped = new FrameDecoder.FrameDecoder({ maxFrameLength: MAX * 2 })
      assertFraming(
        clamped.push(Arb.header(MAX + 1), () => {}),
        "FrameTooLarge",
        MAX + 1
      )
      // Once the peer authenticated, the cap is the spec's, with per-tag caps on top.
      const raised = new FrameDecoder.FrameDecoder({ maxFrameLength: 64 })
      raised.authenticated({ maxLengthOf: () => MAX, onOversized: () => {} })
      assert.isUndefined(raised.push(Arb.header(1024), () => {}))
      assert.strictEqual(raised.buffered, 4)
    })

    it("rejects a length prefix of 0 with EmptyFrame", () => {
      const decoder = new FrameDecoder.FrameDecoder()
      assertFraming(
        decoder.push(Arb.header(0), () => assert.fail("delivered")),
        "EmptyFrame",
        0
      )
      assert.strictEqual(decoder.buffered, 0)
    })

    it("end() mid-frame returns Truncated with the bytes held", () => {
      const bytes = Frame.encode(Frame.heartbeat("server"))
      for (let held = 1; held < bytes.length; held++) {
        const decoder = new FrameDecoder.FrameDecoder()
        assert.isUndefined(decoder.push(bytes.slice(0, held), () => assert.fail("delivered")))
        assertFraming(decoder.end(), "Truncated", held)
        assert.strictEqual(decoder.buffered, 0)
      }
    })

    it("end() at a frame boundary or on an empty stream is clean", () => {
      const empty = new FrameDecoder.FrameDecoder()
      assert.isUndefined(empty.end())
      const decoder = new FrameDecoder.FrameDecoder()
      assert.isUndefined(decoder.push(Frame.encode(Frame.heartbeat()), () => {}))
      assert.isUndefined(decoder.end())
    })

    it("after an error every push and end returns the same error", () => {
      const decoder = new FrameDecoder.FrameDecoder()
      const error = assertFraming(
        decoder.push(Arb.header(0), () => {}),
        "EmptyFrame"
      )
      assert.strictEqual(
        decoder.push(Frame.encode(Frame.heartbeat()), () => assert.fail("delivered")),
        error
      )
      assert.strictEqual(
        decoder.push(new Uint8Array(0), () => assert.fail("delivered")),
        error
      )
      assert.strictEqual(decoder.end(), error)
      assert.strictEqual(decoder.end(), error)

      const truncated = new FrameDecoder.FrameDecoder()
      truncated.push(Uint8Array.of(0, 0), () => {})
      const eof = assertFraming(truncated.end(), "Truncated", 2)
      assert.strictEqual(truncated.end(), eof)
      assert.strictEqual(
        truncated.push(Frame.encode(Frame.heartbeat()), () => assert.fail("delivered")),
        eof
      )
    })

    it("keeps decoders independent", () => {
      const a = new FrameDecoder.FrameDecoder()
      const b = new FrameDecoder.FrameDecoder()
      a.push(Uint8Array.of(0, 0), () => {})
      assert.strictEqual(a.buffered, 2)
      assert.strictEqual(b.buffered, 0)
      assert.isUndefined(b.end())
    })
  })
})
