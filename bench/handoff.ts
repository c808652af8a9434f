/**
 * The hand-off at no load: one message at a time from a producer process to a worker process waiting
 * for it, as a new user would write it, two ways side by side on the same embedded PostgreSQL (each
 * pair a database of its own):
 *
 * - `bare`: node-postgres alone. The producer runs `INSERT` with `pg_notify` in the statement (one
 *   transaction); the worker `LISTEN`s and, on the notification, claims with `FOR UPDATE SKIP LOCKED` on
 *   the same connection;
 * - `mesh`: the producer runs the plain `INSERT`, then `unsafeMessageAvailable` over the TCP mesh; the
 *   worker is parked on `LocalWaker` and, woken, makes the same claim.
 *
 * Rounds are sequenced by the driver (the worker says it waits, the driver tells the producer to push),
 * the two pairs taking turns in blocks, the first round of each block and the warm-up dropped. Every
 * stage is stamped on `CLOCK_MONOTONIC` in the process where it happens: the push begun, its commit
 * acknowledged, the hint handed to the mesh (mesh only), the worker woken (the notification handler, or
 * the parked pop resumed), the claim returned. The hand-off is push begun to claim returned.
 */
import { Effect, Option, Schema } from "effect"
import * as LocalWaker from "../src/LocalWaker.js"
import * as Mesh from "../src/Mesh.js"
import { freePort } from "./driver.js"
import type { Database } from "./embeddedDatabase.js"
import type { Child } from "./ipc.js"
import { fromParent, nowNs, toParent } from "./ipc.js"
import { hears, linksUp, localNode, until } from "./nodes.js"
import { type Distribution, distribution, ratio } from "./stats.js"
import { pgClient, startChild, stopAll } from "./writeloadProcs.js"

export interface HandoffPlan {
  readonly warmup: number
  readonly rounds: number
  readonly block: number
}

export type Way = "bare" | "mesh"

const SECRET = "bench-handoff-s3cr3t"
const CHANNEL = "bench_handoff"
const LONG_WAIT_MS = 120_000
/** A worker not woken this long after its push claims anyway; that round counts as a lost wake. */
const LOST_AFTER_MS = 5000
const ITEM = { queue: "jobs", partition: "p-0" } as const
const TARGET: LocalWaker.WaitTarget = { queue: "jobs", tenant: Option.none() }
const PAYLOAD = `{"job":"bench","data":"${"x".repeat(64)}"}`

const DDL =
  "CREATE TABLE IF NOT EXISTS ho_jobs (id bigserial PRIMARY KEY, round int NOT NULL, payload text NOT NULL)"
const INSERT = "INSERT INTO ho_jobs (round, payload) VALUES ($1, $2)"
const INSERT_NOTIFY = `WITH j AS (INSERT INTO ho_jobs (round, payload) VALUES ($1, $2) RETURNING id) SELECT pg_notify('${CHANNEL}', '') FROM j`
const CLAIM =
  "DELETE FROM ho_jobs WHERE id IN (SELECT id FROM ho_jobs ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING round"

// ---------------------------------------------------------------------------------------------
// driver
// ---------------------------------------------------------------------------------------------

const ProducerStamps = Schema.Struct({
  begun: Schema.Array(Schema.Number),
  committed: Schema.Array(Schema.Number),
  hinted: Schema.Array(Schema.Number)
})
const WorkerStamps = Schema.Struct({
  woken: Schema.Array(Schema.Number),
  claimed: Schema.Array(Schema.Number),
  lost: Schema.Number,
  wrong: Schema.Number
})

export interface Stage {
  readonly stage: string
  readonly us: { readonly p50: number; readonly mean: number }
}

export interface WayResult {
  readonly handoffUs: Distribution
  readonly stages: ReadonlyArray<Stage>
  /** Rounds whose wake never came (the worker claimed after its fallback), and claims of another round. */
  readonly lostWakes: number
  readonly wrongClaims: number
}

