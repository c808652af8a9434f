/**
 * `fair`: a good peer's wakes while a hostile peer floods a node with `MESSAGE_AVAILABLE_BATCH` frames
 * just under 16 MiB, valid or with the last item invalid, and with no flood for reference (the
 * children are in bench/fairness.ts).
 */
import { Schema } from "effect"
import { type Driver, freePort, portOf, SECRET, stopAll } from "../driver.js"
import type { Child } from "../ipc.js"
import { check, fmt, row } from "../report.js"
import { section } from "../section.js"
import { round, sleep } from "../stats.js"

interface FairPlan {
  readonly fair: { readonly durationMs: number; readonly everyMs: number }
}

const DistributionSchema = Schema.Struct({
  n: Schema.Number,
  p50: Schema.Number,
  p90: Schema.Number,
  p99: Schema.Number,
  p999: Schema.Number,
  max: Schema.Number,
  mean: Schema.Number
})
const FairReport = Schema.Struct({
  wakeUs: DistributionSchema,
  floodItems: Schema.Number,
  framesReceived: Schema.Number,
  framesInvalid: Schema.Number,
  itemsInvalid: Schema.Number
})
const Written = Schema.Struct({ written: Schema.Number, reconnects: Schema.Number })

type Flood = "none" | "valid" | "invalid"

/** The hostile peer of `flood`, started a second before the good one; its frame as it reported it. */
const startHostile = async (driver: Driver, port: number, flood: "valid" | "invalid", all: Array<Child>) => {
  const hostile = driver.spawn("fair-hostile", { port, secret: SECRET, invalid: flood === "invalid" })
  all.push(hostile)
  const frame: unknown = (await hostile.take("ready", 60_000)).data
  await sleep(1_000)
  return { hostile, frame }
}

/** One run: the receiver, the hostile peer unless `none`, the good peer for the plan's duration. */
const fairOnce = async (driver: Driver, plan: FairPlan["fair"], flood: Flood) => {
  driver.progress(`fairness: good peer every ${plan.everyMs} ms, flood ${flood}, ${plan.durationMs / 1000} s`)
  const recv = driver.spawn("fair-recv", { secret: SECRET, dummyPeerPort: await freePort() })
  const all = [recv]
  try {
    const port = portOf((await recv.take("ready", 30_000)).data)
    const hostile = flood === "none" ? undefined : await startHostile(driver, port, flood, all)
    const good = driver.spawn("fair-good", { port, secret: SECRET, ...plan })
    all.push(good)
    await good.take("done", plan.durationMs + 60_000)
    recv.send({ kind: "report" })
    const report = Schema.decodeUnknownSync(FairReport)((await recv.take("report", 60_000)).data)
    let written: typeof Written.Type | undefined
    if (hostile !== undefined) {
      hostile.hostile.send({ kind: "report" })
      written = Schema.decodeUnknownSync(Written)((await hostile.hostile.take("written", 30_000)).data)
    }
    const figures = {
      ...report,
      hostileFramesWritten: written?.written ?? 0,
      reconnects: written?.reconnects ?? 0
    }
    return { figures, hostileFrame: hostile?.frame }
  } finally {
    await stopAll(all)
  }
}

const run = async (driver: Driver, plan: FairPlan) => {
  const none = await fairOnce(driver, plan.fair, "none")
  const valid = await fairOnce(driver, plan.fair, "valid")
  const invalid = await fairOnce(driver, plan.fair, "invalid")
  return {
    everyMs: plan.fair.everyMs,
    durationMs: plan.fair.durationMs,
    hostileFrame: invalid.hostileFrame,
    none: none.figures,
    valid: valid.figures,
    invalid: invalid.figures
  }
}

type Fairness = Awaited<ReturnType<typeof run>>

const p99Ms = (fairness: Fairness | undefined, flood: "valid" | "invalid") =>
  fairness === undefined ? undefined : round(fairness[flood].wakeUs.p99 / 1000, 1)

export const fair = section({
  names: ["fair"],
  plan: {
    full: { fair: { durationMs: 10_000, everyMs: 50 } },
    quick: { fair: { durationMs: 4_000, everyMs: 50 } }
  },
  run,
  results: (fairness) => ({ fairness }),
  rows: (fairness) =>
    (["none", "valid", "invalid"] as const).map((flood) => {
      const w = fairness[flood].wakeUs
      return row(
        `good peer wake under flood "${flood}": p50 / p99 / max (µs)`,
        `${fmt(w.p50)} / ${fmt(w.p99)} / ${fmt(w.max)}`
      )
    }),
  targets: (fairness) => [
    check(
      "good peer wake p99 under the valid 16 MiB flood (ms)",
      p99Ms(fairness, "valid"),
      "< 250",
      (v) => v < 250
    ),
    check(
      "good peer wake p99 under the invalid-item flood (ms)",
      p99Ms(fairness, "invalid"),
      "< 250",
      (v) => v < 250
    )
  ],
  notes: (_, plan) => [
    `Fairness: a mesh node receiving, from one authenticated peer, MESSAGE_AVAILABLE_BATCH frames just under 16 MiB back to back (valid, or with the last item invalid), and from another one MESSAGE_AVAILABLE every ${plan.fair.everyMs} ms carrying its send time; the good peer's one-way wake latency over ${plan.fair.durationMs / 1000} s, after 1 s of flood.`
  ]
})
