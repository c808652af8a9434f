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
 * `npm test` runs them all.
 */
const tiers = ["int", "solo", "release"] as const
const named = (tier: (typeof tiers)[number]) => `test/**/*.${tier}.test.ts`

export default defineConfig({
  test: {
    // Most files wait on sockets, child processes and timers rather than the CPU: three at a time keep
    // two cores busy and the suite within its budget.
    maxWorkers: 3,
    minWorkers: 1,
    projects: [
      {
        extends: true,
        test: {
          name: "unit",
          include: ["test/**/*.test.ts"],
          exclude: tiers.map(named),
          testTimeout: 30_000,
          hookTimeout: 30_000
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
