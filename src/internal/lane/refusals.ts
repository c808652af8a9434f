/**
 * Why the PostgreSQL lane refused what it received, each reason listed once: the envelope's (a
 * notification whose format, MAC, sender, epoch, sequence, backend or time does not hold; see
 * `pgEnvelope` and docs/postgres.md) and the frames' (a frame of an accepted notification that is
 * invalid, a handshake frame, which means nothing on the lane, a tag this version does not know, or one
 * past the bound of frames waiting to be applied). The stats body's `lane.refused`, the metric's
 * `reason` label and the counters all derive from these lists.
 *
 * @internal
 */
import * as Schema from "effect/Schema"

/** The envelope's refusals; a notification of our own is no refusal (`own`, counted apart). */
export const EnvelopeRefusal = Schema.Literals([
  "malformed",
  "unknown_key",
  "bad_mac",
  "unauthenticated",
  "own_server_id",
  "old_epoch",
  "replayed",
  "wrong_backend",
  "stale"
])

export type EnvelopeRefusal = typeof EnvelopeRefusal.Type

/** The refusals of frames inside accepted notifications. */
export const FrameRefusal = Schema.Literals([
  "invalid_frame",
  "handshake_frame",
  "unknown_frame",
  "overloaded"
])

export type FrameRefusal = typeof FrameRefusal.Type

/** Every refusal, as the stats body counts them. */
export const reasons: ReadonlyArray<EnvelopeRefusal | FrameRefusal> = [
  ...EnvelopeRefusal.literals,
  ...FrameRefusal.literals
]

export type Refusal = EnvelopeRefusal | FrameRefusal

/** A count of zero for every reason of `literals`. */
export const zeroes = <R extends string>(literals: ReadonlyArray<R>): Record<R, number> => {
  const counts = {} as Record<R, number>
  for (const reason of literals) counts[reason] = 0
  return counts
}
