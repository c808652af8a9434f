/**
 * The mesh's HTTP surface (spec "Observing it"): the two stats routes, which serve `Mesh.stats`, the
 * deliberately minimal `/api/v1/system/shared-state`, `/metrics` for Prometheus, and the `/healthz`
 * and `/readyz` probes. `router` is what a host mounts into its own
 * server (a layer of routes on effect's `HttpRouter`, as `routes` is their list); `app` adds a JSON 404
 * for serving the routes on their own, as `queen-mesh node` does.
 *
 * The bodies also exist as Schemas, so clients (the `queen-mesh stats` command, tests) decode what the
 * routes answer instead of trusting it.
 *
 * @since 0.1.0
 */
import * as Http from "node:http"
import type * as Net from "node:net"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServer from "effect/http/HttpServer"
import type * as HttpServerError from "effect/http/HttpServerError"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import type * as ClusterView from "./ClusterView.js"
import * as ViewPaths from "./internal/view/paths.js"
import { Mesh } from "./Mesh.js"
import type * as MeshHealth from "./MeshHealth.js"
import * as MeshMetrics from "./MeshMetrics.js"
import type * as MeshStats from "./MeshStats.js"

/**
 * The paths the routes answer on.
 *
 * @since 0.1.0
 * @category constants
 */
export const paths = {
  sharedStateStats: "/internal/api/shared-state/stats",
  interInstanceStats: "/internal/api/inter-instance/stats",
  sharedState: "/api/v1/system/shared-state",
  metrics: "/metrics",
  health: "/healthz",
  ready: "/readyz"
} as const

// ---------------------------------------------------------------------------------------------
// bodies
// ---------------------------------------------------------------------------------------------

/**
 * The body of `/api/v1/system/shared-state`: always disabled, since each replica is a single-node
 * segments broker as far as shared state goes; only the maintenance flags are live.
 *
 * @since 0.1.0
 * @category schemas
 */
export const SharedStateBody = Schema.Struct({
  enabled: Schema.Literal(false),
  reason: Schema.Literal("single_node_segments_broker"),
  maintenance_mode: Schema.Boolean,
  pop_maintenance_mode: Schema.Boolean
})

/**
 * @since 0.1.0
 * @category models
 */
export type SharedStateBody = typeof SharedStateBody.Type

/**
 * The body of a 404.
 *
 * @since 0.1.0
 * @category schemas
 */
