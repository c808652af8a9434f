/**
 * A full mesh of N `queen-mesh node` processes on loopback (membership issue, item 5): one process per
 * node, every node listing every other as a peer, driven through pipes by the driver process as a
 * script would; then, where it is built, the same with upstream's Rust mesh behind its harness
 * (`upstream-mesh-node`), for reference. For each N:
 *
 * - formation: from spawning the N processes to every node reporting every outbound link connected
 *   and N - 1 authenticated inbound links (`GET /internal/api/shared-state/stats`), polled;
 * - connections per node, from the same stats body: outbound `peers[].connected`, inbound
 *   `inbound.authenticated` (and `inbound.open`); upstream's harness answers `stats` on stdin, and
 *   counts no inbound sockets, only the peers heard on them (`servers_alive`);
 * - wake latency across the mesh: a `message_available` line on one node's stdin (the sender rotates
 *   round by round) to the `wake` line on every other node's stdout, both stamps in the driver; per
 *   receiver, and per push until the last receiver woke;
 * - CPU per wake per node: time on CPU of every thread of every node (`/proc/<pid>/task/<tid>/schedstat`)
 *   over the measured rounds, per wake line delivered (the senders' share included), gross and net of
 *   the idle rate;
 * - idle cost per node: CPU ms per minute of each node over a window with heartbeats only, and RSS;
 * - the time for a new member found by discovery (`QUEEN_MESH_DISCOVERY=dns:<name>`, a private hosts
 *   file per node) to receive its first wake, from its spawn and from its `listening` line (see
 *   `discoveryFirstWake`; skipped, saying why, without root or `unshare -m`).
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Schema } from "effect"
import {
  CliNode,
  type CliOptions,
  cliEntry,
  isEvent,
  pushLine,
  type StartExtra,
  startNode,
  upstreamStats
} from "./cli.js"
import { nowNs } from "./ipc.js"
import { distribution, mean, percentile, round, sleep } from "./stats.js"
import * as Tail from "./tail.js"

export interface ClusterPlan {
  /** Mesh sizes, one run each. */
  readonly sizes: ReadonlyArray<number>
  /**
   * Warm-up lines written to every node's stdin in quick bursts before measuring, so each node sends
   * as many and receives N - 1 times as many: a node's CPU per wake falls by half or more over its
   * first few thousand lines as V8 optimizes, and one push at a time at N = 16 would take minutes.
   */
  readonly warmupLinesPerNode: number
  /** Then one-at-a-time pushes per node, as measured, to warm the idle-to-wake path too. */
  readonly warmupPushesPerNode: number
  /** Pushes measured, the sender rotating over the nodes. */
  readonly rounds: number
  /**
   * A pause before the idle window, so the full collections V8 schedules once the warm-up's garbage
   * stops (its memory reducer: a few, seconds apart) fall before the window rather than in it or not
   * by chance: one such collection is tens of ms, as much as a small mesh's whole idle minute.
   */
  readonly idleSettleMs: number
  /** The idle window, heartbeats only. */
  readonly idleMs: number
  /** The discovery join ({@link discoveryFirstWake}); {@link discoveryDefaults} for what is left out. */
  readonly discovery?: Partial<DiscoveryPlan>
}

/** Our CLI, the lean hand-written CLI baseline (`bench/cliBaseline.ts`), or upstream's Rust mesh. */
export type ClusterKind = "mesh" | "base" | "upstream"

export interface ClusterOptions {
  /** How nodes are started (`upstream` set for the upstream kind); `onStart` sees every process. */
  readonly cli: CliOptions
  readonly progress: (text: string) => void
}

const MiB = 1024 * 1024

const Listening = Schema.fromJsonString(
  Schema.Struct({ event: Schema.Literal("listening"), http_port: Schema.Number })
)

/** The fields of `MeshStats.StatsBody` read here (the rest is ignored). */
const Stats = Schema.fromJsonString(
  Schema.Struct({
    peers: Schema.Array(Schema.Struct({ connected: Schema.Boolean, self: Schema.optional(Schema.Boolean) })),
    inbound: Schema.Struct({ open: Schema.Number, authenticated: Schema.Number })
  })
)
type Stats = typeof Stats.Type

const getText = (port: number, path: string): Promise<string> =>
  new Promise((resolve, reject) => {
    const request = Http.get({ host: "127.0.0.1", port, path, agent: false, timeout: 5_000 }, (response) => {
      let body = ""
      response.setEncoding("utf8")
      response.on("data", (chunk: string) => {
        body += chunk
      })
      response.on("end", () => resolve(body))
      response.on("error", reject)
    })
    request.on("timeout", () => request.destroy(new Error(`GET ${path} timed out`)))
    request.on("error", reject)
  })

const statsOf = async (httpPort: number): Promise<Stats> =>
  Schema.decodeUnknownSync(Stats)(await getText(httpPort, "/internal/api/shared-state/stats"))

