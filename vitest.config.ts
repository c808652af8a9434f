import * as Path from "node:path"
import { defineConfig } from "vitest/config"
import { BaseSequencer, type TestSpecification } from "vitest/node"

/**
 * The suite in tiers, each a vitest project chosen by the test file's name (docs/development.md):
 *
 * - `unit`, `test/**\/*.test.ts`: `TestClock`, the in-memory transport, pure functions. No socket, no
 *   process, no database; the inner loop (`npm run test:unit`).
 * - `integration`, `*.int.test.ts`: loopback sockets, child processes, PostgreSQL.
 * - `solo`, `*.solo.test.ts`: integration files that need the CPU to themselves (floods, a paused
 *   process): before everything else, one file at a time, no other test file beside them.
 * - `release`, `*.release.test.ts`: what a release ships (the packed tarball, the API reference, every
 *   example in the docs).
 *
 * `npm test` runs them all. A new file lands in its tier by its name alone.
 */
const tiers = ["int", "solo", "release"] as const
const named = (tier: (typeof tiers)[number]) => `test/**/*.${tier}.test.ts`

/**
 * Test files at once, of every project but `solo`. Vitest 5 runs the projects of one `groupOrder` in one
 * pool of workers, so the unit threads and the integration and release forks share these four (projects
 * with a `maxWorkers` of their own must each have a group of their own, and would run one after another).
 */
const FORKS = 4

/**
 * Files that run far longer than their size says: the reference broker's three replicas under load, over
 * a minute each on a busy machine. Started first, the rest of the suite runs beside them. In vitest's
 * order (the largest files first on a fresh clone) `chaos.int` started last and ran alone for a minute,
 * a core idle.
 */
const STARTED_FIRST = ["test/chaos.int.test.ts", "test/broker.int.test.ts"]

/**
 * Vitest's order (the longest first by the durations of the run before, kept in `node_modules/.vite`;
 * the largest files first where there is none, as on a fresh clone), with the `release` files ahead of
 * it and then `STARTED_FIRST`. The forks pool runs the files of one project on its processes, and the
 * next project's once that queue is empty: the release files (packing, installing, docgen: a third of a
 * minute to a minute each) start at once, beside the unit tier, and the integration files fill the
 * processes as they free up. Last, they ran at the end with a core idle.
 */
class LongestFirst extends BaseSequencer {
  override async sort(files: Array<TestSpecification>): Promise<Array<TestSpecification>> {
    const sorted = await super.sort(files)
    const rank = (spec: TestSpecification) => {
      if (spec.project.name === "release") return 0
      const path = Path.relative(spec.project.config.root, spec.moduleId).split(Path.sep).join("/")
      const at = STARTED_FIRST.indexOf(path)
      return at === -1 ? STARTED_FIRST.length + 1 : at + 1
    }
    return sorted
      .map((spec, index) => ({ spec, index, rank: rank(spec) }))
      .sort((a, b) => a.rank - b.rank || a.index - b.index)
      .map(({ spec }) => spec)
  }
}

export default defineConfig({
  test: {
    // Most integration files wait on sockets, child processes and timers rather than the CPU: four at a
    // time keep two cores busy (three left a fifth of the CPU idle; the suite took 229 to 260 s of vitest
    // then, 190 s with four).
    maxWorkers: FORKS,
    sequence: { sequencer: LongestFirst, groupOrder: 1 },
    // Integration and release files run four at a time, each process running file after file of one
    // project in one module graph (`isolate: false`), as the unit threads do. A process of its own per
    // file started vitest's runner and loaded effect, `@effect/vitest` and the sources afresh: 1 to 1.5 s
    // of CPU before the file's first test, a tenth of the suite's CPU. So these files too leave nothing
    // behind (their servers, sockets, databases and children end with their scopes; a changed global is
    // put back), and `layer` comes from test/fixtures/layer.ts, which puts back the `it` that
    // `@effect/vitest`'s own overwrites for every later file.
    pool: "forks",
    isolate: false,
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: tiers.map(named),
          // Worker threads that each load effect and the sources once and then run file after file
          // (`isolate: false`): loading them afresh for each file was most of the tier's time. So a unit
          // file leaves no global state behind (a swapped global is put back in `finally`), and no two
          // unit files may depend on running in a fresh module graph.
          pool: "threads",
          isolate: false,
          // Zero-delay timeouts as `setImmediate`: TestClock's yields, without Node's 1 ms clamp.
          setupFiles: ["test/fixtures/zeroDelayTimers.ts"],
          // Only ends a stuck test: the heaviest (16 MiB batches, 300 connections past a cap of 256) take
          // seconds alone and may take ten times that on a machine shared with other work.
          testTimeout: 60_000,
          hookTimeout: 60_000
        }
      },
      {
        extends: true,
        test: {
          name: "integration",
          include: [named("int")],
          // Generous: a test waits for conditions, each bounded; this only ends one that is stuck.
          testTimeout: 180_000,
          hookTimeout: 180_000
        }
      },
      {
        extends: true,
        test: {
          name: "release",
          include: [named("release")],
          testTimeout: 300_000,
          hookTimeout: 300_000
        }
      },
      {
        extends: true,
        test: {
          name: "solo",
          include: [named("solo")],
          testTimeout: 180_000,
          hookTimeout: 180_000,
          // Before the other projects (group 1), one file at a time in a single fork, each in a process
          // of its own. They wait on real timers (dead thresholds, a paused process) and use a tenth of a
          // core: last, they were a third of a minute with the machine idle; first, `npm test`'s checks
          // (typecheck, lint, the package's) run beside them and fill it.
          sequence: { groupOrder: 0 },
          isolate: true,
          fileParallelism: false
        }
      }
    ]
  }
})
