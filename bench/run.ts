/**
 * `npm run bench [-- --quick]`: every benchmark of the mesh next to the hand-written baseline
 * (`bench/baseline.ts`), in one process tree. Prints a table and writes `bench/results.json` with every
 * figure, the ratios (ours divided by the baseline's), the targets, and the machine.
 *
 * Flags: `--quick` (smaller counts, about three minutes), `--only=<sections>` (a subset of the sections
 * below, by name, written to `.bench-dist/results.only.json` instead), `--cpu-prof=<role>,...` (run
 * those child roles under `node --cpu-prof`, profiles in `bench/profiles/`; the CLI nodes are
 * `cli-mesh-a`, `cli-mesh-b`, `cli-mesh-recv` and their `cli-base-*` twins, the lane's `lane-flood-a`,
 * `lane-lane-b`, ...), `--upstream=<path>|off` (upstream's Rust mesh behind its harness, run in the CLI
 * rounds as a third kind; else `QUEEN_MESH_BENCH_UPSTREAM`, else
 * `upstream-mesh-harness/target/release/upstream-mesh-node` in the temporary directory if it exists;
 * skipped, saying why, where none is found).
 *
 * Each section lives in `bench/sections/` with its run and its part of the report (bench/section.ts).
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Driver, findUpstream } from "./driver.js"
import { knobs, refuse } from "./knobs.js"
import { machine, type Row, row, table, targetTable } from "./report.js"
import type { Outcome, Registered } from "./section.js"
import { broker } from "./sections/broker.js"
import { cli } from "./sections/cli.js"
import { cluster } from "./sections/cluster.js"
import { codec } from "./sections/codec.js"
import { consumers } from "./sections/consumers.js"
import { fair } from "./sections/fair.js"
import { flood } from "./sections/flood.js"
import { floor } from "./sections/floor.js"
import { idle } from "./sections/idle.js"
import { lane } from "./sections/lane.js"
import { parked } from "./sections/parked.js"
import { scale } from "./sections/scale.js"
import { startupSection } from "./sections/startup.js"
import { throughput } from "./sections/throughput.js"
import { tls } from "./sections/tls.js"
import { wake } from "./sections/wake.js"
import { writeload } from "./sections/writeload.js"
import { round } from "./stats.js"

/** The sections, in the order they run and are reported: a new section is one entry here. */
const sections: ReadonlyArray<Registered> = [
  codec,
  throughput,
  wake,
  flood,
  cli,
  cluster,
  scale,
  parked,
  lane,
  tls,
  fair,
  idle,
  startupSection,
  broker,
  floor,
  consumers,
  writeload
]

const here = Path.dirname(fileURLToPath(import.meta.url))
const benchDir = Path.resolve(here, "../../bench")

const listFlag = (name: string): ReadonlyArray<string> | undefined =>
  knobs
    .value(name)
    ?.split(",")
    .filter((s) => s !== "")

const quick = knobs.flag("quick")
const only = listFlag("only")
const driver = new Driver({
  quick,
  only,
  profiled: new Set(listFlag("cpu-prof") ?? []),
  profileDir: Path.join(benchDir, "profiles"),
  upstream: findUpstream(knobs.value("upstream"))
})

const cleanup = () => {
  driver.killAll()
  for (const section of sections) section.cleanup()
}
process.on("exit", cleanup)
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.on(signal, () => {
    cleanup()
    process.exit(130)
  })
}

/** `--only=` names a section that does not exist: say which exist, run nothing. */
const unknownSections = (): string | undefined => {
  const known = sections.flatMap((s) => s.names)
  const unknown = (only ?? []).filter((name) => !known.includes(name))
  return unknown.length === 0
    ? undefined
    : `--only=${unknown.join(",")}: no such section (the sections: ${known.join(", ")})`
}

const runAll = async (): Promise<ReadonlyArray<Outcome>> => {
  const outcomes: Array<Outcome> = []
  for (const section of sections) {
    outcomes.push(section.names.some(driver.selected) ? await section.run(driver) : section.skip(quick))
  }
  return outcomes
}

/** The keys of every part, in order. */
const merged = (parts: ReadonlyArray<object>): Record<string, unknown> =>
  Object.fromEntries(parts.flatMap((part) => Object.entries(part)))

/** The table of every section's rows, then the targets. */
const summary = (outcomes: ReadonlyArray<Outcome>): string => {
  const rows: Array<Row> = [
    row("benchmark", "queen-mesh", "baseline", "ratio"),
    ...outcomes.flatMap((o) => o.rows)
  ]
  return `${table(rows)}\n\n${targetTable(outcomes.flatMap((o) => o.targets))}\n`
}

const main = async () => {
  const started = Date.now()
  const { upstream } = driver
  const plan = merged(sections.map((s) => s.plan(quick)))
  // The binary's name only: a path names one machine.
  const meta = {
    ...machine(benchDir),
    quick,
    plan,
    upstream: "binary" in upstream ? { binary: Path.basename(upstream.binary) } : upstream
  }
  process.stderr.write(
    `queen-mesh bench${quick ? " (quick)" : ""}: ${meta.node} on ${meta.cpu} x ${meta.cores}\n`
  )
  if ("skipped" in upstream && (driver.selected("cli") || driver.selected("cluster"))) {
    driver.progress(`upstream Rust rows (cli, cluster) skipped: ${upstream.skipped}`)
  }
  const outcomes = await runAll()
  const durationSec = round((Date.now() - started) / 1000, 1)
  const text = summary(outcomes)
  process.stdout.write(`\n${text}`)
  const results = {
    meta: { ...meta, loadAverageAtEnd: Os.loadavg().map((l) => round(l, 2)), durationSec },
    ...merged(outcomes.map((o) => o.results)),
    targets: outcomes.flatMap((o) => o.targets),
    notes: [
      "Ratios are ours divided by the baseline's (bench/baseline.ts: the same wire hand-written on node:net).",
      ...outcomes.flatMap((o) => o.notes)
    ],
    table: text.split("\n")
  }
  const outFile =
    only === undefined ? Path.join(benchDir, "results.json") : Path.resolve(here, "../results.only.json")
  Fs.writeFileSync(outFile, `${JSON.stringify(results, null, 2)}\n`)
  process.stderr.write(`\nwrote ${Path.relative(process.cwd(), outFile)} in ${durationSec} s\n`)
}

const unknown = unknownSections()
if (unknown !== undefined) refuse(unknown)
// Every section has read its knobs as it was imported: what is left, nothing reads.
const unread = knobs.unread()
if (unread.length > 0)
  refuse(`${unread.join(" ")}: no such flag (bench/README.md, "Reproducing", lists them)`)

main().then(
  () => {
    cleanup()
    process.exit(0)
  },
  (error: unknown) => {
    process.stderr.write(
      `bench failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`
    )
    cleanup()
    process.exit(1)
  }
)
