/**
 * `cluster`: a full mesh of N `queen-mesh node` processes, and of upstream's where it is built
 * (bench/cluster.ts): formation, wake latency to every other node, CPU per wake per node, idle cost
 * and memory; and a new member found by discovery, to its first wake.
 */

import { type ClusterPlan, type ClusterResult, type ClusterRow, runCluster } from "../cluster.js"
import type { Driver } from "../driver.js"
import { fmt, type Row, row } from "../report.js"
import { section } from "../section.js"
import { ratio, round } from "../stats.js"
import { tailRows } from "../tail.js"

interface ClusterSectionPlan {
  readonly cluster: ClusterPlan
}

const run = (driver: Driver, plan: ClusterSectionPlan) =>
  runCluster(
    { cli: driver.cli, progress: driver.progress },
    plan.cluster,
    "skipped" in driver.upstream ? driver.upstream.skipped : undefined
  )

const clusterRows = (r: ClusterRow): ReadonlyArray<Row> => {
  const label = `${r.kind === "upstream" ? "upstream Rust cluster" : r.kind === "base" ? "baseline cluster" : "cluster"} of ${r.nodes}`
  const { outboundPerNode: out, inboundAuthenticatedPerNode: inbound } = r.connections
  return [
    row(
      `${label}: wake p50 / p99, each receiver (µs)`,
      `${fmt(r.wake.perReceiverUs.p50)} / ${fmt(r.wake.perReceiverUs.p99)}`
    ),
    row(
      `${label}: wake p50 / p99, until all ${r.nodes - 1} woke (µs)`,
      `${fmt(r.wake.untilAllWokeUs.p50)} / ${fmt(r.wake.untilAllWokeUs.p99)}`
    ),
    row(
      `${label}: CPU per wake per node, gross / net of idle (µs)`,
      `${fmt(r.cpu.usPerWakePerNode)} / ${fmt(r.cpu.usPerWakePerNodeNetOfIdle)}`
    ),
    row(
      `${label}: links per node out / in (min-max); start-up + linking (ms)`,
      `${out.min}-${out.max} / ${inbound.min}-${inbound.max}; ${fmt(r.startupMs, 0)} + ${fmt(r.linkingMs, 0)}`
    ),
    row(
      `${label}: idle CPU per node, mean (max) (ms/min)`,
      `${fmt(r.idle.cpuMsPerMinutePerNode.mean)} (${fmt(r.idle.cpuMsPerMinutePerNode.max)})`
    ),
    row(
      `${label}: RSS per node, mean (max) (MiB)`,
      `${fmt(r.idle.rssMiBPerNode.mean)} (${fmt(r.idle.rssMiBPerNode.max)})`
    )
  ]
}

const discoveryRows = (d: ClusterResult["discoveryFirstWake"]): ReadonlyArray<Row> => {
  if (d.status !== "measured")
    return [row("discovery join: a new member to its first wake", `${d.status} (see notes)`)]
  const few = (f: { n: number; min: number; p50: number; max: number }) =>
    `${fmt(f.p50, 0)} (${fmt(f.min, 0)}-${fmt(f.max, 0)})`
  return [
    row(
      `discovery join (${d.existingNodes} nodes, ${d.intervalMs} ms interval): spawn to first wake, p50 (min-max) of ${d.joins} (ms)`,
      few(d.spawnToFirstWakeMs)
    ),
    row(
      `discovery join: listening to first wake, p50 (min-max) of ${d.joins} (ms)`,
      few(d.listeningToFirstWakeMs)
    )
  ]
}

const rows = (cluster: ClusterResult): ReadonlyArray<Row> => [
  ...[
    ...cluster.rows,
    ...cluster.baseRows,
    ...(cluster.upstream.status === "measured" ? cluster.upstream.rows : [])
  ].flatMap(clusterRows),
  ...cluster.rows.flatMap((ours) => {
    const base = cluster.baseRows.find((b) => b.nodes === ours.nodes)
    if (base === undefined) return []
    const r = (a: number, b: number) => fmt(ratio(a, b), 2)
    return [
      row(
        `cluster of ${ours.nodes}: ours / baseline, idle CPU per node; CPU per wake per node`,
        `${r(ours.idle.cpuMsPerMinutePerNode.mean, base.idle.cpuMsPerMinutePerNode.mean)}; ${r(ours.cpu.usPerWakePerNode, base.cpu.usPerWakePerNode)}`
      ),
      ...tailRows(`cluster of ${ours.nodes}, wake`, ours.wake.tail, base.wake.tail)
    ]
  }),
  ...(cluster.upstream.status === "skipped"
    ? [row("upstream Rust cluster rows", "skipped (see notes)")]
    : []),
  ...discoveryRows(cluster.discoveryFirstWake)
]

