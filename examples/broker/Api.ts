/**
 * The broker's HTTP API on `effect/http`, with the mesh's own routes (`/readyz`, `/healthz`,
 * `/metrics`, the stats routes) mounted beside it from `HttpRoutes.router`. Every input goes through a
 * Schema; every failure becomes a JSON answer with a status.
 *
 * | route                              | does                                                          |
 * | ---------------------------------- | ------------------------------------------------------------- |
 * | `POST /queues/:queue/messages`     | push one (`{partition?, payload}`) or a batch (`{messages}`)  |
 * | `GET /queues/:queue/messages`      | pop: `?batch=1..1000&wait=<ms>` long-polls for up to `wait`   |
 * | `POST /queues/:queue/ack`          | `{lease, ids}`: the popped messages are done                  |
 * | `GET`, `PUT /queues/:queue/config`  | `{leaseTimeSeconds, encrypted}`                               |
 * | `GET`, `PUT /maintenance`          | `{enabled}`: pushes refused on every replica                  |
 * | `PUT /maintenance/pop`             | `{enabled}`: pops answer empty on every replica               |
 * | `GET /broker/stats`                | this replica's counters                                       |
 *
 * Every queue route takes `?tenant=<uuid>` (default: upstream Queen's default tenant).
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as HttpRouter from "effect/http/HttpRouter"
import * as HttpServerRequest from "effect/http/HttpServerRequest"
import * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Layer from "effect/Layer"
import * as Metric from "effect/Metric"
import * as Schema from "effect/Schema"
import * as HttpRoutes from "queen-mesh/HttpRoutes"
import * as LocalWaker from "queen-mesh/LocalWaker"
import * as Mesh from "queen-mesh/Mesh"
import * as Body from "./Body.js"
import { BrokerConfig } from "./BrokerConfig.js"
import { metrics, Queues, type QueuesShape } from "./Queues.js"
import { Stages } from "./Stages.js"

/** Upstream Queen's default tenant, which its peers send for it. */
export const DEFAULT_TENANT = "00000000-0000-0000-0000-000000000001"

/** Queue and partition names: what fits a URL and the mesh's 255-character limit. */
const Name = Schema.String.check(Schema.isPattern(/^[A-Za-z0-9._-]{1,255}$/))

/**
 * Any UUID-shaped string, whatever its version nibble: effect 4's `isUUID` wants a version of 1 to 8,
 * and upstream Queen's default tenant (version 0) would fail it. This is effect 3's `Schema.UUID`.
 */
const Uuid = Schema.String.check(
  Schema.isPattern(/^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$/i)
)

const Tenant = Uuid.pipe(Schema.withDecodingDefaultType(Effect.succeed(DEFAULT_TENANT)))

const QueuePath = Schema.Struct({ queue: Name })
const TenantQuery = Schema.Struct({ tenant: Tenant })
const PopQuery = Schema.Struct({
  tenant: Tenant,
  batch: Schema.NumberFromString.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 1000 })).pipe(
    Schema.withDecodingDefaultType(Effect.succeed(1))
  ),
  wait: Schema.NumberFromString.check(Schema.isInt(), Schema.isGreaterThanOrEqualTo(0)).pipe(
    Schema.withDecodingDefaultType(Effect.succeed(0))
  )
})

export const Message = Schema.Struct({
  partition: Name.pipe(Schema.withDecodingDefaultType(Effect.succeed("Default"))),
  // Any JSON value, but one: a missing key would decode as `undefined`.
  payload: Schema.Unknown.check(
    Schema.makeFilter((payload) => payload !== undefined || "payload is required")
  )
})
export const PushBody = Schema.Union([
  Schema.Struct({ messages: Schema.Array(Message).check(Schema.isMinLength(1), Schema.isMaxLength(1000)) }),
  Message
])
export const AckBody = Schema.Struct({
  lease: Uuid,
  ids: Schema.Array(Schema.String.check(Schema.isPattern(/^[0-9]{1,19}$/))).check(Schema.isMaxLength(1000))
})
export const ConfigBody = Schema.Struct({
  leaseTimeSeconds: Schema.Number.check(Schema.isInt(), Schema.isBetween({ minimum: 1, maximum: 3600 })),
  encrypted: Schema.Boolean.pipe(Schema.withDecodingDefaultType(Effect.succeed(false)))
})
export const SwitchBody = Schema.Struct({ enabled: Schema.Boolean })

const json = (body: unknown, status = 200) => HttpServerResponse.jsonUnsafe(body, { status })

/**
 * The inputs of the routes, each decoder built once here rather than per request: a request then runs
 * an Effect that already exists instead of assembling one.
 */
const queuePath = HttpRouter.schemaPathParams(QueuePath)
const popQuery = HttpServerRequest.schemaSearchParams(PopQuery)
const pushBody = Body.schemaBodyJson(PushBody)
const ackBody = Body.schemaBodyJson(AckBody)
const configBody = Body.schemaBodyJson(ConfigBody)
const switchBody = Body.schemaBodyJson(SwitchBody)

