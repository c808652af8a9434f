/**
 * Wake latency: a push on node A to a pop parked on node B, sequentially. A and B are separate
 * processes; the driver only sequences them (B reports "parked", the driver tells A to push, B's
 * wake re-parks it and reports the next "parked"). A stamps the moment it calls push, B the moment its
 * pop resumes, both on `CLOCK_MONOTONIC`, which is one clock for all processes on a Linux machine; the
 * figure is B's stamp minus A's, a true one-way latency that includes no IPC.
 *
 * Variants: the mesh (`Mesh.messageAvailable` to `LocalWaker.awaitWake`), the baseline (its node to its
 * waker), the mesh turned off (B's pop only finds the push on its own re-poll), and PostgreSQL
 * `NOTIFY` to a `LISTEN`ing client.
 */
import { Effect, Option } from "effect"
import * as LocalWaker from "../src/LocalWaker.js"
import * as Mesh from "../src/Mesh.js"
import * as Baseline from "./baseline.js"
import { fromParent, nowNs, toParent } from "./ipc.js"
import { hears, linksUp, localNode, until } from "./nodes.js"

export interface WakeParams {
  /** This node's mesh port and its peer's. */
  readonly port: number
  readonly peerPort: number
  readonly secret: string
  /** Total sequential wakes, warm-up included. */
  readonly total: number
  /** For the mesh-off variant: the parked pop's re-poll interval. */
  readonly pollMs: number
  /** For PostgreSQL. */
  readonly pgPort: number
}

const ITEM = { queue: "orders", partition: "p-0", tenant: "ac3e0000-0000-4000-8000-00000000ac3e" } as const
const TARGET: LocalWaker.WaitTarget = {
  queue: "orders",
  tenant: Option.some("ac3e0000-0000-4000-8000-00000000ac3e")
}
const LONG_WAIT_MS = 60_000

/** A: on every `push` from the driver, stamp and push. Sends its stamps on `times`. */
const pusher = async (ready: () => Promise<void>, push: () => void, total: number): Promise<void> => {
  const inbox = fromParent()
  await ready()
  toParent({ kind: "ready" })
  const stamps: Array<number> = new Array(total).fill(0)
  for (let i = 0; i < total; i++) {
    const message = await inbox.take("push", LONG_WAIT_MS)
    stamps[message.i ?? i] = nowNs()
    push()
  }
  toParent({ kind: "times", data: stamps })
  await inbox.take("stop", LONG_WAIT_MS * 10)
}

/**
 * B: parks, reports `parked i`, stamps when woken, repeats. `park` resolves once the pop is registered,
 * with a promise of the stamp taken as the pop resumed.
 */
export const parker = async (
  ready: () => Promise<void>,
  park: () => Promise<{ readonly woken: Promise<number> }>,
  total: number
): Promise<void> => {
  const inbox = fromParent()
  await ready()
  toParent({ kind: "ready" })
  const stamps: Array<number> = new Array(total).fill(0)
  for (let i = 0; i < total; i++) {
    const { woken } = await park()
    toParent({ kind: "parked", i })
    stamps[i] = await woken
  }
  toParent({ kind: "times", data: stamps })
  await inbox.take("stop", LONG_WAIT_MS * 10)
}

// ---------------------------------------------------------------------------------------------
// the mesh
// ---------------------------------------------------------------------------------------------

/**
 * A, the way an Effect broker calls the mesh: one long-lived fiber that awaits the driver's `push`
 * (an `Effect.async` resumed from the IPC callback, as a request handler's fiber is resumed by its
 * server), stamps, and `yield* mesh.messageAvailable`. No `runSync` per push.
 */
export const meshPusher = async (params: WakeParams): Promise<void> => {
  const runtime = localNode({
    serverId: "node-a",
    port: params.port,
    peers: [params.peerPort],
    secret: params.secret
  })
  const mesh = await runtime.runPromise(Effect.service(Mesh.Mesh))
  const inbox = fromParent()
  // The one pending resume, set while the fiber waits; a push arriving before it waits is kept.
  let resume: ((i: number) => void) | undefined
  const early: Array<number> = []
  inbox.handle("push", (message) => {
    const i = message.i ?? 0
    const waiting = resume
    resume = undefined
    if (waiting === undefined) early.push(i)
    else waiting(i)
  })
  const nextPush = Effect.callback<number>((k) => {
    const i = early.shift()
    if (i !== undefined) return k(Effect.succeed(i))
    resume = (n) => k(Effect.succeed(n))
  })
  const stamps: Array<number> = new Array(params.total).fill(0)
  const loop = Effect.gen(function* () {
    for (let n = 0; n < params.total; n++) {
      const i = yield* nextPush
      stamps[i] = nowNs()
      yield* mesh.messageAvailable(ITEM)
    }
  })
  await until(runtime, linksUp, 10_000, "A's link to B")
  const done = runtime.runPromise(loop)
  toParent({ kind: "ready" })
  await done
  toParent({ kind: "times", data: stamps })
  await inbox.take("stop", LONG_WAIT_MS * 10)
  await runtime.dispose()
}

