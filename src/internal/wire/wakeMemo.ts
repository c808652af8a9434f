/**
 * The `MESSAGE_AVAILABLE` frames one connection decoded lately, by their payload's bytes: pushes name the
 * same few partitions over and over (a producer committing back to back hints its partition on every
 * commit), and the same bytes decode to the same frame (decoding is a function of the tag and the
 * payload alone, and frames are immutable). A repeat then costs a hash and a comparison of its bytes,
 * with nothing allocated, instead of the UTF-8 decode, `JSON.parse`, the checks and a new frame: measured
 * in the receive bench, that was four tenths of the receive path's CPU per frame.
 *
 * Bounded: only frames that decoded are kept, only from payloads of at most `KEPT_BYTES`, one per hash
 * (a newer payload with the same hash takes the slot), and the memo is dropped whole when it holds
 * `KEPT_FRAMES`; anything else is decoded (or refused) every time, exactly as without the memo.
 * `test/internal/wire/wakeMemo.test.ts` proves it agrees with `Codec.decodeFrame` on arbitrary payloads.
 *
 * @internal
 */
import { FrameDecodeError } from "../../MeshError.js"
import * as Codec from "./codec.js"
import { type Frame, Tag, type UnknownFrame } from "./frames.js"

/** Frames kept at most: the partitions a peer hinted lately. */
const KEPT_FRAMES = 256
/** The longest payload kept: two names of at most 255 characters, a tenant and the JSON around them. */
const KEPT_BYTES = 1024

/** A payload kept (a copy: the payload handed in is a view of a chunk) and the frame it decodes to. */
interface Kept {
  readonly bytes: Uint8Array
  readonly frame: Frame
}

/** FNV-1a over the bytes, 32 bits. */
const hashOf = (bytes: Uint8Array): number => {
  let hash = 0x811c9dc5
  for (let i = 0; i < bytes.length; i++) hash = Math.imul(hash ^ bytes[i]!, 0x01000193)
  return hash
}

/** Whether two short byte strings are equal. */
export const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => {
  if (a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

export class WakeMemo {
  private readonly kept = new Map<number, Kept>()

  /** The frame a `MESSAGE_AVAILABLE` payload decodes to, or the error: as `Codec.decodeFrame`. */
  decode(payload: Uint8Array): Frame | UnknownFrame | FrameDecodeError {
    if (payload.length > KEPT_BYTES) return Codec.decodeFrame(Tag.MESSAGE_AVAILABLE, payload)
    const hash = hashOf(payload)
    const known = this.kept.get(hash)
    if (known !== undefined && sameBytes(known.bytes, payload)) return known.frame
    const frame = Codec.decodeFrame(Tag.MESSAGE_AVAILABLE, payload)
    if (!(frame instanceof FrameDecodeError) && frame._tag !== "Unknown") {
      if (this.kept.size >= KEPT_FRAMES) this.kept.clear()
      this.kept.set(hash, { bytes: Uint8Array.from(payload), frame })
    }
    return frame
  }
}
