/**
 * Stage stamps on the PostgreSQL lane's hot path, for the bench's breakdown of a lane wake
 * (bench/lane.ts): where a wake's time goes, measured on the path rather than by subtracting totals.
 * Off unless the bench installs a tracer; then each stage costs one property read and a test.
 *
 * The stages of one wake, in order. Sending: `offered` (the frame handed to the lane), `tick` (the
 * sender takes it, at the end of the tick), `packed` (frames packed into notification bodies), `sealed`
 * (sequence number, time and MAC added), `handed` (the statement written to the `pg` client), `acked`
 * (PostgreSQL answered it); `echoed` is our own notification come back to us. Receiving: `notified` (the
 * client's notification event), `verified` (the MAC checked), `checked` (the body parsed, the replay and
 * epoch rules passed), `decoded` (a frame decoded by the frame table), `dispatched` (the mesh's dispatch
 * returned, local pops woken). The receiving stages of one notification run in one call, in order.
 *
 * @internal
 */

export type LaneStage =
  | "offered"
  | "tick"
  | "packed"
  | "sealed"
  | "handed"
  | "acked"
  | "echoed"
  | "notified"
  | "verified"
  | "checked"
  | "decoded"
  | "dispatched"

export interface LaneTracer {
  readonly stamp: (stage: LaneStage) => void
}

/** The installed tracer, if any: read on every stage, so it is one mutable slot. */
export const trace: { tracer: LaneTracer | undefined } = { tracer: undefined }

/** Installs `tracer` (or removes it, with `undefined`) for every lane of this process. */
export const install = (tracer: LaneTracer | undefined): void => {
  trace.tracer = tracer
}
