/**
 * Load on a broker cluster, with an account of every message: pushed (the push answered 2xx), received
 * by a pop (how often, where, when). A message pushed and never received is lost; one received twice
 * was delivered twice. Times are `process.hrtime` in this one process, so a push-to-pop latency is the
 * client's view end to end: its push request, the commit on one replica, the hint, the pop's claim on
 * another replica, and the pop's answer.
 */
import { Schema } from "effect"
import { BrokerClient, type Push } from "./client.js"
import type { Replica } from "./replica.js"

const nowNs = (): bigint => process.hrtime.bigint()

const Payload = Schema.Struct({ seq: Schema.Number })
const decodePayload = Schema.decodeUnknownOption(Payload)

interface Receipt {
  readonly at: bigint
  readonly replica: string
  readonly wake: string
  count: number
}

/** Every message of a run: when it was pushed, when and where it was received. */
export class Ledger {
  private next = 0
  readonly pushed = new Map<number, bigint>()
  /** Pushes whose answer never came (an error): committed or not, nobody knows. */
  readonly uncertain = new Set<number>()
  readonly received = new Map<number, Receipt>()
  private readonly waiting = new Map<number, () => void>()
  private readonly watchers = new Set<() => void>()

  /** A new payload. */
  payload(): { readonly seq: number; readonly push: Push } {
    const seq = this.next++
    return { seq, push: { partition: `p${seq % 8}`, payload: { seq } } }
  }

  markPushed(seq: number, at: bigint): void {
    this.pushed.set(seq, at)
  }

  receive(payload: unknown, replica: string, wake: string): void {
    const decoded = decodePayload(payload)
    if (decoded._tag === "None") return
    const seq = decoded.value.seq
    const seen = this.received.get(seq)
    if (seen !== undefined) seen.count++
    else this.received.set(seq, { at: nowNs(), replica, wake, count: 1 })
    this.waiting.get(seq)?.()
    this.waiting.delete(seq)
    for (const watcher of this.watchers) watcher()
  }

  /** Resolves once `seq` has been received; rejects after `withinMs`. */
  receivedOf(seq: number, withinMs: number): Promise<Receipt> {
    const seen = this.received.get(seq)
    if (seen !== undefined) return Promise.resolve(seen)
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(seq)
        reject(new Error(`message ${seq} not received within ${withinMs} ms`))
      }, withinMs)
      this.waiting.set(seq, () => {
        clearTimeout(timer)
        resolve(this.received.get(seq)!)
      })
    })
  }

  /** Resolves once every pushed message has been received; rejects after `withinMs`. */
  allReceived(withinMs: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = () => {
        for (const seq of this.pushed.keys()) if (!this.received.has(seq)) return false
        return true
      }
      if (check()) return resolve()
      const timer = setTimeout(() => {
        this.watchers.delete(watch)
        reject(
          new Error(
            `${this.lost().length} of ${this.pushed.size} messages not received within ${withinMs} ms`
          )
        )
      }, withinMs)
      const watch = () => {
        if (!check()) return
        clearTimeout(timer)
        this.watchers.delete(watch)
        resolve()
      }
      this.watchers.add(watch)
    })
  }

  /** Pushed (answered 2xx) and never received. */
  lost(): ReadonlyArray<number> {
    return [...this.pushed.keys()].filter((seq) => !this.received.has(seq))
  }

  /** Received more than once. */
  duplicated(): ReadonlyArray<number> {
    return [...this.received].filter(([, receipt]) => receipt.count > 1).map(([seq]) => seq)
  }

  /** Push-to-pop latency of `seq`, in µs. */
  latencyUs(seq: number): number | undefined {
    const pushed = this.pushed.get(seq)
    const received = this.received.get(seq)
    return pushed === undefined || received === undefined ? undefined : Number(received.at - pushed) / 1000
  }
}

/**
 * Long-polls running on one replica: each pops, records what it got, acks it, and pops again, until
 * stopped. A pop that fails (the replica went away) is recorded and, unless stopped, retried after a
 * pause.
 */
export class PopLoops {
  private running = true
  private readonly loops: Array<Promise<void>>
  /** A client of its own: stopping with `abort` closes its connections, and only its. */
  private readonly client: BrokerClient
  readonly failures: Array<unknown> = []
  /** Pops that answered, by how their last wait ended (`none`, `woken`, `timeout`, `shutdown`). */
  readonly answers = new Map<string, number>()

