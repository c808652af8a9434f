/**
 * The reference broker is what broker engineers copy, so a copy of `examples/broker/` (harness included)
 * must build outside this repository: its files import their own files, Node's built-ins, the package by
 * its public entry points and published packages, never `src/` or anything else of the repository.
 * `examples.standalone.release.test.ts` type-checks such a copy.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { example, offenders, sources, specifiers, unresolvable } from "./fixtures/exampleImports.js"

describe("examples/broker stands alone", () => {
  it("imports only what a copy of it can resolve", () => {
    assert.deepStrictEqual(offenders(), [])
  })

  it("the scan finds the example's imports, static, type-only and dynamic", () => {
    const found = new Set(sources().flatMap((file) => specifiers(Fs.readFileSync(file, "utf8"))))
    for (const expected of [
      "queen-mesh/Mesh",
      "queen-mesh/Postgres",
      "./harness/database.js",
      "./ports.js",
      "pg"
    ])
      assert.isTrue(found.has(expected), expected)
    assert.deepStrictEqual(
      specifiers(
        [
          'import * as A from "a"',
          'import type { B } from "./b.js"',
          "import {\n  c,\n  d\n} from '../c.js'",
          'export * from "e"',
          'import "f"',
          'const g = await import("g")',
          'type H = typeof import("h")'
        ].join("\n")
      ),
      ["a", "./b.js", "../c.js", "e", "f", "g", "h"]
    )
  })

  it("the check refuses the library's sources, its internals and what is not installed", () => {
    const harness = Path.join(example, "harness", "replica.ts")
    const refused = [
      "../../../src/internal/ports.js",
      "../../../test/fixtures/ports.js",
      "/opt/queen-mesh/src/index.js",
      "queen-mesh/internal/ports",
      "queen-mesh/Nowhere",
      "fs",
      "node:nowhere",
      "left-pad"
    ]
    for (const specifier of refused) assert.isDefined(unresolvable(harness, specifier), specifier)
    const accepted = [
      "./client.js",
      "../main.js",
      "node:fs",
      "queen-mesh",
      "queen-mesh/Postgres",
      "effect",
      "effect/Schema",
      "@effect/platform-node/NodeRuntime",
      "pg"
    ]
    for (const specifier of accepted) assert.isUndefined(unresolvable(harness, specifier), specifier)
  })
})
