/**
 * The broker, composed: which layer provides what, from the bottom up.
 *
 * 1. `BrokerConfig.layer`: the broker's settings, from the current `ConfigProvider`.
 * 2. `MeshLive`: `Mesh.layerConfig` reads the mesh's own settings the same way and provides `Mesh`
 *    with the shipped host services under their own tags: `LocalWaker` (where pops park),
 *    `QueueConfigCache.MemoryQueueConfigCache` and `MaintenanceFlags`, the same instances the mesh
 *    applies received frames to. `Postgres.layerConfigIfSet` adds the PostgreSQL lane when
 *    `QUEEN_MESH_PG_URL` is set: the same hints over the database's LISTEN/NOTIFY, with or without
 *    mesh peers.
 * 3. `PgClient.layer`: the queues' connection pool (`@effect/sql-pg`), then `Store` (the tables and
 *    statements) and `Queues` (push, pop, ack, configuration, maintenance; the lease sweep).
 * 4. The HTTP server (`NodeHttpServer`) serving `Api.app`, the router of the broker's routes and
 *    `HttpRoutes.router`.
 * 5. `Drain`, built last so that its finalizer runs first (see {@link Drain}).
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as PgClient from "@effect/sql-pg/PgClient"
import * as Cause from "effect/Cause"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as HttpMiddleware from "effect/http/HttpMiddleware"
import * as HttpServer from "effect/http/HttpServer"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as References from "effect/References"
import type * as Runtime from "effect/Runtime"
import * as ClusterView from "queen-mesh/ClusterView"
import * as HttpRoutes from "queen-mesh/HttpRoutes"
import * as LocalWaker from "queen-mesh/LocalWaker"
import * as Mesh from "queen-mesh/Mesh"
import * as Postgres from "queen-mesh/Postgres"
import * as Api from "./Api.js"
import { BrokerConfig, layer as BrokerConfigLive } from "./BrokerConfig.js"
import * as Queues from "./Queues.js"
import * as Server from "./Server.js"
import * as Stages from "./Stages.js"
import * as Store from "./Store.js"

/**
 * The mesh and the shipped host services. While the mesh is degraded or isolated the waker caps every
 * wait at the short re-poll interval: the pops' own re-poll then finds what the mesh cannot announce.
 */
const MeshLive = Layer.unwrap(
  Effect.map(BrokerConfig, (config) =>
    Mesh.layerConfig({ waker: { degradedMaxWait: config.repollDegraded } })
  )
).pipe(Layer.provide(Postgres.layerConfigIfSet()))

const DatabaseLive = Layer.unwrap(
  Effect.map(BrokerConfig, (config) =>
    PgClient.layer({ url: config.databaseUrl, maxConnections: config.maxConnections })
  )
)

const ServicesLive = Queues.layer.pipe(
  Layer.provideMerge(Stages.layer),
  Layer.provideMerge(Store.layer),
  Layer.provideMerge(Layer.merge(MeshLive, DatabaseLive)),
  Layer.provideMerge(BrokerConfigLive)
)

const ServerLive = Layer.unwrap(
  Effect.map(BrokerConfig, (config) =>
    NodeHttpServer.layerServer(Server.createServer, { host: config.host, port: config.port })
  )
)

/**
 * The shutdown order. Layers are released in the reverse of the order they were built, so this one,
 * built after the server, goes first: the waker is shut, every parked long-poll answers at once (empty;
 * its client polls again, elsewhere if it likes) and any pop arriving later answers at once too. Then
 * the server closes, which waits for the requests in flight (quick now), then `Queues` stops its sweep,
 * the mesh closes its links (the peers see this node go quiet), and the pool closes last.
 *
 * It also prints the ready line, once the server is listening: `{"listening":{"http":…,"mesh":…}}`.
 */
const Drain = Layer.effectDiscard(
  Effect.gen(function* () {
    const waker = yield* LocalWaker.LocalWaker
    const mesh = yield* Mesh.Mesh
    const server = yield* HttpServer.HttpServer
    yield* Effect.addFinalizer(() =>
      Effect.flatMap(waker.shutdown, (released) =>
        Effect.logInfo(`draining: ${released} parked pops answered`)
      )
    )
    const http = server.address._tag === "UnixPathAddress" ? null : server.address.port
    yield* Console.log(JSON.stringify({ listening: { http, mesh: Option.getOrNull(mesh.port) } }))
  })
)

/**
 * What the cluster page (mounted with `HttpRoutes.router` in `Api.ts`) needs to name each peer, kept
 * from the moment the mesh hears it: a page first opened after a replica died still draws that replica
 * by its name, down, instead of an unknown address. `HttpRoutes.serve` runs this itself; a broker that
 * mounts the router into its own server runs it in the mesh's scope.
 */
const PageLearner = Layer.effectDiscard(
  ClusterView.learnPeers({ statsPath: HttpRoutes.paths.sharedStateStats })
)

/**
 * The API, served; with the stage tracer's middleware when it is on (`Stages.ts`). No span per request:
 * the platform's server span (the URL parsed, the headers copied into attributes) is the largest
 * fixed cost of a request, for a tracer that exports nowhere (see {@link layer}). The router is built
 * once, in the layer's scope.
 */
const ServeLive = Layer.unwrap(
  Effect.gen(function* () {
    const stages = yield* Stages.Stages
    const app = yield* Api.app
    return HttpServer.serve(app, stages.middleware)
  })
).pipe(Layer.provide(Layer.succeed(HttpMiddleware.TracerDisabledWhen, () => true)))

/**
 * The broker. Effect's tracer is off: nothing here exports spans, and each request would otherwise
 * build two (the server's and `effect/sql`'s per statement). A deployment that traces provides its
 * exporter (`@effect/opentelemetry`) and drops the `TracerEnabled` and `TracerDisabledWhen` settings.
 */
export const layer = Drain.pipe(
  Layer.provide(ServeLive),
  Layer.provide(PageLearner),
  Layer.provideMerge(ServerLive),
  Layer.provideMerge(ServicesLive),
  Layer.provide(Layer.succeed(References.TracerEnabled, false))
)

/**
 * How `main.ts` ends the process: 0 when a signal stopped the broker, 1 on a failure. Effect 4's
 * default teardown exits 130 for an interruption, where effect 3's, which the broker's callers know,
 * exited 0.
 */
export const teardown: Runtime.Teardown = (exit, onExit) =>
  onExit(Exit.isFailure(exit) && !Cause.hasInterruptsOnly(exit.cause) ? 1 : 0)
