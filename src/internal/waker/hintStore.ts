/**
 * The hint store of the shipped waker: the partitions a wake named, kept per `(queue, tenant)` until a
 * pop takes them, so the pop can look at those partitions first.
 *
 * Bounded three ways (the `LocalWakerOptions` defaults: 10,000 keys, 1,000 partitions per key, 4 MiB of
 * UTF-8 in all, each hint charged its queue, tenant and partition): a hint past a bound is not kept and
 * is counted in `dropped`. A lost hint costs a pop a full re-poll, nothing else.
 *
 * @internal
 */

/** The store's bounds. */
export interface HintBounds {
  /** Distinct `(queue, tenant)` keys kept. */
  readonly maxKeys: number
  /** Partitions kept per key. */
  readonly maxPerKey: number
  /** UTF-8 bytes kept across all keys. */
  readonly maxBytes: number
}

const byteLength = (text: string): number => Buffer.byteLength(text, "utf8")

/** The partitions hinted for one `(queue, tenant)`, with the bytes they are charged. */
class Hint {
  readonly partitions = new Set<string>()
  bytes = 0
  constructor(readonly keyBytes: number) {}
  add(partition: string, cost: number) {
    this.partitions.add(partition)
    this.bytes += cost
  }
}

/** Partition hints by queue and tenant, within their bounds. */
export class HintStore {
  // queue -> tenant -> hinted partitions
  private readonly byQueue = new Map<string, Map<string, Hint>>()
  private keys = 0
  private bytes = 0
  private notKept = 0

  constructor(private readonly bounds: HintBounds) {}

  /** Hints not kept because a bound was reached, since the store was made. */
  get dropped(): number {
    return this.notKept
  }

  /** The `(queue, tenant)` keys held now. */
  get keyCount(): number {
    return this.keys
  }

  /** The bytes the hints held now are charged. */
  get byteCount(): number {
    return this.bytes
  }

  /** Notes that `partition` of `queue` has news for `tenant`, unless a bound is reached. */
  record(queue: string, tenant: string, partition: string): void {
    let byTenant = this.byQueue.get(queue)
    const hint = byTenant?.get(tenant)
    if (hint !== undefined) {
      this.extend(hint, partition)
      return
    }
    const keyBytes = byteLength(queue) + byteLength(tenant)
    const cost = keyBytes + byteLength(partition)
    const bounds = this.bounds
    if (this.keys >= bounds.maxKeys || bounds.maxPerKey < 1 || this.bytes + cost > bounds.maxBytes) {
      this.notKept++
      return
    }
    const fresh = new Hint(keyBytes)
    if (byTenant === undefined) {
      byTenant = new Map()
      this.byQueue.set(queue, byTenant)
    }
    byTenant.set(tenant, fresh)
    this.keys++
    fresh.add(partition, cost)
    this.bytes += cost
  }

  /** Takes (and clears) the partitions hinted for `queue` and `tenant`. */
  take(queue: string, tenant: string): Array<string> {
    const byTenant = this.byQueue.get(queue)
    const hint = byTenant?.get(tenant)
    if (hint === undefined) return []
    byTenant!.delete(tenant)
    if (byTenant!.size === 0) this.byQueue.delete(queue)
    this.keys--
    this.bytes -= hint.bytes
    return [...hint.partitions]
  }

  /** Adds a partition to a key already held. */
  private extend(hint: Hint, partition: string): void {
    if (hint.partitions.has(partition)) return
    const cost = hint.keyBytes + byteLength(partition)
    if (hint.partitions.size >= this.bounds.maxPerKey || this.bytes + cost > this.bounds.maxBytes) {
      this.notKept++
      return
    }
    hint.add(partition, cost)
    this.bytes += cost
  }
}