export const NotFoundBody = Schema.Struct({
  error: Schema.Literal("not_found"),
  method: Schema.String,
  path: Schema.String
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const sharedState = (stats: MeshStats.MeshStats): SharedStateBody => ({
  enabled: false,
  reason: "single_node_segments_broker",
  maintenance_mode: stats.maintenance_mode,
  pop_maintenance_mode: stats.pop_maintenance_mode
})

// ---------------------------------------------------------------------------------------------
// routes
// ---------------------------------------------------------------------------------------------

/** Stats change from one request to the next: nothing in between should cache them. */
const json = (body: unknown, status = 200) =>
  HttpServerResponse.jsonUnsafe(body, { status, headers: { "cache-control": "no-store" } })

/** The stats body, with the host's own counters added (the CLI's dropped stdout lines). */
const statsHandler = (extra: (() => Readonly<Record<string, unknown>>) | undefined) =>
  Effect.map(
    Effect.flatMap(Mesh, (mesh) => mesh.stats),
    (stats) => json(extra === undefined ? stats : { ...stats, ...extra() })
  )

const sharedStateHandler = Effect.map(
  Effect.flatMap(Mesh, (mesh) => mesh.stats),
  (stats) => json(sharedState(stats))
)

const metricsHandler = Effect.gen(function* () {
  const mesh = yield* Mesh
  yield* mesh.syncMetrics
  const text = yield* MeshMetrics.renderPrometheus()
  return HttpServerResponse.text(text, {
    contentType: MeshMetrics.contentType,
    headers: { "cache-control": "no-store" }
  })
})

/**
 * The body of `/readyz`: whether this node is ready, and why (or why not).
 *
 * @since 0.1.0
 * @category models
 */
export interface Readiness {
  readonly ready: boolean
  /** The node's health (see `MeshHealth`): its status and the reason for it. */
  readonly status: MeshHealth.Status
  readonly reason: MeshHealth.Reason
  readonly links_up: number
  /** The configured and discovered peers other than this node itself. */
  readonly peer_count: number
  /** Peers expected (links and lane members) and, of those, linked and heard both ways. */
  readonly expected: number
  readonly healthy: number
}

/**
 * Ready unless the node is `isolated`: it expects peers (or has a lane, or a discovery source) and
 * reaches none of them, so every remote push would reach its pops only by their backoff. `clustered`,
 * `degraded` (some peers reached: hints still flow to most pops), `starting` (peers have not had their
 * chance yet: the first dead threshold after start) and `solo` (nothing to reach, or the mesh off) are
 * ready. An entry that names this node itself counts for nothing.
 *
 * @example
 * ```ts
 * import { deepStrictEqual, strictEqual } from "node:assert"
 * import { Effect } from "effect"
 * import { TestClock } from "effect/testing"
 * import { HttpRoutes, MeshTest } from "queen-mesh"
 *
 * const program = Effect.gen(function* () {
 *   const network = yield* MeshTest.network
 *   const a = yield* MeshTest.node(network, { serverId: "a", peers: ["b"] })
 *   // Its peer has not had its chance yet: starting, and ready.
 *   strictEqual(HttpRoutes.readiness(yield* a.mesh.stats).status, "starting")
 *   // No link up by the dead threshold: `/readyz` answers 503.
 *   yield* TestClock.adjust("5 seconds")
 *   yield* MeshTest.settle
 *   deepStrictEqual(HttpRoutes.readiness(yield* a.mesh.stats), {
 *     ready: false,
 *     status: "isolated",
 *     reason: "unreached",
 *     links_up: 0,
 *     peer_count: 1,
 *     expected: 1,
 *     healthy: 0
 *   })
 *   // Its peer comes; a's dialer is in its backoff (at most 5 s): then both ways, clustered and ready.
 *   yield* MeshTest.node(network, { serverId: "b", peers: ["a"] })
 *   yield* TestClock.adjust("5 seconds")
 *   yield* MeshTest.settleUntil(Effect.map(a.mesh.stats, (stats) => HttpRoutes.readiness(stats).ready))
 *   strictEqual(HttpRoutes.readiness(yield* a.mesh.stats).status, "clustered")
 * })
 *
 * // Under the test clock, so the example moves time without waiting for it.
 * Effect.runPromise(Effect.scoped(program).pipe(Effect.provide(TestClock.layer())))
 * ```
 *
 * @since 0.1.0
 * @category constructors
 */
export const readiness = (stats: MeshStats.MeshStats): Readiness => {
  const health = stats.health
  const others = stats.enabled ? stats.peers.filter((peer) => !peer.self) : []
  return {
    ready: health.status !== "isolated",
    status: health.status,
    reason: health.reason,
    links_up: others.filter((peer) => peer.connected).length,
    peer_count: others.length,
    expected: health.expected,
    healthy: health.healthy
  }
}

const readyHandler = Effect.map(
  Effect.flatMap(Mesh, (mesh) => mesh.stats),
  (stats) => {
    const body = readiness(stats)
    return json(body, body.ready ? 200 : 503)
  }
)

const healthHandler = Effect.succeed(json({ status: "ok" }))

/**
 * Options of the routes.
 *
 * @since 0.1.0
 * @category models
 */
export interface RouterOptions {
  /** Fields of the host's own to add to the stats bodies (the CLI's dropped stdout events). */
  readonly extraStats?: () => Readonly<Record<string, unknown>>
  /**
   * The cluster page's settings (see `ClusterView`), or `false` to leave the page out. Its peers' stats
   * are fetched at the stats route's path.
   */
  readonly cluster?: Omit<ClusterView.Options, "statsPath"> | false
}

/**
 * The routes: the two stats routes, the minimal shared-state route, `/metrics` (Prometheus text
 * 0.0.4), `/healthz` (the process serves), `/readyz` (200 when ready, else 503) and the cluster page
 * under `/cluster/` (see `ClusterView`), for a host to add to its own `HttpRouter`
 * (`router.addAll(routes)`); {@link makeRouter} is the same as a layer.
 *
 * @since 0.1.0
 * @category routers
 */
export const makeRoutes = (options: RouterOptions = {}): ReadonlyArray<HttpRouter.Route<never, Mesh>> => {
  const routes = [
    HttpRouter.route("GET", paths.sharedStateStats, statsHandler(options.extraStats)),
    HttpRouter.route("GET", paths.interInstanceStats, statsHandler(options.extraStats)),
    HttpRouter.route("GET", paths.sharedState, sharedStateHandler),
    HttpRouter.route("GET", paths.metrics, metricsHandler),
    HttpRouter.route("GET", paths.health, healthHandler),
    HttpRouter.route("GET", paths.ready, readyHandler)
  ]
  return options.cluster === false
    ? routes
    : [...routes, ...clusterRoutes({ ...options.cluster, statsPath: paths.sharedStateStats })]
}

/**
 * A router layer as an app: the router is built on the first request (not when the module loads) and
 * kept, since it holds nothing to release. Building a router layer has nothing to wait for, so it is
 * built synchronously, in a scope of its own that is never closed.
 */
const lazyApp = <R>(
  layer: Layer.Layer<never, never, HttpRouter.HttpRouter | HttpRouter.Request<"Requires", R>>
): Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  HttpServerError.HttpServerError,
  R | HttpServerRequest.HttpServerRequest | Scope.Scope
> => {
  let built:
    | Effect.Effect<
        HttpServerResponse.HttpServerResponse,
        HttpServerError.HttpServerError,
        R | HttpServerRequest.HttpServerRequest | Scope.Scope
      >
    | undefined
  return Effect.suspend(() => {
    built ??= Effect.runSync(Scope.provide(HttpRouter.toHttpEffect(layer), Scope.makeUnsafe()))
    return built
  })
}

/** Answers `RouteNotFound` with the JSON 404; the router fails with no other reason. */
const orNotFound = <R>(
  app: Effect.Effect<HttpServerResponse.HttpServerResponse, HttpServerError.HttpServerError, R>
): Effect.Effect<HttpServerResponse.HttpServerResponse, never, R | HttpServerRequest.HttpServerRequest> =>
  app.pipe(
    Effect.catchReason("HttpServerError", "RouteNotFound", () => notFound),
    Effect.orDie
  )

/**
 * The cluster page's routes, its module loaded on the first request for one of them: a node nobody
 * opens the page of never loads it. Each path is answered by the page's own router, built once.
 */
const clusterRoutes = (options: ClusterView.Options): ReadonlyArray<HttpRouter.Route<never, Mesh>> => {
  // The options' durations are read now, as the page's router would: a bad one fails here, not later.
  for (const duration of [options.fetchTimeout, options.refreshInterval, options.streamLifetime]) {
    if (duration !== undefined) Duration.fromInputUnsafe(duration)
  }
  let loaded:
    | Promise<
        Effect.Effect<
          HttpServerResponse.HttpServerResponse,
          never,
          Mesh | HttpServerRequest.HttpServerRequest | Scope.Scope
        >
      >
    | undefined
  const page = Effect.flatMap(
    Effect.promise(() => {
      loaded ??= import("./ClusterView.js").then((ClusterView) =>
        orNotFound(lazyApp(ClusterView.makeRouter(options)))
      )
      return loaded
    }),
    (app) => app
  )
  const { page: pagePath, script, style, view, events } = ViewPaths.paths
  return [
    HttpRouter.route("GET", pagePath, page),
    HttpRouter.route("GET", style, page),
    HttpRouter.route("GET", script, page),
    HttpRouter.route("GET", view, page),
    HttpRouter.route("GET", events, page)
  ]
}

/**
 * {@link makeRoutes} with no extra counters.
 *
 * @since 0.1.0
 * @category routers
 */
export const routes: ReadonlyArray<HttpRouter.Route<never, Mesh>> = makeRoutes()

/**
 * The routes (see {@link makeRoutes}) as a layer of effect's `HttpRouter`, for a host to mount beside
 * its own (`HttpRouter.serve(Layer.mergeAll(HttpRoutes.router, ...))`). Unknown paths are left to the
 * host (the router fails with an `HttpServerError` whose reason is `RouteNotFound`).
 *
 * @since 0.1.0
 * @category routers
 */
export const makeRouter = (
  options: RouterOptions = {}
): Layer.Layer<never, never, HttpRouter.HttpRouter | HttpRouter.Request<"Requires", Mesh>> =>
  HttpRouter.addAll(makeRoutes(options))

/**
 * {@link makeRouter} with no extra counters.
 *
 * @since 0.1.0
 * @category routers
 */
export const router: Layer.Layer<never, never, HttpRouter.HttpRouter | HttpRouter.Request<"Requires", Mesh>> =
  makeRouter()

/**
 * The JSON 404 answered for anything the routes do not know.
 *
 * @since 0.1.0
 * @category handlers
 */
export const notFound: Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  never,
  HttpServerRequest.HttpServerRequest
> = Effect.map(HttpServerRequest.HttpServerRequest, (request) =>
  json(
    {
      error: "not_found",
      method: request.method,
      path: new URL(request.url, "http://localhost").pathname
    },
    404
  )
)

/**
 * An HTTP app: the response to the `HttpServerRequest` in context, in the request's scope (what
 * effect 3 called `HttpApp.Default`).
 *
 * @since 0.1.0
 * @category models
 */
export type App<E = never, R = never> = Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  E,
  R | HttpServerRequest.HttpServerRequest | Scope.Scope
>

/**
 * The routes as a complete app: a router with a JSON 404. The router is built on the first request.
 *
 * @since 0.1.0
 * @category apps
 */
export const makeApp = (options: RouterOptions = {}): App<never, Mesh> =>
  orNotFound(lazyApp(makeRouter(options)))

/**
 * {@link makeApp} with no extra counters.
 *
 * @since 0.1.0
 * @category apps
 */
export const app: App<never, Mesh> = makeApp()

/**
 * The cluster page's learner (`ClusterView.learnPeers`) for the mesh in context, in the current scope,
 * unless the page is off: from the start, so that a page first opened after a peer died still names it.
 * Its module is loaded only here, not with the routes.
 */
const learnPeers = (options: RouterOptions): Effect.Effect<void, never, Mesh | Scope.Scope> => {
  const cluster = options.cluster
  return cluster === false
    ? Effect.void
    : Effect.flatMap(
        Effect.promise(() => import("./internal/view/peerBook.js")),
        (PeerBook) =>
          PeerBook.learnPeers({
            statsPath: paths.sharedStateStats,
            fetchTimeout: cluster?.fetchTimeout,
            maxBodyBytes: cluster?.maxBodyBytes
          })
      )
}

/**
 * Serves `app` on whatever `HttpServer` is provided, for the life of the layer (and keeps what the
 * cluster page learns of each peer from the start: `ClusterView.learnPeers`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: Layer.Layer<never, never, HttpServer.HttpServer | Mesh> = Layer.merge(
  HttpServer.serve(app),
  Layer.effectDiscard(learnPeers({}))
)

/**
 * @since 0.1.0
 * @category models
 */
export interface ServeOptions extends RouterOptions {
  readonly host: string
  /** 0 asks for an ephemeral port. */
  readonly port: number
  /** Open connections at most; at the cap the oldest idle one is closed to make room. Default 128. */
  readonly maxConnections?: number
  /** Time a client has to send its request headers. Default 5 seconds. */
  readonly headersTimeout?: Duration.Input
  /** Time a client has to send its whole request. Default 10 seconds. */
  readonly requestTimeout?: Duration.Input
  /** How long an idle keep-alive connection is kept. Default 5 seconds. */
  readonly keepAliveTimeout?: Duration.Input
}

/**
 * A Node HTTP server that stays answerable under a slow or flooding client: header, request and
 * keep-alive timeouts, and a connection cap enforced by closing the oldest connection that is not
 * serving a request (a slowloris holds connections that never finish their headers; a real client
 * sends them at once), so a new request always gets a connection.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeServer = (options: Omit<ServeOptions, "host" | "port"> = {}): Http.Server => {
  const maxConnections = options.maxConnections ?? 128
  const server = Http.createServer({
    headersTimeout: Duration.toMillis(Duration.fromInputUnsafe(options.headersTimeout ?? "5 seconds")),
    requestTimeout: Duration.toMillis(Duration.fromInputUnsafe(options.requestTimeout ?? "10 seconds")),
    keepAliveTimeout: Duration.toMillis(Duration.fromInputUnsafe(options.keepAliveTimeout ?? "5 seconds"))
  })
  // Insertion order is age order; a socket serving a request is busy and never evicted.
  const sockets = new Map<Net.Socket, { busy: number }>()
  server.on("connection", (socket: Net.Socket) => {
    if (sockets.size >= maxConnections) {
      for (const [old, state] of sockets) {
        if (state.busy === 0) {
          old.destroy()
          sockets.delete(old)
          break
        }
      }
      if (sockets.size >= maxConnections) {
        socket.destroy()
        return
      }
    }
    sockets.set(socket, { busy: 0 })
    socket.on("close", () => sockets.delete(socket))
  })
  server.on("request", (request: Http.IncomingMessage, response: Http.ServerResponse) => {
    const state = sockets.get(request.socket)
    if (state === undefined) return
    state.busy++
    response.on("close", () => {
      state.busy--
    })
  })
  // A client error (a bad request, a timeout) ends that connection only.
  server.on("clientError", (_error, socket: Net.Socket) => socket.destroy())
  return server
}

/**
 * Starts a Node HTTP server (see {@link makeServer}) serving `app` in the current scope, and returns the
 * bound port once it is listening. When the scope closes, open connections are closed with the server
 * (an open event stream of the cluster page would otherwise hold it). Unless the page is off, it also
 * runs `ClusterView.learnPeers` in the scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const serve = (
  options: ServeOptions
): Effect.Effect<number, HttpServerError.ServeError, Scope.Scope | Mesh> =>
  Effect.gen(function* () {
    // Node's own server with a small adapter of ours (internal/http/nodeServer.ts), not the
    // platform's Node server: what that loads (ws, mime, the Node context) cost more than the routes.
    // Loaded here, so a host that mounts `router` into its own server never loads it.
    const NodeServer = yield* Effect.promise(() => import("./internal/http/nodeServer.js"))
    const node = makeServer(options)
    const port = yield* NodeServer.listen(node, options)
    const served = makeApp(options)
    yield* NodeServer.serve(node, served)
    yield* learnPeers(options)
    return port
  })