const stagesOf = (
  way: Way,
  p: typeof ProducerStamps.Type,
  w: typeof WorkerStamps.Type,
  kept: ReadonlyArray<number>
): ReadonlyArray<Stage> => {
  const parts: ReadonlyArray<readonly [string, (i: number) => number]> =
    way === "mesh"
      ? [
          ["push begun -> commit acknowledged (INSERT)", (i) => p.committed[i]! - p.begun[i]!],
          ["commit acknowledged -> hint handed to the mesh", (i) => p.hinted[i]! - p.committed[i]!],
          ["hint handed -> worker's pop resumed", (i) => w.woken[i]! - p.hinted[i]!],
          ["pop resumed -> claim returned", (i) => w.claimed[i]! - w.woken[i]!]
        ]
      : [
          ["push begun -> commit acknowledged (INSERT + pg_notify)", (i) => p.committed[i]! - p.begun[i]!],
          ["commit acknowledged -> notification handled", (i) => w.woken[i]! - p.committed[i]!],
          ["notification handled -> claim returned", (i) => w.claimed[i]! - w.woken[i]!]
        ]
  return parts.map(([stage, of]) => {
    const us = kept.map((i) => of(i) / 1000)
    const d = distribution(us)
    return { stage, us: { p50: d.p50, mean: d.mean } }
  })
}

export const runHandoff = async (db: Database, plan: HandoffPlan) => {
  const { warmup, rounds, block } = plan
  const blocks = Math.ceil(rounds / block)
  const total = warmup + rounds + blocks
  const pairs: Array<{ way: Way; producer: Child; worker: Child; next: number; kept: Array<number> }> = []
  try {
    for (const way of ["bare", "mesh"] as const) {
      const url = await db.urlFor(`handoff_${way}`)
      const setup = await pgClient(url)
      await setup.query(DDL)
      await setup.end()
      const [portP, portW] = [await freePort(), await freePort()]
      const common = { way, url, total, secret: SECRET }
      const worker = startChild("handoff-worker", { ...common, port: portW, peers: [portP] })
      const producer = startChild("handoff-producer", { ...common, port: portP, peers: [portW] })
      pairs.push({ way, producer, worker, next: 0, kept: [] })
    }
    await Promise.all(
      pairs.flatMap((p) => [p.producer.take("ready", 60_000), p.worker.take("ready", 60_000)])
    )
    const boundaries = [warmup + block + 1]
    while (boundaries.at(-1)! < total) boundaries.push(boundaries.at(-1)! + block + 1)
    for (const end of boundaries) {
      for (const pair of pairs) {
        const first = pair.next
        for (; pair.next < Math.min(end, total); pair.next++) {
          await pair.worker.take("waiting", LONG_WAIT_MS)
          pair.producer.send({ kind: "push", i: pair.next })
          if (pair.next >= warmup && pair.next !== first) pair.kept.push(pair.next)
        }
      }
    }
    const out = new Map<Way, WayResult>()
    for (const { way, producer, worker, kept } of pairs) {
      const p = Schema.decodeUnknownSync(ProducerStamps)((await producer.take("stamps", LONG_WAIT_MS)).data)
      const w = Schema.decodeUnknownSync(WorkerStamps)((await worker.take("stamps", LONG_WAIT_MS)).data)
      const measured = kept.slice(0, rounds)
      out.set(way, {
        handoffUs: distribution(measured.map((i) => (w.claimed[i]! - p.begun[i]!) / 1000)),
        stages: stagesOf(way, p, w, measured),
        lostWakes: w.lost,
        wrongClaims: w.wrong
      })
    }
    const bare = out.get("bare")!
    const mesh = out.get("mesh")!
    return {
      rounds,
      warmup,
      block,
      bare,
      mesh,
      meshOverBareP50: ratio(mesh.handoffUs.p50, bare.handoffUs.p50)
    }
  } finally {
    await stopAll(pairs.flatMap((p) => [p.producer, p.worker]))
  }
}

export type HandoffResult = Awaited<ReturnType<typeof runHandoff>>

// ---------------------------------------------------------------------------------------------
// children
// ---------------------------------------------------------------------------------------------

export interface HandoffParams {
  readonly way: Way
  readonly url: string
  readonly total: number
  readonly secret: string
  readonly port: number
  readonly peers: ReadonlyArray<number>
}

