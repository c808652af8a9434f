/**
 * The CLI path: `queen-mesh node` (the entry `src/cli.ts`, compiled with the bench into `.bench-dist/`)
 * next to the hand-written `bench/cliBaseline.ts` and, where it is built, upstream Queen's Rust mesh
 * behind its stdin/stdout harness (`upstream-mesh-node`, see `../shared/upstream-mesh/README.md` beside this repository),
 * all driven as a script drives them, through pipes. Run from the driver process, which owns the pipes:
 *
 * - wake latency: a `message_available` line (upstream: `ma <queue> <partition> <tenant>`) written to
 *   A's stdin until the `wake` line for it is read from B's stdout, one at a time; the pairs take turns
 *   in blocks;
 * - receive throughput: the throughput sender (`bench/throughput.ts`, a child) streams
 *   `MESSAGE_AVAILABLE` frames to a node, which prints one `wake` line each to a pipe the driver drains;
 *   lines/s from the first line to the last, and the node's CPU from `/proc/<pid>/stat`.
 */
// Pulls the CLI entry into `tsc -p tsconfig.bench.json`, so it is compiled next to the bench.
/// <reference path="../src/cli.ts" />
import { type ChildProcess, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Schema } from "effect"
import { nowNs } from "./ipc.js"
import { type Distribution, distribution, sleep } from "./stats.js"
import * as Tail from "./tail.js"

/** `queen-mesh node`, the hand-written CLI baseline, upstream's Rust mesh behind its harness. */
export type CliKind = "mesh" | "base" | "upstream"

const here = Path.dirname(fileURLToPath(import.meta.url))

/**
 * The `queen-mesh` the CLI and cluster sections run, by `QUEEN_MESH_BENCH_CLI`: `bundle` (the default)
 * is the command that ships, `dist/cli.js` (its one bundled script and code cache; `npm run bench`
 * builds it first); `modules` is `src/cli.ts` compiled with the bench into `.bench-dist/`, as runs
 * before 2026-12-04 measured.
 */
const cliBuild = (value: string | undefined): "modules" | "bundle" => {
  if (value === undefined || value === "" || value === "bundle") return "bundle"
  if (value === "modules") return "modules"
  throw new Error(`QUEEN_MESH_BENCH_CLI=${value}: expected bundle or modules`)
}
const CLI_BUILD = cliBuild(process.env.QUEEN_MESH_BENCH_CLI)
/** tsc's modules of `queen-mesh`, compiled with the bench. */
export const modulesEntry = Path.resolve(here, "../src/cli.js")
/** The `queen-mesh` entry the sections start. */
export const cliEntry = CLI_BUILD === "bundle" ? Path.resolve(here, "../../dist/cli.js") : modulesEntry
const scripts: Record<"mesh" | "base", ReadonlyArray<string>> = {
  mesh: [cliEntry, "node"],
  base: [Path.resolve(here, "cliBaseline.js")]
}

/** An executable and its arguments. */
export interface Command {
  readonly file: string
  readonly args: ReadonlyArray<string>
}

/** A running node with its stdout split into lines. */
export class CliNode {
  readonly process: ChildProcess
  private partial = ""
  private waiters: Array<{
    test: (line: string) => boolean
    resolve: (line: string) => void
    ended: (how: string) => void
  }> = []
  /** How the process ended, once it has (its stdout and stderr read to the end). */
  private endedAs: string | undefined = undefined
  /**
   * When set, raw stdout chunks go here instead of being split into lines: the receive benchmark
   * counts newlines in the bytes, so the driver keeps up with any node (a UTF-8 multi-byte character
   * never contains a newline byte, so the count is exact).
   */
  counter: ((chunk: Buffer, at: number) => void) | undefined = undefined
  /** Called for every stdout line, with the time its chunk arrived. */
  onLine: ((line: string, at: number) => void) | undefined = undefined
  lines = 0
  stderr = ""

