/**
 * Where a frame the mesh sends goes: every peer's link and the lane (spec "Topology": a node sends only
 * on the links it dialled). Chosen once when the mesh starts, so a push tests nothing more. A frame is
 * encoded once for every receiver; a batch over the 16 MiB cap goes out in halves, and any other frame
 * over it is dropped with a warning (only a batch can grow that large).
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import type { LaneShape } from "../lane/running.js"
import type { PeersShape } from "../links/peers.js"
import * as Codec from "../wire/codec.js"
import type * as Frames from "../wire/frames.js"

export class Broadcaster {
  /** Hands encoded bytes to every peer's link and the lane; never blocks. */
  readonly send: (bytes: Uint8Array) => void
  /** Whether anyone would receive a frame sent now (a lane always may). */
  readonly hasReceivers: () => boolean

  constructor(peers: PeersShape, lane: LaneShape | undefined) {
    this.send =
      lane === undefined
        ? peers.broadcast
        : (bytes) => {
            peers.broadcast(bytes)
            lane.offer(bytes)
          }
    this.hasReceivers = lane === undefined ? () => peers.size > 0 : () => true
  }

  /** Encodes `frame` and sends it; an oversized batch in halves. */
  frame(frame: Frames.Frame): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (!this.hasReceivers()) return Effect.void
      const encoded = Codec.encodeResult(frame)
      if (Result.isSuccess(encoded)) {
        this.send(encoded.success)
        return Effect.void
      }
      if (frame._tag === "MessageAvailableBatch" && frame.items.length > 1) {
        const half = Math.ceil(frame.items.length / 2)
        return Effect.andThen(
          this.frame({ _tag: frame._tag, items: frame.items.slice(0, half) }),
          this.frame({ _tag: frame._tag, items: frame.items.slice(half) })
        )
      }
      if (frame._tag === "HotlistDirtyBatch" && frame.items.length > 1) {
        const half = Math.ceil(frame.items.length / 2)
        return Effect.andThen(
          this.frame({ _tag: frame._tag, items: frame.items.slice(0, half) }),
          this.frame({ _tag: frame._tag, items: frame.items.slice(half) })
        )
      }
      return Effect.logWarning("dropped a frame larger than the 16 MiB cap").pipe(
        Effect.annotateLogs({ frame: frame._tag, length: encoded.failure.length })
      )
    })
  }
}
