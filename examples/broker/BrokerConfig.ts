/**
 * The broker's own settings, read through Effect's `Config` from the current `ConfigProvider` (the
 * environment unless the host provides another), as the mesh's are. The mesh reads its own variables
 * (`QUEEN_SERVER_ID`, `QUEEN_MESH_PEERS`, `QUEEN_MESH_PORT`, `QUEEN_SYNC_SECRET`, `QUEEN_MESH_PG_URL`,
 * ...); these are the broker's.
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"

export interface BrokerConfigShape {
  /** The HTTP API's address; port 0 asks for an ephemeral port. */
  readonly host: string
  readonly port: number
  /** The database that holds the queues. */
  readonly databaseUrl: Redacted.Redacted<string>
  /** Connections in the pool. */
  readonly maxConnections: number
  /**
   * How often a parked pop re-reads PostgreSQL on its own (its backoff), while the mesh is trusted to
   * wake it: the fallback for a lost hint, so it can be long.
   */
  readonly repoll: Duration.Duration
  /** The same while the mesh is degraded or isolated: the re-poll is then what finds remote pushes. */
  readonly repollDegraded: Duration.Duration
  /** The longest a client may ask a pop to wait. */
  readonly maxWait: Duration.Duration
  /** How often expired leases are handed back (and the pops parked on their queues woken). */
  readonly leaseSweep: Duration.Duration
  /** The lease of a queue without a configuration of its own. */
  readonly defaultLeaseSeconds: number
}

export class BrokerConfig extends Context.Service<BrokerConfig, BrokerConfigShape>()("broker/BrokerConfig") {}

/**
 * An integer variable, checked by `valid` (failing with `message`); its description is the Schema's
 * annotation (effect 4's `Config` has no `withDescription`).
 */
const integer = (name: string, valid: (n: number) => boolean, message: string, description: string) =>
  Config.schema(
    Schema.Int.check(Schema.makeFilter((n: number) => valid(n) || message)).annotate({ description }),
    name
  )

const millis = (name: string, fallback: number, description: string) =>
  integer(name, (n) => n > 0, `${name} must be a positive number of milliseconds`, description).pipe(
    Config.withDefault(fallback),
    Config.map(Duration.millis)
  )

export const config: Config.Config<BrokerConfigShape> = Config.all({
  host: Config.schema(Schema.String.annotate({ description: "address of the HTTP API" }), "BROKER_HOST").pipe(
    Config.withDefault("127.0.0.1")
  ),
  port: integer(
    "BROKER_PORT",
    (n) => n >= 0 && n <= 65535,
    "BROKER_PORT must be 0 to 65535",
    "port of the HTTP API; 0 for an ephemeral one"
  ).pipe(Config.withDefault(8080)),
  databaseUrl: Config.schema(
    Schema.Redacted(Schema.String).annotate({ description: "connection string of the queues' PostgreSQL" }),
    "BROKER_DATABASE_URL"
  ),
  maxConnections: integer(
    "BROKER_DATABASE_CONNECTIONS",
    (n) => n >= 1,
    "BROKER_DATABASE_CONNECTIONS must be 1 or more",
    "connections in the pool"
  ).pipe(Config.withDefault(10)),
  repoll: millis(
    "BROKER_POP_REPOLL_MS",
    10_000,
    "a parked pop's own re-poll interval while the mesh is trusted"
  ),
  repollDegraded: millis(
    "BROKER_POP_REPOLL_DEGRADED_MS",
    200,
    "a parked pop's re-poll interval while the mesh is degraded or isolated"
  ),
  maxWait: millis("BROKER_POP_MAX_WAIT_MS", 60_000, "the longest wait a pop may ask for"),
  leaseSweep: millis("BROKER_LEASE_SWEEP_MS", 1_000, "how often expired leases are handed back"),
  defaultLeaseSeconds: integer(
    "BROKER_LEASE_SECONDS",
    (n) => n >= 1 && n <= 3600,
    "BROKER_LEASE_SECONDS must be 1 to 3600",
    "the lease of a queue with no configuration of its own"
  ).pipe(Config.withDefault(30))
})

export const layer: Layer.Layer<BrokerConfig, Config.ConfigError> = Layer.effect(BrokerConfig, config)