/** The sender's entry for one peer (the fields read here). */
const PeerEntry = Schema.fromJsonString(
  Schema.Struct({
    peers: Schema.Array(
      Schema.Struct({
        host: Schema.String,
        dropped_down: Schema.Number,
        last_error: Schema.NullOr(Schema.String)
      })
    )
  })
)

/** A node's links as its stats see them: outbound connected, inbound authenticated (and open). */
interface Links {
  readonly outbound: number
  readonly inbound: number
  readonly inboundOpen: number | null
}

interface Member {
  readonly node: CliNode
  readonly links: () => Promise<Links>
}

const meshLinks = async (httpPort: number): Promise<Links> => {
  const stats = await statsOf(httpPort)
  return {
    outbound: stats.peers.filter((p) => !p.self && p.connected).length,
    inbound: stats.inbound.authenticated,
    inboundOpen: stats.inbound.open
  }
}

const upstreamLinks = async (node: CliNode): Promise<Links> => {
  const body = await upstreamStats(node)
  return {
    outbound: body.peers.filter((p) => p.connected).length,
    inbound: body.servers_alive,
    inboundOpen: null
  }
}

const BaseStats = Schema.fromJsonString(
  Schema.Struct({ event: Schema.Literal("stats"), outbound: Schema.Number, inbound: Schema.Number })
)

/** The CLI baseline's links, from its `{"op":"stats"}` answer (dialled links up, HELLOs accepted). */
const baseLinks = async (node: CliNode): Promise<Links> => {
  const line = node.waitFor(isEvent("stats"), 5_000, "stats")
  node.write(`{"op":"stats"}\n`)
  const stats = Schema.decodeUnknownSync(BaseStats)(await line)
  return { outbound: stats.outbound, inbound: stats.inbound, inboundOpen: null }
}

const fullyLinked = (links: Links, others: number): boolean =>
  links.outbound >= others && links.inbound >= others

/** Min, mean and max of a list. */
const spread = (values: ReadonlyArray<number>, digits = 1) => ({
  min: round(Math.min(...values), digits),
  mean: round(mean(values), digits),
  max: round(Math.max(...values), digits)
})

/** How the discovery join is measured; the defaults stand where a plan leaves them out. */
export interface DiscoveryPlan {
  /** Nodes already meshed through discovery when each new one joins. */
  readonly existing: number
  /** Joins measured, one new node each, one after the other. */
  readonly joins: number
  /** `QUEEN_MESH_DISCOVERY_INTERVAL_MS` of every node. */
  readonly intervalMs: number
  /** A push on an existing node every so often, from the new node's `listening` to its first wake. */
  readonly pushEveryMs: number
}

export const discoveryDefaults: DiscoveryPlan = { existing: 3, joins: 5, intervalMs: 1_000, pushEveryMs: 2 }

/** The name every node resolves (only in the nodes' private hosts file). */
const DISCOVERY_NAME = "queen-mesh-bench-headless.test"
/** The tenant of the discovery pushes: a UUID, as `QUEEN_MESH_TENANTS=uuid` (the default) requires. */
const DISCOVERY_TENANT = "ac3e0000-0000-4000-8000-00000000ac3e"
/** Existing nodes on 127.0.0.2, .3, ...; the joiners after them, a fresh address each. */
const discoveryAddress = (i: number): string => `127.0.0.${2 + i}`

/** Min, median (p50), p99 and max of a few samples (nearest rank: p99 is the max under 100 samples). */
export interface FewSamples {
  readonly n: number
  readonly min: number
  readonly p50: number
  readonly p99: number
  readonly max: number
}

const fewSamples = (values: ReadonlyArray<number>): FewSamples => ({
  n: values.length,
  min: round(Math.min(...values), 1),
  p50: round(percentile(values, 50), 1),
  p99: round(percentile(values, 99), 1),
  max: round(Math.max(...values), 1)
})

/** One join: the new node's address, who pushed, and its times (ms). */
export interface DiscoveryJoin {
  readonly address: string
  /** The existing node whose stdin carried the pushes (rotating over joins). */
  readonly sender: string
  /** The random pause before the spawn, so the joins fall anywhere in the others' discovery rounds. */
  readonly offsetMs: number
  readonly spawnToListeningMs: number
  readonly spawnToFirstWakeMs: number
  readonly listeningToFirstWakeMs: number
  /** Pushes written from `listening` to the first wake. */
  readonly pushesSent: number
  /** Which of them (0-based) the first wake was for: the pushes before it reached no link to the new node. */
  readonly wokenByPush: number
  /** That push's stdin write to the wake line: delivery once linked, as against waiting for the link. */
  readonly wokenByPushAgeMs: number
  /** The `from` of the first wake line (the server id that sent it). */
  readonly from: string
  /**
   * The sender's stats for the new peer just after the first wake: why its last dial failed (`null`:
   * none did; `refused`: it found the address before the new node listened, and then waited on its
   * reconnect back-off), and the pushes it dropped while the link was down.
   */
  readonly senderLastError: string | null
  readonly senderDroppedDown: number | null
}

