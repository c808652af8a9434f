/**
 * The deadline heap of the shipped waker: a binary min-heap of parked pops by deadline, so the reaper
 * finds the next pop due in O(1) and park and timeout stay O(log n). Entries that are done (woken,
 * interrupted) are not removed when they finish: they are dropped when they surface, or all at once by
 * {@link DeadlineHeap.compact}, which the parked-pop index calls when they outnumber the live ones.
 *
 * @internal
 */

/** What the heap orders: a deadline, a park sequence number for ties, and whether the entry is done. */
export interface HeapEntry {
  readonly deadline: number
  readonly seq: number
  readonly done: boolean
}

/** Earlier deadline first; equal deadlines in park order, so timeouts are deterministic. */
const before = (a: HeapEntry, b: HeapEntry): boolean =>
  a.deadline < b.deadline || (a.deadline === b.deadline && a.seq < b.seq)

/** A binary min-heap of entries by deadline. Stale entries are dropped when they surface or on `compact`. */
export class DeadlineHeap<A extends HeapEntry> {
  private readonly items: Array<A> = []

  /** How many entries the heap holds, stale ones included. */
  get size(): number {
    return this.items.length
  }

  peek(): A | undefined {
    return this.items[0]
  }

  push(entry: A): void {
    const items = this.items
    let i = items.length
    items.push(entry)
    while (i > 0) {
      const parent = (i - 1) >> 1
      const above = items[parent]!
      if (!before(entry, above)) break
      items[i] = above
      i = parent
    }
    items[i] = entry
  }

  pop(): A | undefined {
    const items = this.items
    const top = items[0]
    const last = items.pop()
    if (top !== undefined && last !== undefined && items.length > 0) {
      items[0] = last
      this.siftDown(0)
    }
    return top
  }

  /** Drops every stale entry and re-heapifies: O(n), paid for by the stale entries it removes. */
  compact(): void {
    // In place, and truncated: a discarded array would still point at the stale entries until a full GC.
    const items = this.items
    let n = 0
    for (let i = 0; i < items.length; i++) {
      const entry = items[i]!
      if (!entry.done) items[n++] = entry
    }
    items.length = n
    for (let i = (n >> 1) - 1; i >= 0; i--) this.siftDown(i)
  }

  private siftDown(start: number): void {
    const items = this.items
    const n = items.length
    const entry = items[start]!
    let i = start
    for (;;) {
      const left = 2 * i + 1
      if (left >= n) break
      const right = left + 1
      let child = left
      if (right < n && before(items[right]!, items[left]!)) child = right
      const below = items[child]!
      if (!before(below, entry)) break
      items[i] = below
      i = child
    }
    items[i] = entry
  }
}
