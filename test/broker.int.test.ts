/**
 * The reference broker (`examples/broker/`) end to end: three replicas as processes over one real
 * PostgreSQL (embedded, or `QUEEN_MESH_TEST_PG_URL`), once with the TCP mesh and once on the PostgreSQL
 * lane alone (no mesh port). In each:
 *
 * - 600 messages pushed across the replicas and popped concurrently on all three are each delivered
 *   exactly once;
 * - pops parked on B and C are answered by a push on A through the carrier: each answers `woken` (a
 *   wake named its queue) while its own re-poll is a minute away and its wait half a minute, and B's
 *   and C's carriers show the frames received;
 * - twenty pops waiting on each replica cost one claim per wake; a push taken by its own replica's
 *   pops is not announced, one with no pop waiting where it was pushed costs each peer one claim;
 * - settings and maintenance set on A reach B and C through the carrier; bad input is refused with 400;
 * - a replica killed mid-run (SIGKILL with the mesh, SIGTERM on the lane) loses no committed message
 *   (what it had leased comes back when the lease runs out), and its parked pops' clients get an error
 *   or an empty answer; no push to it waits out its client's timeout.
 *
 * And the broker's HTTP server alone: a request that arrives once the API has stopped handling them is
 * answered 503, so the server's close does not wait for it.
 *
 * Every wait is on a condition, bounded generously.
 */
import * as Http from "node:http"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import type { MeshCounters, PopAnswer } from "../examples/broker/harness/client.js"
import { burst, Ledger, PopLoops } from "../examples/broker/harness/load.js"
import {
  type Carrier,
  clustered,
  type Replica,
  startCluster,
  until
} from "../examples/broker/harness/replica.js"
import * as Server from "../examples/broker/Server.js"
import { buildExample } from "./fixtures/broker.js"
import { layer } from "./fixtures/layer.js"
import * as Pg from "./fixtures/postgres.js"

/** Frames this replica's carrier has applied from its peers. */
const framesIn = (carrier: Carrier, stats: MeshCounters): number =>
  carrier === "lane" ? (stats.lane?.frames_received ?? 0) : (stats.frames_dispatched ?? 0)

const settle = <A>(promise: Promise<A>) =>
  promise.then(
    (value) => ({ ok: true as const, value }),
    (error: unknown) => ({ ok: false as const, error })
  )

const exactlyOnce = async (replicas: ReadonlyArray<Replica>) => {
  const run = await burst({
    pushers: replicas,
    poppers: replicas,
    queue: "orders",
    count: 600,
    maxBatch: 20,
    concurrency: 6,
    loops: 3,
    popBatch: 25,
    withinMs: 90_000
  })
  assert.strictEqual(run.pushed, 600)
  assert.strictEqual(run.lost, 0, "lost")
  assert.strictEqual(run.duplicated, 0, "delivered twice")
  for (const replica of replicas)
    assert.isAbove(run.byReplica[replica.name] ?? 0, 0, `${replica.name} popped none`)
}

/** Refused input changes nothing; settings and maintenance set on A reach B and C through the carrier. */
const settingsAndMaintenanceCross = async (replicas: ReadonlyArray<Replica>) => {
  const [a, b, c] = replicas as [Replica, Replica, Replica]
  for (const [path, body] of [
    ["/queues/orders/messages", { partition: "p" }],
    ["/queues/orders/messages?tenant=acme", { payload: 1 }],
    ["/queues/bad%20name/messages", { payload: 1 }]
  ] as const) {
    const answer = await a.client.request("POST", path, body)
    assert.strictEqual(answer.status, 400, `${path} ${JSON.stringify(answer.body)}`)
  }
  // B reads the settings (and caches them); A sets new ones; B's copy is dropped through the carrier.
  assert.strictEqual((await b.client.settings("configured")).leaseTimeSeconds, 30)
  await a.client.configure("configured", { leaseTimeSeconds: 7 })
  await until(
    "B sees the new settings",
    async () => (await b.client.settings("configured")).leaseTimeSeconds === 7
  )
  const pushOnBC = () =>
    Promise.all(
      [b, c].map((replica) => replica.client.request("POST", "/queues/flags/messages", { payload: 1 }))
    )
  await a.client.maintenance(true)
  await until("B and C refuse pushes", async () =>
    (await pushOnBC()).every((answer) => answer.status === 503)
  )
  await a.client.maintenance(false)
  await until("B and C take pushes again", async () =>
    (await pushOnBC()).every((answer) => answer.status === 201)
  )
}

