/**
 * `npm test`: the checks and the test suite side by side, not one after the other. The suite keeps two
 * cores busy for most of its run but not all of it (its processes wait on sockets, timers and children),
 * and the checks fill what it leaves. The API docs' check is not among them: the suite's
 * `test/docs.release.test.ts` runs docgen and compares `docs/api/` itself, and two docgens at once would
 * share `.docgen/`. None of the others writes what the suite reads (typecheck and lint read sources, the
 * package check packs `dist/` as it is).
 *
 * The suite's output streams as it runs; each check's is printed whole when it ends, under its name. The
 * exit code is 1 when a check or the suite failed, once both have ended. Arguments go to `vitest run`.
 */
import { spawn } from "node:child_process"
import { runAll } from "./checks.js"

const CHECKS = ["typecheck", "lint", "check:package"] as const

const suite = new Promise<number>((resolve) => {
  const child = spawn("npx", ["vitest", "run", ...process.argv.slice(2)], { stdio: "inherit" })
  child.on("error", (error) => {
    console.error(`vitest: ${error.message}`)
    resolve(1)
  })
  child.on("close", (code, signal) => resolve(code ?? (signal === null ? 1 : 128)))
})

const [failed, code] = await Promise.all([runAll(CHECKS), suite])
const failures = [...failed, ...(code === 0 ? [] : [`the test suite (exit ${code})`])]
if (failures.length > 0) {
  console.error(`\nfailed: ${failures.join(", ")}`)
  process.exit(1)
}
