/**
 * The faults a test sets on the in-memory network (`MemoryTransport`): dials refused, readers stopped,
 * partitions between named nodes, and the delay of bytes in flight. This unit only records them and
 * answers whether they apply; the hosts act on them (`hosts.ts`).
 *
 * A target is a port (on every host), a host (every port), or `host:port`.
 *
 * @internal
 */

/** What a control applies to: a port (on every host), a host (every port), or `host:port`. */
export type Target = number | string

/** Whether `target` names the listener reached as `host` (`*`: an unnamed node's wildcard) on `port`. */
export const matches = (target: Target, host: string, port: number): boolean => {
  if (typeof target === "number") return target === port
  const colon = target.lastIndexOf(":")
  if (colon > 0 && /^\d+$/.test(target.slice(colon + 1))) {
    const targetHost = target.slice(0, colon)
    return Number(target.slice(colon + 1)) === port && (targetHost === host || host === "*")
  }
  return target === host
}

/** Two groups of named nodes that do not reach each other, either way (`all`: every other node). */
interface Partition {
  readonly a: ReadonlySet<string>
  readonly b: ReadonlySet<string> | "all"
}

const inB = (partition: Partition, node: string): boolean =>
  partition.b === "all" ? !partition.a.has(node) : partition.b.has(node)

/** The faults set on one network. */
export class Faults {
  private readonly refused = new Set<Target>()
  private readonly stopped = new Set<Target>()
  private readonly partitions: Array<Partition> = []
  private delay = 0

  /** Refuse (or stop refusing) every dial to `target`. */
  refuse(target: Target, refused: boolean): void {
    if (refused) this.refused.add(target)
    else this.refused.delete(target)
  }

  /** Whether a dial to `host:port` is refused. */
  isRefused(host: string, port: number): boolean {
    for (const target of this.refused) if (matches(target, host, port)) return true
    return false
  }

  /** Stop (or resume) the readers of connections into `target`, current and future. */
  stopReading(target: Target, stopped: boolean): void {
    if (stopped) this.stopped.add(target)
    else this.stopped.delete(target)
  }

  /** Whether the readers of a listener on `host:port` start stopped. */
  isStopped(host: string, port: number): boolean {
    for (const target of this.stopped) if (matches(target, host, port)) return true
    return false
  }

  /** Splits the named nodes of `groupA` from those of `groupB`, both ways, until `heal`. */
  partition(groupA: ReadonlyArray<string>, groupB: ReadonlyArray<string>): void {
    this.partitions.push({ a: new Set(groupA), b: new Set(groupB) })
  }

  /** Cuts `node` off from every other node, both ways, until `heal`. */
  isolate(node: string): void {
    this.partitions.push({ a: new Set([node]), b: "all" })
  }

  /** Lifts every partition and isolation. */
  heal(): void {
    this.partitions.length = 0
  }

  /** Whether a partition separates `from` (a dialer; unnamed: never) and `to`. */
  blocked(from: string | undefined, to: string): boolean {
    if (from === undefined || from === to) return false
    return this.partitions.some(
      (part) => (part.a.has(from) && inB(part, to)) || (part.a.has(to) && inB(part, from))
    )
  }

  /** The delay of every byte written from now on, in `Clock` milliseconds. */
  get delayMillis(): number {
    return this.delay
  }

  setDelay(millis: number): void {
    this.delay = millis
  }
}