const parkedAnsweredThroughTheCarrier = async (carrier: Carrier, replicas: ReadonlyArray<Replica>) => {
  const [a, b, c] = replicas as [Replica, Replica, Replica]
  const parkedOn = async () => Promise.all([b.client.stats(), c.client.stats()])
  // The pops of the run before have left.
  await until("no pop parked on B and C", async () => (await parkedOn()).every((stats) => stats.parked === 0))
  const before = await Promise.all([b, c].map((replica) => replica.client.meshStats()))
  // Two pops parked on each of B and C, each waiting up to 30 s; their re-poll is 60 s away.
  const pops = [b, b, c, c].map((replica) => replica.client.pop("parked", { batch: 1, waitMs: 30_000 }))
  await until("four pops parked", async () => (await parkedOn()).every((stats) => stats.parked === 2))
  // One push on A, of four messages: nothing is pushed on B or C.
  await a.client.push(
    "parked",
    [0, 1, 2, 3].map((seq) => ({ partition: "p", payload: { seq } }))
  )
  const answers: ReadonlyArray<PopAnswer> = await Promise.all(pops)
  for (const answer of answers) {
    assert.strictEqual(answer.messages.length, 1, "each parked pop answered with a message")
    assert.strictEqual(answer.wake, "woken", "woken by a wake, not by its re-poll or its timeout")
  }
  const seqs = answers.map((answer) => JSON.stringify(answer.messages[0]!.payload)).sort()
  assert.deepStrictEqual(seqs, ['{"seq":0}', '{"seq":1}', '{"seq":2}', '{"seq":3}'])
  const after = await Promise.all([b, c].map((replica) => replica.client.meshStats()))
  for (let i = 0; i < 2; i++) assert.isAbove(framesIn(carrier, after[i]!), framesIn(carrier, before[i]!))
}

/**
 * Grouped pops across replicas: twenty pops waiting on each replica cost one claim per wake, not
 * twenty; a push whose own replica's pops took it is not announced (the peers claim nothing), and one
 * that finds no pop waiting where it was pushed costs each peer one claim.
 */
