/**
 * Streaming reassembly of frames from byte chunks of any size and alignment (spec "Framing").
 *
 * A small state machine in the style of a protocol parser: it keeps at most one partial frame between
 * calls, so a frame split across chunks is handled by construction. A frame that lies whole inside a
 * chunk is handed on as a view of that chunk, never copied. A length prefix of 0 or above the 16 MiB cap
 * is rejected before any buffer of that size exists.
 *
 * Caps can also be set per tag, checked from the five header bytes (length and tag) before anything is
 * buffered: a frame over its tag's cap either fails the stream (before authentication) or is skipped
 * without being held, its bytes discarded as they arrive (after it, so one oversized frame costs no
 * memory and does not close a peer's link). A listener's decoder starts with a HELLO's cap and is told
 * once the peer authenticated (`authenticated`), which is the only change made to it mid-stream.
 *
 * @internal
 */

import { FramingError } from "../../MeshError.js"
import { readLength } from "./codec.js"
import { LENGTH_PREFIX_BYTES, MAX_FRAME_LENGTH } from "./payloads.js"

/**
 * Receives each complete frame: its tag byte and its payload bytes. The payload may be a view into the
 * chunk being decoded, valid only during the call.
 */
export type OnFrame = (tag: number, payload: Uint8Array) => void

export interface FrameDecoderOptions {
  /** The largest length prefix accepted; at most the spec's 16 MiB cap. */
  readonly maxFrameLength?: number
  /** A per-tag cap (tag byte plus payload), at most `maxFrameLength`. Default: none. */
  readonly maxLengthOf?: (tag: number) => number
  /**
   * Called for a frame over its tag's cap, which is then skipped without being buffered. Without it, a
   * frame over its tag's cap fails the stream as `FrameTooLarge`.
   */
  readonly onOversized?: (tag: number, length: number) => void
}

const HEADER_BYTES = LENGTH_PREFIX_BYTES + 1

/**
 * A decoder for one connection. Not shared between connections; not re-entrant.
 */
export class FrameDecoder {
  private maxFrameLength: number
  private maxLengthOf: ((tag: number) => number) | undefined
  private onOversized: ((tag: number, length: number) => void) | undefined

  constructor(options: FrameDecoderOptions = {}) {
    this.maxFrameLength = Math.min(options.maxFrameLength ?? MAX_FRAME_LENGTH, MAX_FRAME_LENGTH)
    this.maxLengthOf = options.maxLengthOf
    this.onOversized = options.onOversized
  }

  /**
   * The peer authenticated: frames up to the spec's 16 MiB cap from now on, capped per tag, a frame
   * over its tag's cap skipped rather than failing the stream. Until then an unauthenticated
   * connection cannot make it reserve a large buffer.
   */
  authenticated(options: {
    readonly maxLengthOf: (tag: number) => number
    readonly onOversized: (tag: number, length: number) => void
  }): void {
    this.maxFrameLength = MAX_FRAME_LENGTH
    this.maxLengthOf = options.maxLengthOf
    this.onOversized = options.onOversized
  }

  /** The partial header (length prefix and tag), when a chunk ended inside it. */
  private readonly header = new Uint8Array(HEADER_BYTES)
  private headerFilled = 0
  /** The partial frame payload, sized exactly once its length is known. */
  private body: Uint8Array | undefined = undefined
  private bodyTag = 0
  private bodyFilled = 0
  /** Payload bytes of an oversized frame still to discard. */
  private skipping = 0
  private failure: FramingError | undefined = undefined

  /** Bytes currently held for an incomplete frame (for tests and stats). */
  get buffered(): number {
    return this.body === undefined ? this.headerFilled : HEADER_BYTES + this.bodyFilled
  }

  /**
   * Feeds one chunk. Calls `onFrame` for every frame completed by it, in order, and returns a
   * `FramingError` once the stream is invalid; after that every call returns the same error.
   */
  push(chunk: Uint8Array, onFrame: OnFrame): FramingError | undefined {
    if (this.failure !== undefined) return this.failure
    let offset = 0
    const end = chunk.length
    while (offset < end) {
      if (this.skipping > 0) {
        const take = Math.min(this.skipping, end - offset)
        this.skipping -= take
        offset += take
        continue
      }
      if (this.body !== undefined) {
        // Continue a frame split across chunks.
        const take = Math.min(this.body.length - this.bodyFilled, end - offset)
        this.body.set(chunk.subarray(offset, offset + take), this.bodyFilled)
        this.bodyFilled += take
        offset += take
        if (this.bodyFilled === this.body.length) {
          const body = this.body
          this.body = undefined
          this.bodyFilled = 0
          onFrame(this.bodyTag, body)
        }
        continue
      }
      let length: number
      let tag: number
      if (this.headerFilled === 0 && end - offset >= LENGTH_PREFIX_BYTES) {
        length = readLength(chunk, offset)
        // A bad length is refused as soon as its four bytes are in, before the tag.
        const early = this.checkLength(length)
        if (early !== undefined) return early
        if (end - offset < HEADER_BYTES) {
          this.header.set(chunk.subarray(offset, end), 0)
          this.headerFilled = end - offset
          return undefined
        }
        tag = chunk[offset + LENGTH_PREFIX_BYTES]!
        offset += HEADER_BYTES
      } else {
        while (this.headerFilled < HEADER_BYTES && offset < end) {
          this.header[this.headerFilled++] = chunk[offset++]!
          if (this.headerFilled === LENGTH_PREFIX_BYTES) {
            const early = this.checkLength(readLength(this.header, 0))
            if (early !== undefined) return early
          }
        }
        if (this.headerFilled < HEADER_BYTES) return undefined
        this.headerFilled = 0
        length = readLength(this.header, 0)
        tag = this.header[LENGTH_PREFIX_BYTES]!
      }
      const payloadLength = length - 1
      const cap = this.maxLengthOf?.(tag)
      if (cap !== undefined && length > cap) {
        if (this.onOversized === undefined) return this.fail("FrameTooLarge", length)
        this.onOversized(tag, length)
        this.skipping = payloadLength
        continue
      }
      if (end - offset >= payloadLength) {
        // The whole frame is in this chunk: hand on a view, no copy.
        onFrame(tag, chunk.subarray(offset, offset + payloadLength))
        offset += payloadLength
      } else {
        this.body = new Uint8Array(payloadLength)
        this.bodyTag = tag
        this.bodyFilled = 0
      }
    }
    return undefined
  }

  /**
   * Signals the end of the stream: an error if it ended inside a frame.
   */
  end(): FramingError | undefined {
    if (this.failure !== undefined) return this.failure
    const held = this.buffered + (this.skipping > 0 ? 1 : 0)
    return held === 0 ? undefined : this.fail("Truncated", held)
  }

  /** @internal */
  private checkLength(length: number): FramingError | undefined {
    if (length === 0) return this.fail("EmptyFrame", length)
    if (length > this.maxFrameLength) return this.fail("FrameTooLarge", length)
    return undefined
  }

  /** @internal */
  private fail(reason: FramingError["reason"], length: number): FramingError {
    this.body = undefined
    this.bodyFilled = 0
    this.headerFilled = 0
    this.skipping = 0
    this.failure = new FramingError({ reason, length })
    return this.failure
  }
}