  constructor(
    readonly kind: CliKind,
    command: Command,
    env: Record<string, string>
  ) {
    this.process = spawn(command.file, command.args, {
      env: { ...process.env, ...env },
      stdio: ["pipe", "pipe", "pipe"]
    })
    this.process.stdout!.on("data", (chunk: Buffer) => {
      const at = nowNs()
      const counter = this.counter
      if (counter !== undefined) return counter(chunk, at)
      const text = this.partial + chunk.toString("utf8")
      let start = 0
      for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", start)) {
        this.line(text.slice(start, nl), at)
        start = nl + 1
      }
      this.partial = text.slice(start)
    })
    this.process.stderr!.setEncoding("utf8")
    this.process.stderr!.on("data", (chunk: string) => {
      if (this.stderr.length < 10_000) this.stderr += chunk
    })
    // A node that ends fails what waits on it at once (a port taken, a bad flag), not at the timeout.
    this.process.once("close", (code, signal) => {
      this.endedAs = signal === null ? `exited with code ${code}` : `ended by ${signal}`
      for (const waiter of this.waiters.splice(0)) waiter.ended(this.endedAs)
    })
  }

  private line(line: string, at: number): void {
    this.lines++
    const at2 = this.waiters.findIndex((w) => w.test(line))
    if (at2 >= 0) {
      const [waiter] = this.waiters.splice(at2, 1)
      waiter!.resolve(line)
    }
    this.onLine?.(line, at)
  }

  /** The next stdout line passing `test`, failing after `ms` or when the process ends first. */
  waitFor(test: (line: string) => boolean, ms: number, what: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const fail = (why: string) =>
        reject(new Error(`${this.kind} CLI node: no ${what}: ${why}; stderr: ${this.stderr.slice(-500)}`))
      if (this.endedAs !== undefined) return fail(this.endedAs)
      const timer = setTimeout(() => fail(`not within ${ms} ms`), ms)
      this.waiters.push({
        test,
        resolve: (line) => {
          clearTimeout(timer)
          resolve(line)
        },
        ended: (how) => {
          clearTimeout(timer)
          fail(how)
        }
      })
    })
  }

  write(line: string): void {
    this.process.stdin!.write(line)
  }

  /** utime + stime of the process, all its threads, in µs (from `/proc`, 10 ms ticks). */
  cpuUs(): number {
    return processCpuUs(this.process.pid)
  }

  /** CPU of every thread of the process, in ns, from schedstat (see `processCpuNs`). */
  cpuNs(): number {
    return processCpuNs(this.process.pid)
  }

  /** Resident set size of the process in bytes (`VmRSS` in `/proc/<pid>/status`). */
  rssBytes(): number {
    try {
      const status = Fs.readFileSync(`/proc/${this.process.pid}/status`, "utf8")
      const match = /^VmRSS:\s+(\d+) kB/m.exec(status)
      return match === null ? Number.NaN : Number(match[1]) * 1024
    } catch {
      return Number.NaN
    }
  }

  stop(): Promise<void> {
    return new Promise((resolve) => {
      if (this.process.exitCode !== null || this.process.signalCode !== null) return resolve()
      const timer = setTimeout(() => {
        this.process.kill("SIGKILL")
      }, 2000)
      this.process.once("exit", () => {
        clearTimeout(timer)
        resolve()
      })
      this.process.kill("SIGTERM")
    })
  }
}

/** utime + stime of a process, all its threads, in µs (from `/proc/<pid>/stat`, 10 ms ticks). */
export const processCpuUs = (pid: number | undefined): number => {
  try {
    const stat = Fs.readFileSync(`/proc/${pid}/stat`, "utf8")
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
    return (Number(fields[11]) + Number(fields[12])) * 10_000
  } catch {
    return Number.NaN
  }
}

/**
 * Time on CPU of every thread of a process, in ns: the sum of the first field of
 * `/proc/<pid>/task/<tid>/schedstat` (the scheduler's own count, not 10 ms ticks), which short bursts
 * such as one wake line need; `/proc/<pid>/stat` in ticks where schedstat is missing.
 */
export const processCpuNs = (pid: number | undefined): number => {
  let ns = 0
  let read = 0
  try {
    for (const tid of Fs.readdirSync(`/proc/${pid}/task`)) {
      try {
        ns += Number(Fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, "utf8").split(" ")[0])
        read++
      } catch {
        // A thread that ended between the listing and the read.
      }
    }
  } catch {
    // The process is gone, or /proc has no task directory: the ticks below say which.
  }
  return read > 0 ? ns : processCpuUs(pid) * 1000
}