export type DiscoveryFirstWake =
  | {
      readonly status: "measured"
      /** The name every node resolves through its private hosts file (`dns.lookup`, `multi on`). */
      readonly name: string
      readonly existingNodes: number
      readonly intervalMs: number
      readonly pushEveryMs: number
      readonly joins: number
      /** The existing nodes' spawn to full mesh (every outbound link connected, N - 1 inbound authenticated). */
      readonly existingFormationMs: number
      readonly spawnToListeningMs: FewSamples
      readonly spawnToFirstWakeMs: FewSamples
      readonly listeningToFirstWakeMs: FewSamples
      readonly perJoin: ReadonlyArray<DiscoveryJoin>
    }
  | { readonly status: "skipped"; readonly reason: string }
  | { readonly status: "failed"; readonly reason: string }

const here = Path.dirname(fileURLToPath(import.meta.url))

/** Why the discovery join cannot be measured here, or undefined. */
const discoveryUnavailable = (
  wrap: (command: ReadonlyArray<string>) => ReadonlyArray<string>,
  hosts: string
) => {
  try {
    if (!Fs.readFileSync(Path.resolve(here, "../src/cli/env.js"), "utf8").includes("QUEEN_MESH_DISCOVERY"))
      return "this build of the CLI has no QUEEN_MESH_DISCOVERY"
  } catch (error) {
    return `cannot read the compiled CLI: ${error instanceof Error ? error.message : String(error)}`
  }
  if (process.getuid?.() !== 0)
    return "not root: a private mount namespace with its own /etc/hosts needs root"
  try {
    ChildProcess.execFileSync("unshare", ["-m", "--propagation", "private", "true"], {
      stdio: "ignore",
      timeout: 10_000
    })
  } catch (error) {
    return `unshare -m failed here: ${error instanceof Error ? error.message : String(error)}`
  }
  // The whole path once: the bind mounts, and the name resolving to every address in the file.
  const expected = Fs.readFileSync(hosts, "utf8")
    .split("\n")
    .filter((line) => line.endsWith(` ${DISCOVERY_NAME}`)).length
  try {
    const command = wrap([
      process.execPath,
      "-e",
      `require("node:dns").lookup(${JSON.stringify(DISCOVERY_NAME)},{all:true},(e,a)=>{process.stdout.write(e?"error "+e.code:String(a.length))})`
    ])
    const out = ChildProcess.execFileSync(command[0]!, command.slice(1), {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
      timeout: 10_000
    })
    if (out !== String(expected))
      return `the private hosts file does not resolve ${DISCOVERY_NAME} to its ${expected} addresses (got ${out})`
  } catch (error) {
    return `the private mount namespace failed here: ${error instanceof Error ? error.message : String(error)}`
  }
  return undefined
}

/**
 * The hosts file the discovery nodes resolve the name through (with `multi on` in a host.conf beside
 * it), and the command prefix that runs a process in a private mount namespace with both mounted over
 * /etc. Rewritten in place (same inode), as the nodes see the file through a bind mount.
 */
class DiscoveryHosts {
  readonly dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-bench-dns-"))
  readonly hosts = Path.join(this.dir, "hosts")
  private readonly conf = Path.join(this.dir, "host.conf")
  private listed: ReadonlyArray<string> = []

  /** The files, the name listing `addresses`. */
  init(addresses: ReadonlyArray<string>): void {
    this.write(addresses)
    Fs.writeFileSync(this.conf, "multi on\n")
  }

  private write(addresses: ReadonlyArray<string>): void {
    this.listed = addresses
    const lines = addresses.map((address) => `${address} ${DISCOVERY_NAME}\n`).join("")
    Fs.writeFileSync(this.hosts, `127.0.0.1 localhost\n${lines}`)
  }

  add(address: string): void {
    this.write([...this.listed, address])
  }

  remove(address: string): void {
    this.write(this.listed.filter((a) => a !== address))
  }

  readonly wrap = (command: ReadonlyArray<string>): ReadonlyArray<string> => [
    "unshare",
    "-m",
    "--propagation",
    "private",
    "sh",
    "-c",
    'mount --bind "$0" /etc/hosts && mount --bind "$1" /etc/host.conf && shift && exec "$@"',
    this.hosts,
    this.conf,
    ...command
  ]

  dispose(): void {
    Fs.rmSync(this.dir, { recursive: true, force: true })
  }
}

/** What every discovery node shares: the hosts, the one mesh port, the plan; the nodes still running. */
interface DiscoveryRun {
  readonly options: ClusterOptions
  readonly plan: DiscoveryPlan
  readonly hosts: DiscoveryHosts
  readonly port: number
  readonly nodes: Array<CliNode>
}

