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
import { CliNode, type CliOptions, cliEntry, isEvent, pushLine, startNode, upstreamStats } from "./cli.js"
import { nowNs } from "./ipc.js"
import { distribution, mean, percentile, round, sleep } from "./stats.js"

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
  /** The idle window, heartbeats only. */
  readonly idleMs: number
  /** The discovery join ({@link discoveryFirstWake}); {@link discoveryDefaults} for what is left out. */
  readonly discovery?: Partial<DiscoveryPlan>
}

/** Our CLI, or upstream's Rust mesh behind its harness. */
export type ClusterKind = "mesh" | "upstream"

export interface ClusterOptions {
  /** How nodes are started (`upstream` set for the upstream kind); `onStart` sees every process. */
  readonly cli: CliOptions
  readonly progress: (text: string) => void
}

const MiB = 1024 * 1024

const Listening = Schema.parseJson(
  Schema.Struct({ event: Schema.Literal("listening"), http_port: Schema.Number })
)

/** The fields of `MeshStats.StatsBody` read here (the rest is ignored). */
const Stats = Schema.parseJson(
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
const PeerEntry = Schema.parseJson(
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
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-bench-dns-"))
  const nodes: Array<CliNode> = []
  try {
    const hosts = Path.join(dir, "hosts")
    const conf = Path.join(dir, "host.conf")
    const line = (address: string) => `${address} ${DISCOVERY_NAME}\n`
    let listed = Array.from({ length: plan.existing }, (_, i) => discoveryAddress(i))
    // Rewritten in place (same inode), as the nodes see the file through a bind mount.
    const writeHosts = () => Fs.writeFileSync(hosts, `127.0.0.1 localhost\n${listed.map(line).join("")}`)
    writeHosts()
    Fs.writeFileSync(conf, "multi on\n")
    const wrap = (command: ReadonlyArray<string>): ReadonlyArray<string> => [
      "unshare",
      "-m",
      "--propagation",
      "private",
      "sh",
      "-c",
      'mount --bind "$0" /etc/hosts && mount --bind "$1" /etc/host.conf && shift && exec "$@"',
      hosts,
      conf,
      ...command
    ]
    const unavailable = discoveryUnavailable(wrap, hosts)
    if (unavailable !== undefined) return { status: "skipped", reason: unavailable }

    const port = await options.cli.freePort()
    const start = (serverId: string, address: string): CliNode => {
      const command = wrap([process.execPath, ...options.cli.execArgv(serverId), cliEntry, "node"])
      const node = new CliNode(
        "mesh",
        { file: command[0]!, args: command.slice(1) },
        {
          QUEEN_SERVER_ID: serverId,
          QUEEN_MESH_PORT: String(port),
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
      nodes.push(node)
      return node
    }

    options.progress(
      `discovery: ${plan.existing} nodes on one name (interval ${plan.intervalMs} ms), then ${plan.joins} joins to their first wake`
    )
    const spawned = nowNs()
    const started = listed.map((address, i) => ({ id: `dns-${i}`, node: start(`dns-${i}`, address) }))
    const existing = await Promise.all(
      started.map(async (e) => ({
        ...e,
        httpPort: Schema.decodeUnknownSync(Listening)(
          await e.node.waitFor(isEvent("listening"), 30_000, "listening")
        ).http_port
      }))
    )
    const httpPorts = existing.map((e) => e.httpPort)
    const deadline = Date.now() + 30_000
    for (;;) {
      const links = await Promise.all(httpPorts.map(meshLinks))
      if (links.every((l) => fullyLinked(l, plan.existing - 1))) break
      if (Date.now() > deadline)
        throw new Error(`the ${plan.existing} discovery nodes were not a full mesh after 30 s`)
      await sleep(50)
    }
    const existingFormationMs = round((nowNs() - spawned) / 1e6, 0)

    const perJoin: Array<DiscoveryJoin> = []
    for (let j = 0; j < plan.joins; j++) {
      const offsetMs = Math.round(Math.random() * plan.intervalMs)
      await sleep(offsetMs)
      const address = discoveryAddress(plan.existing + j)
      const sender = existing[j % existing.length]!
      const serverId = `dns-join-${j}`
      // Its record first, then the process, as a headless Service publishes it.
      listed = [...listed, address]
      writeHosts()
      const pushedAt: Array<number> = []
      // Start-up, then the others' next round and their reconnect back-off, with room to spare.
      const limitMs = 10 * plan.intervalMs + 20_000
      let timer: NodeJS.Timeout | undefined
      const t0 = nowNs()
      const joiner = start(serverId, address)
      try {
        const times = await new Promise<{ listening: number; woke: number; push: number; from: string }>(
          (resolve, reject) => {
            let listening = 0
            const limit = setTimeout(() => {
              joiner.onLine = undefined
              const what = listening === 0 ? "no listening line" : `no wake after ${pushedAt.length} pushes`
              reject(
                new Error(
                  `discovery join ${j}: ${what} within ${limitMs} ms; stderr: ${joiner.stderr.slice(-500)}`
                )
              )
            }, limitMs)
            // A node that dies on the way says so at once, not at the limit.
            joiner.process.once("exit", (code, signal) => {
              clearTimeout(limit)
              reject(
                new Error(
                  `discovery join ${j}: the new node exited (${signal ?? code}) before its first wake; stderr: ${joiner.stderr.slice(-500)}`
                )
              )
            })
            const push = () => {
              const k = pushedAt.length
              pushedAt.push(nowNs())
              sender.node.write(
                `{"op":"message_available","queue":"discovery","partition":"d${j}-${k}","tenant":"${DISCOVERY_TENANT}"}\n`
              )
            }
            joiner.onLine = (text, at) => {
              if (listening === 0 && isEvent("listening")(text)) {
                listening = at
                push()
                timer = setInterval(push, plan.pushEveryMs)
                return
              }
              if (!isEvent("wake")(text)) return
              const match = new RegExp(`"partition":"d${j}-(\\d+)"`).exec(text)
              if (match === null) return
              joiner.onLine = undefined
              clearTimeout(limit)
              clearInterval(timer)
              const from = /"from":"([^"]*)"/.exec(text)
              resolve({ listening, woke: at, push: Number(match[1]), from: from?.[1] ?? "" })
            }
          }
        )
        const entry = await getText(sender.httpPort, "/internal/api/shared-state/stats")
          .then((body) => Schema.decodeUnknownSync(PeerEntry)(body).peers.find((p) => p.host === address))
          .catch(() => undefined)
        perJoin.push({
          address,
          sender: sender.id,
          offsetMs,
          spawnToListeningMs: round((times.listening - t0) / 1e6, 1),
          spawnToFirstWakeMs: round((times.woke - t0) / 1e6, 1),
          listeningToFirstWakeMs: round((times.woke - times.listening) / 1e6, 1),
          pushesSent: pushedAt.length,
          wokenByPush: times.push,
          wokenByPushAgeMs: round((times.woke - pushedAt[times.push]!) / 1e6, 2),
          from: times.from,
          senderLastError: entry?.last_error ?? null,
          senderDroppedDown: entry?.dropped_down ?? null
        })
      } finally {
        clearInterval(timer)
        await joiner.stop()
        nodes.splice(nodes.indexOf(joiner), 1)
        listed = listed.filter((a) => a !== address)
        writeHosts()
      }
    }
    return {
      status: "measured",
      name: DISCOVERY_NAME,
      existingNodes: plan.existing,
      intervalMs: plan.intervalMs,
      pushEveryMs: plan.pushEveryMs,
      joins: plan.joins,
      existingFormationMs,
      spawnToListeningMs: fewSamples(perJoin.map((r) => r.spawnToListeningMs)),
      spawnToFirstWakeMs: fewSamples(perJoin.map((r) => r.spawnToFirstWakeMs)),
      listeningToFirstWakeMs: fewSamples(perJoin.map((r) => r.listeningToFirstWakeMs)),
      perJoin
    }
  } catch (error) {
    return { status: "failed", reason: error instanceof Error ? error.message : String(error) }
  } finally {
    await Promise.all(nodes.map((node) => node.stop()))
    Fs.rmSync(dir, { recursive: true, force: true })
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

/** One full mesh of `n` nodes of `kind`: formation, connections, wakes, CPU, idle cost, RSS. */
const clusterOnce = async (options: ClusterOptions, plan: ClusterPlan, kind: ClusterKind, n: number) => {
  const name = kind === "mesh" ? `cluster of ${n}` : `upstream cluster of ${n}`
  const ports: Array<number> = []
  while (ports.length < n) {
    const port = await options.cli.freePort()
    if (!ports.includes(port)) ports.push(port)
  }
  const nodes: Array<CliNode> = []
  const loadAtStart = Os.loadavg()[0]!
  try {
    const spawned = nowNs()
    for (let i = 0; i < n; i++) {
      const id = `${kind === "mesh" ? "cluster" : "ucluster"}-${n}-${i}`
      nodes.push(
        startNode(
          options.cli,
          kind,
          id,
          ports[i]!,
          ports.filter((_, j) => j !== i)
        )
      )
    }
    let lastListening = 0
    const members: Array<Member> = await Promise.all(
      nodes.map(async (node) => {
        const line = await node.waitFor(isEvent("listening"), 30_000 + n * 2_000, "listening")
        lastListening = Math.max(lastListening, nowNs())
        if (kind === "upstream") return { node, links: () => upstreamLinks(node) }
        const httpPort = Schema.decodeUnknownSync(Listening)(line).http_port
        return { node, links: () => meshLinks(httpPort) }
      })
    )
    const startupMs = round((lastListening - spawned) / 1e6, 0)
    // Formation: every node sees every link, both ways.
    const deadline = Date.now() + 60_000
    let last: Array<Links> = []
    for (;;) {
      last = await Promise.all(members.map((m) => m.links()))
      if (last.every((s) => fullyLinked(s, n - 1))) break
      if (Date.now() > deadline) {
        const short = last.filter((s) => !fullyLinked(s, n - 1)).length
        throw new Error(`${name}: ${short} node(s) without every link after 60 s`)
      }
      await sleep(100)
    }
    const formationMs = round((nowNs() - spawned) / 1e6, 0)
    const linkingMs = round((nowNs() - lastListening) / 1e6, 0)
    const outbound = last.map((s) => s.outbound)
    const inbound = last.map((s) => s.inbound)
    const inboundOpen = last.flatMap((s) => (s.inboundOpen === null ? [] : [s.inboundOpen]))

    // One push on `sender`, until every other node printed its wake; µs per receiver from the push.
    const push = async (index: number): Promise<Array<number>> => {
      const sender = index % n
      const partition = `c${index}`
      const needle = `"partition":"${partition}"`
      const woken: Array<number> = []
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
            woken.push((at - sent) / 1000)
            if (--left === 0) {
              clearTimeout(timer)
              resolve()
            }
          }
        })
        sent = nowNs()
        members[sender]!.node.write(pushLine(kind, partition))
      })
      return woken
    }

    options.progress(
      `${name}: formed in ${formationMs} ms; warm-up: ${plan.warmupLinesPerNode} lines into each node in bursts, then ${plan.warmupPushesPerNode * n} pushes`
    )
    // Bursts of 64 lines per node, well under a send queue (1024 frames), with a pause sized to the
    // 64 n (n - 1) wake lines each round makes the machine print (8 µs a line), so the warm-up
    // exercises the receive path rather than the drop path; then wait until every node fell quiet.
    const linesBefore = nodes.reduce((sum, node) => sum + node.lines, 0)
    for (let offset = 0; offset < plan.warmupLinesPerNode; offset += 64) {
      members.forEach((m, i) => {
        let text = ""
        for (let k = offset; k < Math.min(plan.warmupLinesPerNode, offset + 64); k++) {
          text += pushLine(kind, `w${i}-${k}`, "warm")
        }
        m.node.write(text)
      })
      await sleep(Math.max(2, (64 * n * (n - 1) * 8) / 1000))
    }
    await quiet(nodes, 500, 60_000)
    const warmupLines = nodes.reduce((sum, node) => sum + node.lines, 0) - linesBefore
    const warmup = plan.warmupPushesPerNode * n
    for (let r = 0; r < warmup; r++) await push(r)

    options.progress(`${name}: idle for ${plan.idleMs / 1000} s`)
    const idleCpu0 = nodes.map((node) => node.cpuNs())
    const idleT0 = nowNs()
    await sleep(plan.idleMs)
    const idleNs = nowNs() - idleT0
    const idleCpu = nodes.map((node, i) => (node.cpuNs() - idleCpu0[i]!) / 1000)
    const rss = nodes.map((node) => node.rssBytes() / MiB)
    const idleMsPerMinute = idleCpu.map((us) => (us / 1000 / (idleNs / 1e6)) * 60_000)

    options.progress(`${name}: ${plan.rounds} pushes, each to ${n - 1} nodes, the sender rotating`)
    const perReceiver: Array<number> = []
    const perPush: Array<number> = []
    const cpu0 = nodes.map((node) => node.cpuNs())
    const t0 = nowNs()
    for (let r = warmup; r < warmup + plan.rounds; r++) {
      const woken = await push(r)
      perReceiver.push(...woken)
      perPush.push(Math.max(...woken))
    }
    const windowNs = nowNs() - t0
    const cpu = nodes.map((node, i) => (node.cpuNs() - cpu0[i]!) / 1000)
    const cpuTotalUs = cpu.reduce((a, b) => a + b, 0)
    // What the same nodes spend idle over as long a window (heartbeats), taken off for the net figure.
    const idleShareUs = (idleCpu.reduce((a, b) => a + b, 0) / idleNs) * windowNs
    const wakes = plan.rounds * (n - 1)
    const loadAtEnd = Os.loadavg()[0]!
    return {
      kind,
      nodes: n,
      processes: n,
      /** Spawn to every node printing `listening` (process start-up, N at once on the machine's cores). */
      startupMs,
      /** The last `listening` to every link up both ways (dials, their back-off, HELLOs). */
      linkingMs,
      /** Spawn to every link up: the two above. */
      formationMs,
      connections: {
        expectedEachWay: n - 1,
        outboundPerNode: spread(outbound, 0),
        /** Upstream: the peers heard on inbound links (`servers_alive`); it counts no sockets. */
        inboundAuthenticatedPerNode: spread(inbound, 0),
        inboundOpenPerNode: inboundOpen.length === 0 ? null : spread(inboundOpen, 0)
      },
      warmupLines: {
        written: plan.warmupLinesPerNode * n,
        expected: plan.warmupLinesPerNode * n * (n - 1),
        /** Wake lines the driver read; fewer than expected = frames or lines dropped under the burst. */
        printed: warmupLines
      },
      wake: {
        warmup,
        pushes: plan.rounds,
        wakesPerPush: n - 1,
        perReceiverUs: distribution(perReceiver),
        untilAllWokeUs: distribution(perPush)
      },
      cpu: {
        windowMs: round(windowNs / 1e6, 0),
        allNodesUsPerPush: round(cpuTotalUs / plan.rounds, 1),
        usPerWakePerNode: round(cpuTotalUs / wakes, 2),
        usPerWakePerNodeNetOfIdle: round((cpuTotalUs - idleShareUs) / wakes, 2),
        perNodeUsPerPush: spread(
          cpu.map((us) => us / plan.rounds),
          1
        )
      },
      idle: {
        windowMs: round(idleNs / 1e6, 0),
        cpuMsPerMinutePerNode: spread(idleMsPerMinute, 1),
        rssMiBPerNode: spread(rss, 1)
      },
      loadAverage1m: { start: round(loadAtStart, 2), end: round(loadAtEnd, 2) }
    }
  } finally {
    await Promise.all(nodes.map((node) => node.stop()))
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
  for (const n of plan.sizes) rows.push(await clusterOnce(options, plan, "mesh", n))
  const upstreamRows: Array<ClusterRow> = []
  if (options.cli.upstream !== undefined) {
    for (const n of plan.sizes) upstreamRows.push(await clusterOnce(options, plan, "upstream", n))
  }
  const discovery = await discoveryFirstWake(options, { ...discoveryDefaults, ...plan.discovery })
  return {
    sizes: plan.sizes,
    cores: Os.cpus().length,
    rows,
    upstream:
      options.cli.upstream !== undefined
        ? { status: "measured" as const, binary: options.cli.upstream, rows: upstreamRows }
        : { status: "skipped" as const, reason: upstreamSkipped ?? "no upstream binary given" },
    discoveryFirstWake: discovery
  }
}

export type ClusterResult = Awaited<ReturnType<typeof runCluster>>
