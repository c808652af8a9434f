/**
 * `EPH_ADMIN` verbs counted per operation, sent and received: one object the mesh's API and the
 * dispatch write and the stats and the metrics read. The operations are `EphOp`'s, listed once.
 *
 * @internal
 */
import { Context, Layer } from "effect"
import { EphOp } from "../wire/payloads.js"

/** One count per operation. */
export type PerOp = Record<EphOp, number>

export const ops: ReadonlyArray<EphOp> = EphOp.literals

/** The counts of a running mesh. */
export interface EphCountsShape {
  readonly sent: PerOp
  readonly received: PerOp
}

export class EphCounts extends Context.Tag("queen-mesh/internal/EphCounts")<EphCounts, EphCountsShape>() {}

const zero = (): PerOp => {
  const counts = {} as PerOp
  for (const op of ops) counts[op] = 0
  return counts
}

export const layer: Layer.Layer<EphCounts> = Layer.sync(EphCounts, () => ({ sent: zero(), received: zero() }))