/** An existing discovery node, with its HTTP port. */
interface Existing {
  readonly id: string
  readonly node: CliNode
  readonly httpPort: number
}

/** A `queen-mesh node` on `address` in its private mount namespace, found by discovery alone. */
const startDiscoveryNode = (run: DiscoveryRun, serverId: string, address: string): CliNode => {
  const { options, plan } = run
  const command = run.hosts.wrap([process.execPath, ...options.cli.execArgv(serverId), cliEntry, "node"])
  const node = new CliNode(
    "mesh",
    { file: command[0]!, args: command.slice(1) },
    {
      QUEEN_SERVER_ID: serverId,
      QUEEN_MESH_PORT: String(run.port),
      QUEEN_MESH_BIND_ADDR: address,
      QUEEN_MESH_DISCOVERY: `dns:${DISCOVERY_NAME}`,
      QUEEN_MESH_DISCOVERY_INTERVAL_MS: String(plan.intervalMs),
      QUEEN_SYNC_SECRET: options.cli.secret,
      QUEEN_MESH_HTTP_HOST: "127.0.0.1",
      QUEEN_MESH_HTTP_PORT: "0",
      QUEEN_MESH_LOG_LEVEL: "warning",
      NO_COLOR: "1"
    }
  )
  options.cli.onStart?.(node)
  run.nodes.push(node)
  return node
}

/** The existing nodes started on `addresses` and linked into a full mesh; ms from spawn to that. */
const formExisting = async (run: DiscoveryRun, addresses: ReadonlyArray<string>) => {
  const spawned = nowNs()
  const started = addresses.map((address, i) => ({
    id: `dns-${i}`,
    node: startDiscoveryNode(run, `dns-${i}`, address)
  }))
  const existing: ReadonlyArray<Existing> = await Promise.all(
    started.map(async (e) => ({
      ...e,
      httpPort: Schema.decodeUnknownSync(Listening)(
        await e.node.waitFor(isEvent("listening"), 30_000, "listening")
      ).http_port
    }))
  )
  const deadline = Date.now() + 30_000
  for (;;) {
    const links = await Promise.all(existing.map((e) => meshLinks(e.httpPort)))
    if (links.every((l) => fullyLinked(l, run.plan.existing - 1))) break
    if (Date.now() > deadline)
      throw new Error(`the ${run.plan.existing} discovery nodes were not a full mesh after 30 s`)
    await sleep(50)
  }
  return { existing, formationMs: round((nowNs() - spawned) / 1e6, 0) }
}

/** The pushes of one join: when each was written, and the timer writing them. */
interface Pushes {
  readonly at: Array<number>
  timer: NodeJS.Timeout | undefined
}

interface FirstWake {
  readonly listening: number
  readonly woke: number
  /** Which push woke it. */
  readonly push: number
  readonly from: string
}

/**
 * From the joiner's `listening` line, a push on `sender` every `pushEveryMs`, until the joiner prints
 * the wake of one of them (or exits, or `limitMs` pass).
 */
const awaitFirstWake = (joiner: CliNode, sender: Existing, j: number, plan: DiscoveryPlan, pushes: Pushes) =>
  new Promise<FirstWake>((resolve, reject) => {
    // Start-up, then the others' next round and their reconnect back-off, with room to spare.
    const limitMs = 10 * plan.intervalMs + 20_000
    let listening = 0
    const fail = (what: string) =>
      reject(new Error(`discovery join ${j}: ${what}; stderr: ${joiner.stderr.slice(-500)}`))
    const limit = setTimeout(() => {
      joiner.onLine = undefined
      fail(
        `${listening === 0 ? "no listening line" : `no wake after ${pushes.at.length} pushes`} within ${limitMs} ms`
      )
    }, limitMs)
    // A node that dies on the way says so at once, not at the limit.
    joiner.process.once("exit", (code, signal) => {
      clearTimeout(limit)
      fail(`the new node exited (${signal ?? code}) before its first wake`)
    })
    const push = () => {
      const k = pushes.at.length
      pushes.at.push(nowNs())
      sender.node.write(
        `{"op":"message_available","queue":"discovery","partition":"d${j}-${k}","tenant":"${DISCOVERY_TENANT}"}\n`
      )
    }
    joiner.onLine = (text, at) => {
      if (listening === 0 && isEvent("listening")(text)) {
        listening = at
        push()
        pushes.timer = setInterval(push, plan.pushEveryMs)
        return
      }
      if (!isEvent("wake")(text)) return
      const match = new RegExp(`"partition":"d${j}-(\\d+)"`).exec(text)
      if (match === null) return
      joiner.onLine = undefined
      clearTimeout(limit)
      clearInterval(pushes.timer)
      const from = /"from":"([^"]*)"/.exec(text)
      resolve({ listening, woke: at, push: Number(match[1]), from: from?.[1] ?? "" })
    }
  })