/** The producer: on each `push`, stamps, commits, stamps, and (mesh) hints and stamps. */
export const handoffProducer = async (params: HandoffParams): Promise<void> => {
  const client = await pgClient(params.url)
  const runtime =
    params.way === "mesh"
      ? localNode({ serverId: "ho-producer", port: params.port, peers: params.peers, secret: params.secret })
      : undefined
  const mesh = runtime === undefined ? undefined : await runtime.runPromise(Effect.service(Mesh.Mesh))
  if (runtime !== undefined) await until(runtime, linksUp, 30_000, "the producer's link to the worker")
  const inbox = fromParent()
  const begun: Array<number> = new Array(params.total).fill(0)
  const committed: Array<number> = new Array(params.total).fill(0)
  const hinted: Array<number> = new Array(params.total).fill(0)
  let pushed = 0
  let allPushed: () => void = () => {}
  const done = new Promise<void>((resolve) => {
    allPushed = resolve
  })
  const statement = params.way === "bare" ? INSERT_NOTIFY : INSERT
  inbox.handle("push", (message) => {
    const i = message.i ?? pushed
    begun[i] = nowNs()
    client.query(statement, [i, PAYLOAD]).then(
      () => {
        committed[i] = nowNs()
        if (mesh !== undefined) {
          mesh.unsafeMessageAvailable(ITEM)
          hinted[i] = nowNs()
        }
        if (++pushed === params.total) allPushed()
      },
      (error: unknown) => toParent({ kind: "error", data: `push ${i}: ${String(error)}` })
    )
  })
  toParent({ kind: "ready" })
  await done
  toParent({ kind: "stamps", data: { begun, committed, hinted } })
  await inbox.take("stop", LONG_WAIT_MS * 10)
  await runtime?.dispose()
  await client.end()
}

/**
 * The worker: says it waits, is woken (a notification, or its pop parked on `LocalWaker` resumed),
 * claims, and waits again.
 */
export const handoffWorker = async (params: HandoffParams): Promise<void> => {
  const client = await pgClient(params.url)
  const inbox = fromParent()
  const woken: Array<number> = new Array(params.total).fill(0)
  const claimed: Array<number> = new Array(params.total).fill(0)
  let lost = 0
  let wrong = 0
  let waitForWake: () => Promise<number>
  if (params.way === "mesh") {
    const runtime = localNode({
      serverId: "ho-worker",
      port: params.port,
      peers: params.peers,
      secret: params.secret
    })
    const waker = await runtime.runPromise(Effect.service(LocalWaker.LocalWaker))
    await until(runtime, hears(1), 30_000, "the worker hearing the producer")
    // A broker's request fiber: `runFork` registers the pop before it returns.
    waitForWake = () =>
      new Promise((resolve) => {
        runtime.runFork(
          Effect.flatMap(waker.awaitWake(TARGET, { maxWait: LOST_AFTER_MS }), (outcome) =>
            Effect.sync(() => resolve(outcome === "woken" ? nowNs() : 0))
          )
        )
      })
  } else {
    let resume: ((at: number) => void) | undefined
    client.on("notification", () => {
      const at = nowNs()
      const r = resume
      resume = undefined
      r?.(at)
    })
    await client.query(`LISTEN ${CHANNEL}`)
    waitForWake = () =>
      new Promise((resolve) => {
        const timer = setTimeout(() => {
          resume = undefined
          resolve(0)
        }, LOST_AFTER_MS)
        resume = (at) => {
          clearTimeout(timer)
          resolve(at)
        }
      })
  }
  toParent({ kind: "ready" })
  for (let i = 0; i < params.total; i++) {
    const wake = waitForWake()
    toParent({ kind: "waiting", i })
    const at = await wake
    if (at === 0) lost++
    woken[i] = at
    for (;;) {
      const { rows } = await client.query<{ round: number }>(CLAIM)
      const row = rows[0]
      if (row !== undefined) {
        claimed[i] = nowNs()
        if (row.round !== i) wrong++
        break
      }
    }
  }
  toParent({ kind: "stamps", data: { woken, claimed, lost, wrong } })
  await inbox.take("stop", LONG_WAIT_MS * 10)
  await client.end()
}
