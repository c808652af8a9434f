/**
 * The soak script (`npm run soak`, scripts/soak.ts) as a script or CI runs it: a process of its own, a
 * short run, its verdict, and then its exit, by itself. The seed's one churn action is a partition of
 * node A (its links black-holed past the dead threshold, then reset as the hole is lifted): the fault
 * that once left a proxy's socket open, so that the run printed PASS and never exited.
 */
import { spawn } from "node:child_process"
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect } from "effect"

// tsx's loader in the node process itself: its CLI would run the script in a child of its own, which a
// kill at the bound would leave behind.
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href
const soakScript = new URL("../scripts/soak.ts", import.meta.url).pathname

interface Ended {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly out: string
  readonly err: string
}

/**
 * Runs the soak with `args` until it exits by itself; fails (and kills it) when it has not within
 * `within`: a run of a few seconds that outlives it has hung.
 */
const soak = (args: ReadonlyArray<string>, within: Duration.Input = "120 seconds") =>
  Effect.acquireRelease(
    Effect.sync(() =>
      spawn(process.execPath, ["--import", tsxLoader, soakScript, ...args], {
        stdio: ["ignore", "pipe", "pipe"]
      })
    ),
    (child) =>
      Effect.sync(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
      })
  ).pipe(
    Effect.flatMap((child) => {
      let out = ""
      let err = ""
      child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
        out += chunk
      })
      child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
        err += chunk
      })
      // 'close': exited, and everything it wrote has been read.
      return Effect.callback<Ended>((resume) => {
        child.once("close", (code, signal) => resume(Effect.succeed({ code, signal, out, err })))
      }).pipe(
        Effect.timeoutOrElse({
          duration: within,
          orElse: () =>
            Effect.fail(
              new Error(
                `the soak has not exited within ${Duration.format(Duration.fromInputUnsafe(within))}:\n${out}\n${err}`
              )
            )
        })
      )
    })
  )

describe("npm run soak", () => {
  it.live("a short run prints PASS, then exits by itself with 0", () =>
    Effect.gen(function* () {
      const ended = yield* soak(["--seconds", "6", "--seed", "337"])
      const report = `${ended.out}\n${ended.err}`
      assert.include(ended.out, "churn: partition A", report)
      assert.strictEqual(ended.out.trimEnd().split("\n").at(-1), "PASS", report)
      assert.deepStrictEqual([ended.code, ended.signal], [0, null], report)
    })
  )
})