/** Join `j`: a random pause, the new address listed, the node spawned, to its first wake; then it goes. */
const join = async (
  run: DiscoveryRun,
  existing: ReadonlyArray<Existing>,
  j: number
): Promise<DiscoveryJoin> => {
  const offsetMs = Math.round(Math.random() * run.plan.intervalMs)
  await sleep(offsetMs)
  const address = discoveryAddress(run.plan.existing + j)
  const sender = existing[j % existing.length]!
  // Its record first, then the process, as a headless Service publishes it.
  run.hosts.add(address)
  const pushes: Pushes = { at: [], timer: undefined }
  const t0 = nowNs()
  const joiner = startDiscoveryNode(run, `dns-join-${j}`, address)
  try {
    const times = await awaitFirstWake(joiner, sender, j, run.plan, pushes)
    const entry = await getText(sender.httpPort, "/internal/api/shared-state/stats")
      .then((body) => Schema.decodeUnknownSync(PeerEntry)(body).peers.find((p) => p.host === address))
      .catch(() => undefined)
    return {
      address,
      sender: sender.id,
      offsetMs,
      spawnToListeningMs: round((times.listening - t0) / 1e6, 1),
      spawnToFirstWakeMs: round((times.woke - t0) / 1e6, 1),
      listeningToFirstWakeMs: round((times.woke - times.listening) / 1e6, 1),
      pushesSent: pushes.at.length,
      wokenByPush: times.push,
      wokenByPushAgeMs: round((times.woke - pushes.at[times.push]!) / 1e6, 2),
      from: times.from,
      senderLastError: entry?.last_error ?? null,
      senderDroppedDown: entry?.dropped_down ?? null
    }
  } finally {
    clearInterval(pushes.timer)
    await joiner.stop()
    run.nodes.splice(run.nodes.indexOf(joiner), 1)
    run.hosts.remove(address)
  }
}

/**
 * The time for a new member found by discovery to receive its first wake. `existing` `queen-mesh node`
 * processes on 127.0.0.2, .3, ... share one mesh port and `QUEEN_MESH_DISCOVERY=dns:<name>` at
 * `intervalMs`, the name resolving to every one of them through a hosts file; each runs in a private
 * mount namespace with that file over /etc/hosts (and `multi on` in /etc/host.conf), as
 * `test/Discovery.process.int.test.ts` does, so it needs root and `unshare -m` (else `skipped`, saying
 * why). Once they are a full mesh, each join, after a random pause of up to one interval: the new
 * address appended to the file in place (the running nodes see it at their next round), the new node
 * spawned on it, and from its `listening` line a push on one existing node (rotating) every
 * `pushEveryMs` until the new node prints its first `wake` line; then the new node stopped and its line
 * removed. Spawn to first wake and `listening` to first wake, stamped in the driver.
 */
export const discoveryFirstWake = async (
  options: ClusterOptions,
  plan: DiscoveryPlan = discoveryDefaults
): Promise<DiscoveryFirstWake> => {
  const hosts = new DiscoveryHosts()
  const nodes: Array<CliNode> = []
  try {
    const addresses = Array.from({ length: plan.existing }, (_, i) => discoveryAddress(i))
    hosts.init(addresses)
    const unavailable = discoveryUnavailable(hosts.wrap, hosts.hosts)
    if (unavailable !== undefined) return { status: "skipped", reason: unavailable }
    const run: DiscoveryRun = { options, plan, hosts, port: await options.cli.freePort(), nodes }
    options.progress(
      `discovery: ${plan.existing} nodes on one name (interval ${plan.intervalMs} ms), then ${plan.joins} joins to their first wake`
    )
    const { existing, formationMs } = await formExisting(run, addresses)
    const perJoin: Array<DiscoveryJoin> = []
    for (let j = 0; j < plan.joins; j++) perJoin.push(await join(run, existing, j))
    return {
      status: "measured",
      name: DISCOVERY_NAME,
      existingNodes: plan.existing,
      intervalMs: plan.intervalMs,
      pushEveryMs: plan.pushEveryMs,
      joins: plan.joins,
      existingFormationMs: formationMs,
      spawnToListeningMs: fewSamples(perJoin.map((r) => r.spawnToListeningMs)),
      spawnToFirstWakeMs: fewSamples(perJoin.map((r) => r.spawnToFirstWakeMs)),
      listeningToFirstWakeMs: fewSamples(perJoin.map((r) => r.listeningToFirstWakeMs)),
      perJoin
    }
  } catch (error) {
    return { status: "failed", reason: error instanceof Error ? error.message : String(error) }
  } finally {
    await Promise.all(nodes.map((node) => node.stop()))
    hosts.dispose()
  }
}