/** The discovery join, for the cluster note. */
const discoveryNote = (d: ClusterResult["discoveryFirstWake"]): string =>
  d.status === "measured"
    ? `Discovery join: ${d.existingNodes} queen-mesh node processes on 127.0.0.2-${1 + d.existingNodes}, one mesh port, each with QUEEN_MESH_DISCOVERY=dns:${d.name} and QUEEN_MESH_DISCOVERY_INTERVAL_MS=${d.intervalMs}, the name resolving to every node through a hosts file bind-mounted over /etc/hosts in a private mount namespace per node (multi on), and no static peers; once they were a full mesh (${d.existingFormationMs} ms from spawn), ${d.joins} joins one after the other, each after a random pause of up to one interval (so the joins fall anywhere in the others' rounds): the new address appended to the file in place, the new node spawned on it, and from its listening line a push (message_available on one existing node's stdin, rotating) every ${d.pushEveryMs} ms until the new node printed its first wake line; then it was stopped and its line removed. Spawn to first wake p50 ${d.spawnToFirstWakeMs.p50} ms (min ${d.spawnToFirstWakeMs.min}, max ${d.spawnToFirstWakeMs.max}), of which spawn to listening p50 ${d.spawnToListeningMs.p50} ms; listening to first wake p50 ${d.listeningToFirstWakeMs.p50} ms (min ${d.listeningToFirstWakeMs.min}, max ${d.listeningToFirstWakeMs.max}); with ${d.joins} samples p99 is the max. The record goes in before the process, so a sender whose discovery round falls while the new node is still starting finds the address early and has its dial refused, and the wait after listening is then its reconnect back-off (250 ms doubling) rather than the next round: in ${d.perJoin.filter((j) => j.senderLastError !== null).length} of ${d.joins} joins the sender had a failed dial to the new node (senderLastError in perJoin, which has each join's figures).`
    : `Discovery join (a new member found by discovery, to its first wake): ${d.status} (${d.reason}).`

/** What the largest cluster means for a machine of `cores` cores, for the notes. */
const clusterCrowding = (sizes: ReadonlyArray<number>, cores: number): string => {
  const most = Math.max(...sizes)
  return most > cores
    ? `: at ${most} nodes ${round(most / cores, 1)} node processes share each core, so latency tails and CPU per wake include the scheduler's queueing and the nodes evicting each other from the caches`
    : ""
}

const note = (cluster: ClusterResult, plan: ClusterPlan): string =>
  `Cluster: ${cluster.sizes.join(", ")} queen-mesh node processes (one process per node, every node listing every other on 127.0.0.1, HMAC secret, 1 s heartbeats) on ${cluster.cores} cores shared with the driver${clusterCrowding(cluster.sizes, cluster.cores)}. Formation = spawn to every node reporting N-1 connected outbound links and N-1 authenticated inbound ones (stats route, polled every 100 ms), split into start-up (spawn to the last listening line) and linking (from there). Wake = a message_available line on one node's stdin to the wake line on each other node's stdout (both stamps in the driver, which reads N pipes, so a later receiver also waits for the driver to read the earlier ones); the sender rotates each push; warm-up: ${plan.warmupLinesPerNode} lines into every node in bursts of 64 (each node prints N-1 times as many), then ${plan.warmupPushesPerNode} one-at-a-time pushes per node; then ${plan.rounds} measured (a cold node's CPU per wake is twice or more a warm one's). CPU = time on CPU of every thread of every node (/proc/<pid>/task/*/schedstat, ns) over the measured pushes divided by the wake lines delivered (senders' share included); "net" subtracts the idle rate measured just before over as long a window. Idle = ${plan.idleMs / 1000} s with heartbeats only, after a pause of ${plan.idleSettleMs / 1000} s so the collections V8 runs once the warm-up's garbage stops fall before the window; RSS from /proc/<pid>/status at its end. Baseline cluster: the same sizes with the lean hand-written CLI baseline (bench/cliBaseline.ts), each size right after ours; its links from its {"op":"stats"} answer on stdin (dialled links connected, HELLOs accepted). ${discoveryNote(cluster.discoveryFirstWake)} ${cluster.upstream.status === "measured" ? "Upstream Rust cluster: the same with upstream-mesh-node processes (dialled on 127.0.0.1 only), for reference; its inbound count is the peers heard (servers_alive), as it counts no sockets, and its readiness comes from its stats command on stdin." : `Upstream Rust cluster: skipped (${cluster.upstream.reason}).`}`

export const cluster = section({
  names: ["cluster"],
  plan: {
    full: {
      cluster: {
        sizes: [3, 8, 16],
        warmupLinesPerNode: 3_000,
        warmupPushesPerNode: 30,
        rounds: 600,
        idleSettleMs: 60_000,
        idleMs: 30_000
      }
    },
    quick: {
      cluster: {
        sizes: [3, 8],
        warmupLinesPerNode: 2_000,
        warmupPushesPerNode: 20,
        rounds: 300,
        idleSettleMs: 3_000,
        idleMs: 6_000
      }
    }
  },
  run,
  results: (result) => ({ cluster: result }),
  rows,
  notes: (result, plan) => (result === undefined ? [] : [note(result, plan.cluster)])
})
