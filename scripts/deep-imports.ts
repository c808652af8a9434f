/**
 * Rewrites the barrel imports of `effect` (and its `effect/http`, `effect/socket`, `effect/sql` and
 * `effect/testing` barrels) and `@effect/platform-node` in `src/` into imports of their modules:
 * `import { Effect, type Scope } from "effect"` becomes `import * as Effect from "effect/Effect"` and
 * `import type * as Scope from "effect/Scope"`, `import { HttpRouter } from "effect/http"` becomes
 * `import * as HttpRouter from "effect/http/HttpRouter"`, and the functions the `effect` barrel
 * re-exports (`pipe`, `identity`, ...) come from `effect/Function`.
 *
 * Why: Node evaluates every module a barrel re-exports (the `effect` barrel is some 150 modules;
 * `effect/http`'s brings the HTTP client, multipart, the static server), so a module that imports one
 * name from a barrel pays for all of them, and so does every host of the library. The
 * lint rule in biome.json keeps the barrels out of `src/`; this script is how the rewrite was done,
 * and redoes it on files that bring barrel imports back: `npx tsx scripts/deep-imports.ts [files...]`
 * (default: every `.ts` file under `src/`). Doc comments' examples are left alone (they show a host's
 * code).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import ts from "typescript"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const BARRELS: ReadonlySet<string> = new Set([
  "effect",
  "effect/http",
  "effect/socket",
  "effect/sql",
  "effect/testing",
  "@effect/platform-node"
])
/** What the `effect` barrel re-exports from `effect/Function` rather than as a module. */
const FUNCTIONS: ReadonlySet<string> = new Set(["absurd", "cast", "flow", "hole", "identity", "pipe"])

/** A barrel's module file: `effect/http`'s are under `effect/dist/http/`, a package's under its `dist/`. */
const moduleExists = (barrel: string, name: string): boolean => {
  const [scope, pkg, ...sub] = barrel.split("/")
  const [packageName, under] = scope?.startsWith("@")
    ? [`${scope}/${pkg}`, sub]
    : [scope ?? "", [pkg, ...sub]]
  const directory = under.filter((part): part is string => part !== undefined)
  return Fs.existsSync(Path.join(root, "node_modules", packageName, "dist", ...directory, `${name}.js`))
}

const filesUnder = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    if (entry.isDirectory()) return filesUnder(path)
    return entry.name.endsWith(".ts") && !entry.name.endsWith(".d.ts") ? [path] : []
  })

/** The rewritten text, or `undefined` when the file has no barrel import. */
export const rewrite = (file: string, text: string): string | undefined => {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const edits: Array<{ readonly start: number; readonly end: number; readonly text: string }> = []
  for (const statement of source.statements) {
    if (!ts.isImportDeclaration(statement) || !ts.isStringLiteral(statement.moduleSpecifier)) continue
    const barrel = statement.moduleSpecifier.text
    if (!BARRELS.has(barrel)) continue
    const clause = statement.importClause
    const named = clause?.namedBindings
    if (
      clause === undefined ||
      clause.name !== undefined ||
      named === undefined ||
      !ts.isNamedImports(named)
    ) {
      throw new Error(`${file}: cannot rewrite ${statement.getText(source)}`)
    }
    const lines: Array<string> = []
    const functions: Array<string> = []
    for (const element of named.elements) {
      const imported = (element.propertyName ?? element.name).text
      const local = element.name.text
      const typeOnly = clause.isTypeOnly || element.isTypeOnly
      if (barrel === "effect" && FUNCTIONS.has(imported)) {
        const name = imported === local ? imported : `${imported} as ${local}`
        functions.push(typeOnly ? `type ${name}` : name)
        continue
      }
      if (!moduleExists(barrel, imported)) throw new Error(`${file}: ${barrel} has no module ${imported}`)
      lines.push(`import ${typeOnly ? "type " : ""}* as ${local} from "${barrel}/${imported}"`)
    }
    if (functions.length > 0) lines.push(`import { ${functions.join(", ")} } from "effect/Function"`)
    edits.push({ start: statement.getStart(source), end: statement.getEnd(), text: lines.join("\n") })
  }
  if (edits.length === 0) return undefined
  return edits
    .sort((a, b) => b.start - a.start)
    .reduce((out, edit) => out.slice(0, edit.start) + edit.text + out.slice(edit.end), text)
}

const given = process.argv.slice(2)
const files = given.length > 0 ? given.map((f) => Path.resolve(f)) : filesUnder(Path.join(root, "src"))
let changed = 0
for (const file of files) {
  const out = rewrite(file, Fs.readFileSync(file, "utf8"))
  if (out === undefined) continue
  Fs.writeFileSync(file, out)
  changed++
}
process.stderr.write(`deep-imports: rewrote ${changed} of ${files.length} files\n`)
process.stderr.write("run `npx biome check --write` next: it sorts the new imports\n")
