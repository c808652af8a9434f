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
 * - the time for a new member found by discovery to receive its first wake: not measured yet (see
 *   `discoveryFirstWake`).
 */
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { Schema } from "effect"
import { type CliNode, type CliOptions, isEvent, pushLine, startNode, upstreamStats } from "./cli.js"
import { nowNs } from "./ipc.js"
import { distribution, mean, round, sleep } from "./stats.js"

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

/** The fields of `HttpRoutes.StatsBody` read here (the rest is ignored). */
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

/**
 * The time from starting an (N+1)th node that the others find through discovery
 * (`QUEEN_MESH_DISCOVERY=dns:<name>`, being built) to the first `wake` line it prints for a push on an
 * existing node. To fill in once discovery lands: start the N nodes with discovery against a resolver
 * the bench controls (a loopback DNS server or a hosts-file name listing 127.0.0.1 ports), start the
 * new node, push on an existing node every millisecond or so, and stamp the new node's first `wake`
 * line; report p50/p99 over a few joins. Until then it says so and carries no number.
 */
export const discoveryFirstWake = (): { readonly status: "not measured yet"; readonly reason: string } => {
  const here = Path.dirname(fileURLToPath(import.meta.url))
  let known = false
  try {
    known = Fs.readFileSync(Path.resolve(here, "../src/cli/env.js"), "utf8").includes("QUEEN_MESH_DISCOVERY")
  } catch {
    known = false
  }
  return {
    status: "not measured yet",
    reason: known
      ? "discovery lands later: the CLI knows QUEEN_MESH_DISCOVERY, but this measurement is not written yet (bench/cluster.ts, discoveryFirstWake)"
      : "discovery lands later: this build has no QUEEN_MESH_DISCOVERY (bench/cluster.ts, discoveryFirstWake)"
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
 * set (`upstreamSkipped` says why not otherwise), then the discovery figure (not measured yet).
 */
export const runCluster = async (options: ClusterOptions, plan: ClusterPlan, upstreamSkipped?: string) => {
  const rows: Array<ClusterRow> = []
  for (const n of plan.sizes) rows.push(await clusterOnce(options, plan, "mesh", n))
  const upstreamRows: Array<ClusterRow> = []
  if (options.cli.upstream !== undefined) {
    for (const n of plan.sizes) upstreamRows.push(await clusterOnce(options, plan, "upstream", n))
  }
  return {
    sizes: plan.sizes,
    cores: Os.cpus().length,
    rows,
    upstream:
      options.cli.upstream !== undefined
        ? { status: "measured" as const, binary: options.cli.upstream, rows: upstreamRows }
        : { status: "skipped" as const, reason: upstreamSkipped ?? "no upstream binary given" },
    discoveryFirstWake: discoveryFirstWake()
  }
}

export type ClusterResult = Awaited<ReturnType<typeof runCluster>>
