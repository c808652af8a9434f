import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    testTimeout: 30_000,
    // Most files wait on sockets, child processes and timers rather than the CPU: three at a time keep
    // two cores busy and the suite within its budget.
    maxWorkers: 3,
    minWorkers: 1,
    hookTimeout: 30_000
  }
})
