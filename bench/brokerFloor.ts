/**
 * The reference broker against its floor (`npm run bench -- --only=floor`): what a replica costs to
 * start and to keep, and what each request costs, each figure beside the bare parts it is made of,
 * measured in the same run on one embedded PostgreSQL (fsync off).
 *
 * - Start: the three replicas of a TCP cluster started one after another, unbundled as
 *   `npm run broker` runs them, spawn to ready line, and their CPU then; the median of the three.
 * - Memory: their RSS 5 s after they cluster, and at rest (once V8's memory reducer has given back the
 *   young generation start-up grew); the last replica's broken down (`/proc`, the heap by space, code,
 *   script source) by the memory probe, and the connections its pool holds.
 * - Requests on the first replica, one at a time on one kept-alive connection, taking turns in blocks
 *   with their floors: a bare `node:http` server in a process of its own (a `POST` with the same body,
 *   a `GET`), and `pg` running the broker's own `INSERT` and claim on a pool of the same size. A push;
 *   a pop that finds its message at once (`batch=1&wait=0`, a message pushed and the answer acked
 *   outside the time); `/readyz`.
 * - Across replicas: a push on A to the pop parked on B or C that answers with it, at no load, against
 *   the bare hand-off (bench/handoff.ts: `INSERT ... pg_notify`, `LISTEN`, the claim; and the same over
 *   the mesh's library, without HTTP).
 * - CPU per push: clients pushing back to back on A, no pop waiting (each push's hint reaches B and C);
 *   A's CPU per push.
 * - Stages: a replica of its own with the stage tracer on (`BROKER_TRACE_STAGES`), the same push and
 *   ready pop; each stage's p50 beside its floor (the body's `JSON.parse` and compiled Schema in this
 *   process, the bare statements above).
 */
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { Schema } from "effect"
import { PushBody } from "../examples/broker/Api.js"
import { BrokerClient } from "../examples/broker/harness/client.js"
import { latencyRounds, pushThroughput } from "../examples/broker/harness/load.js"
import { clusterEnv, clustered, Replica } from "../examples/broker/harness/replica.js"
import { collectStages, tracedStageTable } from "./broker.js"
import { type Database, startDatabase } from "./embeddedDatabase.js"
import * as Handoff from "./handoff.js"
import { breakdown, type MemoryBreakdown, memoryProbe } from "./memoryProbe.js"
import { type Distribution, distribution, median, ratio, round, sleep } from "./stats.js"

export interface FloorPlan {
  /** How long the cluster idles before its RSS is read at rest. */
  readonly restMs: number
  /** Request rounds per kind, after `warmup`, in blocks of `block` (each block's first dropped). */
  readonly rounds: number
  readonly warmup: number
  readonly block: number
  readonly cross: { readonly rounds: number; readonly warmup: number }
  readonly handoff: Handoff.HandoffPlan
  readonly cpu: { readonly clients: number; readonly durationMs: number }
  readonly stages: { readonly rounds: number; readonly warmup: number }
  readonly decodeIterations: number
}

export const quickPlan: FloorPlan = {
  restMs: 20_000,
  rounds: 300,
  warmup: 50,
  block: 50,
  cross: { rounds: 150, warmup: 20 },
  handoff: { warmup: 50, rounds: 300, block: 50 },
  cpu: { clients: 16, durationMs: 3_000 },
  stages: { rounds: 200, warmup: 30 },
  decodeIterations: 20_000
}

export const fullPlan: FloorPlan = {
  restMs: 20_000,
  rounds: 500,
  warmup: 100,
  block: 50,
  cross: { rounds: 300, warmup: 30 },
  handoff: { warmup: 100, rounds: 500, block: 50 },
  cpu: { clients: 16, durationMs: 5_000 },
  stages: { rounds: 500, warmup: 50 },
  decodeIterations: 50_000
}

const TENANT = "00000000-0000-0000-0000-000000000001"
/** What every push carries: a small JSON document, as a consumer's job would be. */
const payloadOf = (seq: number) => ({ seq, job: "bench", data: "x".repeat(64) })

/** A bare `node:http` server: reads the body, answers a small JSON document. Its port on stdout. */
const BARE_HTTP = `import http from "node:http"
const server = http.createServer((request, response) => {
  const chunks = []
  request.on("data", (chunk) => chunks.push(chunk))
  request.on("end", () => {
    const body = request.method === "POST" ? '{"ids":["1"]}' : '{"ready":true,"status":"clustered","reason":""}'
    response.writeHead(request.method === "POST" ? 201 : 200, { "content-type": "application/json" })
    response.end(body)
  })
})
server.keepAliveTimeout = 60_000
server.listen(0, "127.0.0.1", () => process.stdout.write(String(server.address().port) + "\\n"))`

