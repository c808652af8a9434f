import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import * as fc from "fast-check"
import * as Rules from "../../../src/internal/wire/names.js"

// The 8-4-4-4-12 form the wire rule states (spec "The frame set"), written as a regular expression for
// the test only: the product checks char codes, and the two must agree on every string.
const UUID_FORM = /^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/

const hexChar = fc.constantFrom(..."0123456789abcdefABCDEF")
const hex = (n: number) => fc.array(hexChar, { minLength: n, maxLength: n }).map((cs) => cs.join(""))
const uuidLike = fc.tuple(hex(8), hex(4), hex(4), hex(4), hex(12)).map((parts) => parts.join("-"))
// A UUID with one character replaced by anything, so near misses are common.
const nearMiss = fc
  .tuple(uuidLike, fc.nat(35), fc.string({ minLength: 1, maxLength: 1 }))
  .map(([u, at, c]) => u.slice(0, at) + c + u.slice(at + 1))
const anyTenant = fc.oneof(uuidLike, nearMiss, fc.string({ maxLength: 40 }), fc.constant(""))

describe("rules", () => {
  it("isUuid agrees with the 8-4-4-4-12 form on every string", () => {
    fc.assert(
      fc.property(anyTenant, (text) => {
        assert.strictEqual(Rules.isUuid(text), UUID_FORM.test(text), text)
      }),
      { numRuns: 5_000 }
    )
  })

  it("isUuid's kept answer never leaks into the next, different string", () => {
    fc.assert(
      fc.property(fc.array(anyTenant, { minLength: 2, maxLength: 12 }), (texts) => {
        for (const text of texts) {
          assert.strictEqual(Rules.isUuid(text), UUID_FORM.test(text), text)
          assert.strictEqual(Rules.isUuid(text), UUID_FORM.test(text), `${text} asked again`)
        }
      })
    )
  })

  it("tenant reads any sequence of tenants as each alone reads, the repeated ones shared", () => {
    const expected = (u: unknown): Option.Option<string> | undefined => {
      if (u === undefined || u === null || u === "") return Option.none()
      if (typeof u !== "string" || !Rules.fitsName(u)) return undefined
      return Option.some(UUID_FORM.test(u) ? u.toLowerCase() : u)
    }
    const value = fc.oneof(anyTenant, fc.constant(null), fc.integer(), fc.constant("x".repeat(256)))
    fc.assert(
      fc.property(fc.array(value, { minLength: 1, maxLength: 12 }), (values) => {
        for (const u of values) assert.deepStrictEqual(Rules.tenant(u), expected(u), String(u))
      })
    )
    const first = Rules.tenant("3F2B8A4C-1D2E-4F5A-9B6C-7D8E9F0A1B2C")
    assert.deepStrictEqual(first, Option.some("3f2b8a4c-1d2e-4f5a-9b6c-7d8e9f0a1b2c"))
    assert.strictEqual(Rules.tenant("3F2B8A4C-1D2E-4F5A-9B6C-7D8E9F0A1B2C"), first)
  })
})
