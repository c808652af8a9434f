/**
 * The package's version, read from its `package.json`, so the CLI never reports a stale literal. The
 * file is looked for upwards from this module's own place, which differs by how the CLI runs: `src/cli/`
 * (sources), `dist/cli/` (tsc's build) or a chunk under `dist/bin/` (the bundle `queen-mesh` runs).
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"

const PackageJson = Schema.fromJsonString(Schema.Struct({ name: Schema.String, version: Schema.String }))

/** The package's root is at most this many directories above this module. */
const LEVELS = 4

const read = (): string => {
  let directory = new URL(".", import.meta.url)
  for (let level = 0; level <= LEVELS; level++) {
    let text: string | undefined
    try {
      text = readFileSync(new URL("package.json", directory), "utf8")
    } catch {
      text = undefined
    }
    if (text !== undefined) {
      const found = Result.match(Schema.decodeUnknownResult(PackageJson)(text), {
        onFailure: () => undefined,
        onSuccess: (pkg) => (pkg.name === "queen-mesh" ? pkg.version : undefined)
      })
      if (found !== undefined) return found
    }
    directory = new URL("..", directory)
  }
  return "unknown"
}

/**
 * @since 0.1.0
 * @category constants
 */
export const version: string = read()