const bareHttp = async (): Promise<{ readonly client: BrokerClient; readonly child: ChildProcess }> => {
  const child = spawn(process.execPath, ["--input-type=module", "-e", BARE_HTTP], {
    stdio: ["ignore", "pipe", "inherit"]
  })
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout?.once("data", (chunk: Buffer) => resolve(Number(chunk.toString("utf8").trim())))
    child.once("exit", (code) => reject(new Error(`the bare HTTP server exited (${code})`)))
  })
  return { client: new BrokerClient("127.0.0.1", port, { maxSockets: 1 }), child }
}

/** The broker's `INSERT` (`Store.push`, one message) and claim (`Store.claim`), for `pg` alone. */
const INSERT =
  'INSERT INTO broker_messages ("tenant","queue","partition","payload") VALUES ($1,$2,$3,$4) RETURNING id'
const CLAIM = `WITH picked AS MATERIALIZED (
  SELECT id FROM broker_messages
  WHERE tenant = $1 AND queue = $2 AND visible_at <= now()
  ORDER BY id LIMIT $3 FOR UPDATE SKIP LOCKED
), claimed AS (
  UPDATE broker_messages AS m
  SET lease = $4, visible_at = now() + make_interval(secs => $5), deliveries = m.deliveries + 1
  FROM picked WHERE m.id = picked.id
  RETURNING m.id, m.partition, m.payload, m.deliveries
)
SELECT id, partition, payload, deliveries, EXISTS (
  SELECT 1 FROM broker_messages
  WHERE tenant = $1 AND queue = $2 AND visible_at <= now() AND id NOT IN (SELECT id FROM picked)
) AS more
FROM claimed ORDER BY id`

/**
 * The request kinds and their floors. `pg` runs each statement both ways: unnamed (parsed and planned
 * every time, as `pool.query(text, values)` does) and as a named statement, prepared once per
 * connection, which is how `@effect/sql-pg` 4 runs every statement.
 */
type Kind =
  | "httpPost"
  | "httpGet"
  | "push"
  | "pop"
  | "readyz"
  | "insert"
  | "insertPrepared"
  | "claim"
  | "claimPrepared"
const kinds: ReadonlyArray<Kind> = [
  "httpPost",
  "httpGet",
  "push",
  "pop",
  "readyz",
  "insert",
  "insertPrepared",
  "claim",
  "claimPrepared"
]

const Popped = Schema.Struct({
  lease: Schema.NullOr(Schema.String),
  messages: Schema.Array(Schema.Struct({ id: Schema.String }))
})
const decodePopped = Schema.decodeUnknownSync(Popped)

const elapsedUs = async (run: () => Promise<unknown>): Promise<number> => {
  const started = process.hrtime.bigint()
  await run()
  return Number(process.hrtime.bigint() - started) / 1000
}

/** `/proc/<pid>/status`'s VmRSS, in MiB. */
const rssMiB = (pid: number | undefined) => {
  const status = Fs.readFileSync(`/proc/${pid}/status`, "utf8")
  return round(Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? Number.NaN) / 1024, 1)
}

export interface FloorSection {
  readonly postgres: string
  readonly start: {
    readonly ms: ReadonlyArray<number>
    readonly cpuMs: ReadonlyArray<number>
    readonly medianMs: number
    readonly medianCpuMs: number
  }
  readonly rss: {
    readonly idleMiB: ReadonlyArray<number>
    readonly restMiB: ReadonlyArray<number>
    readonly medianIdleMiB: number
    readonly medianRestMiB: number
    readonly breakdown: MemoryBreakdown
    readonly poolConnections: number
    /** Each part's cost to load, alone in a fresh `node` (heap after GC, anonymous RSS), MiB. */
    readonly parts: ReadonlyArray<{
      readonly part: string
      readonly heapMiB: number
      readonly anonMiB: number
    }>
  }
  readonly requestsUs: Readonly<Record<Kind, Distribution>>
  readonly cross: {
    readonly p50Us: number
    readonly p99Us: number
    readonly bareHandoffP50Us: number
    readonly meshHandoffP50Us: number
    readonly lost: number
    readonly duplicated: number
  }
  readonly cpu: { readonly pushes: number; readonly pushesPerSec: number; readonly usPerPush: number }
  readonly stagesUs: {
    readonly push: Readonly<Record<string, number>>
    readonly pop: Readonly<Record<string, number>>
    /** A push on A to a pop parked on B or C, with the tracer on in all three (their p50s). */
    readonly cross: Readonly<Record<string, number>>
    /** The bare hand-off's stages and the mesh library's (bench/handoff.ts), p50. */
    readonly bareHandoff: Readonly<Record<string, number>>
    readonly meshHandoff: Readonly<Record<string, number>>
  }
  readonly decodeUs: { readonly jsonParse: number; readonly schema: number }
  readonly ratios: {
    readonly push: number | null
    readonly pop: number | null
    readonly readyz: number | null
    readonly cross: number | null
  }
}