/**
 * A, from outside any fiber: the IPC callback stamps and calls `mesh.unsafeMessageAvailable`, the
 * synchronous twin, as a host's plain socket handler would.
 */
export const meshSyncPusher = async (params: WakeParams): Promise<void> => {
  const runtime = localNode({
    serverId: "node-a",
    port: params.port,
    peers: [params.peerPort],
    secret: params.secret
  })
  const mesh = await runtime.runPromise(Effect.service(Mesh.Mesh))
  const inbox = fromParent()
  const stamps: Array<number> = new Array(params.total).fill(0)
  let pushed = 0
  let allPushed: () => void = () => {}
  const done = new Promise<void>((resolve) => {
    allPushed = resolve
  })
  inbox.handle("push", (message) => {
    stamps[message.i ?? pushed] = nowNs()
    mesh.unsafeMessageAvailable(ITEM)
    if (++pushed === params.total) allPushed()
  })
  await until(runtime, linksUp, 10_000, "A's link to B")
  toParent({ kind: "ready" })
  await done
  toParent({ kind: "times", data: stamps })
  await inbox.take("stop", LONG_WAIT_MS * 10)
  await runtime.dispose()
}

/**
 * Parks a pop on a `LocalWaker` as a broker's request fiber would: one `runFork` per pop. `runFork`
 * starts the fiber synchronously, so the pop is registered when it returns; every 64th pop the count
 * is checked as well (the check is a fiber of its own, garbage a broker would not make on every pop).
 */
let parks = 0
const parkLocal = async (
  runtime: { runFork: <A>(effect: Effect.Effect<A>) => unknown; runSync: <A>(effect: Effect.Effect<A>) => A },
  waker: LocalWaker.LocalWakerShape,
  maxWaitMs: number,
  onResume: (outcome: LocalWaker.WakeOutcome) => void
): Promise<void> => {
  runtime.runFork(
    Effect.flatMap(waker.awaitWake(TARGET, { maxWait: maxWaitMs }), (outcome) =>
      Effect.sync(() => onResume(outcome))
    )
  )
  if (parks++ % 64 === 0 && runtime.runSync(waker.parked) < 1) throw new Error("the pop never parked")
}

export const meshParker = async (params: WakeParams): Promise<void> => {
  const runtime = localNode({
    serverId: "node-b",
    port: params.port,
    peers: [params.peerPort],
    secret: params.secret
  })
  const waker = await runtime.runPromise(Effect.service(LocalWaker.LocalWaker))
  await parker(
    () => until(runtime, hears(1), 10_000, "B hearing A's HELLO"),
    async () => {
      let resolve: (at: number) => void = () => {}
      let reject: (error: Error) => void = () => {}
      const woken = new Promise<number>((res, rej) => {
        resolve = res
        reject = rej
      })
      await parkLocal(runtime, waker, LONG_WAIT_MS, (outcome) => {
        const at = nowNs()
        if (outcome === "woken") resolve(at)
        else reject(new Error("a parked pop timed out: a wake was lost"))
      })
      return { woken }
    },
    params.total
  )
  await runtime.dispose()
}

// ---------------------------------------------------------------------------------------------
// the baseline
// ---------------------------------------------------------------------------------------------

const baselineNode = (serverId: string, params: WakeParams, onWake: (item: Baseline.Item) => void) =>
  new Baseline.BaselineNode({
    serverId,
    port: params.port,
    secret: params.secret,
    peers: [{ host: "127.0.0.1", port: params.peerPort }],
    onWake
  })