export const isEvent = (event: string) => (line: string) => line.startsWith(`{"event":"${event}"`)

export interface CliOptions {
  readonly secret: string
  readonly freePort: () => Promise<number>
  /** Extra `node` flags for a role (`cli-mesh-a`, `cli-base-b`, ...), e.g. `--cpu-prof`. */
  readonly execArgv: (role: string) => ReadonlyArray<string>
  readonly onStart?: (node: CliNode) => void
  /** The `upstream-mesh-node` binary; the `upstream` kind needs it. */
  readonly upstream?: string
}

/** The environment of a `queen-mesh node` (or the CLI baseline) on loopback, HTTP on an ephemeral port. */
export const envFor = (
  options: Pick<CliOptions, "secret">,
  serverId: string,
  port: number,
  peers: ReadonlyArray<number>
): Record<string, string> => ({
  QUEEN_SERVER_ID: serverId,
  QUEEN_MESH_PORT: String(port),
  QUEEN_MESH_BIND_ADDR: "127.0.0.1",
  QUEEN_MESH_PEERS: peers.map((p) => `127.0.0.1:${p}`).join(","),
  QUEEN_SYNC_SECRET: options.secret,
  QUEEN_MESH_HTTP_HOST: "127.0.0.1",
  QUEEN_MESH_HTTP_PORT: "0",
  QUEEN_MESH_LOG_LEVEL: "warning",
  NO_COLOR: "1"
})

/** What a start adds to a node of ours or the baseline: node flags, arguments, environment. */
export interface StartExtra {
  readonly execArgv?: ReadonlyArray<string>
  readonly args?: ReadonlyArray<string>
  readonly env?: Record<string, string>
}

/**
 * Starts a node of `kind` as `serverId` on `port`, dialling `peers` on 127.0.0.1. Ours and the
 * baseline read the `QUEEN_*` environment; upstream's harness takes `<server_id> <mesh_port> <peers>
 * <secret> <heartbeat_ms> <dead_ms>` (the same 1 s heartbeat and 5 s dead threshold as ours). Upstream
 * binds 0.0.0.0 (hard-coded there); it is only ever dialled on 127.0.0.1.
 */
export const startNode = (
  options: CliOptions,
  kind: CliKind,
  serverId: string,
  port: number,
  peers: ReadonlyArray<number>,
  extra: StartExtra = {}
): CliNode => {
  let node: CliNode
  if (kind === "upstream") {
    if (options.upstream === undefined) throw new Error("the upstream kind needs options.upstream")
    const list = peers.length === 0 ? "-" : peers.map((p) => `127.0.0.1:${p}`).join(",")
    node = new CliNode(
      kind,
      { file: options.upstream, args: [serverId, String(port), list, options.secret, "1000", "5000"] },
      {}
    )
  } else {
    node = new CliNode(
      kind,
      {
        file: process.execPath,
        args: [
          ...options.execArgv(serverId),
          ...(extra.execArgv ?? []),
          ...scripts[kind],
          ...(extra.args ?? [])
        ]
      },
      { ...envFor(options, serverId, port, peers), ...extra.env }
    )
  }
  options.onStart?.(node)
  return node
}

const UpstreamStats = Schema.fromJsonString(
  Schema.Struct({
    event: Schema.Literal("stats"),
    body: Schema.Struct({
      peers: Schema.Array(Schema.Struct({ connected: Schema.Boolean })),
      servers_alive: Schema.Number
    })
  })
)
const decodeUpstreamStats = Schema.decodeUnknownSync(UpstreamStats)

/** Upstream's stats body (the fields read here), asked for with the harness's `stats` command. */
export const upstreamStats = async (node: CliNode) => {
  const line = node.waitFor(isEvent("stats"), 5_000, "stats")
  node.write("stats\n")
  return decodeUpstreamStats(await line).body
}

/**
 * Upstream's harness prints no `peer_up`: ask for its `stats` until its outbound links are connected
 * and `peers` peers' HELLOs have been heard on inbound ones (`servers_alive`).
 */
