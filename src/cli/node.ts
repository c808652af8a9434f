/**
 * `queen-mesh node`: one mesh node configured from the environment (spec "Enabling it"), with the
 * shipped in-memory host services but a waker that wakes nothing (it parks no pops), the HTTP routes, JSON lines on stdout for what the mesh does, and
 * JSON commands on stdin (docs/cli.md, "node", is the contract).
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as SchemaIssue from "effect/SchemaIssue"
import * as HotList from "../HotList.js"
import * as HttpRoutes from "../HttpRoutes.js"
import * as NodeServer from "../internal/http/nodeServer.js"
import * as PeerBook from "../internal/view/peerBook.js"
import * as MaintenanceFlags from "../MaintenanceFlags.js"
import * as Mesh from "../Mesh.js"
import * as MeshConfig from "../MeshConfig.js"
import * as QueueConfigCache from "../QueueConfigCache.js"
import * as TcpTransport from "../TcpTransport.js"
import * as Waker from "../Waker.js"
import * as Commands from "./commands.js"
import * as Events from "./events.js"
import * as Io from "./io.js"
import { CliFailure, configFailure, EXIT_FAILURE, printLine } from "./io.js"
import { LineSplitter, MAX_LINE_BYTES, type Piece } from "./lines.js"
import { version } from "./version.js"

/**
 * Where the HTTP routes listen.
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpConfig {
  readonly host: string
  readonly port: number
}

/**
 * @since 0.1.0
 * @category defaults
 */
export const httpDefaults: HttpConfig = { host: "127.0.0.1", port: 6632 }

/**
 * The node's host services: the shipped in-memory ones, but a waker that wakes nothing. A
 * `queen-mesh node` parks no pops and nobody takes partition hints from it, so the shipped registry
 * would only record, on every received wake, hints for no one; the wake is printed from the mesh's
 * event instead (and with `--quiet` not even built).
 */
const hostServices = Layer.mergeAll(
  Waker.layerNoop,
  QueueConfigCache.layerMemory(),
  HotList.layerMemory(),
  MaintenanceFlags.layer()
)

/**
 * A `ConfigError` whose one line is `message`: effect 4's `ConfigError` wraps a `SchemaError`, whose
 * issue carries it (as MeshConfig's own errors do).
 */
const invalid = (message: string): Config.ConfigError =>
  new Config.ConfigError(new Schema.SchemaError(new SchemaIssue.InvalidValue({ message })))

const parsedOr = <A>(name: string, fallback: A, parse: (raw: string) => Result.Result<A, string>) =>
  Config.option(Config.String(name)).pipe(
    Config.mapEffect(
      Option.match({
        onNone: () => Effect.succeed(fallback),
        onSome: (raw) => Effect.fromResult(Result.mapError(parse(raw), (why) => invalid(`${name}: ${why}`)))
      })
    )
  )

/**
 * `QUEEN_MESH_HTTP_HOST` and `QUEEN_MESH_HTTP_PORT`, read like the mesh's own variables: a malformed
 * value fails with a `ConfigError` naming the variable.
 *
 * @since 0.1.0
 * @category config
 */
export const httpConfig: Config.Config<HttpConfig> = Config.all({
  // address the HTTP routes bind
  host: Config.String("QUEEN_MESH_HTTP_HOST").pipe(Config.withDefault(httpDefaults.host)),
  // port of the HTTP routes; 0 = ephemeral
  port: parsedOr("QUEEN_MESH_HTTP_PORT", httpDefaults.port, (raw) => MeshConfig.parsePort(raw))
})

/**
 * `QUEEN_MESH_STDOUT_BUFFER`: bytes of stdout events left pending for a slow reader before new ones are
 * dropped (at least 1024).
 *
 * @since 0.1.0
 * @category config
 */
export const stdoutBufferConfig: Config.Config<number> = parsedOr(
  "QUEEN_MESH_STDOUT_BUFFER",
  Io.DEFAULT_MAX_PENDING,
  (raw) =>
    Result.flatMap(MeshConfig.parseCount(raw), (n) =>
      n >= 1024 ? Result.succeed(n) : Result.fail(`expected at least 1024 bytes, got ${n}`)
    )
)

/**
 * Whether `QUEEN_MESH_PG_URL` asks for the PostgreSQL lane: set and not empty. Only then is the lane's
 * module loaded (and, with it, the `pg` driver), which reads and checks the lane's variables itself.
 *
 * @since 0.1.0
 * @category config
 */
export const laneRequested: Config.Config<boolean> = Config.option(Config.String("QUEEN_MESH_PG_URL")).pipe(
  Config.map(Option.exists((url) => url.trim() !== ""))
)

/**
 * Everything `node` reads from the environment.
 *
 * @since 0.1.0
 * @category config
 */