/** Request rounds on `a` and their floors, taking turns in blocks. */
const requestRounds = async (
  plan: FloorPlan,
  a: Replica,
  bare: BrokerClient,
  pool: import("pg").Pool
): Promise<Record<Kind, Distribution>> => {
  const body = (seq: number) => ({ payload: payloadOf(seq) })
  let seq = 0
  // One round of each kind that needs nothing set up first; a pop and a claim each need their row.
  const one: Record<Exclude<Kind, "pop" | "claim" | "claimPrepared">, () => Promise<void>> = {
    httpPost: async () => {
      await bare.request("POST", "/queues/floor-push/messages", body(seq++))
    },
    httpGet: async () => {
      await bare.request("GET", "/readyz")
    },
    push: async () => {
      const answer = await a.client.request("POST", "/queues/floor-push/messages", body(seq++))
      if (answer.status !== 201) throw new Error(`push: HTTP ${answer.status}`)
    },
    readyz: async () => {
      await a.client.request("GET", "/readyz")
    },
    insert: async () => {
      await pool.query(INSERT, [TENANT, "floor-bare", "Default", JSON.stringify(payloadOf(seq++))])
    },
    insertPrepared: async () => {
      await pool.query({
        name: "floor_insert",
        text: INSERT,
        values: [TENANT, "floor-bare", "Default", JSON.stringify(payloadOf(seq++))]
      })
    }
  }
  const samples = new Map<Kind, Array<number>>(kinds.map((kind) => [kind, []]))
  const blocks = Math.ceil((plan.warmup + plan.rounds) / plan.block)
  for (let b = 0; b < blocks; b++) {
    for (const kind of kinds) {
      for (let i = 0; i <= plan.block; i++) {
        let us: number
        if (kind === "pop") {
          await a.client.push("floor-pop", [{ payload: payloadOf(seq++) }])
          let answer: unknown
          us = await elapsedUs(async () => {
            answer = (await a.client.request("GET", "/queues/floor-pop/messages?batch=1&wait=0")).body
          })
          const popped = decodePopped(answer)
          if (popped.lease === null || popped.messages.length !== 1)
            throw new Error("a ready pop found nothing")
          await a.client.ack(
            "floor-pop",
            popped.lease,
            popped.messages.map((message) => message.id)
          )
        } else if (kind === "claim" || kind === "claimPrepared") {
          await pool.query(INSERT, [TENANT, "floor-claim", "Default", JSON.stringify(payloadOf(seq++))])
          const values = [TENANT, "floor-claim", 1, crypto.randomUUID(), 30]
          let rows = 0
          us = await elapsedUs(async () => {
            rows =
              (
                await (kind === "claim"
                  ? pool.query(CLAIM, values)
                  : pool.query({ name: "floor_claim", text: CLAIM, values }))
              ).rowCount ?? 0
          })
          if (rows !== 1) throw new Error("a bare claim found nothing")
          await pool.query("DELETE FROM broker_messages WHERE queue = 'floor-claim'")
        } else {
          us = await elapsedUs(one[kind])
        }
        if (i > 0 && b * plan.block >= plan.warmup) samples.get(kind)!.push(us)
      }
    }
    await pool.query("DELETE FROM broker_messages WHERE queue IN ('floor-bare', 'floor-push')")
  }
  return Object.fromEntries(kinds.map((kind) => [kind, distribution(samples.get(kind)!)])) as Record<
    Kind,
    Distribution
  >
}

