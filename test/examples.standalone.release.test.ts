/**
 * A copy of the reference broker outside this repository type-checks: `examples/broker/` in a temporary
 * directory whose `node_modules` holds only the packages it imports and their types (links to this
 * repository's installed copies; `queen-mesh` to this package, so it resolves through the exports map to
 * `dist/`, which must be built), compiled with the repository's compiler options.
 * `examples.standalone.test.ts` checks the imports themselves.
 */
import { execFile } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { afterAll, assert, describe, it } from "@effect/vitest"
import { example, manifest, packageOf, root, sources, specifiers } from "./fixtures/exampleImports.js"

const copy = Fs.mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-example-"))
afterAll(() => Fs.rmSync(copy, { recursive: true, force: true }))

/** Links `node_modules/<name>` of the copy to `target`. */
const link = (name: string, target: string) => {
  const path = Path.join(copy, "node_modules", name)
  Fs.mkdirSync(Path.dirname(path), { recursive: true })
  Fs.symlinkSync(target, path, "dir")
}

describe("a copy of examples/broker outside the repository", () => {
  it("type-checks with only the packages it imports installed", async () => {
    Fs.cpSync(example, Path.join(copy, "broker"), { recursive: true })
    const imported = new Set(
      sources()
        .flatMap((file) => specifiers(Fs.readFileSync(file, "utf8")))
        .filter((specifier) => !specifier.startsWith(".") && !specifier.startsWith("node:"))
        .map(packageOf)
    )
    for (const name of imported)
      link(name, name === manifest.name ? root : Path.join(root, "node_modules", name))
    for (const name of ["node", ...imported]) {
      const types = `@types/${name.replace(/^@/, "").replace("/", "__")}`
      if (Fs.existsSync(Path.join(root, "node_modules", types)))
        link(types, Path.join(root, "node_modules", types))
    }
    const base = JSON.parse(Fs.readFileSync(Path.join(root, "tsconfig.base.json"), "utf8"))
    Fs.writeFileSync(
      Path.join(copy, "package.json"),
      JSON.stringify({ name: "broker", private: true, type: "module" })
    )
    Fs.writeFileSync(
      Path.join(copy, "tsconfig.json"),
      JSON.stringify({ compilerOptions: { ...base.compilerOptions, noEmit: true }, include: ["broker"] })
    )
    const tsc = Path.join(root, "node_modules", "typescript", "bin", "tsc")
    const ran = await new Promise<{ readonly code: number | null; readonly output: string }>((resolve) =>
      execFile(process.execPath, [tsc, "-p", copy], { cwd: copy }, (error, stdout, stderr) =>
        resolve({
          code: error === null ? 0 : typeof error.code === "number" ? error.code : null,
          output: `${stdout}${stderr}`
        })
      )
    )
    assert.strictEqual(ran.code, 0, ran.output)
  })
})
