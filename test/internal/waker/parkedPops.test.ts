import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { ParkedPops, type WakeOutcome } from "../../../src/internal/waker/parkedPops.js"

/** A resume that records the outcome it was given. */
const recorder = () => {
  const outcomes: Array<WakeOutcome> = []
  const resume = (outcome: Effect.Effect<WakeOutcome>) => {
    outcomes.push(Effect.runSync(outcome))
  }
  return { outcomes, resume }
}

describe("ParkedPops", () => {
  it("wakes the pops of one queue and tenant, and only those", () => {
    const pops = new ParkedPops()
    const a = recorder()
    const b = recorder()
    const c = recorder()
    pops.park("q", "t1", 100, a.resume)
    pops.park("q", "t2", 100, b.resume)
    pops.park("other", "t1", 100, c.resume)
    pops.wake("q", "t1")
    assert.deepStrictEqual([a.outcomes, b.outcomes, c.outcomes], [["woken"], [], []])
    assert.strictEqual(pops.parked, 2)
    assert.deepStrictEqual([...(pops.tenantsOn("q") ?? [])], ["t2"])
    pops.wakeQueue("q")
    assert.deepStrictEqual(b.outcomes, ["woken"])
    assert.isUndefined(pops.tenantsOn("q"))
    assert.strictEqual(pops.parked, 1)
  })

  it("times out what is due, in deadline order, and says what is next", () => {
    const pops = new ParkedPops()
    const order: Array<string> = []
    const park = (name: string, deadline: number) =>
      pops.park("q", "t", deadline, (outcome) => order.push(`${name}:${Effect.runSync(outcome)}`))
    park("late", 300)
    park("early", 100)
    park("never", Number.POSITIVE_INFINITY)
    park("mid", 200)
    assert.strictEqual(pops.nextDeadline(), 100)
    assert.strictEqual(pops.expire(99), 0)
    assert.strictEqual(pops.expire(200), 2)
    assert.deepStrictEqual(order, ["early:timeout", "mid:timeout"])
    assert.strictEqual(pops.nextDeadline(), 300)
    assert.strictEqual(pops.expire(1_000_000), 1)
    assert.strictEqual(pops.nextDeadline(), Number.POSITIVE_INFINITY)
    assert.strictEqual(pops.parked, 1)
  })

  it("a woken or interrupted pop leaves a stale heap entry, skipped when it surfaces", () => {
    const pops = new ParkedPops()
    const woken = recorder()
    const left = recorder()
    const kept = recorder()
    pops.park("a", "t", 100, woken.resume)
    const leaving = pops.park("b", "t", 150, left.resume)
    pops.park("c", "t", 200, kept.resume)
    pops.wake("a", "t")
    pops.leave(leaving)
    assert.strictEqual(pops.parked, 1)
    assert.strictEqual(pops.heapEntries, 3)
    // The two stale tops are dropped on the way to the live one, and never resumed again.
    assert.strictEqual(pops.nextDeadline(), 200)
    assert.strictEqual(pops.heapEntries, 1)
    assert.strictEqual(pops.expire(200), 1)
    assert.deepStrictEqual([woken.outcomes, left.outcomes, kept.outcomes], [["woken"], [], ["timeout"]])
    // Leaving after the end changes nothing.
    pops.leave(leaving)
    assert.strictEqual(pops.parked, 0)
  })

  it("compacts the heap once the stale entries outnumber the live ones (and are at least 64)", () => {
    const pops = new ParkedPops()
    const ignore = () => {}
    for (let i = 0; i < 100; i++) pops.park(`q${i}`, "t", 1_000 + i, ignore)
    for (let i = 0; i < 50; i++) pops.wake(`q${i}`, "t")
    // 50 stale, 50 live: not yet.
    assert.strictEqual(pops.heapEntries, 100)
    for (let i = 50; i < 63; i++) pops.wake(`q${i}`, "t")
    // 63 stale: under the floor.
    assert.strictEqual(pops.heapEntries, 100)
    pops.wake("q63", "t")
    assert.strictEqual(pops.heapEntries, 36)
    assert.strictEqual(pops.parked, 36)
    assert.strictEqual(pops.nextDeadline(), 1_064)
  })

  it("releaseAll ends every pop as shutdown; timeOut ends those of a snapshot still parked", () => {
    const pops = new ParkedPops()
    const a = recorder()
    const b = recorder()
    const c = recorder()
    pops.park("q", "t1", 100, a.resume)
    pops.park("q", "t2", 100, b.resume)
    const then = pops.snapshot()
    assert.strictEqual(then.length, 2)
    pops.wake("q", "t1")
    pops.timeOut(then)
    assert.deepStrictEqual([a.outcomes, b.outcomes], [["woken"], ["timeout"]])
    pops.park("r", "t", 100, c.resume)
    assert.strictEqual(pops.releaseAll(), 1)
    assert.deepStrictEqual(c.outcomes, ["shutdown"])
    assert.strictEqual(pops.parked, 0)
    assert.isUndefined(pops.tenantsOn("r"))
  })
})