  /** Pops answered so far. */
  answered(): number {
    let n = 0
    for (const count of this.answers.values()) n += count
    return n
  }

  constructor(
    readonly replica: Replica,
    readonly options: {
      readonly queue: string
      readonly ledger: Ledger
      readonly loops: number
      readonly batch: number
      readonly waitMs: number
    }
  ) {
    this.client = new BrokerClient(replica.client.host, replica.client.port)
    this.loops = Array.from({ length: options.loops }, () => this.loop())
  }

  private async loop(): Promise<void> {
    const { queue, ledger, batch, waitMs } = this.options
    while (this.running) {
      try {
        const answer = await this.client.pop(queue, { batch, waitMs })
        this.answers.set(answer.wake, (this.answers.get(answer.wake) ?? 0) + 1)
        for (const message of answer.messages) ledger.receive(message.payload, this.replica.name, answer.wake)
        if (answer.lease !== null && answer.messages.length > 0) {
          void this.client
            .ack(
              queue,
              answer.lease,
              answer.messages.map((message) => message.id)
            )
            .catch((error: unknown) => this.failures.push(error))
        }
      } catch (error) {
        if (!this.running) return
        this.failures.push(error)
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
    }
  }

  /** Stops popping: the loops end with their current pop (at most `waitMs`), or at once with `abort`. */
  async stop(abort = false): Promise<void> {
    this.running = false
    if (abort) this.client.close()
    await Promise.all(this.loops)
    this.client.close()
  }
}

const percentile = (sorted: ReadonlyArray<number>, p: number): number =>
  sorted.length === 0
    ? Number.NaN
    : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!

export interface Distribution {
  readonly n: number
  readonly p50: number
  readonly p90: number
  readonly p99: number
  readonly max: number
  readonly mean: number
}

export const distribution = (values: ReadonlyArray<number>): Distribution => {
  const sorted = [...values].sort((a, b) => a - b)
  const round = (v: number) => Math.round(v * 10) / 10
  return {
    n: sorted.length,
    p50: round(percentile(sorted, 50)),
    p90: round(percentile(sorted, 90)),
    p99: round(percentile(sorted, 99)),
    max: round(sorted.at(-1) ?? Number.NaN),
    mean: round(sorted.reduce((a, b) => a + b, 0) / Math.max(1, sorted.length))
  }
}

export interface LatencyRun {
  readonly latencyUs: Distribution
  readonly pushed: number
  readonly lost: number
  readonly duplicated: number
  /** Pops that answered with a message, by how their last wait ended. */
  readonly wakes: Readonly<Record<string, number>>
}

/**
 * Push-to-pop rounds, one message at a time, on long-lived pops: `loops` pops wait on each of
 * `poppers`, a message is pushed on `pusher`, and the round ends when a pop has answered with it.
 * Before each push every popper has its pops parked again, then a random pause of up to `jitterMs`
 * puts the push at a random phase of their re-poll timers (what the mesh-off figure depends on).
 */
export class LatencySeries {
  readonly ledger = new Ledger()
  private readonly pops: ReadonlyArray<PopLoops>
  /** Latencies of the rounds kept, in µs. */
  readonly kept: Array<number> = []
  /** The rounds kept: the message's id, when its push was sent and answered (`process.hrtime`, ns). */
  readonly rounds: Array<{
    readonly seq: number
    readonly id: string
    readonly sent: bigint
    readonly answered: bigint
  }> = []

  constructor(
    readonly options: {
      readonly pusher: Replica
      readonly poppers: ReadonlyArray<Replica>
      readonly queue: string
      readonly loops: number
      readonly jitterMs: number
      readonly roundTimeoutMs?: number
    }
  ) {
    this.pops = options.poppers.map(
      (replica) =>
        new PopLoops(replica, {
          queue: options.queue,
          ledger: this.ledger,
          loops: options.loops,
          batch: 1,
          waitMs: 30_000
        })
    )
  }

