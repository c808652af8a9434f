/**
 * `npm run broker`: the reference broker end to end. One embedded PostgreSQL; for each way of carrying
 * hints (the TCP mesh, the PostgreSQL lane, none), three replicas as separate processes over a fresh
 * database; pushes on replica A while pops wait on B and C; then a summary: push-to-pop latency across
 * replicas, and the messages lost and delivered twice (both must be 0; the exit code says so).
 */
import { type Database, freshDatabase, startDatabase } from "./harness/database.js"
import { burst, latencyRounds } from "./harness/load.js"
import { type Carrier, clustered, type Replica, startCluster } from "./harness/replica.js"

const plan = {
  rounds: 300,
  warmup: 30,
  offRounds: 60,
  offWarmup: 5,
  repollOffMs: 100,
  burst: 1_000
}

const say = (text: string) => process.stdout.write(`${text}\n`)

interface Row {
  readonly carrier: Carrier
  readonly what: string
  readonly p50: number
  readonly p99: number
  readonly rounds: number
  readonly lost: number
  readonly duplicated: number
  readonly pushed: number
}

const describe: Record<Carrier, string> = {
  tcp: "TCP mesh (QUEEN_MESH_PEERS)",
  lane: "PostgreSQL lane (QUEEN_MESH_PG_URL, no mesh peers)",
  off: `mesh off, re-poll every ${plan.repollOffMs} ms`
}

const variant = async (database: Database, carrier: Carrier): Promise<Row> => {
  say(`\n${describe[carrier]}`)
  const url = await freshDatabase(database, `broker_${carrier}`)
  const env: Record<string, string> =
    carrier === "off" ? { BROKER_POP_REPOLL_MS: String(plan.repollOffMs) } : {}
  const started = Date.now()
  const replicas: Array<Replica> = await startCluster({ carrier, databaseUrl: url, env })
  try {
    await clustered(replicas, carrier)
    say(`  3 replicas up and ${carrier === "off" ? "answering" : "clustered"} in ${Date.now() - started} ms`)
    const [a, b, c] = replicas as [Replica, Replica, Replica]
    const rounds = carrier === "off" ? plan.offRounds : plan.rounds
    const latency = await latencyRounds({
      pusher: a,
      poppers: [b, c],
      queue: "latency",
      rounds,
      warmup: carrier === "off" ? plan.offWarmup : plan.warmup,
      jitterMs: carrier === "off" ? plan.repollOffMs : 2
    })
    say(
      `  ${rounds} pushes on A, one at a time, each popped on B or C: p50 ${fmt(latency.latencyUs.p50)} µs, p99 ${fmt(latency.latencyUs.p99)} µs`
    )
    const loaded = await burst({
      pushers: [a],
      poppers: [b, c],
      queue: "burst",
      count: plan.burst,
      maxBatch: 10,
      concurrency: 4,
      loops: 4,
      popBatch: 20
    })
    say(
      `  ${plan.burst} messages pushed on A in batches, popped on B and C (${Object.entries(loaded.byReplica)
        .map(([name, n]) => `${name} ${n}`)
        .join(", ")}) in ${loaded.wallMs} ms`
    )
    return {
      carrier,
      what: describe[carrier],
      p50: latency.latencyUs.p50,
      p99: latency.latencyUs.p99,
      rounds,
      pushed: latency.pushed + loaded.pushed,
      lost: latency.lost + loaded.lost,
      duplicated: latency.duplicated + loaded.duplicated
    }
  } finally {
    await Promise.all(replicas.map((replica) => replica.stop()))
  }
}

const fmt = (value: number) => (Number.isFinite(value) ? Math.round(value).toLocaleString("en-US") : "-")

const main = async () => {
  say("queen-mesh reference broker: 3 replicas over one PostgreSQL, pushes on A, pops waiting on B and C")
  const database = await startDatabase()
  say(`embedded PostgreSQL ${database.version} on ${new URL(database.url).host}`)
  const rows: Array<Row> = []
  try {
    for (const carrier of ["tcp", "lane", "off"] as const) rows.push(await variant(database, carrier))
  } finally {
    await database.stop()
  }
  const header = [
    "hints carried by",
    "push-to-pop p50 (µs)",
    "p99 (µs)",
    "messages",
    "lost",
    "delivered twice"
  ]
  const lines = rows.map((row) => [
    row.what,
    fmt(row.p50),
    fmt(row.p99),
    fmt(row.pushed),
    String(row.lost),
    String(row.duplicated)
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((line) => line[i]!.length)))
  const render = (cells: ReadonlyArray<string>) =>
    `| ${cells.map((cell, i) => cell.padEnd(widths[i]!)).join(" | ")} |`
  say(
    `\n${render(header)}\n| ${widths.map((w) => "-".repeat(w)).join(" | ")} |\n${lines.map(render).join("\n")}`
  )
  const tcp = rows.find((row) => row.carrier === "tcp")
  const off = rows.find((row) => row.carrier === "off")
  if (tcp !== undefined && off !== undefined)
    say(
      `\nthe TCP mesh finds a remote push ${Math.round(off.p50 / tcp.p50)} times sooner than a ${plan.repollOffMs} ms re-poll (p50)`
    )
  const bad = rows.filter((row) => row.lost > 0 || row.duplicated > 0)
  if (bad.length > 0) {
    say(`FAILED: messages lost or delivered twice with ${bad.map((row) => row.carrier).join(", ")}`)
    process.exitCode = 1
  } else {
    say("no message lost, none delivered twice")
  }
}

main().catch((error: unknown) => {
  process.stderr.write(
    `broker demo failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`
  )
  process.exit(1)
})
