import { assert, describe, it } from "@effect/vitest"
import * as fc from "fast-check"
import { DeadlineHeap } from "../../../src/internal/waker/deadlineHeap.js"

class Entry {
  done = false
  constructor(
    readonly deadline: number,
    readonly seq: number
  ) {}
}

const drain = (heap: DeadlineHeap<Entry>): Array<Entry> => {
  const out: Array<Entry> = []
  for (let top = heap.pop(); top !== undefined; top = heap.pop()) out.push(top)
  return out
}

describe("DeadlineHeap", () => {
  it("pops by deadline, ties in push order", () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 20 }), { maxLength: 200 }), (deadlines) => {
        const heap = new DeadlineHeap<Entry>()
        const entries = deadlines.map((deadline, seq) => new Entry(deadline, seq))
        for (const entry of entries) heap.push(entry)
        const expected = [...entries].sort((a, b) => a.deadline - b.deadline || a.seq - b.seq)
        assert.deepStrictEqual(drain(heap), expected)
      })
    )
  })

  it("compact drops exactly the done entries and keeps the order of the rest", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 50 }), fc.boolean()), { maxLength: 200 }),
        (specs) => {
          const heap = new DeadlineHeap<Entry>()
          const entries = specs.map(([deadline], seq) => new Entry(deadline, seq))
          for (const entry of entries) heap.push(entry)
          specs.forEach(([, done], i) => {
            entries[i]!.done = done
          })
          heap.compact()
          const live = entries.filter((entry) => !entry.done)
          assert.strictEqual(heap.size, live.length)
          assert.deepStrictEqual(
            drain(heap),
            live.sort((a, b) => a.deadline - b.deadline || a.seq - b.seq)
          )
        }
      )
    )
  })

  it("peek shows the top without taking it; an empty heap has none", () => {
    const heap = new DeadlineHeap<Entry>()
    assert.isUndefined(heap.peek())
    assert.isUndefined(heap.pop())
    heap.push(new Entry(5, 0))
    heap.push(new Entry(3, 1))
    assert.strictEqual(heap.peek()?.deadline, 3)
    assert.strictEqual(heap.size, 2)
  })
})
