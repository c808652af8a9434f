/**
 * The PostgreSQL lane's receive path after the envelope: frames decoded and applied in order, the ones
 * that mean nothing on the lane counted.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Latch from "effect/Latch"
import * as Result from "effect/Result"
import type * as Lane from "../../Lane.js"
import * as Codec from "../wire/codec.js"
import * as Frames from "../wire/frames.js"
import type { LaneMembers } from "./members.js"
import type * as Envelope from "./pgEnvelope.js"
import { trace } from "./trace.js"

/** Effects waiting to apply frames, at most; past it a frame is dropped and counted `overloaded`. */
const MAX_PENDING_APPLIES = 65_536

/**
 * The lane's receive path after the envelope: each frame decoded by the frame table and handed to the
 * mesh's dispatch, in the order received. Where the host services apply a frame synchronously it is
 * applied here and now, from the notification's event; once one frame needs an effect, later frames
 * wait behind it (the TCP receive path keeps the same order).
 */
export class LaneReceiver {
  invalidFrames = 0
  handshakeFrames = 0
  unknownFrames = 0
  overloaded = 0
  private readonly waiting: Array<Effect.Effect<void>> = []
  private running = false
  private readonly work: Latch.Latch

  constructor(
    private readonly context: Lane.BuildContext,
    private readonly members: LaneMembers,
    latch: Latch.Latch
  ) {
    this.work = latch
  }

  /** The frames of one authenticated notification. */
  receive(from: string, frames: ReadonlyArray<Envelope.ReceivedFrame>, epoch: string): void {
    this.members.heard(from, epoch)
    for (const frame of frames) this.frame(from, frame)
  }

  private frame(from: string, received: Envelope.ReceivedFrame): void {
    const { tag, json } = received
    if (tag === Frames.Tag.HELLO || tag === Frames.Tag.CHALLENGE) {
      // The lane authenticates each notification; a handshake frame on it means nothing.
      this.handshakeFrames++
      return
    }
    // An empty payload travels as `null`: only a heartbeat may have one.
    const decoded =
      json === null && tag === Frames.Tag.HEARTBEAT
        ? Result.succeed(Frames.heartbeat())
        : Codec.decodeJson(tag, json)
    if (Result.isFailure(decoded)) {
      this.invalidFrames++
      if (this.context.events.listening()) {
        this.context.events.emit({ _tag: "InvalidFrame", from, tag, detail: decoded.failure.detail })
      }
      return
    }
    const frame = decoded.success
    trace.tracer?.stamp("decoded")
    if (frame._tag === "Unknown") {
      this.unknownFrames++
      return
    }
    // Liveness was recorded for the notification; a heartbeat has nothing else to do.
    if (frame._tag === "Heartbeat") return
    this.apply(from, frame)
    trace.tracer?.stamp("dispatched")
  }

  private apply(from: string, frame: Frames.Frame): void {
    const apply = this.context.apply
    if (this.running || this.waiting.length > 0) {
      if (this.waiting.length >= MAX_PENDING_APPLIES) {
        this.overloaded++
        return
      }
      this.waiting.push(Effect.suspend(() => apply(from, frame) ?? Effect.void))
      this.work.openUnsafe()
      return
    }
    const applying = apply(from, frame)
    if (applying !== undefined) {
      this.waiting.push(applying)
      this.work.openUnsafe()
    }
  }

  /** Completes once frames wait to be applied. */
  get ready(): Effect.Effect<void> {
    return this.work.await
  }

  /** Runs what waits, in order; frames arriving meanwhile queue behind it. */
  readonly drain: Effect.Effect<void> = Effect.suspend(() => {
    this.work.closeUnsafe()
    const batch = this.waiting.splice(0, this.waiting.length)
    if (batch.length === 0) return Effect.void
    this.running = true
    return Effect.forEach(batch, (effect) => effect, { discard: true }).pipe(
      Effect.ensuring(
        Effect.sync(() => {
          this.running = false
          if (this.waiting.length > 0) this.work.openUnsafe()
        })
      )
    )
  })
}