/** The body's decode in this process: `JSON.parse` of the push's bytes, then the API's compiled Schema. */
const decodeFloor = (iterations: number) => {
  const text = JSON.stringify({ payload: payloadOf(1) })
  const decode = Schema.decodeUnknownSync(PushBody)
  for (let i = 0; i < 2000; i++) decode(JSON.parse(text))
  let t0 = process.hrtime.bigint()
  let parsed: unknown
  for (let i = 0; i < iterations; i++) parsed = JSON.parse(text)
  const jsonParse = Number(process.hrtime.bigint() - t0) / 1000 / iterations
  t0 = process.hrtime.bigint()
  for (let i = 0; i < iterations; i++) decode(parsed)
  const schema = Number(process.hrtime.bigint() - t0) / 1000 / iterations
  return { jsonParse: round(jsonParse, 2), schema: round(schema, 2) }
}

/** The stage names of a push and of a ready pop, as their marks bound them (examples/broker/Stages.ts). */
const pushStages = [
  ["HTTP in (client to request fiber)", "sent", "in"],
  ["routing (fiber to handler)", "in", "handler"],
  ["body read and decoded", "handler", "decoded"],
  ["decoded to INSERT sent", "decoded", "insert"],
  ["INSERT and commit", "insert", "committed"],
  ["offer and hint", "committed", "hinted"],
  ["answer built and written", "hinted", "out"],
  ["HTTP out (answer to client)", "out", "received"],
  ["total", "sent", "received"]
] as const
const popStages = [
  ["HTTP in (client to request fiber)", "sent", "in"],
  ["routing and query decoded (fiber to handler)", "in", "handler"],
  ["handler to claim sent", "handler", "claim"],
  ["claim", "claim", "claimed"],
  ["answer built and written", "claimed", "out"],
  ["HTTP out (answer to client)", "out", "received"],
  ["total", "sent", "received"]
] as const

const stageRounds = async (plan: FloorPlan, traced: Replica) => {
  const sent = new Map<string, { readonly sent: bigint; readonly received: bigint }>()
  const once = async (keep: boolean, seq: number) => {
    const t0 = process.hrtime.bigint()
    const [id] = await traced.client.push("floor-stages", [{ payload: payloadOf(seq) }])
    const t1 = process.hrtime.bigint()
    const t2 = process.hrtime.bigint()
    const popped = await traced.client.pop("floor-stages", { batch: 1 })
    const t3 = process.hrtime.bigint()
    if (popped.lease !== null) await traced.client.ack("floor-stages", popped.lease, [popped.messages[0]!.id])
    if (keep && id !== undefined) {
      sent.set(`push:${id}`, { sent: t0, received: t1 })
      sent.set(`pop:${id}`, { sent: t2, received: t3 })
    }
  }
  for (let i = 0; i < plan.stages.warmup; i++) await once(false, i)
  const collecting = collectStages([traced])
  for (let i = 0; i < plan.stages.rounds; i++) await once(true, i)
  await sleep(200)
  const lines = collecting.stop()
  const p50Of = (
    stages: ReadonlyArray<readonly [string, string, string]>,
    marksOf: (id: string) => ReadonlyMap<string, bigint> | undefined,
    route: "push" | "pop"
  ) => {
    const values = new Map<string, Array<number>>(stages.map(([name]) => [name, []]))
    for (const [key, client] of sent) {
      if (!key.startsWith(`${route}:`)) continue
      const marks = marksOf(key.slice(route.length + 1))
      if (marks === undefined) continue
      const at = (name: string) =>
        name === "sent" ? client.sent : name === "received" ? client.received : marks.get(name)
      for (const [name, from, to] of stages) {
        const a = at(from)
        const b = at(to)
        if (a !== undefined && b !== undefined) values.get(name)!.push(Number(b - a) / 1000)
      }
    }
    return Object.fromEntries(stages.map(([name]) => [name, round(distribution(values.get(name)!).p50, 0)]))
  }
  return {
    push: p50Of(pushStages, (id) => lines.pushes.get(id), "push"),
    pop: p50Of(popStages, (id) => lines.pops.get(id), "pop")
  }
}

/**
 * What each part of a replica costs to load, alone in a fresh `node`: the parts imported one set after
 * another (each set adds to the one before), the heap used after two full GCs and `RssAnon`, in MiB.
 */