export const baselinePusher = async (params: WakeParams): Promise<void> => {
  const node = baselineNode("base-a", params, () => {})
  await node.start()
  await pusher(
    async () => {
      const deadline = Date.now() + 10_000
      while (!node.links.every((link) => link.connected)) {
        if (Date.now() > deadline) throw new Error("A's link to B never came up")
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    },
    () => node.messageAvailable(ITEM),
    params.total
  )
  node.close()
}

export const baselineParker = async (params: WakeParams): Promise<void> => {
  const waker = new Baseline.BaselineWaker()
  const node = baselineNode("base-b", params, waker.wake)
  await node.start()
  await parker(
    async () => {
      const deadline = Date.now() + 10_000
      while (node.lastSeen.size === 0) {
        if (Date.now() > deadline) throw new Error("B never heard A's HELLO")
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    },
    async () => ({
      woken: waker.awaitWake(ITEM.queue, ITEM.tenant, LONG_WAIT_MS).then((outcome) => {
        const at = nowNs()
        if (outcome !== "woken") throw new Error("a parked pop timed out: a wake was lost")
        return at
      })
    }),
    params.total
  )
  node.close()
}

// ---------------------------------------------------------------------------------------------
// the mesh turned off: the same consumers, found only by their own re-poll
// ---------------------------------------------------------------------------------------------

/** A, mesh off: stamps and pushes (a local wake only) and reports the stamp to the driver. */
export const offPusher = async (params: WakeParams): Promise<void> => {
  const runtime = localNode({ serverId: "off-a", port: params.port, peers: [], secret: params.secret })
  const mesh = await runtime.runPromise(Effect.service(Mesh.Mesh))
  if (mesh.active) throw new Error("the mesh should be off")
  const inbox = fromParent()
  toParent({ kind: "ready" })
  for (let i = 0; i < params.total; i++) {
    const message = await inbox.take("push", LONG_WAIT_MS)
    const at = nowNs()
    runtime.runSync(mesh.messageAvailable(ITEM))
    toParent({ kind: "pushed", i: message.i ?? i, data: at })
  }
  await inbox.take("stop", LONG_WAIT_MS * 10)
  await runtime.dispose()
}

/**
 * B, mesh off: a pop that parks for `pollMs`, then re-polls. The driver forwards each commit's stamp;
 * the first re-poll after it is when the pop would have found the message.
 */
export const offParker = async (params: WakeParams): Promise<void> => {
  const runtime = localNode({ serverId: "off-b", port: params.port, peers: [], secret: params.secret })
  const waker = await runtime.runPromise(Effect.service(LocalWaker.LocalWaker))
  const inbox = fromParent()
  let committed: { i: number; at: number } | undefined
  let seen = 0
  let stopped = false
  const latencies: Array<number> = []
  const stopMessage = inbox.take("stop", LONG_WAIT_MS * 10).then(() => {
    stopped = true
  })
  const loop = async () => {
    while (!stopped && seen < params.total) {
      const polled = await new Promise<number>((resolve, reject) => {
        parkLocal(runtime, waker, params.pollMs, () => resolve(nowNs())).catch(reject)
      })
      if (committed !== undefined && committed.at <= polled) {
        latencies.push(polled - committed.at)
        toParent({ kind: "seen", i: committed.i })
        committed = undefined
        seen++
      }
    }
  }
  const commits = async () => {
    for (let i = 0; i < params.total; i++) {
      const message = await inbox.take("committed", LONG_WAIT_MS)
      committed = { i: message.i ?? i, at: typeof message.data === "number" ? message.data : 0 }
    }
  }
  toParent({ kind: "ready" })
  await Promise.all([loop(), commits()])
  toParent({ kind: "latencies", data: latencies })
  await stopMessage
  await runtime.dispose()
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL LISTEN/NOTIFY
// ---------------------------------------------------------------------------------------------

const pgClient = async (port: number) => {
  const { default: pg } = await import("pg")
  const client = new pg.Client({ host: "127.0.0.1", port, user: "bench", database: "postgres" })
  await client.connect()
  return client
}

export const pgPusher = async (params: WakeParams): Promise<void> => {
  const client = await pgClient(params.pgPort)
  client.on("error", (error) => toParent({ kind: "error", data: `pg pusher: ${error.message}` }))
  await pusher(
    async () => {},
    () => {
      client.query("NOTIFY queen_wake, 'orders'").catch((error: unknown) => {
        toParent({ kind: "error", data: `NOTIFY failed: ${String(error)}` })
      })
    },
    params.total
  )
  await client.end()
}

export const pgParker = async (params: WakeParams): Promise<void> => {
  const client = await pgClient(params.pgPort)
  client.on("error", (error) => toParent({ kind: "error", data: `pg listener: ${error.message}` }))
  let waiting: ((at: number) => void) | undefined
  client.on("notification", () => {
    const at = nowNs()
    const resolve = waiting
    waiting = undefined
    resolve?.(at)
  })
  await client.query("LISTEN queen_wake")
  await parker(
    async () => {},
    async () => ({
      woken: new Promise<number>((resolve) => {
        waiting = resolve
      })
    }),
    params.total
  )
  await client.end()
}