export const upstreamLinked = async (node: CliNode, peers: number, ms: number): Promise<void> => {
  const deadline = Date.now() + ms
  for (;;) {
    const body = await upstreamStats(node)
    if (body.peers.every((p) => p.connected) && body.servers_alive >= peers) return
    if (Date.now() > deadline) throw new Error(`upstream node: links not up within ${ms} ms`)
    await sleep(50)
  }
}

/** Two nodes of `kind` dialling each other, both having heard the other's HELLO. */
const pair = async (options: CliOptions, kind: CliKind, extra: StartExtra = {}) => {
  const portA = await options.freePort()
  const portB = await options.freePort()
  const b = startNode(options, kind, `cli-${kind}-b`, portB, [portA], extra)
  const a = startNode(options, kind, `cli-${kind}-a`, portA, [portB], extra)
  if (kind === "upstream") {
    await Promise.all([
      a.waitFor(isEvent("listening"), 15_000, "listening on A"),
      b.waitFor(isEvent("listening"), 15_000, "listening on B")
    ])
    await Promise.all([upstreamLinked(a, 1, 15_000), upstreamLinked(b, 1, 15_000)])
  } else {
    await Promise.all([
      a.waitFor(isEvent("peer_up"), 15_000, "peer_up on A"),
      b.waitFor(isEvent("peer_up"), 15_000, "peer_up on B")
    ])
  }
  return { a, b }
}

/**
 * The tenant of every push: a UUID, lowercase, because upstream reads any other tenant as absent
 * (`frame_tenant`), and so does `queen-mesh node` under `QUEEN_MESH_TENANTS=uuid`, which also refuses
 * one on stdin; so all three kinds send and print the same thing. A bare `ma <queue> <partition>`
 * would send upstream's default-tenant UUID instead.
 */
export const TENANT = "a0000000-0000-4000-8000-000000000001"

/**
 * The stdin line that pushes `partition` of `queue` for {@link TENANT}, for each kind: the frame on the
 * wire is the same for all three (`{"queue","partition","tenant"}`).
 */
export const pushLine = (kind: CliKind, partition: string, queue = "orders"): string =>
  kind === "upstream"
    ? `ma ${queue} ${partition} ${TENANT}\n`
    : `{"op":"message_available","queue":"${queue}","partition":"${partition}","tenant":"${TENANT}"}\n`

export interface CliWakePlan {
  readonly warmup: number
  readonly measured: number
  readonly block: number
}

/**
 * stdin on A to the `wake` line on B's stdout, one at a time, the kinds in alternating blocks (the
 * first round of each block and the warm-up dropped). One-way µs, both stamps in the driver.
 */
export const cliWake = async (
  options: CliOptions,
  plan: CliWakePlan,
  kinds: ReadonlyArray<CliKind> = ["mesh", "base"],
  extra: StartExtra = {}
): Promise<CliWakeResult> => {
  const pairs = []
  // Node processes carry the tail probe (bench/tailProbe.ts); upstream's Rust has no collector.
  const tail = Tail.probe()
  const withProbe = (kind: CliKind): StartExtra =>
    kind === "upstream"
      ? extra
      : {
          ...extra,
          execArgv: [...tail.execArgv, ...(extra.execArgv ?? [])],
          env: { ...extra.env, ...tail.env }
        }
  try {
    for (const kind of kinds)
      pairs.push({
        kind,
        ...(await pair(options, kind, withProbe(kind))),
        done: 0,
        kept: [] as Array<Tail.Stamped>
      })
    const total = plan.warmup + plan.measured
    while (pairs.some((p) => p.done < total)) {
      for (const p of pairs) {
        const end = Math.min(total, p.done + (p.done < plan.warmup ? plan.warmup : plan.block + 1))
        const first = p.done
        for (; p.done < end; p.done++) {
          const partition = `p-${p.done}`
          const line = pushLine(p.kind, partition)
          const needle = `"partition":"${partition}"`
          let sent = 0
          const woke = await new Promise<number>((resolve, reject) => {
            const timer = setTimeout(
              () => reject(new Error(`${p.kind} CLI: wake ${p.done} never arrived`)),
              10_000
            )
            p.b.onLine = (text, at) => {
              if (text.includes(needle)) {
                clearTimeout(timer)
                resolve(at)
              }
            }
            sent = nowNs()
            p.a.write(line)
          })
          if (p.done >= plan.warmup && p.done !== first) p.kept.push({ sentNs: sent, wokeNs: woke })
        }
      }
    }
    const wake: Partial<Record<CliKind, Distribution>> = {}
    const tails: Partial<Record<CliKind, Tail.Attribution | null>> = {}
    for (const p of pairs) {
      const kept = p.kept.slice(0, plan.measured)
      wake[p.kind] = distribution(kept.map((s) => (s.wokeNs - s.sentNs) / 1000))
      if (p.kind === "upstream") continue
      const [a, b] = await Promise.all([
        Tail.collect(tail.dir, p.a.process.pid),
        Tail.collect(tail.dir, p.b.process.pid)
      ])
      tails[p.kind] =
        a === undefined || b === undefined ? null : Tail.attribute(kept, { sender: a.gcs, receiver: b.gcs })
    }
    return { wake, tail: tails }
  } finally {
    await Promise.all(pairs.flatMap((p) => [p.a.stop(), p.b.stop()]))
    Fs.rmSync(tail.dir, { recursive: true, force: true })
  }
}

