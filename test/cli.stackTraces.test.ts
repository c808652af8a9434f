/**
 * The bundled command's stack traces (src/cli/stackTraces.ts): a frame in a file under the bundle's
 * directory is written at the place its map gives, any other frame as V8 writes it, a file without a
 * map stays as it is, and the previous formatter comes back. On a small bundle of our own making (a
 * file, its map), so the places are known; test/cli.bundle.int.test.ts checks the real bundle's maps.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { mapStackTraces } from "../src/cli/stackTraces.js"

/** A directory with `bin/mapped.js` (and its map: every line to `src/fake.ts` line 10), `bin/bare.js`. */
const bundle = () => {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-stack-"))
  const bin = Path.join(dir, "bin")
  Fs.mkdirSync(bin)
  const body = 'export const boom = () => {\n  throw new Error("boom")\n}\n'
  Fs.writeFileSync(Path.join(bin, "mapped.js"), body)
  // Every line (a loader may shift them) -> fake.ts:10:1, one segment per line.
  Fs.writeFileSync(
    Path.join(bin, "mapped.js.map"),
    JSON.stringify({
      version: 3,
      sources: ["../src/fake.ts"],
      names: [],
      mappings: "AASA;AAAA;AAAA;AAAA;AAAA"
    })
  )
  Fs.writeFileSync(Path.join(bin, "bare.js"), body)
  return { dir, bin: `${Url.pathToFileURL(bin).href}/` }
}

const stackOf = async (file: string) => {
  const { boom } = (await import(file)) as { boom: () => never }
  try {
    boom()
  } catch (error) {
    return error instanceof Error ? (error.stack ?? "") : ""
  }
  return ""
}

describe("the bundled command's stack traces", () => {
  it("name our source where the map knows the place, and leave every other frame as it was", async () => {
    const { dir, bin } = bundle()
    const before = Error.prepareStackTrace
    const restore = mapStackTraces(bin)
    try {
      const stack = await stackOf(`${bin}mapped.js?mapped`)
      const lines = stack.split("\n")
      assert.strictEqual(lines[0], "Error: boom")
      const source = Url.pathToFileURL(Path.join(dir, "src", "fake.ts")).href
      assert.match(
        lines[1] ?? "",
        new RegExp(`^    at boom \\(${source.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:10:1\\)$`)
      )
      // This test's own frame is not under bin: as V8 writes it.
      assert.isTrue(
        lines.slice(2).some((line) => line.includes("cli.stackTraces.test.ts")),
        stack
      )

      // A file without a map: as V8 writes it.
      const bare = await stackOf(`${bin}bare.js?bare`)
      assert.match(bare.split("\n")[1] ?? "", /bare\.js(\?bare)?:\d+:\d+\)$/)
    } finally {
      restore()
      Fs.rmSync(dir, { recursive: true, force: true })
    }
    assert.strictEqual(Error.prepareStackTrace, before)
  })

  it("read no map of a file left out of the list of ours", async () => {
    const { dir, bin } = bundle()
    const restore = mapStackTraces(bin, ["bare.js"])
    try {
      const stack = await stackOf(`${bin}mapped.js?listed`)
      assert.notInclude(stack, "fake.ts")
      assert.match(stack.split("\n")[1] ?? "", /mapped\.js(\?listed)?:\d+:\d+\)$/)
    } finally {
      restore()
      Fs.rmSync(dir, { recursive: true, force: true })
    }
  })
})