  /** One round; its latency is kept unless `keep` is false (a warm-up). */
  async round(keep = true): Promise<number> {
    for (const replica of this.options.poppers) await waitParked(replica, this.options.loops)
    if (this.options.jitterMs > 0)
      await new Promise((resolve) => setTimeout(resolve, Math.random() * this.options.jitterMs))
    const { seq, push } = this.ledger.payload()
    const at = nowNs()
    const [id] = await this.options.pusher.client.push(this.options.queue, [push])
    const answered = nowNs()
    this.ledger.markPushed(seq, at)
    await this.ledger.receivedOf(seq, this.options.roundTimeoutMs ?? 30_000)
    const latency = this.ledger.latencyUs(seq)!
    if (keep) {
      this.kept.push(latency)
      if (id !== undefined) this.rounds.push({ seq, id, sent: at, answered })
    }
    return latency
  }

  result(): LatencyRun {
    const wakes: Record<string, number> = {}
    for (const receipt of this.ledger.received.values()) wakes[receipt.wake] = (wakes[receipt.wake] ?? 0) + 1
    return {
      latencyUs: distribution(this.kept),
      pushed: this.ledger.pushed.size,
      lost: this.ledger.lost().length,
      duplicated: this.ledger.duplicated().length,
      wakes
    }
  }