/** Each kind's wake distribution, and for the Node kinds where the tail came from. */
export interface CliWakeResult {
  readonly wake: Partial<Record<CliKind, Distribution>>
  readonly tail: Partial<Record<CliKind, Tail.Attribution | null>>
}

export interface CliReceiveResult {
  readonly frames: number
  readonly printed: number
  readonly linesPerSec: number
  readonly cpuUsPerLine: number
  readonly wallMs: number
  /** Lines that never came: dropped by the node at its stdout limit. */
  readonly lost: number
}

/**
 * A node of `kind` receiving `frames` frames from `startSender(port)` (which resolves when the sender
 * is done) and printing a line each. Measured from the first `wake` line to the last; lines lost to
 * the node's stdout limit show as `printed < frames`.
 */
export const cliReceive = async (
  options: CliOptions,
  kind: CliKind,
  frames: number,
  startSender: (port: number) => Promise<() => Promise<void>>
): Promise<CliReceiveResult> => {
  const port = await options.freePort()
  const node = startNode(options, kind, `cli-${kind}-recv`, port, [await options.freePort()])
  let stopSender: (() => Promise<void>) | undefined
  try {
    await node.waitFor(isEvent("listening"), 15_000, "listening")
    let printed = 0
    let first = 0
    let last = 0
    let cpuStart = 0
    let finish: () => void = () => {}
    const finished = new Promise<void>((resolve) => {
      finish = resolve
    })
    let idle: NodeJS.Timeout | undefined
    // Every line from here on is a wake line but the sender's one `peer_up` (upstream: its log lines,
    // such as "started", which may follow `listening`).
    const PEER_UP = Buffer.from('"peer_up"')
    const LOG = Buffer.from('{"event":"log"')
    // The window opens at the first chunk of wake lines, so those lines are not in the rate.
    let firstLines = 0
    node.counter = (chunk, at) => {
      let lines = 0
      for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10, nl + 1)) lines++
      for (let p = chunk.indexOf(PEER_UP); p >= 0; p = chunk.indexOf(PEER_UP, p + 1)) lines--
      for (let p = chunk.indexOf(LOG); p >= 0; p = chunk.indexOf(LOG, p + 1)) lines--
      if (lines <= 0) return
      if (printed === 0) {
        first = at
        firstLines = lines
        cpuStart = node.cpuUs()
      }
      printed += lines
      last = at
      if (printed >= frames) finish()
      // A node that dropped lines never reaches `frames`: stop once nothing came for a second.
      if (idle !== undefined) clearTimeout(idle)
      idle = setTimeout(finish, 1_000)
    }
    stopSender = await startSender(port)
    await Promise.race([
      finished,
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error(`${kind} CLI receive: nothing printed`)), 120_000).unref()
      )
    ])
    if (idle !== undefined) clearTimeout(idle)
    const cpu = node.cpuUs() - cpuStart
    const wallNs = last - first
    const counted = Math.max(1, printed - firstLines)
    return {
      frames,
      printed,
      linesPerSec: Math.round((counted / wallNs) * 1e9),
      cpuUsPerLine: Math.round((cpu / counted) * 1000) / 1000,
      wallMs: Math.round(wallNs / 1e5) / 10,
      lost: frames - printed
    }
  } finally {
    await stopSender?.()
    await node.stop()
  }
}

