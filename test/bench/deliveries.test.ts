import { describe, expect, it } from "vitest"
import { spread, tally } from "../../bench/deliveries.js"

describe("the write-load bench's delivery check", () => {
  it("counts each message once and measures commit to claim", () => {
    const result = tally(
      [
        { source: 1, stamps: [1000, 2000, 3000], begun: [500, 1500, 2500] },
        { source: 2, stamps: [5000] }
      ],
      [
        { source: [1, 2], seq: [0, 0], atNs: [4000, 9000] },
        { source: [1, 1], seq: [2, 1], atNs: [6000, 7000] }
      ]
    )
    expect(result).toMatchObject({ committed: 4, delivered: 4, lost: 0, duplicated: 0, unknown: 0 })
    expect([...result.latenciesUs].sort((a, b) => a - b)).toEqual([3, 3, 4, 5])
    // Only source 1 gave the stamps of its statements sent.
    expect([...result.fromBegunUs].sort((a, b) => a - b)).toEqual([3.5, 3.5, 5.5])
  })

  it("finds the lost, the delivered twice and the unknown", () => {
    const result = tally(
      [{ source: 1, stamps: [0, 0, 0] }],
      [
        { source: [1, 1], seq: [0, 1], atNs: [10, 10] },
        { source: [1, 7, 1], seq: [0, 0, 3], atNs: [10, 10, 10] }
      ]
    )
    expect(result).toMatchObject({ committed: 3, delivered: 2, lost: 1, duplicated: 1, unknown: 2 })
  })

  it("refuses a source reported twice", () => {
    expect(() =>
      tally(
        [
          { source: 1, stamps: [] },
          { source: 1, stamps: [] }
        ],
        []
      )
    ).toThrow()
  })

  it("spreads connections over producer processes, the first ones first", () => {
    expect(spread(1, 4, 16)).toEqual([1, 0, 0, 0])
    expect(spread(32, 4, 16)).toEqual([16, 16, 0, 0])
    expect(spread(64, 4, 16)).toEqual([16, 16, 16, 16])
    expect(spread(20, 2, 16)).toEqual([16, 4])
    expect(() => spread(65, 4, 16)).toThrow()
  })
})