/** Resolves once no node printed a line for `ms` (at most `maxMs`). */
const quiet = async (nodes: ReadonlyArray<CliNode>, ms: number, maxMs: number): Promise<void> => {
  const deadline = Date.now() + maxMs
  let lines = -1
  for (;;) {
    const now = nodes.reduce((sum, node) => sum + node.lines, 0)
    if (now === lines || Date.now() > deadline) return
    lines = now
    await sleep(ms)
  }
}

/** `n` distinct free ports. */
const distinctPorts = async (options: ClusterOptions, n: number): Promise<Array<number>> => {
  const ports: Array<number> = []
  while (ports.length < n) {
    const port = await options.cli.freePort()
    if (!ports.includes(port)) ports.push(port)
  }
  return ports
}

/** A cluster being measured: its nodes of one kind, every one listing every other. */
interface Cluster {
  readonly name: string
  readonly kind: ClusterKind
  readonly n: number
  readonly nodes: Array<CliNode>
  readonly members: ReadonlyArray<Member>
}

/** Starts one node per port into `nodes`; resolves when all listen, with the last `listening` stamp. */
const startMembers = async (
  options: ClusterOptions,
  kind: ClusterKind,
  ports: ReadonlyArray<number>,
  nodes: Array<CliNode>,
  probe: StartExtra
) => {
  const n = ports.length
  for (let i = 0; i < n; i++) {
    const id = `${kind === "mesh" ? "cluster" : kind === "base" ? "bcluster" : "ucluster"}-${n}-${i}`
    nodes.push(
      startNode(
        options.cli,
        kind,
        id,
        ports[i]!,
        ports.filter((_, j) => j !== i),
        kind === "upstream" ? {} : probe
      )
    )
  }
  let lastListening = 0
  const members: Array<Member> = await Promise.all(
    nodes.map(async (node) => {
      const line = await node.waitFor(isEvent("listening"), 30_000 + n * 2_000, "listening")
      lastListening = Math.max(lastListening, nowNs())
      if (kind === "upstream") return { node, links: () => upstreamLinks(node) }
      if (kind === "base") return { node, links: () => baseLinks(node) }
      const httpPort = Schema.decodeUnknownSync(Listening)(line).http_port
      return { node, links: () => meshLinks(httpPort) }
    })
  )
  return { members, lastListening }
}

/** Formation: until every node sees every link, both ways (60 s at most); the links last seen. */
const awaitFormation = async (cluster: Cluster): Promise<Array<Links>> => {
  const deadline = Date.now() + 60_000
  for (;;) {
    const last = await Promise.all(cluster.members.map((m) => m.links()))
    if (last.every((s) => fullyLinked(s, cluster.n - 1))) return last
    if (Date.now() > deadline) {
      const short = last.filter((s) => !fullyLinked(s, cluster.n - 1)).length
      throw new Error(`${cluster.name}: ${short} node(s) without every link after 60 s`)
    }
    await sleep(100)
  }
}

/** Push `index` on node `index % n`, until every other node printed its wake; µs per receiver from the push. */
const pushToAll = async (cluster: Cluster, index: number): Promise<Array<Tail.Stamped>> => {
  const { n, members, name } = cluster
  const sender = index % n
  const partition = `c${index}`
  const needle = `"partition":"${partition}"`
  const woken: Array<Tail.Stamped> = []
  let sent = 0
  await new Promise<void>((resolve, reject) => {
    let left = n - 1
    const timer = setTimeout(
      () => reject(new Error(`${name}: push ${index} reached ${n - 1 - left} of ${n - 1} nodes`)),
      10_000
    )
    members.forEach((m, i) => {
      if (i === sender) {
        m.node.onLine = undefined
        return
      }
      m.node.onLine = (text, at) => {
        if (!text.includes(needle)) return
        m.node.onLine = undefined
        woken.push({ sentNs: sent, wokeNs: at })
        if (--left === 0) {
          clearTimeout(timer)
          resolve()
        }
      }
    })
    sent = nowNs()
    members[sender]!.node.write(pushLine(cluster.kind, partition))
  })
  return woken
}

const linesRead = (nodes: ReadonlyArray<CliNode>): number => nodes.reduce((sum, node) => sum + node.lines, 0)

/**
 * Bursts of 64 lines per node, well under a send queue (1024 frames), with a pause sized to the
 * 64 n (n - 1) wake lines each round makes the machine print (8 µs a line), so the warm-up exercises
 * the receive path rather than the drop path; then, once every node fell quiet, the one-at-a-time
 * pushes. The wake lines the bursts printed.
 */
const warmUp = async (cluster: Cluster, plan: ClusterPlan): Promise<number> => {
  const { n, nodes } = cluster
  const linesBefore = linesRead(nodes)
  for (let offset = 0; offset < plan.warmupLinesPerNode; offset += 64) {
    cluster.members.forEach((m, i) => {
      let text = ""
      for (let k = offset; k < Math.min(plan.warmupLinesPerNode, offset + 64); k++) {
        text += pushLine(cluster.kind, `w${i}-${k}`, "warm")
      }
      m.node.write(text)
    })
    await sleep(Math.max(2, (64 * n * (n - 1) * 8) / 1000))
  }
  await quiet(nodes, 500, 60_000)
  const printed = linesRead(nodes) - linesBefore
  for (let r = 0; r < plan.warmupPushesPerNode * n; r++) await pushToAll(cluster, r)
  return printed
}

