/**
 * One build: whatever compiles the library writes `dist/` as `npm run build` does, bundled CLI launcher
 * included. `tsc -p tsconfig.build.json` alone puts the unbundled entry over `dist/cli.js`, and a node
 * started from it then takes some four times as long to start, with nothing saying why.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"

const root = fileURLToPath(new URL("..", import.meta.url))
const Manifest = (text: string): Record<string, string> => {
  const parsed: unknown = JSON.parse(text)
  const scripts = typeof parsed === "object" && parsed !== null ? Reflect.get(parsed, "scripts") : undefined
  if (typeof scripts !== "object" || scripts === null) throw new Error("package.json has no scripts")
  return Object.fromEntries(Object.entries(scripts).map(([name, command]) => [name, String(command)]))
}

const sources = (dir: string): Array<string> =>
  Fs.readdirSync(Path.join(root, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = Path.join(dir, entry.name)
    if (entry.isDirectory()) return sources(path)
    return /\.(ts|mjs|js|sh)$/.test(entry.name) ? [path] : []
  })

describe("one build", () => {
  it("only `build` runs the library's tsc; the scripts that need dist/ run `npm run build`", () => {
    const scripts = Manifest(Fs.readFileSync(Path.join(root, "package.json"), "utf8"))
    const compiling = Object.entries(scripts).filter(([, command]) => command.includes("tsconfig.build.json"))
    assert.deepStrictEqual(
      compiling.map(([name]) => name),
      ["build"]
    )
    for (const name of ["prepare", "bench", "chaos"]) assert.include(scripts[name], "npm run build", name)
  })

  it("no script, bench or fixture compiles the library with tsc on its own", () => {
    const offenders = ["scripts", "bench", "test", "examples", ".ci"]
      .filter((dir) => Fs.existsSync(Path.join(root, dir)))
      .flatMap(sources)
      .filter((file) => file !== "test/buildScripts.test.ts")
      .filter((file) => Fs.readFileSync(Path.join(root, file), "utf8").includes('"tsconfig.build.json"'))
    assert.deepStrictEqual(offenders, [])
  })
})
