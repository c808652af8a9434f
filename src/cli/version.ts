/**
 * The package's version, read from its `package.json` (two levels up from `src/cli/` and `dist/cli/`
 * alike), so the CLI never reports a stale literal.
 *
 * @since 0.1.0
 */
import { readFileSync } from "node:fs"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"

const PackageJson = Schema.parseJson(Schema.Struct({ version: Schema.String }))

const read = (): string => {
  try {
    const text = readFileSync(new URL("../../package.json", import.meta.url), "utf8")
    return Either.match(Schema.decodeUnknownEither(PackageJson)(text), {
      onLeft: () => "unknown",
      onRight: (pkg) => pkg.version
    })
  } catch {
    return "unknown"
  }
}

/**
 * @since 0.1.0
 * @category constants
 */
export const version: string = read()
