/**
 * The fuzz properties of `fixtures/fuzzProperties.ts`, one batch each (a few seconds in all), so every
 * test run fuzzes the wire code a little; `npm run fuzz` runs the same properties for minutes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Fuzz from "./fixtures/fuzzProperties.js"

describe("fuzz", () => {
  for (const property of Fuzz.all) {
    it(property.name, () => {
      const result = property.run({ numRuns: property.batch })
      assert.isFalse(
        result.failed,
        `${result.description}\nreproduce: npm run fuzz -- --property ${property.name} --seed ${result.seed}` +
          `${result.path === undefined ? "" : ` --path ${result.path}`}\n${result.report}`
      )
    })
  }
})
