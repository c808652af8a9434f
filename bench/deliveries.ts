/**
 * Every message of a write-load cell accounted for: the producers' commits (each connection's
 * messages numbered from 0, each with the `CLOCK_MONOTONIC` stamp taken when its commit was
 * acknowledged) against the consumers' claims (the message's connection and number, and the stamp taken
 * when the claim that returned it was done). A commit never claimed is lost, a message claimed twice is
 * delivered twice, and a claim of a message no producer committed is unknown; all three must be 0.
 */

/**
 * One producer connection's commits: `stamps[seq]` is the commit of its message `seq` acknowledged, in
 * ns, and `begun[seq]` (when given) its statement sent.
 */
export interface Committed {
  readonly source: number
  readonly stamps: ReadonlyArray<number>
  readonly begun?: ReadonlyArray<number> | undefined
}

/** One consumer's claims, as three columns: message `i` is `(source[i], seq[i])`, claimed at `atNs[i]`. */
export interface Claimed {
  readonly source: ReadonlyArray<number>
  readonly seq: ReadonlyArray<number>
  readonly atNs: ReadonlyArray<number>
}

export interface Tally {
  readonly committed: number
  readonly delivered: number
  readonly lost: number
  readonly duplicated: number
  readonly unknown: number
  /** Commit to claim, in µs, one per message delivered (the first claim of each). */
  readonly latenciesUs: ReadonlyArray<number>
  /** Statement sent to claim, in µs, for the messages whose `begun` was given. */
  readonly fromBegunUs: ReadonlyArray<number>
}

export const tally = (committed: ReadonlyArray<Committed>, claims: ReadonlyArray<Claimed>): Tally => {
  const bySource = new Map<
    number,
    {
      readonly stamps: ReadonlyArray<number>
      readonly begun: ReadonlyArray<number> | undefined
      readonly seen: Uint8Array
    }
  >()
  let total = 0
  for (const { source, stamps, begun } of committed) {
    if (bySource.has(source)) throw new Error(`source ${source} reported twice`)
    bySource.set(source, { stamps, begun, seen: new Uint8Array(stamps.length) })
    total += stamps.length
  }
  let delivered = 0
  let duplicated = 0
  let unknown = 0
  const latenciesUs: Array<number> = []
  const fromBegunUs: Array<number> = []
  for (const claimed of claims) {
    for (let i = 0; i < claimed.source.length; i++) {
      const known = bySource.get(claimed.source[i]!)
      const seq = claimed.seq[i]!
      if (known === undefined || !(seq >= 0 && seq < known.stamps.length)) {
        unknown++
        continue
      }
      if (known.seen[seq] === 1) {
        duplicated++
        continue
      }
      known.seen[seq] = 1
      delivered++
      latenciesUs.push((claimed.atNs[i]! - known.stamps[seq]!) / 1000)
      const begun = known.begun?.[seq]
      if (begun !== undefined) fromBegunUs.push((claimed.atNs[i]! - begun) / 1000)
    }
  }
  return {
    committed: total,
    delivered,
    lost: total - delivered,
    duplicated,
    unknown,
    latenciesUs,
    fromBegunUs
  }
}

/**
 * `k` connections over producer processes of at most `perProcess` connections each, filling the first
 * processes first: 8 over 4 processes of 16 is `[8, 0, 0, 0]`, 64 is `[16, 16, 16, 16]`.
 */
export const spread = (k: number, processes: number, perProcess: number): ReadonlyArray<number> => {
  if (k > processes * perProcess) throw new Error(`${k} connections do not fit ${processes} x ${perProcess}`)
  return Array.from({ length: processes }, (_, i) => Math.max(0, Math.min(perProcess, k - i * perProcess)))
}
