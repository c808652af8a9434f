/**
 * `EPH_ADMIN` verbs counted per operation, sent and received. Dispatch owns it (it applies what is
 * received) and hands it to the mesh's API (which counts what it sends); the stats and the metrics
 * read it. The operations are `EphOp`'s, listed once.
 *
 * @internal
 */
import { EphOp } from "../wire/payloads.js"

/** One count per operation. */
export type PerOp = Record<EphOp, number>

export const ops: ReadonlyArray<EphOp> = EphOp.literals

const zero = (): PerOp => {
  const counts = {} as PerOp
  for (const op of ops) counts[op] = 0
  return counts
}

export class EphAdminAccount {
  private readonly sentCounts = zero()
  private readonly receivedCounts = zero()

  sent(op: EphOp): void {
    this.sentCounts[op]++
  }

  received(op: EphOp): void {
    this.receivedCounts[op]++
  }

  /** A copy of both counts, as the stats body holds them. */
  snapshot(): { readonly sent: PerOp; readonly received: PerOp } {
    return { sent: { ...this.sentCounts }, received: { ...this.receivedCounts } }
  }
}
