/**
 * Parked pops at scale, on the real clock: `LocalWaker` over `LocalWaker.layer()` in a
 * `ManagedRuntime`, with every pop its own fiber, as a broker's long-polls are. For each size N:
 *
 * - park: N pops across N/10 queues, from the first fork until all N are parked (wall ns per pop);
 * - wake: one wake per queue, from the first wake until every pop has resumed (wall ns per pop);
 * - timeout: N pops with deadlines spread over ~1 s, CPU (`process.cpuUsage`) from all parked until all
 *   timed out, per pop (median of three rounds): the reaper's cost, which must not grow with N (it used
 *   to scan every pop on each tick);
 * - memory: heap per parked pop, after a forced GC (`--expose-gc`; without it the figure is noisy).
 *
 * Standalone: `node --expose-gc .bench-dist/bench/parked.js [sizes...]` prints a JSON array.
 */
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Effect, ManagedRuntime, Option } from "effect"
import * as LocalWaker from "../src/LocalWaker.js"
import * as Waker from "../src/Waker.js"

/** One size's figures; times in ns per pop, memory in bytes per parked pop (fiber included). */
export interface ParkedResult {
  readonly size: number
  /** Wall time from the first fork until all are parked. */
  readonly parkNsPerPop: number
  /** Wall time from the first wake until every pop has resumed. */
  readonly wakeNsPerPop: number
  /** Process CPU from all parked until all timed out (median of three rounds). */
  readonly timeoutCpuNsPerPop: number
  /** Heap growth while parked, between two forced GCs. */
  readonly bytesPerParkedPop: number
}

const gc = (): boolean => {
  const collect: unknown = Reflect.get(globalThis, "gc")
  if (typeof collect !== "function") return false
  collect()
  return true
}

const heapAfterGc = async (): Promise<number> => {
  // Twice, with a turn between: finalisers and weak callbacks of the first pass free more.
  gc()
  await new Promise((resolve) => setImmediate(resolve))
  gc()
  return process.memoryUsage().heapUsed
}

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

const now = () => process.hrtime.bigint()

const cpuNs = (): number => {
  const usage = process.cpuUsage()
  return (usage.user + usage.system) * 1_000
}

/** A fixed LCG, so every run spreads the deadlines the same way. */
const lcg = (seed: number) => () => {
  seed = (seed * 1_103_515_245 + 12_345) % 2_147_483_648
  return seed / 2_147_483_648
}

const round = (value: number) => Math.round(value * 10) / 10

const measure = async (size: number, timeoutSpreadMs = 1_000): Promise<ParkedResult> => {
  const runtime = ManagedRuntime.make(LocalWaker.layer())
  try {
    const waker = await runtime.runPromise(Effect.service(LocalWaker.LocalWaker))
    const queueCount = Math.max(1, Math.floor(size / 10))
    const queues = Array.from({ length: queueCount }, (_, i) => `queue-${i}`)
    const none = Option.none<string>()
    const parkedCount = () => runtime.runSync(waker.parked)

    /** Forks `size` pops; resolves `ended` when all of them have resumed. */
    const parkAll = (maxWait: (i: number) => number) => {
      let left = size
      let resolve = () => {}
      const ended = new Promise<void>((r) => {
        resolve = r
      })
      const done = Effect.sync(() => {
        if (--left === 0) resolve()
      })
      for (let i = 0; i < size; i++) {
        const target = { queue: queues[i % queueCount]!, tenant: none }
        runtime.runFork(Effect.andThen(waker.awaitWake(target, { maxWait: maxWait(i) }), done))
      }
      return ended
    }
    const untilParked = async (n: number) => {
      while (parkedCount() < n) await turn()
    }

    // park, memory and wake
    const heapBefore = await heapAfterGc()
    const parkStart = now()
    const woken = parkAll(() => 3_600_000)
    await untilParked(size)
    const parkNs = Number(now() - parkStart)
    const heapParked = await heapAfterGc()
    const wakeStart = now()
    for (const queue of queues) Waker.syncWakeOf(waker)!({ queue, partition: "", tenant: none })
    await woken
    const wakeNs = Number(now() - wakeStart)
    for (const queue of queues) await runtime.runPromise(waker.takePartitionHints({ queue, tenant: none }))

    // timeout: deadlines 500 ms .. 1.5 s out, in random order; the median of three rounds, since one
    // round's CPU swings with whatever else the machine runs
    const random = lcg(size)
    const rounds: Array<number> = []
    for (let round = 0; round < 3; round++) {
      // No forced GC here: its concurrent sweeping would land in the CPU window.
      await new Promise((resolve) => setTimeout(resolve, 100))
      const timedOut = parkAll(() => 500 + Math.floor(random() * timeoutSpreadMs))
      await untilParked(size)
      const cpuStart = cpuNs()
      await timedOut
      rounds.push(cpuNs() - cpuStart)
    }
    const timeoutCpuNs = [...rounds].sort((a, b) => a - b)[1]!

    return {
      size,
      parkNsPerPop: round(parkNs / size),
      wakeNsPerPop: round(wakeNs / size),
      timeoutCpuNsPerPop: round(timeoutCpuNs / size),
      bytesPerParkedPop: round((heapParked - heapBefore) / size)
    }
  } finally {
    await runtime.dispose()
  }
}

/**
 * Runs the parked-pop benchmark for each size in turn (one runtime per size).
 */
export const runParkedBench = async (sizes: ReadonlyArray<number>): Promise<ReadonlyArray<ParkedResult>> => {
  // Warm the JIT first, or the first size pays for compiling the park, wake and reaper paths.
  await measure(2_000, 100)
  const results: Array<ParkedResult> = []
  for (const size of sizes) results.push(await measure(size))
  return results
}

const isMain =
  process.argv[1] !== undefined && Path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)

if (isMain) {
  const given = process.argv
    .slice(2)
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0)
  if (!gc()) process.stderr.write("parked: run with --expose-gc for a meaningful bytesPerParkedPop\n")
  runParkedBench(given.length > 0 ? given : [1_000, 10_000, 100_000]).then(
    (results) => process.stdout.write(`${JSON.stringify(results, null, 2)}\n`),
    (error: unknown) => {
      process.stderr.write(`${String(error)}\n`)
      process.exitCode = 1
    }
  )
}
