/**
 * Every TypeScript example of `README.md` and `docs/*.md`, compiled as a user would compile a copy of it
 * and run, so the pages keep matching the code. (The examples in the doc comments of `src/`, the
 * package overview of `src/index.ts` among them, are docgen's: `npm run docs` checks and runs those.)
 *
 * A block fenced ` ```ts ` is a whole program: it imports what it uses from `queen-mesh` and ends by
 * itself. Each is written twice under `.tmp/doc-examples/`: as written, for the type-check, which maps
 * `queen-mesh` to `src/` with the compiler options of a strict ESM project; and for running, with its
 * `queen-mesh` imports pointed at `src/` and its `Effect.runPromise` / `NodeRuntime.runMain` routed
 * through a harness that waits for the program to end and fails with its error. Running in this process
 * rather than a child keeps the suite fast (a child spends seconds loading Effect). A block that
 * imports `@effect/vitest` is a test file: its tests are registered here. A block fenced
 * ` ```ts no-run ` is type-checked only.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { inspect } from "node:util"
import { afterEach, assert, describe, it, vi } from "@effect/vitest"
import { Effect } from "effect"
import ts from "typescript"
import { markLines } from "../scripts/docs-api.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const out = Path.join(root, ".tmp", "doc-examples")

interface Example {
  /** `docs/effect.md:42`, the line of the opening fence. */
  readonly where: string
  readonly code: string
  readonly run: boolean
  /** Registers vitest tests rather than running a program. */
  readonly kit: boolean
  readonly checkFile: string
  readonly runFile: string
}

const pages = [
  "README.md",
  ...Fs.readdirSync(Path.join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`)
]

const examples: Array<Example> = []
for (const page of pages) {
  const lines = markLines(Fs.readFileSync(Path.join(root, page), "utf8"))
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(?:ts|typescript)(?:\s+(.*))?$/.exec(lines[i]!.text)
    if (fence === null) continue
    let end = i + 1
    while (end < lines.length && lines[end]!.text !== "```") end++
    const code = lines
      .slice(i + 1, end)
      .map((line) => line.text)
      .join("\n")
    const name = `${page.replace(/[/.]/g, "_")}_${i + 1}`
    examples.push({
      where: `${page}:${i + 1}`,
      code: `${code}\n`,
      run: !(fence[1] ?? "").split(/\s+/).includes("no-run"),
      kit: code.includes('from "@effect/vitest"'),
      checkFile: Path.join(out, "check", `${name}.ts`),
      runFile: Path.join(out, "run", `${name}.ts`)
    })
    i = end
  }
}

/** The program as it runs here: `queen-mesh` from `src/`, and its runs handed to the harness. */
const runnable = (code: string): string =>
  [
    "const __docs = (globalThis as any).__docExamples",
    code
      .replace(/from "queen-mesh"/g, 'from "../../../src/index.js"')
      .replace(/from "queen-mesh\/(\w+)"/g, 'from "../../../src/$1.js"')
      .replace(/\bNodeRuntime\.runMain\b/g, "__docs.runMain")
      .replace(/\bEffect\.runPromise\b/g, "__docs.runPromise")
  ].join("\n")

Fs.rmSync(out, { recursive: true, force: true })
Fs.mkdirSync(Path.join(out, "check"), { recursive: true })
Fs.mkdirSync(Path.join(out, "run"), { recursive: true })
for (const example of examples) {
  Fs.writeFileSync(example.checkFile, example.code)
  Fs.writeFileSync(example.runFile, runnable(example.code))
}

/** What an example started: the promises of its programs, waited for by its test. */
const started: Array<Promise<unknown>> = []
const track = <A>(promise: Promise<A>): Promise<A> => {
  // Handled here, so a failure is the test's and never an unhandled rejection.
  promise.catch(() => {})
  started.push(promise)
  return promise
}
Object.assign(globalThis, {
  __docExamples: {
    runPromise: <A, E>(effect: Effect.Effect<A, E>) => track(Effect.runPromise(effect)),
    runMain: <A, E>(effect: Effect.Effect<A, E>) => {
      track(Effect.runPromise(effect))
    }
  }
})

describe("the examples of README.md and docs/*.md", () => {
  it("are there", () => {
    assert.isAtLeast(examples.filter((example) => example.where.startsWith("README.md")).length, 1)
  })

  it("compile as written, with queen-mesh mapped to src/", () => {
    const program = ts.createProgram(
      examples.map((example) => example.checkFile),
      {
        noEmit: true,
        strict: true,
        exactOptionalPropertyTypes: true,
        noUncheckedIndexedAccess: true,
        noUnusedLocals: true,
        target: ts.ScriptTarget.ES2022,
        lib: ["lib.es2022.d.ts"],
        module: ts.ModuleKind.ESNext,
        moduleResolution: ts.ModuleResolutionKind.Bundler,
        types: ["node"],
        typeRoots: [Path.join(root, "node_modules", "@types")],
        skipLibCheck: true,
        baseUrl: root,
        paths: { "queen-mesh": ["src/index.ts"], "queen-mesh/*": ["src/*.ts"] }
      }
    )
    // The examples' diagnostics and the program's own, as `getPreEmitDiagnostics` gives them, but only
    // for the examples' files: for the whole program it also checked every function body of src/ (which
    // the examples reach through `queen-mesh`), most of the test's time, to drop all it found there.
    const diagnostics = [
      ...program.getConfigFileParsingDiagnostics(),
      ...program.getOptionsDiagnostics(),
      ...program.getGlobalDiagnostics(),
      ...examples.flatMap((example) => {
        const file = program.getSourceFile(example.checkFile)
        if (file === undefined)
          throw new Error(`${example.where}: ${example.checkFile} is not in the program`)
        return [...program.getSyntacticDiagnostics(file), ...program.getSemanticDiagnostics(file)]
      })
    ]
    const errors = ts
      .sortAndDeduplicateDiagnostics(diagnostics)
      .filter((diagnostic) => diagnostic.file === undefined || diagnostic.file.fileName.startsWith(out))
      .map((diagnostic) => {
        const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, "\n")
        if (diagnostic.file === undefined || diagnostic.start === undefined) return text
        const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start)
        const example = examples.find((e) => e.checkFile === diagnostic.file?.fileName)
        const [page, fence] = (example?.where ?? "?:0").split(":")
        return `${page}:${Number(fence) + line + 1}: ${text}`
      })
    assert.deepStrictEqual(errors, [])
  }, 300_000)

  describe("run", () => {
    afterEach(() => {
      vi.restoreAllMocks()
    })

    for (const example of examples.filter((e) => e.run && !e.kit)) {
      it(`${example.where} runs to its end`, async () => {
        started.length = 0
        // The examples print what they show; keep it for a failure's message only.
        const printed: Array<string> = []
        const keep = (...args: Array<unknown>) => {
          printed.push(args.map((arg) => (typeof arg === "string" ? arg : inspect(arg))).join(" "))
        }
        vi.spyOn(console, "log").mockImplementation(keep)
        // OpenTelemetry's console exporters print with `dir`.
        vi.spyOn(console, "dir").mockImplementation(keep)
        try {
          await import(pathToFileURL(example.runFile).href)
          await Promise.all(started)
        } catch (error) {
          throw new Error(`${example.where} failed: ${String(error)}\nit printed:\n${printed.join("\n")}`)
        }
      }, 120_000)
    }
  })
})

// An example that is a test file registers its tests as this file is collected.
for (const example of examples.filter((e) => e.run && e.kit)) {
  describe(example.where, async () => {
    await import(pathToFileURL(example.runFile).href)
  })
}
