/**
 * The fault run's checker (test/fixtures/chaos/checker.ts) on histories written by hand: a loss, a
 * double delivery under a live lease, a legal redelivery after the lease ran out, a delivery after an
 * ack, and a push whose outcome nobody knows.
 */
import { assert, describe, it } from "@effect/vitest"
import { type ChaosEvent, check, render } from "./fixtures/chaos/checker.js"

const LEASE = 3000

const push = (seq: number, at: number, outcome: "committed" | "unknown" = "committed"): ChaosEvent => ({
  kind: "push",
  seqs: [seq],
  replica: "broker-a",
  sent: at,
  answered: at + 5,
  outcome
})

const pop = (
  seq: number,
  sent: number,
  answered: number,
  lease: string,
  deliveries: number,
  consumer = "b0"
): ChaosEvent => ({
  kind: "pop",
  consumer,
  replica: `broker-${consumer[0]}`,
  sent,
  answered,
  lease,
  leaseMs: LEASE,
  wake: "woken",
  messages: [{ seq, id: String(seq + 100), deliveries }]
})

const ack = (
  seq: number,
  sent: number,
  lease: string,
  acked: number | null,
  consumer = "b0"
): ChaosEvent => ({
  kind: "ack",
  consumer,
  replica: `broker-${consumer[0]}`,
  lease,
  seqs: [seq],
  sent,
  answered: sent + 5,
  acked
})

describe("the fault run's checker", () => {
  it("passes a message pushed, delivered once and acked", () => {
    const verdict = check([push(1, 0), pop(1, 2, 10, "L1", 1), ack(1, 11, "L1", 1)], new Set())
    assert.isTrue(verdict.ok)
    assert.strictEqual(verdict.committed, 1)
    assert.strictEqual(verdict.delivered, 1)
  })

  it("finds a committed message never delivered", () => {
    const verdict = check([push(1, 0), push(2, 1), pop(2, 2, 10, "L1", 1), ack(2, 11, "L1", 1)], new Set())
    assert.isFalse(verdict.ok)
    assert.deepStrictEqual(
      verdict.violations.map((v) => [v.kind, v.seq]),
      [["lost", 1]]
    )
  })

  it("finds a second delivery while the first lease certainly still ran", () => {
    // Claimed by b0 under L1 (its lease runs out at 3,002 at the earliest), then by c0 answered at 1,000.
    const verdict = check(
      [push(1, 0), pop(1, 2, 10, "L1", 1), pop(1, 500, 1000, "L2", 2, "c0"), ack(1, 1001, "L2", 1, "c0")],
      new Set()
    )
    assert.deepStrictEqual(
      verdict.violations.map((v) => [v.kind, v.seq]),
      [["double-delivery", 1]]
    )
    assert.include(verdict.violations[0]!.detail, "live lease")
  })

  it("finds two claims with the same delivery count, whatever the times", () => {
    const verdict = check([push(1, 0), pop(1, 2, 10, "L1", 1), pop(1, 9000, 9010, "L2", 1, "c0")], new Set())
    assert.deepStrictEqual(
      verdict.violations.map((v) => v.kind),
      ["double-delivery"]
    )
  })

  it("accepts a redelivery after the lease ran out, and counts it", () => {
    // b0's ack never answered (its replica died); the lease ran out by 3,010; c0 claimed at 4,000.
    const verdict = check(
      [
        push(1, 0),
        pop(1, 2, 10, "L1", 1),
        ack(1, 11, "L1", null),
        pop(1, 4000, 4010, "L2", 2, "c0"),
        ack(1, 4011, "L2", 1, "c0")
      ],
      new Set()
    )
    assert.isTrue(verdict.ok)
    assert.strictEqual(verdict.redeliveries, 1)
  })

  it("accepts a late answer to a pop whose lease ran out before another claimed it", () => {
    // A frozen replica answers b0 long after it claimed; c0 claimed once the lease could have run out.
    const verdict = check(
      [push(1, 0), pop(1, 2, 6000, "L1", 1), pop(1, 3500, 3600, "L2", 2, "c0"), ack(1, 3601, "L2", 1, "c0")],
      new Set()
    )
    assert.isTrue(verdict.ok)
  })

  it("finds a delivery after an ack that deleted the message", () => {
    const verdict = check(
      [push(1, 0), pop(1, 2, 10, "L1", 1), ack(1, 11, "L1", 1), pop(1, 5000, 5010, "L2", 2, "c0")],
      new Set()
    )
    assert.deepStrictEqual(
      verdict.violations.map((v) => v.kind),
      ["delivered-after-ack"]
    )
  })

  it("neither requires nor forbids a push of unknown outcome, but holds it to the same rules", () => {
    assert.isTrue(check([push(1, 0, "unknown")], new Set()).ok)
    const delivered = check([push(1, 0, "unknown"), pop(1, 2, 10, "L1", 1), ack(1, 11, "L1", 1)], new Set())
    assert.isTrue(delivered.ok)
    assert.strictEqual(delivered.unknown, 1)
    const twice = check(
      [push(1, 0, "unknown"), pop(1, 2, 10, "L1", 1), pop(1, 20, 30, "L2", 2, "c0")],
      new Set()
    )
    assert.deepStrictEqual(
      twice.violations.map((v) => v.kind),
      ["double-delivery"]
    )
    // Its row is in the table at the end and nobody ever got it: it was committed, and lost.
    assert.deepStrictEqual(
      check([push(1, 0, "unknown")], new Set([1])).violations.map((v) => v.kind),
      ["lost"]
    )
  })

  it("finds a delivered message whose row is still in the table", () => {
    const verdict = check([push(1, 0), pop(1, 2, 10, "L1", 1), ack(1, 11, "L1", 0)], new Set([1]))
    assert.deepStrictEqual(
      verdict.violations.map((v) => v.kind),
      ["never-acked"]
    )
  })

  it("renders a failure with the message's story first", () => {
    const events = [push(1, 0), pop(1, 2, 10, "L1", 1), pop(1, 500, 1000, "L2", 2, "c0")]
    const text = render(events, check(events, new Set()), [{ at: 400, text: "*** fault #0 begins" }])
    assert.match(text, /^verdict: FAILED/)
    assert.match(text, /double-delivery #1: delivered under a live lease/)
    assert.include(text, "0.400s *** fault #0 begins")
    assert.include(text, "pop by c0 on broker-c: lease L2")
  })
})
