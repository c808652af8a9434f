/**
 * The checks of the code beside the test suite: typecheck, lint, the API docs and the package's checks,
 * at once instead of one after another. Each is one single-threaded process (over a minute of CPU
 * between them), so on two cores they take about half the time side by side. None writes what another
 * reads: typecheck and docgen read `src/`, the package check packs `dist/` as it is (it builds nothing,
 * and fails while `dist/` is older than `src/`).
 *
 * Each check's output is printed whole when it ends, under its name, so the lines of two checks never
 * mix; the exit code is 1 when any failed, after all have ended.
 *
 * `npx tsx scripts/checks.ts [names...]` (default: all four). `npm test` runs them through
 * `scripts/test.ts`, beside the suite.
 */
import { spawn } from "node:child_process"
import { pathToFileURL } from "node:url"

const ALL = ["typecheck", "lint", "docs:check", "check:package"] as const

interface Outcome {
  readonly name: string
  readonly code: number
  readonly ms: number
  readonly output: string
}

/** Runs `npm run <name>`, its output kept until it ends. */
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

/** Prints a check's outcome under its name, whole. */
const report = (outcome: Outcome): Outcome => {
  const verdict = outcome.code === 0 ? "passed" : `FAILED (exit ${outcome.code})`
  process.stdout.write(`\n── ${outcome.name}: ${verdict} in ${(outcome.ms / 1000).toFixed(1)} s\n`)
  process.stdout.write(outcome.output)
  return outcome
}

/** Runs `names` side by side, each reported as it ends; the names of those that failed. */
export const runAll = async (names: ReadonlyArray<string>): Promise<ReadonlyArray<string>> => {
  const outcomes = await Promise.all(names.map((name) => run(name).then(report)))
  return outcomes.filter((outcome) => outcome.code !== 0).map((outcome) => outcome.name)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const names = process.argv.slice(2)
  for (const name of names)
    if (!(ALL as ReadonlyArray<string>).includes(name)) {
      console.error(`checks: no check named ${name} (the checks: ${ALL.join(", ")})`)
      process.exit(2)
    }
  const failed = await runAll(names.length === 0 ? ALL : names)
  if (failed.length > 0) {
    console.error(`\nchecks failed: ${failed.join(", ")}`)
    process.exit(1)
  }
}