export interface CliQuietReceiveResult {
  readonly frames: number
  /** Frames the node counted by the end of the window. */
  readonly counted: number
  readonly framesPerSec: number
  readonly cpuUsPerFrame: number
  readonly wallMs: number
  readonly polls: number
}

/** `messages_received` from a node's stats route (ours: the whole stats body; the baseline: a counter). */
const QuietCount = Schema.fromJsonString(Schema.Struct({ messages_received: Schema.Number }))
const decodeQuietCount = Schema.decodeUnknownSync(QuietCount)

const fetchCount = async (url: string): Promise<number> => {
  const response = await fetch(url)
  return decodeQuietCount(await response.text()).messages_received
}

/**
 * A node of `kind` with its wake lines off (`queen-mesh node --quiet`; the baseline with
 * `QUEEN_BENCH_QUIET=1`) receiving `frames` frames from `startSender(port)`, counted by polling its
 * stats route every `pollMs`: frames/s is the count's growth between the first poll that saw a frame
 * and the first that saw them all (so the poll's granularity cancels out), and the node's CPU over the
 * same window, the polls' cost included.
 */
export const cliReceiveQuiet = async (
  options: CliOptions,
  kind: "mesh" | "base",
  frames: number,
  startSender: (port: number) => Promise<() => Promise<void>>,
  pollMs = 50
): Promise<CliQuietReceiveResult> => {
  const port = await options.freePort()
  const node = startNode(options, kind, `cli-${kind}-quiet`, port, [await options.freePort()], {
    args: kind === "mesh" ? ["--quiet"] : [],
    env: kind === "base" ? { QUEEN_BENCH_QUIET: "1" } : {}
  })
  let stopSender: (() => Promise<void>) | undefined
  try {
    const listening = await node.waitFor(isEvent("listening"), 15_000, "listening")
    const httpPort = Schema.decodeUnknownSync(
      Schema.fromJsonString(Schema.Struct({ http_port: Schema.Number }))
    )(listening).http_port
    const url =
      kind === "mesh"
        ? `http://127.0.0.1:${httpPort}/internal/api/shared-state/stats`
        : `http://127.0.0.1:${httpPort}/`
    stopSender = await startSender(port)
    let first: { at: number; count: number; cpu: number } | undefined
    let last = { at: 0, count: 0 }
    let polls = 0
    const deadline = Date.now() + 120_000
    let stalledSince = Date.now()
    for (;;) {
      const count = await fetchCount(url)
      const at = nowNs()
      polls++
      if (count > 0 && first === undefined) first = { at, count, cpu: node.cpuNs() }
      if (count > last.count) stalledSince = Date.now()
      last = { at, count }
      if (count >= frames) break
      // A node that lost frames never reaches `frames`: stop once the count stood still for a second.
      if (first !== undefined && Date.now() - stalledSince > 1_000) break
      if (Date.now() > deadline)
        throw new Error(`${kind} CLI quiet receive: ${count} of ${frames} frames in 120 s`)
      await sleep(pollMs)
    }
    const cpu = (node.cpuNs() - (first?.cpu ?? 0)) / 1000
    const start = first ?? last
    const wallNs = Math.max(1, last.at - start.at)
    const grown = Math.max(1, last.count - start.count)
    return {
      frames,
      counted: last.count,
      framesPerSec: Math.round((grown / wallNs) * 1e9),
      cpuUsPerFrame: Math.round((cpu / grown) * 1000) / 1000,
      wallMs: Math.round(wallNs / 1e5) / 10,
      polls
    }
  } finally {
    await stopSender?.()
    await node.stop()
  }
}
