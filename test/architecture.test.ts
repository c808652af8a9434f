/**
 * The shape of the source tree, checked: no import cycles (type imports included), the runtime's
 * machinery only under `internal/` and never re-exported, and one owner per fact (the refusal reasons,
 * the stats body) that the HTTP route, the CLI and the metrics all read.
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, relative, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Result, Schema } from "effect"
import { TestClock } from "effect/testing"
import * as CliStats from "../src/cli/stats.js"
import * as MeshError from "../src/MeshError.js"
import * as MeshMetrics from "../src/MeshMetrics.js"
import * as MeshStats from "../src/MeshStats.js"
import * as MeshTest from "../src/MeshTest.js"
import { active } from "./fixtures/memory.js"

const src = resolve(dirname(fileURLToPath(import.meta.url)), "../src")

const sources = (dir: string): Array<string> =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name)
    if (statSync(path).isDirectory()) return sources(path)
    return path.endsWith(".ts") ? [path] : []
  })

/** Every relative import of a module (`import`, `import type`, `export ... from`), as files. */
const importsOf = (file: string): Array<string> => {
  const text = readFileSync(file, "utf8")
  const out: Array<string> = []
  for (const match of text.matchAll(/(?:^|\n)\s*(?:import|export)\b[^;'"]*?from\s+"(\.[^"]+)"/g)) {
    out.push(resolve(dirname(file), match[1]!.replace(/\.js$/, ".ts")))
  }
  for (const match of text.matchAll(/import\("(\.[^"]+)"\)/g)) {
    out.push(resolve(dirname(file), match[1]!.replace(/\.js$/, ".ts")))
  }
  return out
}

/** The first import cycle found, as a list of files, if any. */
const findCycle = (graph: ReadonlyMap<string, ReadonlyArray<string>>): Array<string> | undefined => {
  const state = new Map<string, "open" | "done">()
  const stack: Array<string> = []
  const visit = (node: string): Array<string> | undefined => {
    const seen = state.get(node)
    if (seen === "done") return undefined
    if (seen === "open") return [...stack.slice(stack.indexOf(node)), node]
    state.set(node, "open")
    stack.push(node)
    for (const next of graph.get(node) ?? []) {
      const cycle = visit(next)
      if (cycle !== undefined) return cycle
    }
    stack.pop()
    state.set(node, "done")
    return undefined
  }
  for (const node of graph.keys()) {
    const cycle = visit(node)
    if (cycle !== undefined) return cycle
  }
  return undefined
}

describe("the source tree", () => {
  const files = sources(src)
  const graph = new Map(files.map((file) => [file, importsOf(file)]))

  it("has no import cycles, type imports included", () => {
    const cycle = findCycle(graph)
    assert.isUndefined(cycle, `import cycle: ${cycle?.map((file) => relative(src, file)).join(" -> ")}`)
  })

  it("the cycle check finds a cycle when there is one", () => {
    const cycle = findCycle(
      new Map([
        ["a", ["b"]],
        ["b", ["c"]],
        ["c", ["a"]]
      ])
    )
    assert.deepStrictEqual(cycle, ["a", "b", "c", "a"])
  })

  it("keeps internal modules out of the root and public modules off the CLI", () => {
    const index = readFileSync(join(src, "index.ts"), "utf8")
    assert.notMatch(index, /internal\//)
    for (const file of files) {
      const name = relative(src, file)
      if (name.startsWith("cli") || name === "cli.ts") continue
      for (const target of graph.get(file) ?? []) {
        assert.isFalse(relative(src, target).startsWith("cli"), `${name} imports the CLI`)
      }
    }
  })

  it("internal modules are marked so, and say what they are for", () => {
    for (const file of files.filter((f) => relative(src, f).startsWith("internal"))) {
      const head = /^\/\*\*[\s\S]*?\*\//.exec(readFileSync(file, "utf8"))?.[0]
      assert.isDefined(head, `${relative(src, file)} opens with no doc comment`)
      assert.include(head, "@internal", relative(src, file))
    }
  })
})

describe("docs/architecture.md", () => {
  const doc = readFileSync(resolve(src, "../docs/architecture.md"), "utf8")
  const ticked = (text: string) => [...text.matchAll(/`([^`\n]+)`/g)].map((m) => m[1]!)
  const exists = (path: string) => {
    try {
      return statSync(path).isFile() || statSync(path).isDirectory()
    } catch {
      return false
    }
  }
  /** The names a module file exports (functions, classes, constants, types), to tell a unit from a symbol. */
  const exportsOf = (file: string) =>
    [
      ...readFileSync(file, "utf8").matchAll(
        /export\s+(?:declare\s+)?(?:abstract\s+)?(?:const|function|class|interface|type)\s+(\w+)/g
      )
    ].map((m) => m[1]!)

  it("names only modules that exist: `folder/unit`, a subsystem's units, the public modules", () => {
    const missing: Array<string> = []
    const internal = join(src, "internal")
    for (const name of ticked(doc)) {
      // `links/peerLink` (a unit, maybe followed by the symbol it names) or `wire/` (a folder).
      const unit =
        /^(wire|transport|links|mesh|membership|lane|metrics|waker|memory|view)\/(\w*)(?:\s+\w+)?$/.exec(name)
      if (unit === null) continue
      const path = unit[2] === "" ? join(internal, unit[1]!) : join(internal, unit[1]!, `${unit[2]}.ts`)
      if (!exists(path)) missing.push(name)
    }
    // In a subsystem's bullet (`- **`links/`**: ...`), every ticked lower-case name is one of its units or
    // a symbol one of them exports.
    for (const bullet of doc.matchAll(/^- \*\*`(\w+)\/`\*\*:([\s\S]*?)(?=\n- |\n\n)/gm)) {
      const folder = join(internal, bullet[1]!)
      if (!exists(folder)) {
        missing.push(`${bullet[1]}/`)
        continue
      }
      const units = readdirSync(folder).filter((f) => f.endsWith(".ts"))
      const symbols = new Set(units.flatMap((u) => exportsOf(join(folder, u))))
      for (const name of ticked(bullet[2]!)) {
        if (!/^[a-z][A-Za-z0-9]*$/.test(name)) continue
        if (!units.includes(`${name}.ts`) && !symbols.has(name)) missing.push(`${bullet[1]}/${name}`)
      }
    }
    // The loose files of `internal/`.
    const loose = /^- Loose files:([\s\S]*?)(?=\n\n)/m.exec(doc)?.[1] ?? ""
    for (const name of ticked(loose))
      if (/^[a-z][A-Za-z0-9]*$/.test(name) && !exists(join(internal, `${name}.ts`))) missing.push(name)
    // The public modules' table: the first column names files directly under src/.
    for (const row of doc.matchAll(/^\| (`[A-Z][^|]*)\|/gm)) {
      for (const name of ticked(row[1]!)) {
        if (/^[A-Z][A-Za-z]+$/.test(name) && !exists(join(src, `${name}.ts`))) missing.push(name)
      }
    }
    assert.deepStrictEqual(missing, [])
  })

  it("lists every public module and every subsystem of internal/", () => {
    const publicModules = readdirSync(src).filter((f) => f.endsWith(".ts") && /^[A-Z]/.test(f))
    for (const file of publicModules) assert.include(doc, `\`${file.replace(/\.ts$/, "")}\``, file)
    const folders = readdirSync(join(src, "internal")).filter((f) =>
      statSync(join(src, "internal", f)).isDirectory()
    )
    for (const folder of folders) assert.include(doc, `\`${folder}/\``, `internal/${folder}`)
  })

  it("is short enough to read in ten minutes", () => {
    assert.isAtMost(doc.split(/\s+/).length, 2_500)
  })
})