/** Each node's time on CPU (µs) while `work` runs, and how long it ran (ns). */
const cpuOver = async (nodes: ReadonlyArray<CliNode>, work: () => Promise<void>) => {
  const cpu0 = nodes.map((node) => node.cpuNs())
  const t0 = nowNs()
  await work()
  const ns = nowNs() - t0
  return { ns, cpuUs: nodes.map((node, i) => (node.cpuNs() - cpu0[i]!) / 1000) }
}

/** `rounds` pushes from push `first` on: µs per receiver and until all woke, and the nodes' CPU. */
const measureWakes = async (cluster: Cluster, first: number, rounds: number) => {
  const perReceiver: Array<number> = []
  const perPush: Array<number> = []
  const stamped: Array<Tail.Stamped> = []
  const { ns, cpuUs } = await cpuOver(cluster.nodes, async () => {
    for (let r = first; r < first + rounds; r++) {
      const woken = await pushToAll(cluster, r)
      const us = woken.map((s) => (s.wokeNs - s.sentNs) / 1000)
      stamped.push(...woken)
      perReceiver.push(...us)
      perPush.push(Math.max(...us))
    }
  })
  return { perReceiver, perPush, stamped, windowNs: ns, cpuUs }
}

interface Timings {
  readonly startupMs: number
  readonly linkingMs: number
  readonly formationMs: number
  readonly loadAtStart: number
}

/** The figures of one cluster, as results.json has them. */
const clusterFigures = (
  cluster: Cluster,
  plan: ClusterPlan,
  timings: Timings,
  links: ReadonlyArray<Links>,
  warmupLines: number,
  idle: {
    readonly ns: number
    readonly cpuUs: ReadonlyArray<number>
    readonly rssMiB: ReadonlyArray<number>
  },
  wakes: Awaited<ReturnType<typeof measureWakes>>,
  tail: Tail.Attribution | null
) => {
  const { n, kind } = cluster
  const inboundOpen = links.flatMap((s) => (s.inboundOpen === null ? [] : [s.inboundOpen]))
  const cpuTotalUs = wakes.cpuUs.reduce((a, b) => a + b, 0)
  // What the same nodes spend idle over as long a window (heartbeats), taken off for the net figure.
  const idleShareUs = (idle.cpuUs.reduce((a, b) => a + b, 0) / idle.ns) * wakes.windowNs
  const wakeLines = plan.rounds * (n - 1)
  return {
    kind,
    nodes: n,
    processes: n,
    /** Spawn to every node printing `listening` (process start-up, N at once on the machine's cores). */
    startupMs: timings.startupMs,
    /** The last `listening` to every link up both ways (dials, their back-off, HELLOs). */
    linkingMs: timings.linkingMs,
    /** Spawn to every link up: the two above. */
    formationMs: timings.formationMs,
    connections: {
      expectedEachWay: n - 1,
      outboundPerNode: spread(
        links.map((s) => s.outbound),
        0
      ),
      /** Upstream: the peers heard on inbound links (`servers_alive`); it counts no sockets. */
      inboundAuthenticatedPerNode: spread(
        links.map((s) => s.inbound),
        0
      ),
      inboundOpenPerNode: inboundOpen.length === 0 ? null : spread(inboundOpen, 0)
    },
    warmupLines: {
      written: plan.warmupLinesPerNode * n,
      expected: plan.warmupLinesPerNode * n * (n - 1),
      /** Wake lines the driver read; fewer than expected = frames or lines dropped under the burst. */
      printed: warmupLines
    },
    wake: {
      warmup: plan.warmupPushesPerNode * n,
      pushes: plan.rounds,
      wakesPerPush: n - 1,
      perReceiverUs: distribution(wakes.perReceiver),
      untilAllWokeUs: distribution(wakes.perPush),
      /** Each wake next to the garbage collections of every node (bench/tail.ts); null for upstream. */
      tail
    },
    cpu: {
      windowMs: round(wakes.windowNs / 1e6, 0),
      allNodesUsPerPush: round(cpuTotalUs / plan.rounds, 1),
      usPerWakePerNode: round(cpuTotalUs / wakeLines, 2),
      usPerWakePerNodeNetOfIdle: round((cpuTotalUs - idleShareUs) / wakeLines, 2),
      perNodeUsPerPush: spread(
        wakes.cpuUs.map((us) => us / plan.rounds),
        1
      )
    },
    idle: {
      windowMs: round(idle.ns / 1e6, 0),
      cpuMsPerMinutePerNode: spread(
        idle.cpuUs.map((us) => (us / 1000 / (idle.ns / 1e6)) * 60_000),
        1
      ),
      rssMiBPerNode: spread(idle.rssMiB, 1)
    },
    loadAverage1m: { start: round(timings.loadAtStart, 2), end: round(Os.loadavg()[0]!, 2) }
  }
}

