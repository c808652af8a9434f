/**
 * Streaming reassembly of frames from byte chunks of any size and alignment (spec "Framing").
 *
 * A small state machine in the style of a protocol parser: it keeps at most one partial frame between
 * calls, so a frame split across chunks is handled by construction. A frame that lies whole inside a
 * chunk is handed on as a view of that chunk, never copied. A length prefix of 0 or above the 16 MiB cap
 * is rejected before any buffer of that size exists.
 *
 * @since 0.1.0
 */
import { LENGTH_PREFIX_BYTES, MAX_FRAME_LENGTH } from "./Frame.js"
import { FramingError } from "./MeshError.js"

/**
 * Receives each complete frame: its tag byte and its payload bytes. The payload may be a view into the
 * chunk being decoded, valid only during the call.
 *
 * @since 0.1.0
 * @category models
 */
export type OnFrame = (tag: number, payload: Uint8Array) => void

/**
 * A decoder for one connection. Not shared between connections; not re-entrant.
 *
 * @since 0.1.0
 * @category models
 */
export class FrameDecoder {
  /**
   * The largest length prefix accepted; at most the spec's 16 MiB cap. A listener lowers it until the
   * peer has authenticated, so an unauthenticated connection cannot make it reserve a large buffer.
   */
  maxFrameLength: number

  constructor(options: { readonly maxFrameLength?: number } = {}) {
    this.maxFrameLength = Math.min(options.maxFrameLength ?? MAX_FRAME_LENGTH, MAX_FRAME_LENGTH)
  }

  /** The partial length prefix, when a chunk ended inside it. */
  private readonly header = new Uint8Array(LENGTH_PREFIX_BYTES)
  private headerFilled = 0
  /** The partial frame body (tag + payload), sized exactly to its length once that is known. */
  private body: Uint8Array | undefined = undefined
  private bodyFilled = 0
  private failure: FramingError | undefined = undefined

  /** Bytes currently held for an incomplete frame (for tests and stats). */
  get buffered(): number {
    return this.body === undefined ? this.headerFilled : LENGTH_PREFIX_BYTES + this.bodyFilled
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
          onFrame(body[0]!, body.subarray(1))
        }
        continue
      }
      let length: number
      if (this.headerFilled === 0 && end - offset >= LENGTH_PREFIX_BYTES) {
        length = readU32(chunk, offset)
        offset += LENGTH_PREFIX_BYTES
      } else {
        while (this.headerFilled < LENGTH_PREFIX_BYTES && offset < end) {
          this.header[this.headerFilled++] = chunk[offset++]!
        }
        if (this.headerFilled < LENGTH_PREFIX_BYTES) return undefined
        this.headerFilled = 0
        length = readU32(this.header, 0)
      }
      if (length === 0) return this.fail("EmptyFrame", length)
      if (length > this.maxFrameLength) return this.fail("FrameTooLarge", length)
      if (end - offset >= length) {
        // The whole frame is in this chunk: hand on a view, no copy.
        onFrame(chunk[offset]!, chunk.subarray(offset + 1, offset + length))
        offset += length
      } else {
        this.body = new Uint8Array(length)
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
    const held = this.buffered
    return held === 0 ? undefined : this.fail("Truncated", held)
  }

  private fail(reason: FramingError["reason"], length: number): FramingError {
    this.body = undefined
    this.bodyFilled = 0
    this.headerFilled = 0
    this.failure = new FramingError({ reason, length })
    return this.failure
  }
}

const readU32 = (bytes: Uint8Array, at: number): number =>
  ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) >>> 0

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: { readonly maxFrameLength?: number } = {}): FrameDecoder =>
  new FrameDecoder(options)
