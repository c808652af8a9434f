/**
 * `EPH_ADMIN` verbs counted per operation, sent and received: one object the mesh's API and the
 * dispatch write and the stats and the metrics read.
 *
 * @internal
 */
import { Context, Layer } from "effect"
import type { EphOp } from "../../Frame.js"

/** One count per operation. */
export type PerOp = Record<EphOp, number>

export const ops: ReadonlyArray<EphOp> = ["reset", "delete", "config_set"]

/** The counts of a running mesh. */
export interface EphCountsShape {
  readonly sent: PerOp
  readonly received: PerOp
}

export class EphCounts extends Context.Tag("queen-mesh/internal/EphCounts")<EphCounts, EphCountsShape>() {}

const zero = (): PerOp => ({ reset: 0, delete: 0, config_set: 0 })

export const layer: Layer.Layer<EphCounts> = Layer.sync(EphCounts, () => ({ sent: zero(), received: zero() }))
