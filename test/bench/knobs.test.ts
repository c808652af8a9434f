import { assert, describe, it } from "@effect/vitest"
import { BadKnob, knobsOf } from "../../bench/knobs.js"

const refused = (read: () => unknown): string => {
  try {
    read()
  } catch (error) {
    if (error instanceof BadKnob) return error.message
    throw error
  }
  return assert.fail("not refused")
}

describe("bench knobs", () => {
  it("reads values, lists, counts, numbers and switches as given", () => {
    const k = knobsOf(["--quick", "--a-list=tcp,none", "--a-count=1,100", "--a-ms=2.5", "--a-word=off"])
    assert.isTrue(k.flag("quick"))
    assert.isFalse(k.flag("a-switch"))
    assert.deepStrictEqual(k.list("a-list", ["tcp", "lane", "none"] as const), ["tcp", "none"])
    assert.deepStrictEqual(k.counts("a-count", 1), [1, 100])
    assert.strictEqual(k.number("a-ms", { min: 0, unit: "milliseconds" }), 2.5)
    assert.strictEqual(k.value("a-word"), "off")
    assert.strictEqual(k.value("absent"), undefined)
    assert.strictEqual(k.counts("absent", 1), undefined)
    assert.deepStrictEqual(k.unread(), [])
  })

  it("refuses a value it cannot run with, saying which and why", () => {
    const k = knobsOf(["--l=tcp,foo", "--c=1,x", "--c0=0", "--n=", "--w=1.5", "--e=", "--big=1e400"])
    assert.strictEqual(
      refused(() => k.list("l", ["tcp"] as const)),
      "--l=foo: not one of tcp"
    )
    assert.strictEqual(
      refused(() => k.counts("c", 1)),
      "--c=x: whole numbers, each at least 1"
    )
    assert.strictEqual(
      refused(() => k.counts("c0", 1)),
      "--c0=0: whole numbers, each at least 1"
    )
    assert.strictEqual(
      refused(() => k.number("n", { min: 1, unit: "milliseconds" })),
      "--n=: a number of milliseconds, at least 1"
    )
    assert.strictEqual(
      refused(() => k.number("w", { min: 1, whole: true, unit: "rounds" })),
      "--w=1.5: a whole number of rounds, at least 1"
    )
    assert.strictEqual(
      refused(() => k.list("e", ["tcp"] as const)),
      "--e=: a comma-separated list, not empty"
    )
    assert.match(
      refused(() => k.number("big", { min: 0, unit: "ms" })),
      /^--big=1e400: a number/
    )
  })

  it("names every argument nothing read: a typo, a stray word", () => {
    const k = knobsOf(["--only=consumers", "--consumers-count=1", "stray", "--quick", "--cpu-prof=a"])
    k.counts("consumers-counts", 1)
    assert.deepStrictEqual(k.unread(), ["--consumers-count=1", "stray"])
  })
})
