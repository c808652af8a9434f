/**
 * What receiving one `MESSAGE_AVAILABLE` costs a node, apart from everything else the write-load
 * section measures: `node .bench-dist/bench/hintProbe.js [flags]` (after a bench build).
 *
 * Two processes on 127.0.0.1: this one is the sender, a mesh node that calls `unsafeMessageAvailable`
 * `--rate` times a second (default 3,000), from a timer callback about every millisecond, at least
 * `--burst` calls in each (default 1), the way a producer hints after each acknowledged commit; the receiver is a forked mesh node over `LocalWaker`
 * with, by `--mode`, nothing waiting (`idle`) or two grouped pops of a batch of 100 popping back to back
 * (`grouped`, the write-load consumers' setting: `followUpInterval` 5 ms, re-poll 1 s), whose claim takes
 * `--claim-ms` (default 3) and returns the rows committed since the claim before at the sending rate.
 * After `--warmup-ms`, the receiver's `process.cpuUsage()` over `--seconds` over the hints it received
 * is the CPU per hint; beside it the chunks read (frames per read), the claims, and the sender's CPU per
 * hint. `--cpu-prof` runs the receiver under `node --cpu-prof` (its profile in bench/profiles/).
 */
import { fork } from "node:child_process"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Duration, Effect, Metric, Option, Schema } from "effect"
import { flushHistograms } from "../src/internal/metrics/metricNames.js"
import * as LocalWaker from "../src/LocalWaker.js"
import * as Mesh from "../src/Mesh.js"
import { freePort } from "./driver.js"
import { linksUp, localNode, until } from "./nodes.js"

const SECRET = "bench-hint-probe-s3cr3t"
const ITEM = { queue: "wl", partition: "p-0" } as const
const TARGET: LocalWaker.WaitTarget = { queue: "wl", tenant: Option.none() }

const flag = (name: string, fallback: number): number => {
  const raw = process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
  const value = Number(raw)
  return raw === undefined || !Number.isFinite(value) ? fallback : value
}
const textFlag = (name: string, fallback: string): string =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback

const Report = Schema.Struct({
  hints: Schema.Number,
  chunks: Schema.Number,
  cpuUs: Schema.Number,
  systemUs: Schema.Number,
  wallMs: Schema.Number,
  claims: Schema.Number,
  rows: Schema.Number
})
const Reported = Schema.Struct({ kind: Schema.Literal("report"), report: Report })

/** Chunks read so far: the count of the receive-to-apply histogram (one observation per chunk). */
const chunksRead = Effect.map(Effect.andThen(Effect.sync(flushHistograms), Metric.snapshot), (snapshot) => {
  let chunks = 0
  for (const metric of snapshot) {
    if (metric.id === "queen_mesh_receive_apply_seconds" && metric.type === "Histogram") {
      chunks += metric.state.count
    }
  }
  return chunks
})

const messagesReceived = Effect.map(
  Effect.flatMap(Mesh.Mesh, (mesh) => mesh.stats),
  (stats) => (stats.enabled ? stats.messages_received : 0)
)

/** The receiver: a node over `LocalWaker`, measuring itself when the sender says so. */
const receiver = async () => {
  const port = Number(process.argv[3])
  const senderPort = Number(process.argv[4])
  const mode = process.argv[5] ?? "idle"
  const claimMs = Number(process.argv[6] ?? 3)
  const rate = Number(process.argv[7] ?? 3000)
  const runtime = localNode({ serverId: "probe-receiver", port, peers: [senderPort], secret: SECRET })
  await runtime.runPromise(Effect.service(Mesh.Mesh))
  let claims = 0
  let rows = 0
  if (mode === "grouped") {
    let lastClaim = performance.now()
    runtime.runFork(
      Effect.scoped(
        Effect.gen(function* () {
          const waker = yield* LocalWaker.LocalWaker
          const pops = yield* waker.grouped<number, never>({
            claim: ({ limit }) =>
              Effect.as(
                Effect.sleep(Duration.millis(claimMs)),
                Effect.sync(() => {
                  const now = performance.now()
                  const found = Math.min(limit, Math.round(((now - lastClaim) * rate) / 1000))
                  lastClaim = now
                  claims++
                  rows += found
                  return Array.from({ length: found }, (_, i) => i)
                })
              ).pipe(Effect.flatten),
            release: () => Effect.void,
            repoll: Duration.seconds(1),
            maxClaim: 100,
            followUpInterval: Duration.millis(5)
          })
          const popBackToBack = Effect.forever(pops.pop(TARGET, { batch: 100, maxWait: 120_000 }))
          yield* Effect.all([popBackToBack, popBackToBack], { concurrency: "unbounded", discard: true })
        })
      )
    )
  }
  process.send?.({ kind: "ready" })
  process.on("message", async (raw) => {
    if (typeof raw !== "object" || raw === null) return
    const kind = Reflect.get(raw, "kind")
    if (kind === "measure") {
      const seconds = Number(Reflect.get(raw, "seconds"))
      const hints0 = await runtime.runPromise(messagesReceived)
      const chunks0 = await runtime.runPromise(chunksRead)
      const claims0 = claims
      const rows0 = rows
      const cpu = process.cpuUsage()
      const start = performance.now()
      await new Promise((resolve) => setTimeout(resolve, seconds * 1000))
      const used = process.cpuUsage(cpu)
      const wallMs = performance.now() - start
      const report: typeof Report.Type = {
        hints: (await runtime.runPromise(messagesReceived)) - hints0,
        chunks: (await runtime.runPromise(chunksRead)) - chunks0,
        cpuUs: used.user + used.system,
        systemUs: used.system,
        wallMs,
        claims: claims - claims0,
        rows: rows - rows0
      }
      process.send?.({ kind: "report", report })
    }
    if (kind === "stop") {
      await runtime.dispose()
      process.exit(0)
    }
  })
}