  close(): Promise<void> {
    return Promise.all(this.pops.map((loop) => loop.stop(true))).then(() => undefined)
  }
}

/** A {@link LatencySeries} of `warmup` rounds not kept, then `rounds` kept. */
export const latencyRounds = async (options: {
  readonly pusher: Replica
  readonly poppers: ReadonlyArray<Replica>
  readonly queue: string
  readonly rounds: number
  readonly warmup: number
  readonly loops?: number
  readonly jitterMs: number
}): Promise<LatencyRun> => {
  const series = new LatencySeries({ ...options, loops: options.loops ?? 2 })
  try {
    for (let round = 0; round < options.warmup + options.rounds; round++)
      await series.round(round >= options.warmup)
  } finally {
    await series.close()
  }
  return series.result()
}

/** Resolves once `replica` has at least `count` pops parked. */
const waitParked = async (replica: Replica, count: number, withinMs = 30_000): Promise<void> => {
  const deadline = Date.now() + withinMs
  while (Date.now() < deadline) {
    if ((await replica.client.stats()).parked >= count) return
    await new Promise((resolve) => setTimeout(resolve, 1))
  }
  throw new Error(`${replica.name}: ${count} pops not parked within ${withinMs} ms`)
}

export interface BurstRun {
  readonly pushed: number
  readonly lost: number
  readonly duplicated: number
  readonly wallMs: number
  readonly byReplica: Readonly<Record<string, number>>
}

/**
 * `count` messages pushed on `pushers` (in turn; batches of 1 to `maxBatch`, `concurrency` requests at
 * a time) while pops run on `poppers`; resolves once every message has been received.
 */
export const burst = async (options: {
  readonly pushers: ReadonlyArray<Replica>
  readonly poppers: ReadonlyArray<Replica>
  readonly queue: string
  readonly count: number
  readonly maxBatch: number
  readonly concurrency: number
  readonly loops: number
  readonly popBatch: number
  readonly withinMs?: number
  readonly ledger?: Ledger
}): Promise<BurstRun> => {
  const ledger = options.ledger ?? new Ledger()
  const pops = options.poppers.map(
    (replica) =>
      new PopLoops(replica, {
        queue: options.queue,
        ledger,
        loops: options.loops,
        batch: options.popBatch,
        waitMs: 5_000
      })
  )
  const started = Date.now()
  try {
    let left = options.count
    let turn = 0
    const pusher = async () => {
      while (left > 0) {
        const size = Math.min(left, 1 + Math.floor(Math.random() * options.maxBatch))
        left -= size
        const replica = options.pushers[turn++ % options.pushers.length]!
        const batch = Array.from({ length: size }, () => ledger.payload())
        const at = nowNs()
        await replica.client.push(
          options.queue,
          batch.map((message) => message.push)
        )
        for (const message of batch) ledger.markPushed(message.seq, at)
      }
    }
    await Promise.all(Array.from({ length: options.concurrency }, pusher))
    await ledger.allReceived(options.withinMs ?? 60_000)
  } finally {
    await Promise.all(pops.map((loop) => loop.stop(true)))
  }
  const byReplica: Record<string, number> = {}
  for (const receipt of ledger.received.values())
    byReplica[receipt.replica] = (byReplica[receipt.replica] ?? 0) + 1
  return {
    pushed: ledger.pushed.size,
    lost: ledger.lost().length,
    duplicated: ledger.duplicated().length,
    wallMs: Date.now() - started,
    byReplica
  }
}

export interface ThroughputRun {
  readonly pushed: number
  readonly pushesPerSec: number
  /** CPU of the pushing replica per message pushed (µs). */
  readonly pushCpuUsPerMessage: number
  /** CPU of the other replicas over the pushes, per message: what receiving the hints costs them (µs). */
  readonly peersCpuUsPerMessage: number
}

/**
 * A closed loop of `clients` pushing one message each at a time on `pusher` for `durationMs`, no pop
 * running anywhere: what a push costs, hints included. Then `drain` pops everything (uncounted).
 */
export const pushThroughput = async (options: {
  readonly pusher: Replica
  readonly peers: ReadonlyArray<Replica>
  readonly queue: string
  readonly clients: number
  readonly durationMs: number
}): Promise<ThroughputRun> => {
  const peersCpu = () => options.peers.reduce((sum, replica) => sum + replica.cpuNs(), 0)
  const pushCpu0 = options.pusher.cpuNs()
  const peersCpu0 = peersCpu()
  const started = nowNs()
  const end = Date.now() + options.durationMs
  let pushed = 0
  const client = async () => {
    while (Date.now() < end) {
      await options.pusher.client.push(options.queue, [{ partition: "p", payload: { seq: pushed } }])
      pushed++
    }
  }
  await Promise.all(Array.from({ length: options.clients }, client))
  const seconds = Number(nowNs() - started) / 1e9
  const perMessage = (ns: number) => Math.round((ns / 1000 / pushed) * 10) / 10
  return {
    pushed,
    pushesPerSec: Math.round(pushed / seconds),
    pushCpuUsPerMessage: perMessage(options.pusher.cpuNs() - pushCpu0),
    peersCpuUsPerMessage: perMessage(peersCpu() - peersCpu0)
  }
}

/** Pops `queue` on `replica` until a pop finds it empty. */
export const drain = async (replica: Replica, queue: string): Promise<number> => {
  let popped = 0
  while (true) {
    const answer = await replica.client.pop(queue, { batch: 1000 })
    if (answer.lease === null || answer.messages.length === 0) return popped
    popped += answer.messages.length
    await replica.client.ack(
      queue,
      answer.lease,
      answer.messages.map((message) => message.id)
    )
  }
}

export interface FlowRun {
  readonly pushed: number
  /** CPU of the popping replicas per message popped, from the first push to the last pop (µs). */
  readonly popCpuUsPerMessage: number
  /** Pop requests answered per message (each answer with messages is acked by one more request). */
  readonly popsPerMessage: number
  readonly latencyUs: Distribution
  readonly lost: number
  readonly duplicated: number
}

/**
 * A steady flow: one message pushed on `pusher` every `everyMs` for `durationMs` (open loop) while pops
 * on `poppers` take them: what popping costs per message when pops wait for messages, as a broker's
 * consumers mostly do.
 */
export const flow = async (options: {
  readonly pusher: Replica
  readonly poppers: ReadonlyArray<Replica>
  readonly queue: string
  readonly everyMs: number
  readonly durationMs: number
  readonly loops: number
  readonly popBatch: number
}): Promise<FlowRun> => {
  const ledger = new Ledger()
  const pops = options.poppers.map(
    (replica) =>
      new PopLoops(replica, {
        queue: options.queue,
        ledger,
        loops: options.loops,
        batch: options.popBatch,
        waitMs: 5_000
      })
  )
  try {
    for (const replica of options.poppers) await waitParked(replica, options.loops)
    const popCpu = () => options.poppers.reduce((sum, replica) => sum + replica.cpuNs(), 0)
    const popCpu0 = popCpu()
    const answers0 = pops.reduce((sum, loop) => sum + loop.answered(), 0)
    const pushing: Array<Promise<void>> = []
    const started = Date.now()
    for (let i = 0; Date.now() - started < options.durationMs; i++) {
      const { seq, push } = ledger.payload()
      const at = nowNs()
      pushing.push(options.pusher.client.push(options.queue, [push]).then(() => ledger.markPushed(seq, at)))
      const next = started + (i + 1) * options.everyMs
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, next - Date.now())))
    }
    await Promise.all(pushing)
    await ledger.allReceived(60_000)
    const popCpuNs = popCpu() - popCpu0
    const pushed = ledger.pushed.size
    const latencies = [...ledger.pushed.keys()].map((seq) => ledger.latencyUs(seq)!)
    return {
      pushed,
      popCpuUsPerMessage: Math.round((popCpuNs / 1000 / pushed) * 10) / 10,
      popsPerMessage:
        Math.round(((pops.reduce((sum, loop) => sum + loop.answered(), 0) - answers0) / pushed) * 100) / 100,
      latencyUs: distribution(latencies),
      lost: ledger.lost().length,
      duplicated: ledger.duplicated().length
    }
  } finally {
    await Promise.all(pops.map((loop) => loop.stop(true)))
  }
}