/** The wakes next to every node's collections; null if a node's probe did not answer. */
const clusterTail = async (
  dir: string,
  nodes: ReadonlyArray<CliNode>,
  stamped: ReadonlyArray<Tail.Stamped>
): Promise<Tail.Attribution | null> => {
  const reports = await Promise.all(nodes.map((node) => Tail.collect(dir, node.process.pid)))
  const gcs: Record<string, ReadonlyArray<Tail.Gc>> = {}
  for (const [i, report] of reports.entries()) {
    if (report === undefined) return null
    gcs[`node ${i}`] = report.gcs
  }
  return Tail.attribute(stamped, gcs)
}

/** One full mesh of `n` nodes of `kind`: formation, connections, wakes, CPU, idle cost, RSS. */
const clusterOnce = async (options: ClusterOptions, plan: ClusterPlan, kind: ClusterKind, n: number) => {
  const name = `${kind === "mesh" ? "" : kind === "base" ? "baseline " : "upstream "}cluster of ${n}`
  const ports = await distinctPorts(options, n)
  const nodes: Array<CliNode> = []
  const loadAtStart = Os.loadavg()[0]!
  const probe = Tail.probe()
  try {
    const spawned = nowNs()
    const { members, lastListening } = await startMembers(options, kind, ports, nodes, probe)
    const cluster: Cluster = { name, kind, n, nodes, members }
    const links = await awaitFormation(cluster)
    const timings: Timings = {
      startupMs: round((lastListening - spawned) / 1e6, 0),
      formationMs: round((nowNs() - spawned) / 1e6, 0),
      linkingMs: round((nowNs() - lastListening) / 1e6, 0),
      loadAtStart
    }
    options.progress(
      `${name}: formed in ${timings.formationMs} ms; warm-up: ${plan.warmupLinesPerNode} lines into each node in bursts, then ${plan.warmupPushesPerNode * n} pushes`
    )
    const warmupLines = await warmUp(cluster, plan)
    options.progress(
      `${name}: settle for ${plan.idleSettleMs / 1000} s, then idle for ${plan.idleMs / 1000} s`
    )
    await sleep(plan.idleSettleMs)
    const idle = await cpuOver(nodes, () => sleep(plan.idleMs))
    const rssMiB = nodes.map((node) => node.rssBytes() / MiB)
    options.progress(`${name}: ${plan.rounds} pushes, each to ${n - 1} nodes, the sender rotating`)
    const wakes = await measureWakes(cluster, plan.warmupPushesPerNode * n, plan.rounds)
    const tail = kind === "upstream" ? null : await clusterTail(probe.dir, nodes, wakes.stamped)
    return clusterFigures(cluster, plan, timings, links, warmupLines, { ...idle, rssMiB }, wakes, tail)
  } finally {
    await Promise.all(nodes.map((node) => node.stop()))
    Fs.rmSync(probe.dir, { recursive: true, force: true })
  }
}

export type ClusterRow = Awaited<ReturnType<typeof clusterOnce>>

/**
 * Every size of the plan in turn with our CLI, then with upstream's where `options.cli.upstream` is
 * set (`upstreamSkipped` says why not otherwise), then the discovery join (`plan.discovery`, else
 * {@link discoveryDefaults}).
 */
export const runCluster = async (options: ClusterOptions, plan: ClusterPlan, upstreamSkipped?: string) => {
  const rows: Array<ClusterRow> = []
  const baseRows: Array<ClusterRow> = []
  // Ours and the baseline's, size by size, so the two are measured on the same machine's state.
  for (const n of plan.sizes) {
    rows.push(await clusterOnce(options, plan, "mesh", n))
    baseRows.push(await clusterOnce(options, plan, "base", n))
  }
  const upstreamRows: Array<ClusterRow> = []
  if (options.cli.upstream !== undefined) {
    for (const n of plan.sizes) upstreamRows.push(await clusterOnce(options, plan, "upstream", n))
  }
  const discovery = await discoveryFirstWake(options, { ...discoveryDefaults, ...plan.discovery })
  return {
    sizes: plan.sizes,
    cores: Os.cpus().length,
    rows,
    baseRows,
    upstream:
      options.cli.upstream !== undefined
        ? { status: "measured" as const, binary: Path.basename(options.cli.upstream), rows: upstreamRows }
        : { status: "skipped" as const, reason: upstreamSkipped ?? "no upstream binary given" },
    discoveryFirstWake: discovery
  }
}

export type ClusterResult = Awaited<ReturnType<typeof runCluster>>
