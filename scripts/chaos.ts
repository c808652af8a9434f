/**
 * A fault run under load: the reference broker's three replicas over an embedded PostgreSQL, pushes and
 * pops the whole time, and a seeded schedule of faults (PostgreSQL restarted, replicas killed and
 * frozen, links black-holed, backends terminated), then the checker's verdict and what recovery took.
 *
 *   npm run chaos -- [--seed=N] [--minutes=M] [--carrier=tcp|lane|both]
 *
 * `--minutes` is the load's length per carrier; `--consumers` long-poll on each replica (50), and
 * `--abandon` is the share of their pops whose client gives up mid-wait (0.3). Exits 1 when a message was lost or delivered twice under
 * a live lease, a fault never recovered, or an acceptance bound was missed, 0 otherwise: as soon as the
 * replicas, the fault proxies and PostgreSQL have been stopped and the verdict printed, since a run that
 * stays up after its verdict cannot run in a script or CI. The machinery is in
 * test/fixtures/chaos/, shared with test/chaos.int.test.ts; docs/faults.md has the figures.
 */
import * as Os from "node:os"
import { buildExample } from "../test/fixtures/broker.js"
import { startDatabase } from "../test/fixtures/chaos/cluster.js"
import { defaultConsumers, passed, type RunResult, runChaos, summarize } from "../test/fixtures/chaos/run.js"
import type { Carrier } from "../test/fixtures/chaos/schedule.js"

const arg = (name: string, fallback: string): string => {
  const found = process.argv.find((a) => a.startsWith(`--${name}=`))
  return found === undefined ? fallback : found.slice(name.length + 3)
}

const seed = Number(arg("seed", "1"))
const minutes = Number(arg("minutes", "5"))
const carrierArg = arg("carrier", "both")
const perReplica = Number(arg("consumers", String(defaultConsumers.perReplica)))
const abandonShare = Number(arg("abandon", String(defaultConsumers.abandonShare)))
if (
  !Number.isInteger(seed) ||
  !(minutes > 0) ||
  !["tcp", "lane", "both"].includes(carrierArg) ||
  !(Number.isInteger(perReplica) && perReplica >= 1 && perReplica <= 500) ||
  !(abandonShare >= 0 && abandonShare < 1)
) {
  process.stderr.write(
    "usage: npm run chaos -- [--seed=N] [--minutes=M] [--carrier=tcp|lane|both] [--consumers=1..500] [--abandon=0..0.99]\n"
  )
  process.exit(2)
}
const carriers: ReadonlyArray<Carrier> =
  carrierArg === "both" ? ["tcp", "lane"] : [carrierArg === "lane" ? "lane" : "tcp"]

const say = (line: string) => process.stdout.write(`${line}\n`)

const main = async (): Promise<number> => {
  say(
    `queen-mesh chaos: seed ${seed}, ${minutes} min per carrier, carriers ${carriers.join(", ")}; load average ${Os.loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`
  )
  const example = buildExample()
  const db = await startDatabase()
  const results: Array<RunResult> = []
  try {
    for (const carrier of carriers) {
      results.push(
        await runChaos({
          carrier,
          seed,
          durationMs: minutes * 60_000,
          db,
          entry: example.entry,
          timing: {
            heartbeatMs: 500,
            deadMs: 3000,
            repollMs: 10_000,
            repollDegradedMs: 200,
            leaseSeconds: 3
          },
          gapMs: 8000,
          overlap: 0.3,
          quietMs: 5000,
          pushPauseMs: 20,
          consumers: { ...defaultConsumers, perReplica, abandonShare },
          log: say
        })
      )
      say(`\n${summarize(results.at(-1)!)}\n`)
    }
  } finally {
    await db.close()
    example.remove()
  }
  say(
    `load average at the end ${Os.loadavg()
      .map((l) => l.toFixed(2))
      .join(" ")}`
  )
  const ok = results.every((result) => passed(result, { timedAcceptance: true }))
  say(
    ok ? "PASSED: nothing lost, nothing delivered twice, every fault recovered within its bounds" : "FAILED"
  )
  return ok ? 0 : 1
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `chaos run failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`
    )
    process.exit(1)
  }
)