describe("one owner per fact", () => {
  it("the refusal reasons: one stats key each, in the stats Schema, and nothing else in it", () => {
    const keys = MeshError.handshakeReasonList.map((reason) => MeshError.handshakeReasons[reason].stat)
    assert.deepStrictEqual(Object.keys(MeshStats.RejectionStats.fields).sort(), [...keys].sort())
    assert.strictEqual(new Set(keys).size, keys.length)
  })

  it.effect(
    "a node's body is exactly the stats Schema, and the HTTP route, the CLI and the metrics agree",
    () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        const a = yield* MeshTest.node(network, { serverId: "arch-a", peers: ["arch-b"] })
        yield* MeshTest.node(network, { serverId: "arch-b", peers: ["arch-a"] })
        yield* TestClock.adjust("300 millis")
        yield* MeshTest.settleUntil(MeshTest.linked(a))
        const stats = active(yield* a.mesh.stats)

        // The body is the Schema's: no field the Schema does not know, none missing.
        const json: unknown = JSON.parse(JSON.stringify(stats))
        const strict = Schema.decodeUnknownResult(MeshStats.StatsBody, { onExcessProperty: "error" })
        assert.isTrue(Result.isSuccess(strict(json)), "the served body drifted from MeshStats.StatsBody")

        // The CLI reads every field it prints from a real body.
        const cli = CliStats.decode(JSON.stringify(stats))
        assert.isTrue(Result.isSuccess(cli))
        const body = Result.getOrThrow(cli)
        for (const row of CliStats.COUNTERS) {
          for (const [label, get] of row) {
            if (label === "stdout dropped") continue // the CLI node's own counter, added by it
            assert.isNumber(get(body), `the CLI prints "${label}", which the body does not have`)
          }
        }
        for (const [label, get] of CliStats.PEER_COLUMNS) {
          assert.isNumber(get(body.peers![0]!), `the CLI prints the peer column "${label}"`)
        }

        // The metrics count the same refusals under the same names as the body's keys.
        yield* a.mesh.syncMetrics
        for (const reason of MeshError.handshakeReasonList) {
          const name = MeshError.handshakeReasons[reason].stat
          assert.isNumber(stats.rejections[name])
          const series = MeshMetrics.seriesValue(MeshMetrics.names.rejections, {
            server_id: "arch-a",
            reason: name
          })
          assert.isTrue(series._tag === "Some", `no ${name} series`)
        }
      })
  )
})