export interface WriteLoadRun {
  /** Concurrent pushers, spread over the replicas in turn. */
  readonly pushers: number
  readonly pushed: number
  readonly pushesPerSec: number
  /** Push request sent to the pop's answer that carried it, over every message (µs). */
  readonly latencyUs: Distribution
  readonly lost: number
  readonly duplicated: number
  /**
   * CPU per message (µs) from the first push to the last pop, so push, hints, pop and ack: the
   * replicas together, and PostgreSQL's processes if given.
   */
  readonly replicasCpuUsPerPush: number
  readonly postgresCpuUsPerPush: number | null
  /** CPU of the driving process itself per push (µs): on a small machine it competes with both. */
  readonly clientCpuUsPerPush: number
}

/**
 * Write load: `pushers` clients, spread over `replicas` in turn, each pushing one message at a time
 * back to back for `durationMs`, while `loops` pops (batch `popBatch`) wait on every replica and ack
 * what they get. Counts every message (lost, delivered twice) and the CPU each side spent per push.
 */
export const writeLoad = async (options: {
  readonly replicas: ReadonlyArray<Replica>
  readonly queue: string
  readonly pushers: number
  readonly durationMs: number
  readonly loops: number
  readonly popBatch: number
  readonly postgresCpuNs?: () => number
  readonly withinMs?: number
}): Promise<WriteLoadRun> => {
  const ledger = new Ledger()
  const pops = options.replicas.map(
    (replica) =>
      new PopLoops(replica, {
        queue: options.queue,
        ledger,
        loops: options.loops,
        batch: options.popBatch,
        waitMs: 5_000
      })
  )
  try {
    for (const replica of options.replicas) await waitParked(replica, options.loops)
    const replicasCpu = () => options.replicas.reduce((sum, replica) => sum + replica.cpuNs(), 0)
    const replicasCpu0 = replicasCpu()
    const postgresCpu0 = options.postgresCpuNs?.() ?? 0
    const clientCpu0 = process.cpuUsage()
    const started = nowNs()
    const end = Date.now() + options.durationMs
    const pusher = async (index: number) => {
      const replica = options.replicas[index % options.replicas.length]!
      while (Date.now() < end) {
        const { seq, push } = ledger.payload()
        const at = nowNs()
        await replica.client.push(options.queue, [push])
        ledger.markPushed(seq, at)
      }
    }
    await Promise.all(Array.from({ length: options.pushers }, (_, i) => pusher(i)))
    const seconds = Number(nowNs() - started) / 1e9
    const pushed = ledger.pushed.size
    // Whatever is still unreceived at the deadline is counted as lost, not thrown: a run reports it.
    await ledger.allReceived(options.withinMs ?? 60_000).catch(() => undefined)
    // CPU from the first push to the last pop: a message's whole life (push, hints, pop, ack).
    const perPush = (ns: number) => Math.round((ns / 1000 / Math.max(1, pushed)) * 10) / 10
    const clientCpu = process.cpuUsage(clientCpu0)
    const cpu = {
      replicas: perPush(replicasCpu() - replicasCpu0),
      postgres: options.postgresCpuNs === undefined ? null : perPush(options.postgresCpuNs() - postgresCpu0),
      client: perPush((clientCpu.user + clientCpu.system) * 1000)
    }
    const latencies = [...ledger.pushed.keys()].flatMap((seq) => ledger.latencyUs(seq) ?? [])
    return {
      pushers: options.pushers,
      pushed,
      pushesPerSec: Math.round(pushed / seconds),
      latencyUs: distribution(latencies),
      lost: ledger.lost().length,
      duplicated: ledger.duplicated().length,
      replicasCpuUsPerPush: cpu.replicas,
      postgresCpuUsPerPush: cpu.postgres,
      clientCpuUsPerPush: cpu.client
    }
  } finally {
    await Promise.all(pops.map((loop) => loop.stop(true)))
  }
}
