/**
 * The checks `npm test` runs before the test suite, at once instead of one after another: typecheck,
 * lint, the API docs and the package's checks. Each is one single-threaded process (over a minute of
 * CPU between them), so on two cores they take about half the time side by side. None writes what
 * another reads: typecheck and docgen read `src/`, the package check packs `dist/` as it is (it builds
 * nothing, and fails while `dist/` is older than `src/`).
 *
 * Each check's output is printed whole when it ends, under its name, so the lines of two checks never
 * mix; the exit code is 1 when any failed, after all have ended.
 *
 * `npx tsx scripts/checks.ts [names...]` (default: all four).
 */
import { spawn } from "node:child_process"

const ALL = ["typecheck", "lint", "docs:check", "check:package"] as const

interface Outcome {
  readonly name: string
  readonly code: number
  readonly ms: number
  readonly output: string
}

const run = (name: string): Promise<Outcome> =>
  new Promise((resolve) => {
    const started = performance.now()
    const chunks: Array<Buffer> = []
    const child = spawn("npm", ["run", "--silent", name], { stdio: ["ignore", "pipe", "pipe"] })
    child.stdout.on("data", (chunk: Buffer) => chunks.push(chunk))
    child.stderr.on("data", (chunk: Buffer) => chunks.push(chunk))
    const done = (code: number) =>
      resolve({ name, code, ms: performance.now() - started, output: Buffer.concat(chunks).toString("utf8") })
    child.on("error", (error) => {
      chunks.push(Buffer.from(`${error.message}\n`))
      done(1)
    })
    child.on("close", (code, signal) => done(code ?? (signal === null ? 1 : 128)))
  })

const names = process.argv.slice(2)
for (const name of names)
  if (!(ALL as ReadonlyArray<string>).includes(name)) {
    console.error(`checks: no check named ${name} (the checks: ${ALL.join(", ")})`)
    process.exit(2)
  }

const outcomes = await Promise.all(
  (names.length === 0 ? ALL : names).map((name) =>
    run(name).then((outcome) => {
      const verdict = outcome.code === 0 ? "passed" : `FAILED (exit ${outcome.code})`
      process.stdout.write(`\n── ${outcome.name}: ${verdict} in ${(outcome.ms / 1000).toFixed(1)} s\n`)
      process.stdout.write(outcome.output)
      return outcome
    })
  )
)
const failed = outcomes.filter((outcome) => outcome.code !== 0).map((outcome) => outcome.name)
if (failed.length > 0) {
  console.error(`\nchecks failed: ${failed.join(", ")}`)
  process.exit(1)
}
