/**
 * What one claim of grouped pops costs the library, CPU-bound and alone: `node
 * .bench-dist/bench/groupedCycle.js [--queues=100] [--pops=2] [--seconds=2]` (after a bench build).
 *
 * One process, no sockets: a `LocalWaker` with grouped pops on `--queues` queues, `--pops` pops of a
 * batch of 100 on each popping back to back, and a stream of wakes (two per queue on every turn of the
 * event loop, through the waker's synchronous entry point, as the mesh's receive path calls it) over an
 * in-memory claim that answers on the next turn with the rows pushed meanwhile. The process is busy
 * throughout, so its CPU over the claims is what a claim costs: the claim loop, the hand-out, the pops
 * coming back, their timers and fibers, and the wakes that led to it. Best of three windows, after a
 * warm-up.
 */
import { Duration, Effect, Option, Scope } from "effect"
import * as Frame from "../src/Frame.js"
import * as LocalWaker from "../src/LocalWaker.js"
import * as Waker from "../src/Waker.js"

const flag = (name: string, fallback: number): number => {
  const raw = process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
  const value = Number(raw)
  return raw === undefined || !Number.isFinite(value) ? fallback : value
}

const queues = Math.max(1, Math.floor(flag("queues", 100)))
const popsPerQueue = Math.max(1, Math.floor(flag("pops", 2)))
const seconds = flag("seconds", 2)

const items = Array.from({ length: queues }, (_, i) => Frame.queueItem({ queue: `q${i}`, partition: "p-0" }))
const pending = new Array<number>(queues).fill(0)
let claims = 0
let wakes = 0

const scope = Effect.runSync(Scope.make())
const waker = Effect.runSync(Scope.provide(LocalWaker.make(), scope))
const wake = Waker.syncWakeOf(waker)
if (wake === undefined) throw new Error("LocalWaker has a synchronous wake")

const nextTurn = <A>(f: () => A): Promise<A> => new Promise((resolve) => setImmediate(() => resolve(f())))

Effect.runFork(
  Scope.provide(
    Effect.gen(function* () {
      const grouped = yield* waker.grouped<number, never>({
        claim: ({ queue, limit }) =>
          Effect.promise(() =>
            nextTurn(() => {
              claims++
              const q = Number(queue.slice(1))
              const n = Math.min(limit, pending[q]!)
              pending[q]! -= n
              return Array.from({ length: n }, (_, i) => i)
            })
          ),
        release: () => Effect.void,
        repoll: Duration.seconds(1),
        maxClaim: 100,
        followUpInterval: Duration.zero
      })
      const pops = items.flatMap((item) =>
        Array.from({ length: popsPerQueue }, () =>
          Effect.forever(
            grouped.pop({ queue: item.queue, tenant: Option.none() }, { batch: 100, maxWait: 120_000 })
          )
        )
      )
      yield* Effect.all(pops, { concurrency: "unbounded", discard: true })
    }),
    scope
  )
)

const pump = () => {
  for (let q = 0; q < queues; q++) {
    pending[q]! += 2
    wakes += 2
    wake(items[q]!)
    wake(items[q]!)
  }
  setImmediate(pump)
}
pump()

const window = async (ms: number) => {
  const claims0 = claims
  const wakes0 = wakes
  const cpu = process.cpuUsage()
  await new Promise((resolve) => setTimeout(resolve, ms))
  const used = process.cpuUsage(cpu)
  return { claims: claims - claims0, wakes: wakes - wakes0, cpuUs: used.user + used.system }
}

await window(3000)
let best: { usPerClaim: number; wakesPerClaim: number } | undefined
for (let i = 0; i < 3; i++) {
  const w = await window(seconds * 1000)
  const usPerClaim = w.cpuUs / Math.max(1, w.claims)
  if (best === undefined || usPerClaim < best.usPerClaim)
    best = { usPerClaim, wakesPerClaim: w.wakes / Math.max(1, w.claims) }
}
console.log(
  JSON.stringify({
    queues,
    popsPerQueue,
    cpuUsPerClaim: Math.round((best?.usPerClaim ?? 0) * 100) / 100,
    wakesPerClaim: Math.round((best?.wakesPerClaim ?? 0) * 100) / 100
  })
)
process.exit(0)
