import { defineConfig } from "vitest/config"

/**
 * The suite in tiers, each a vitest project chosen by the test file's name (docs/development.md):
 *
 * - `unit`, `test/**\/*.test.ts`: `TestClock`, the in-memory transport, pure functions. No socket, no
 *   process, no database; the inner loop (`npm run test:unit`).
 * - `integration`, `*.int.test.ts`: loopback sockets, child processes, PostgreSQL.
 * - `solo`, `*.solo.test.ts`: integration files that need the CPU to themselves (floods, a paused
 *   process): after everything else, one file at a time, nothing beside them.
 * - `release`, `*.release.test.ts`: what a release ships (the packed tarball, the API reference, every
 *   example in the docs).
 *
 * `npm test` runs them all. A new file lands in its tier by its name alone.
 */
const tiers = ["int", "solo", "release"] as const
const named = (tier: (typeof tiers)[number]) => `test/**/*.${tier}.test.ts`

/** Unit files at once: they only use the CPU, and the machine has two cores. */
const UNIT_THREADS = 2

export default defineConfig({
  test: {
    // Most integration files wait on sockets, child processes and timers rather than the CPU: four at a
    // time keep two cores busy (three left a fifth of the CPU idle; the suite took 229 to 260 s of vitest
    // then, 190 s with four). Each runs in a process of its own.
    maxWorkers: 4,
    minWorkers: 1,
    poolOptions: {
      // The unit tier runs in worker threads that each load effect and the sources once and then run file
      // after file (`isolate: false`): loading them afresh for each file was most of the tier's time.
      // So a unit file leaves no global state behind (a swapped global is put back in `finally`), and
      // no two unit files may depend on running in a fresh module graph. `minThreads` equals
      // `maxThreads`: a pool that shrinks idle non-isolated workers can tear one down twice, failing the
      // run with "Terminating worker thread".
      threads: { isolate: false, minThreads: UNIT_THREADS, maxThreads: UNIT_THREADS }
    },
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: tiers.map(named),
          pool: "threads",
          // Zero-delay timeouts as `setImmediate`: TestClock's yields, without Node's 1 ms clamp.
          setupFiles: ["test/fixtures/zeroDelayTimers.ts"],
          // Only ends a stuck test: the heaviest (16 MiB batches, 600 connections) take seconds alone
          // and may take ten times that on a machine shared with other work.
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
          // After the other projects (group 0), one file at a time in a single fork.
          sequence: { groupOrder: 1 },
          poolOptions: { forks: { singleFork: true } }
        }
      }
    ]
  }
})
