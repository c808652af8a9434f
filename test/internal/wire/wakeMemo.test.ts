import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import * as Frame from "../../../src/Frame.js"
import * as Codec from "../../../src/internal/wire/codec.js"
import { WakeMemo } from "../../../src/internal/wire/wakeMemo.js"
import { FrameDecodeError } from "../../../src/MeshError.js"
import { messageAvailable } from "../../fixtures/arbitraries.js"
import { numRuns } from "../../fixtures/budget.js"
import { assertEqual } from "../../fixtures/equality.js"

/** What a verdict says: the frame, or the error's tag and detail. */
const verdictOf = (decoded: Frame.Frame | Frame.UnknownFrame | FrameDecodeError): unknown =>
  decoded instanceof FrameDecodeError ? { error: decoded.tag, detail: decoded.detail } : decoded

// Payloads a peer may send under MESSAGE_AVAILABLE: valid wakes, wakes with an extra field, other JSON,
// bytes that are no JSON, invalid UTF-8, and nothing.
const payload: fc.Arbitrary<Uint8Array> = fc.oneof(
  messageAvailable.map((frame) => Frame.encode(frame).subarray(5)),
  fc
    .tuple(messageAvailable, fc.string({ maxLength: 2000 }))
    .map(([frame, extra]) => Buffer.from(JSON.stringify({ ...Codec.payloadOf(frame), extra }))),
  fc.jsonValue({ maxDepth: 2 }).map((json) => Buffer.from(JSON.stringify(json))),
  fc.string({ maxLength: 12 }).map((text) => Buffer.from(text)),
  fc.uint8Array({ maxLength: 12 }),
  fc.constant(new Uint8Array(0))
)

describe("WakeMemo", () => {
  it("decodes every payload as Codec.decodeFrame does, repeats and all", () => {
    fc.assert(
      fc.property(
        fc.array(payload, { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 60 }),
        (pool, picks) => {
          const memo = new WakeMemo()
          // Payloads drawn from a small pool, so most come again; some as a copy, some as a view.
          for (const pick of [0, ...picks]) {
            const bytes = pool[pick % pool.length]!
            const given = pick % 2 === 0 ? Buffer.from(bytes) : bytes
            assertEqual(
              verdictOf(memo.decode(given)),
              verdictOf(Codec.decodeFrame(Frame.Tag.MESSAGE_AVAILABLE, given))
            )
          }
        }
      ),
      { numRuns: numRuns(1000) }
    )
  })

  it("answers a repeat with the frame it kept, and stays bounded", () => {
    const memo = new WakeMemo()
    const bytes = (partition: string) =>
      Frame.encode({ _tag: "MessageAvailable", ...Frame.queueItem({ queue: "q", partition }) }).subarray(5)
    const first = memo.decode(bytes("p-0"))
    assert.strictEqual(memo.decode(Buffer.from(bytes("p-0"))), first)
    // Past its bound it starts over: the frames still decode, anew.
    for (let i = 1; i <= 300; i++) memo.decode(bytes(`p-${i}`))
    const again = memo.decode(bytes("p-0"))
    assert.notStrictEqual(again, first)
    assertEqual(again, first)
  })
})