export const config = Config.all({
  mesh: MeshConfig.config,
  deprecated: MeshConfig.deprecated,
  http: httpConfig,
  stdoutBuffer: stdoutBufferConfig,
  pg: laneRequested,
  explicit: Config.all({
    port: Config.option(Config.String("PORT")).pipe(Config.map(Option.isSome)),
    advertiseHost: Config.option(Config.String("QUEEN_MESH_ADVERTISE_HOST")).pipe(Config.map(Option.isSome))
  })
})

const WILDCARDS: ReadonlySet<string> = new Set(["0.0.0.0", "::", "[::]", ""])

/**
 * Where this node says its HTTP routes answer (the HELLO's `http_addr`). A host that sets `PORT` keeps
 * upstream's meaning: its own HTTP server, as the mesh configuration reads it. Otherwise the node's own
 * routes are what answers: their bound port (an ephemeral one too), and their bind address unless it is
 * a wildcard or `QUEEN_MESH_ADVERTISE_HOST` names the host (then the advertised host, by default the
 * host name).
 *
 * @since 0.1.0
 * @category config
 */
export const advertised = (
  mesh: MeshConfig.MeshConfigShape,
  bound: HttpConfig,
  explicit: { readonly port: boolean; readonly advertiseHost: boolean }
): MeshConfig.MeshConfigShape =>
  explicit.port
    ? mesh
    : {
        ...mesh,
        httpPort: bound.port,
        advertiseHost: explicit.advertiseHost || WILDCARDS.has(bound.host) ? mesh.advertiseHost : bound.host
      }

/**
 * The lane a node runs beside (or instead of) the TCP mesh, for the start-up log.
 *
 * @since 0.1.0
 * @category models
 */