const oneClaimPerMessage = async (replicas: ReadonlyArray<Replica>) => {
  const [a, b, c] = replicas as [Replica, Replica, Replica]
  const claims = async () =>
    Promise.all(replicas.map(async (replica) => (await replica.client.stats()).claims))
  const parkedAll = (counts: ReadonlyArray<number>) =>
    until("the pops parked", async () =>
      (await Promise.all(replicas.map((replica) => replica.client.stats()))).every(
        (stats, i) => stats.parked === counts[i]
      )
    )
  const waiting = (replica: Replica, queue: string, n: number) =>
    Array.from({ length: n }, () => settle(replica.client.pop(queue, { batch: 1, waitMs: 30_000 })))
  // Twenty pops on each replica; one message pushed on A is taken by A's pops.
  const herd = [...waiting(a, "herd", 20), ...waiting(b, "herd", 20), ...waiting(c, "herd", 20)]
  await parkedAll([20, 20, 20])
  const before = await claims()
  await a.client.push("herd", [{ partition: "p", payload: { seq: 0 } }])
  await parkedAll([19, 20, 20])
  const after = await claims()
  assert.deepStrictEqual(
    after.map((n, i) => n - before[i]!),
    [1, 0, 0],
    "one claim on A, none on the peers"
  )
  // Twenty pops on each of B and C, none on A: a push on A costs each peer one claim.
  const peers = [...waiting(b, "peers", 20), ...waiting(c, "peers", 20)]
  await parkedAll([19, 40, 40])
  const beforePeers = await claims()
  await a.client.push("peers", [{ partition: "p", payload: { seq: 1 } }])
  await until("a pop on B or C answered", async () => {
    const stats = await Promise.all([b, c].map((replica) => replica.client.stats()))
    return stats[0]!.parked + stats[1]!.parked === 79
  })
  // The peer that did not take the message may still be running its claim.
  await until("both peers claimed", async () => {
    const now = await claims()
    return now[1]! > beforePeers[1]! && now[2]! > beforePeers[2]!
  })
  const afterPeers = await claims()
  assert.deepStrictEqual(
    afterPeers.map((n, i) => n - beforePeers[i]!),
    [0, 1, 1],
    "one claim on each peer, whichever took the message"
  )
  // Pop maintenance answers every waiting pop at once.
  await a.client.maintenance(true, "pop")
  const answers = await Promise.all([...herd, ...peers])
  await a.client.maintenance(false, "pop")
  const messages = answers.flatMap((answer) => (answer.ok ? answer.value.messages : []))
  assert.deepStrictEqual(messages.map((message) => message.payload).sort(), [{ seq: 0 }, { seq: 1 }])
}

const killMidRun = async (replicas: ReadonlyArray<Replica>, signal: NodeJS.Signals) => {
  const [a, b, c] = replicas as [Replica, Replica, Replica]
  // Leases of 2 s on this queue: what the killed replica had claimed and not delivered comes back soon.
  await a.client.configure("work", { leaseTimeSeconds: 2 })
  const ledger = new Ledger()
  // Pops parked on C on a queue nobody pushes to: their clients must not hang when C goes.
  await until("no pop parked on C", async () => (await c.client.stats()).parked === 0)
  const stranded = [0, 1, 2].map(() => settle(c.client.pop("quiet", { waitMs: 30_000 })))
  await until("three pops parked on C", async () => (await c.client.stats()).parked === 3)
  const loops = replicas.map(
    (replica) => new PopLoops(replica, { queue: "work", ledger, loops: 3, batch: 5, waitMs: 2_000 })
  )
  try {
    const total = 300
    let next = 0
    const refused: Array<string> = []
    const pushOn = async (replica: Replica) => {
      while (next < total) {
        const batch = Array.from({ length: 1 + (next % 3) }, () => ledger.payload())
        next += batch.length
        try {
          await replica.client.push(
            "work",
            batch.map((message) => message.push)
          )
          for (const message of batch) ledger.markPushed(message.seq, process.hrtime.bigint())
        } catch (error) {
          // The replica went away under this push: committed or not, nobody knows. It pushes no more.
          for (const message of batch) ledger.uncertain.add(message.seq)
          refused.push(error instanceof Error ? error.message : String(error))
          return
        }
      }
    }
    const pushing = Promise.all([pushOn(a), pushOn(b), pushOn(a), pushOn(b), pushOn(c)])
    await until("a third popped", () => ledger.received.size >= total / 3, 60_000, 10)
    c.kill(signal)
    const answers = await Promise.race([
      Promise.all(stranded),
      new Promise<"hang">((resolve) => setTimeout(() => resolve("hang"), 20_000))
    ])
    assert.notStrictEqual(answers, "hang", "the parked pops' clients were left hanging")
    if (answers !== "hang") {
      for (const answer of answers) {
        if (answer.ok) assert.deepStrictEqual(answer.value.messages, [], "an empty answer")
      }
    }
    await pushing
    // A push that reached the stopping replica is answered or its connection ends; none waits out the
    // client's 30 s for a server that has stopped handling requests but not yet closed.
    assert.deepStrictEqual(
      refused.filter((message) => message.includes("no answer in")),
      [],
      "a push left unanswered by the stopping replica"
    )
    await ledger.allReceived(60_000)
    assert.deepStrictEqual(ledger.lost(), [], "committed messages lost")
    // Every message was pushed, but for the one batch that was in flight to C when it went.
    assert.strictEqual(ledger.pushed.size + ledger.uncertain.size, next)
    assert.isAtMost(ledger.uncertain.size, 3)
  } finally {
    await Promise.all(loops.map((loop) => loop.stop(true)))
  }
}