const importParts = [
  ["node", []],
  [
    "effect (Effect, Schema, Layer, Stream)",
    ["effect/Effect", "effect/Schema", "effect/Layer", "effect/Stream"]
  ],
  [
    "the mesh (queen-mesh/Mesh, /Postgres, /HttpRoutes, /ClusterView)",
    ["queen-mesh/Mesh", "queen-mesh/Postgres", "queen-mesh/HttpRoutes", "queen-mesh/ClusterView"]
  ],
  ["@effect/sql-pg (PgClient)", ["@effect/sql-pg/PgClient"]],
  ["@effect/platform-node (NodeHttpServer)", ["@effect/platform-node/NodeHttpServer"]],
  ["the broker's own modules (main.js's imports)", ["../examples/broker/Broker.js"]]
] as const

const IMPORT_PROBE = `import fs from "node:fs"
const sets = JSON.parse(process.argv[1])
const out = []
const read = () => {
  globalThis.gc(); globalThis.gc()
  const status = fs.readFileSync("/proc/self/status", "utf8")
  return { heap: process.memoryUsage().heapUsed, anon: Number(/^RssAnon:\\s+(\\d+) kB/m.exec(status)[1]) * 1024 }
}
for (const set of sets) { for (const m of set) await import(m); out.push(read()) }
process.stdout.write(JSON.stringify(out))`

const ImportReadings = Schema.Array(Schema.Struct({ heap: Schema.Number, anon: Schema.Number }))

const importCosts = async () => {
  const sets = importParts.map(([, modules]) =>
    modules.map((m) => (m.startsWith("..") ? new URL(m, import.meta.url).href : m))
  )
  const child = spawn(
    process.execPath,
    ["--expose-gc", "--input-type=module", "-e", IMPORT_PROBE, JSON.stringify(sets)],
    {
      cwd: Path.dirname(new URL(import.meta.url).pathname),
      stdio: ["ignore", "pipe", "inherit"]
    }
  )
  let out = ""
  child.stdout?.on("data", (chunk: Buffer) => {
    out += chunk.toString("utf8")
  })
  await new Promise((resolve) => child.once("exit", resolve))
  const readings = Schema.decodeUnknownSync(Schema.fromJsonString(ImportReadings))(out)
  return importParts.map(([part], i) => {
    const before = i === 0 ? { heap: 0, anon: 0 } : readings[i - 1]!
    const now = readings[i]!
    return {
      part,
      heapMiB: round((now.heap - before.heap) / 1048576, 1),
      anonMiB: round((now.anon - before.anon) / 1048576, 1)
    }
  })
}