export interface LaneDescription {
  readonly kind: "pg"
  /** The channel set, or `undefined` for the default one derived from the cluster label. */
  readonly channel: string | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface NodeOptions {
  /** Print only `listening`, `peer_up` and `peer_down`. */
  readonly quiet: boolean
  /** Answer every stdin command on stdout (`sent` / `refused`). */
  readonly ack: boolean
}

/**
 * The start-up log's view of the configuration: every value, the secret redacted.
 *
 * @since 0.1.0
 * @category logging
 */
export const describeConfig = (
  mesh: MeshConfig.MeshConfigShape,
  http: HttpConfig,
  stdoutBuffer: number,
  lane?: LaneDescription
): Record<string, string | number | boolean> => ({
  version,
  active: MeshConfig.isActive(mesh) || (lane !== undefined && mesh.enabled),
  enabled: mesh.enabled,
  lane: lane === undefined ? "(none)" : `${lane.kind} channel ${lane.channel ?? "(from the cluster label)"}`,
  peers: mesh.peers.length === 0 ? "(none)" : mesh.peers.map((peer) => `${peer.host}:${peer.port}`).join(","),
  port: mesh.port,
  bind_addr: mesh.bindHost,
  http_addr: Option.getOrElse(MeshConfig.httpAddress(mesh), () => "(none)"),
  tenants: mesh.tenants,
  secret: Redacted.value(mesh.secret) === "" ? "(empty)" : "<redacted>",
  heartbeat_ms: Duration.toMillis(mesh.heartbeatInterval),
  dead_threshold_ms: Duration.toMillis(mesh.deadThreshold),
  handshake_timeout_ms: Duration.toMillis(mesh.handshakeTimeout),
  hotlist_flush_ms: Duration.toMillis(mesh.hotlistFlushWindow),
  send_queue: mesh.sendQueueCapacity,
  cache_refresh_ms: Duration.toMillis(mesh.cacheRefreshInterval),
  http: `${http.host}:${http.port}`,
  stdout_buffer: stdoutBuffer
})

/**
 * Reads stdin line by line (lines over 1 MiB are refused and skipped) and runs each command. EOF ends
 * the reading, not the node; a read error is logged and likewise leaves the node running.
 *
 * @since 0.1.0
 * @category running
 */
export const readCommands = (
  mesh: Mesh.MeshShape,
  options: Commands.HandleOptions,
  maxLineBytes: number = MAX_LINE_BYTES
): Effect.Effect<void> =>
  Effect.flatMap(Effect.context<never>(), (context) =>
    Effect.callback<void>((resume) => {
      // Lines are handled straight from stdin's data event: a command runs synchronously where it can
      // (a push is one synchronous call of the mesh), with no stream or fiber between stdin and the mesh.
      const splitter = new LineSplitter(maxLineBytes)
      const runSync = Effect.runForkWith(context)
      const handle = (piece: Piece) => {
        // The common command, a valid push, runs synchronously with no fiber; any other runs as an
        // effect in a fiber of its own, which runs synchronously as far as it can (effect 4's
        // `runForkWith` starts it at once) and, if it has to wait, goes on from there.
        if (piece._tag === "Line" && Commands.unsafeHandleQuick(mesh, piece.text, options)) return
        runSync(
          piece._tag === "Line"
            ? Commands.handleLine(mesh, piece.text, options)
            : Commands.refuse(
                { op: null, reason: `line longer than ${piece.maxBytes} bytes: skipped` },
                "(too long)",
                options
              )
        )
      }
      const onData = (chunk: Buffer) => {
        for (const piece of splitter.push(chunk)) handle(piece)
      }
      const onEnd = () => {
        for (const piece of splitter.end()) handle(piece)
        cleanup()
        resume(Effect.logDebug("stdin closed; the node keeps running"))
      }
      const onError = (error: Error) => {
        cleanup()
        resume(Effect.logWarning("stopped reading stdin", error))
      }
      const cleanup = () => {
        process.stdin.off("data", onData)
        process.stdin.off("end", onEnd)
        process.stdin.off("error", onError)
      }
      process.stdin.on("data", onData)
      process.stdin.on("end", onEnd)
      process.stdin.on("error", onError)
      return Effect.sync(() => {
        cleanup()
        process.stdin.pause()
      })
    })
  )

/** The signal that is stopping the node, recorded for the shutdown line. */
let stopSignal: NodeJS.Signals | undefined

const recordSignal = (signal: NodeJS.Signals) => {
  // A second signal while the node is closing means "now".
  if (stopSignal !== undefined) process.exit(EXIT_FAILURE)
  stopSignal = signal
}

/**
 * Records SIGINT/SIGTERM (the runtime itself turns them into an interruption) for the scope's life.
 * Ahead of the runtime's own listener: effect 4's interrupts the main fiber within the listener, so
 * the shutdown line would otherwise be logged before the signal is known.
 */
const watchSignals = Effect.acquireRelease(
  Effect.sync(() => {
    process.prependListener("SIGINT", recordSignal)
    process.prependListener("SIGTERM", recordSignal)
  }),
  () =>
    Effect.sync(() => {
      process.removeListener("SIGINT", recordSignal)
      process.removeListener("SIGTERM", recordSignal)
    })
)

/**
 * Runs the node until interrupted (SIGINT/SIGTERM close the scope).
 *
 * @since 0.1.0
 * @category running
 */
export const run = (options: NodeOptions): Effect.Effect<never, CliFailure> =>
  Effect.gen(function* () {
    const env = ConfigProvider.fromEnv()
    const settings = yield* Effect.provideService(config, ConfigProvider.ConfigProvider, env).pipe(
      Effect.mapError(configFailure)
    )
    const lane = settings.pg ? Option.some(yield* loadLane(env)) : Option.none()
    return yield* serve({ ...settings, lane }, options).pipe(
      Effect.annotateLogs({ server_id: settings.mesh.serverId })
    )
  })

/** The lane's module, its variables read and checked (a bad one exits 2, naming it). */
const loadLane = (env: ConfigProvider.ConfigProvider) =>
  Effect.gen(function* () {
    const Postgres = yield* Effect.promise(() => import("../Postgres.js"))
    const settings = yield* Effect.provideService(Postgres.config, ConfigProvider.ConfigProvider, env).pipe(
      Effect.mapError(configFailure)
    )
    const channel = Option.getOrUndefined(settings.channel)
    return {
      description: { kind: "pg", channel } satisfies LaneDescription,
      layer: Postgres.layer({ url: settings.url, ...(channel === undefined ? {} : { channel }) })
    }
  })

type LoadedLane = Effect.Success<ReturnType<typeof loadLane>>

const serve = (
  settings: {
    readonly mesh: MeshConfig.MeshConfigShape
    readonly deprecated: ReadonlyArray<string>
    readonly http: HttpConfig
    readonly stdoutBuffer: number
    readonly lane: Option.Option<LoadedLane>
    readonly explicit: { readonly port: boolean; readonly advertiseHost: boolean }
  },
  options: NodeOptions
) =>
  Effect.gen(function* () {
    const { http } = settings
    for (const variable of settings.deprecated) {
      yield* Effect.logWarning("deprecated configuration variable").pipe(Effect.annotateLogs({ variable }))
    }
    yield* watchSignals
    yield* Effect.addFinalizer(() => Effect.logInfo("node stopped"))
    const lane = Option.getOrUndefined(settings.lane)
    // The HTTP port is bound before the mesh starts, so the HELLO's http_addr can name it.
    const httpServer = HttpRoutes.makeServer()
    const httpPort = yield* NodeServer.listen(httpServer, http).pipe(
      Effect.mapError(
        (error) =>
          new CliFailure({
            code: EXIT_FAILURE,
            message: `queen-mesh: cannot serve HTTP on ${http.host}:${http.port}: ${describeCause(error.cause)}`
          })
      )
    )
    const meshConfig = advertised(settings.mesh, { host: http.host, port: httpPort }, settings.explicit)
    yield* Effect.logInfo("node starting").pipe(
      Effect.annotateLogs(
        describeConfig(meshConfig, { ...http, port: httpPort }, settings.stdoutBuffer, lane?.description)
      )
    )

    // A slow or gone stdout reader is a warning on stderr, never a crash nor unbounded memory.
    const runFork = Effect.runForkWith(yield* Effect.context<never>())
    Io.stdout.configure({
      maxPending: settings.stdoutBuffer,
      onDropped: (dropped, total) =>
        runFork(
          Effect.logWarning(`dropped ${dropped} stdout events: the reader is slow`).pipe(
            Effect.annotateLogs({ dropped_total: total })
          )
        ),
      onClosed: (error) =>
        runFork(
          Effect.logWarning("stdout is closed: events are no longer printed").pipe(
            Effect.annotateLogs({ error: error.message })
          )
        )
    })

    // Every reader of the metrics here syncs them first (the /metrics route), so no background sync:
    // an idle node does only its heartbeats.
    const meshLayer = Mesh.layerWith({ metricsInterval: Duration.infinity }).pipe(
      Layer.provide(Layer.merge(hostServices, TcpTransport.layerConfig())),
      Layer.provide(Layer.succeed(MeshConfig.MeshConfig, meshConfig))
    )
    const context = yield* Layer.build(
      lane === undefined ? meshLayer : meshLayer.pipe(Layer.provide(lane.layer))
    ).pipe(
      Effect.mapError((error) =>
        error._tag === "PostgresError"
          ? new CliFailure({ code: EXIT_FAILURE, message: `queen-mesh: PostgreSQL lane: ${error.message}` })
          : new CliFailure({ code: EXIT_FAILURE, message: `queen-mesh: mesh ${error.message}` })
      )
    )
    const mesh = Context.get(context, Mesh.Mesh)

    // Observe now, print once `listening` is out: no event is lost and none comes first. The observer
    // runs synchronously on the receive path, so a wake reaches stdout in the same turn it arrived;
    // until `listening` is printed, lines wait in a bounded list.
    // Each line is written on behalf of the peer it came from, so the stdout budget is shared fairly
    // between peers: one flooding peer cannot crowd another's wakes out.
    let early: Array<readonly [line: string, from: string]> | undefined = []
    const quiet = options.quiet
    // Only the kinds that make a line are observed: with --quiet no wake event is even built, so a
    // received frame costs what it costs the library.
    yield* mesh.observe(
      (event) => {
        const line = Events.lineOf(event, quiet)
        if (line === undefined) return
        const from = Events.sourceOf(event)
        if (early === undefined) Io.stdout.writeLine(line, from)
        else if (early.length < 10_000) early.push([line, from])
      },
      quiet ? Events.quietTags : Events.lineTags
    )
    const ready = {
      open: Effect.sync(() => {
        const waiting = early ?? []
        early = undefined
        for (const [line, from] of waiting) Io.stdout.writeLine(line, from)
      })
    }
    yield* Effect.yieldNow

    yield* NodeServer.serve(
      httpServer,
      HttpRoutes.makeApp({
        extraStats: (): typeof Io.StatsExtras.Type => ({
          stdout_events_dropped: Io.stdout.dropped,
          stdout_events_dropped_by_source: Object.fromEntries(Io.stdout.droppedBySource)
        })
      })
    ).pipe(Effect.provide(context))
    // What the cluster page needs to name each peer, kept from the start (ClusterView.learnPeers).
    yield* PeerBook.learnPeers({ statsPath: HttpRoutes.paths.sharedStateStats }).pipe(Effect.provide(context))

    yield* printLine(Events.listening({ serverId: mesh.serverId, port: mesh.port, httpPort }))
    yield* ready.open
    yield* Effect.logInfo("node ready").pipe(
      Effect.annotateLogs({
        active: mesh.active,
        port: Option.getOrElse(mesh.port, () => "inactive"),
        http: `${http.host}:${httpPort}`
      })
    )
    yield* Effect.forkScoped(readCommands(mesh, { ack: options.ack }))
    // Added last, so it runs first when the scope closes: before the listeners and dialers go.
    yield* Effect.addFinalizer(() =>
      Effect.logInfo("node stopping").pipe(Effect.annotateLogs({ signal: stopSignal ?? "none" }))
    )
    return yield* Effect.never
  }).pipe(Effect.scoped, Effect.annotateLogs({ module: "cli/node" }))

const describeCause = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))