layer(Pg.layer, { excludeTestServices: true, timeout: "150 seconds" })("the reference broker", (it) => {
  const scenario = (carrier: Carrier, signal: NodeJS.Signals) =>
    Effect.gen(function* () {
      const server = yield* Pg.PgServer
      const database = `broker_test_${carrier}_${process.pid}`
      yield* server.query(`CREATE DATABASE ${database}`)
      const example = buildExample()
      yield* Effect.promise(async () => {
        const replicas = await startCluster({
          carrier,
          databaseUrl: server.urlOf(database),
          entry: example.entry,
          env: { BROKER_POP_REPOLL_MS: "60000", BROKER_LEASE_SWEEP_MS: "200" }
        })
        try {
          await clustered(replicas, carrier, 60_000)
          await exactlyOnce(replicas)
          await settingsAndMaintenanceCross(replicas)
          await parkedAnsweredThroughTheCarrier(carrier, replicas)
          await oneClaimPerMessage(replicas)
          await killMidRun(replicas, signal)
        } catch (error) {
          const tails = replicas.map((replica) => `--- ${replica.name}\n${replica.tail()}`).join("\n")
          throw new Error(`${error instanceof Error ? error.message : String(error)}\n${tails}`, {
            cause: error
          })
        } finally {
          await Promise.all(replicas.map((replica) => replica.stop()))
          example.remove()
        }
      })
      yield* server.query(`DROP DATABASE ${database} WITH (FORCE)`)
    })

  it.effect(
    "with the TCP mesh: exactly once, parked pops woken through the mesh, a replica killed",
    () => scenario("tcp", "SIGKILL"),
    150_000
  )

  it.effect(
    "on the PostgreSQL lane alone: the same, a replica stopped",
    () => scenario("lane", "SIGTERM"),
    150_000
  )
})

describe("the broker's HTTP server", () => {
  /** One request on `agent`'s kept-alive connection: the status, the body, and the Connection header. */
  const get = (port: number, agent: Http.Agent) =>
    new Promise<{ status: number; body: string; connection: string | undefined }>((resolve, reject) => {
      const request = Http.get({ host: "127.0.0.1", port, path: "/", agent }, (response) => {
        let body = ""
        response.setEncoding("utf8")
        response.on("data", (chunk: string) => {
          body += chunk
        })
        response.on("end", () =>
          resolve({ status: response.statusCode ?? 0, body, connection: response.headers.connection })
        )
      })
      request.on("error", reject)
    })

  it("answers a request that arrives after the API stopped handling them, so closing does not wait for it", async () => {
    const server = Server.createServer()
    const api = (_request: Http.IncomingMessage, response: Http.ServerResponse) => response.end("ok")
    server.on("request", api)
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    const agent = new Http.Agent({ keepAlive: true, maxSockets: 1 })
    try {
      assert.deepInclude(await get(port, agent), { status: 200, body: "ok" })
      // As the platform's server does on shutdown: the API's listener goes, then the server closes. A
      // request in between, on the connection kept alive from before, had no answer, and the close then
      // waited for it. It is answered, and the connection ends with it.
      server.off("request", api)
      const late = await get(port, agent)
      assert.deepStrictEqual(late, {
        status: 503,
        body: JSON.stringify({ error: "shutting_down" }),
        connection: "close"
      })
      await new Promise<void>((resolve) => server.close(() => resolve()))
    } finally {
      agent.destroy()
      server.closeAllConnections()
    }
  }, 30_000)
})