/** The sender, and the driver of the probe. */
const sender = async () => {
  const rate = flag("rate", 3000)
  const burst = Math.max(1, Math.floor(flag("burst", 1)))
  const seconds = flag("seconds", 5)
  const warmupMs = flag("warmup-ms", 1500)
  const claimMs = flag("claim-ms", 3)
  const mode = textFlag("mode", "idle")
  const profiled = process.argv.includes("--cpu-prof")
  const [port, receiverPort] = await Promise.all([freePort(), freePort()])
  const here = fileURLToPath(import.meta.url)
  const profileDir = Path.join(Path.dirname(here), "..", "..", "bench", "profiles")
  const child = fork(
    here,
    ["receiver", String(receiverPort), String(port), mode, String(claimMs), String(rate)],
    {
      execArgv: [
        ...textFlag("receiver-flags", "")
          .split(",")
          .filter((f) => f !== ""),
        ...(profiled
          ? [
              "--cpu-prof",
              "--cpu-prof-interval",
              "100",
              "--cpu-prof-dir",
              profileDir,
              "--cpu-prof-name",
              `hint-probe-${mode}.cpuprofile`
            ]
          : [])
      ]
    }
  )
  const next = (kind: string) =>
    new Promise<unknown>((resolve) => {
      const on = (raw: unknown) => {
        if (typeof raw === "object" && raw !== null && Reflect.get(raw, "kind") === kind) {
          child.off("message", on)
          resolve(raw)
        }
      }
      child.on("message", on)
    })
  await next("ready")
  const runtime = localNode({ serverId: "probe-sender", port, peers: [receiverPort], secret: SECRET })
  await until(runtime, linksUp, 30_000, "the sender's link")
  const mesh = await runtime.runPromise(Effect.service(Mesh.Mesh))
  // Paced on the clock: each timer callback (about one a millisecond) sends what is due, or nothing
  // until `burst` are.
  let sent = 0
  const began = performance.now()
  let running = true
  const tick = () => {
    if (!running) return
    const due = Math.floor(((performance.now() - began) * rate) / 1000)
    if (due - sent >= burst) {
      for (; sent < due; sent++) mesh.unsafeMessageAvailable(ITEM)
    }
    setTimeout(tick, 1)
  }
  tick()
  await new Promise((resolve) => setTimeout(resolve, warmupMs))
  const cpu = process.cpuUsage()
  const sent0 = sent
  child.send({ kind: "measure", seconds })
  const reported = await next("report")
  const senderUsed = process.cpuUsage(cpu)
  const sentInWindow = sent - sent0
  running = false
  const { report } = Schema.decodeUnknownSync(Reported)(reported)
  const perHint = report.cpuUs / Math.max(1, report.hints)
  console.log(
    JSON.stringify({
      mode,
      rate,
      burst,
      claimMs,
      hints: report.hints,
      hintsPerSec: Math.round((report.hints * 1000) / report.wallMs),
      framesPerRead: Math.round((report.hints / Math.max(1, report.chunks)) * 100) / 100,
      receiverCpuUsPerHint: Math.round(perHint * 10) / 10,
      receiverSystemUsPerHint: Math.round((report.systemUs / Math.max(1, report.hints)) * 10) / 10,
      receiverCpuPercent: Math.round((report.cpuUs / 10 / report.wallMs) * 10) / 10,
      claimsPerSec: Math.round((report.claims * 1000) / report.wallMs),
      rowsPerClaim: Math.round((report.rows / Math.max(1, report.claims)) * 10) / 10,
      senderCpuUsPerHint:
        Math.round(((senderUsed.user + senderUsed.system) / Math.max(1, sentInWindow)) * 10) / 10
    })
  )
  child.send({ kind: "stop" })
  await new Promise((resolve) => child.once("exit", resolve))
  await runtime.dispose()
  process.exit(0)
}

if (process.argv[2] === "receiver") void receiver()
else void sender()