/** The queue and tenant a queue route names; tenants are UUIDs, kept lowercase as the mesh keeps them. */
const queueOf = Effect.all({
  queue: Effect.map(queuePath, (path) => path.queue),
  tenant: Effect.map(HttpServerRequest.schemaSearchParams(TenantQuery), (query) => query.tenant.toLowerCase())
})

const push = Effect.gen(function* () {
  const queues = yield* Queues
  const stages = yield* Stages
  yield* stages.mark("handler")
  const { queue, tenant } = yield* queueOf
  const body = yield* pushBody
  yield* stages.mark("decoded")
  const messages = "messages" in body ? body.messages : [body]
  const ids = yield* queues.push(tenant, queue, messages)
  yield* stages.note("push", ids)
  return json({ ids }, 201)
})

const pop = Effect.gen(function* () {
  const queues = yield* Queues
  const config = yield* BrokerConfig
  const stages = yield* Stages
  yield* stages.mark("handler")
  const { queue } = yield* queuePath
  const query = yield* popQuery
  const wait = Duration.min(Duration.millis(query.wait), config.maxWait)
  const result = yield* queues.pop(query.tenant.toLowerCase(), queue, { batch: query.batch, wait })
  yield* stages.note(
    "pop",
    result.messages.map((message) => message.id)
  )
  return json(result)
})

const ack = Effect.gen(function* () {
  const queues = yield* Queues
  const { queue, tenant } = yield* queueOf
  const body = yield* ackBody
  return json({ acked: yield* queues.ack(tenant, queue, body.lease.toLowerCase(), body.ids) })
})

const configure = Effect.gen(function* () {
  const queues = yield* Queues
  const { queue, tenant } = yield* queueOf
  const settings = yield* configBody
  yield* queues.configure(tenant, queue, settings)
  return json({ queue, tenant, ...settings })
})

const settings = Effect.gen(function* () {
  const queues = yield* Queues
  const { queue, tenant } = yield* queueOf
  return json({ queue, tenant, ...(yield* queues.settings(tenant, queue)) })
})

const maintenance = Effect.flatMap(Queues, (queues) => Effect.map(queues.maintenance, (flags) => json(flags)))

const flip = (set: (queues: QueuesShape, enabled: boolean) => Effect.Effect<void>) =>
  Effect.gen(function* () {
    const queues = yield* Queues
    const { enabled } = yield* switchBody
    yield* set(queues, enabled)
    return json(yield* queues.maintenance)
  })

const stats = Effect.gen(function* () {
  const mesh = yield* Mesh.Mesh
  const waker = yield* LocalWaker.LocalWaker
  const count = (counter: typeof metrics.pushed) => Effect.map(Metric.value(counter), (state) => state.count)
  const waits = yield* Metric.value(metrics.waits)
  return json({
    server_id: mesh.serverId,
    pushed: yield* count(metrics.pushed),
    popped: yield* count(metrics.popped),
    acked: yield* count(metrics.acked),
    released: yield* count(metrics.released),
    claims: yield* count(metrics.claims),
    parked: yield* waker.parked,
    waits: Object.fromEntries(waits.occurrences)
  })
})

/** The broker's routes, for the router (`HttpRouter.toHttpEffect` below, or a host's own). */
export const routes = HttpRouter.addAll([
  HttpRouter.route("POST", "/queues/:queue/messages", push),
  HttpRouter.route("GET", "/queues/:queue/messages", pop),
  HttpRouter.route("POST", "/queues/:queue/ack", ack),
  HttpRouter.route("GET", "/queues/:queue/config", settings),
  HttpRouter.route("PUT", "/queues/:queue/config", configure),
  HttpRouter.route("GET", "/maintenance", maintenance),
  HttpRouter.route(
    "PUT",
    "/maintenance",
    flip((queues, enabled) => queues.setMaintenance(enabled))
  ),
  HttpRouter.route(
    "PUT",
    "/maintenance/pop",
    flip((queues, enabled) => queues.setPopMaintenance(enabled))
  ),
  HttpRouter.route("GET", "/broker/stats", stats)
])

/** The broker's routes and the mesh's, on one router. */
export const router = Layer.merge(routes, HttpRoutes.router)

/**
 * The router as the server's app, every failure answered: bad input 400, maintenance and the database
 * 503, an unknown route the mesh's JSON 404. Built in the current scope (`HttpRouter.toHttpEffect`
 * builds the router's layer once, there).
 */
export const app = Effect.map(HttpRouter.toHttpEffect(router), (handler) =>
  handler.pipe(
    Effect.catchTags({
      SchemaError: (error) => Effect.succeed(json({ error: "bad_request", detail: error.message }, 400)),
      BodyError: (error) =>
        Effect.succeed(
          error.reason === "too_large"
            ? json({ error: "too_large", detail: error.message }, 413)
            : json({ error: "bad_request", detail: error.message }, 400)
        ),
      HttpServerError: (error) =>
        error.reason._tag === "RouteNotFound"
          ? HttpRoutes.notFound
          : Effect.succeed(json({ error: "bad_request", detail: error.message }, 400)),
      MaintenanceError: () => Effect.succeed(json({ error: "maintenance" }, 503)),
      SqlError: (error) =>
        Effect.as(Effect.logWarning("database failure", error), json({ error: "database_unavailable" }, 503))
    })
  )
)