export const runFloor = async (
  plan: FloorPlan,
  progress: (line: string) => void
): Promise<FloorSection | string> => {
  progress("floor: an embedded PostgreSQL (fsync off)")
  const db: Database | string = await startDatabase({ settings: { fsync: "off", full_page_writes: "off" } })
  if (typeof db === "string") return db
  const replicas: Array<Replica> = []
  const probeDir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-floor-"))
  let bare: { readonly client: BrokerClient; readonly child: ChildProcess } | undefined
  const { default: pg } = await import("pg")
  let pool: import("pg").Pool | undefined
  try {
    const url = await db.urlFor("floor")
    const envs = await clusterEnv({ carrier: "tcp", databaseUrl: url })
    const probeFile = Path.join(probeDir, "memory.json")
    const startMs: Array<number> = []
    const startCpuMs: Array<number> = []
    progress("floor: three replicas started one after another")
    for (const [i, env] of envs.entries()) {
      const last = i === envs.length - 1
      const started = performance.now()
      const replica = await Replica.start({
        name: env.QUEEN_SERVER_ID ?? `replica-${i}`,
        env: last ? { ...env, [memoryProbe.variable]: probeFile } : env,
        ...(last ? { execArgv: memoryProbe.flags } : {})
      })
      startMs.push(round(performance.now() - started, 0))
      startCpuMs.push(round(replica.cpuNs() / 1e6, 0))
      replicas.push(replica)
    }
    const [a, b, c] = replicas as [Replica, Replica, Replica]
    await clustered(replicas, "tcp")
    await sleep(5_000)
    const idleMiB = replicas.map((replica) => rssMiB(replica.child.pid))
    progress(`floor: idle RSS ${idleMiB.join(", ")} MiB; resting ${plan.restMs / 1000} s`)
    await sleep(Math.max(0, plan.restMs - 5_000))
    const restMiB = replicas.map((replica) => rssMiB(replica.child.pid))
    const memory = await breakdown(c.child.pid, () => c.child.kill("SIGUSR2"), probeFile)
    const poolConnections = Number(
      (
        await db.query(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = '${new URL(url).pathname.slice(1)}'`
        )
      )[0]?.n ?? 0
    )

    const parts = await importCosts()
    progress(`floor: requests, ${plan.warmup} + ${plan.rounds} rounds of each, and their floors`)
    bare = await bareHttp()
    pool = new pg.Pool({ connectionString: url, max: 10 })
    const requestsUs = await requestRounds(plan, a, bare.client, pool)

    progress(`floor: push on A to a pop parked on B or C, x ${plan.cross.rounds}; the bare hand-off`)
    const cross = await latencyRounds({
      pusher: a,
      poppers: [b, c],
      queue: "floor-cross",
      rounds: plan.cross.rounds,
      warmup: plan.cross.warmup,
      jitterMs: 2
    })
    const handoff = await Handoff.runHandoff(db, plan.handoff)

    progress(`floor: CPU per push, ${plan.cpu.clients} clients for ${plan.cpu.durationMs / 1000} s`)
    const cpu = await pushThroughput({
      pusher: a,
      peers: [b, c],
      queue: "floor-cpu",
      clients: plan.cpu.clients,
      durationMs: plan.cpu.durationMs
    })

    progress("floor: stages, a replica of its own with the stage tracer on")
    const tracedEnv = (await clusterEnv({ carrier: "off", databaseUrl: url, size: 1 }))[0]!
    const traced = await Replica.start({
      name: "broker-traced",
      env: { ...tracedEnv, QUEEN_SERVER_ID: "broker-traced", BROKER_TRACE_STAGES: "true" }
    })
    replicas.push(traced)
    const requestStages = await stageRounds(plan, traced)
    await traced.stop()
    replicas.pop()
    progress(`floor: stages across replicas, a traced TCP cluster, x ${plan.cross.rounds}`)
    const crossStages = Object.fromEntries(
      Object.entries(
        await tracedStageTable({
          databaseUrl: await db.urlFor("floor_traced"),
          queue: "floor-traced",
          warmup: plan.cross.warmup,
          rounds: plan.cross.rounds,
          jitterMs: 2
        })
      ).map(([name, d]) => [name, round(d.p50, 0)])
    )
    const stageTable = (stages: ReadonlyArray<Handoff.Stage>) =>
      Object.fromEntries(stages.map((stage) => [stage.stage, round(stage.us.p50, 0)]))
    const stagesUs = {
      ...requestStages,
      cross: crossStages,
      bareHandoff: stageTable(handoff.bare.stages),
      meshHandoff: stageTable(handoff.mesh.stages)
    }
    const decodeUs = decodeFloor(plan.decodeIterations)

    const version = String((await db.query("SHOW server_version"))[0]?.server_version ?? "?")
    return {
      postgres: `PostgreSQL ${version}, fsync off`,
      start: {
        ms: startMs,
        cpuMs: startCpuMs,
        medianMs: median(startMs),
        medianCpuMs: median(startCpuMs)
      },
      rss: {
        idleMiB,
        restMiB,
        medianIdleMiB: median(idleMiB),
        medianRestMiB: median(restMiB),
        breakdown: memory,
        poolConnections,
        parts
      },
      requestsUs,
      cross: {
        p50Us: round(cross.latencyUs.p50, 0),
        p99Us: round(cross.latencyUs.p99, 0),
        bareHandoffP50Us: round(handoff.bare.handoffUs.p50, 0),
        meshHandoffP50Us: round(handoff.mesh.handoffUs.p50, 0),
        lost: cross.lost,
        duplicated: cross.duplicated
      },
      cpu: { pushes: cpu.pushed, pushesPerSec: cpu.pushesPerSec, usPerPush: cpu.pushCpuUsPerMessage },
      stagesUs,
      decodeUs,
      ratios: {
        push: ratio(requestsUs.push.p50, requestsUs.httpPost.p50 + requestsUs.insert.p50),
        pop: ratio(requestsUs.pop.p50, requestsUs.httpGet.p50 + requestsUs.claim.p50),
        readyz: ratio(requestsUs.readyz.p50, requestsUs.httpGet.p50),
        cross: ratio(cross.latencyUs.p50, handoff.bare.handoffUs.p50)
      }
    }
  } finally {
    await pool?.end().catch(() => undefined)
    bare?.child.kill()
    await Promise.all(replicas.map((replica) => replica.stop()))
    await db.stop()
    Fs.rmSync(probeDir, { recursive: true, force: true })
  }
}
