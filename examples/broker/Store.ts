/**
 * The queues, in PostgreSQL: the one source of truth. A message is a row; a pop claims rows with
 * `FOR UPDATE SKIP LOCKED` and leases them (so concurrent pops on any replica never claim the same
 * row), and an ack deletes them. A lease that runs out makes its rows claimable again: a consumer that
 * died loses nothing. Every statement here is a single statement, so each is its own transaction and
 * has committed when its effect succeeds: that is the moment the mesh may be told.
 */
import { randomUUID } from "node:crypto"
import * as Arr from "effect/Array"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as SchemaTransformation from "effect/SchemaTransformation"
import * as SqlClient from "effect/sql/SqlClient"
import type * as SqlError from "effect/sql/SqlError"

/** A message as pushed. */
export interface Outgoing {
  readonly partition: string
  readonly payload: unknown
}

/** A claimed message, as a pop returns it. */
export const Claimed = Schema.Struct({
  id: Schema.String,
  partition: Schema.String,
  payload: Schema.Unknown,
  deliveries: Schema.Number
})
export type Claimed = typeof Claimed.Type

/** A queue's settings, as the mesh's queue-config cache keeps them. */
export const QueueSettings = Schema.Struct({
  leaseTimeSeconds: Schema.Number,
  encrypted: Schema.Boolean
})
export type QueueSettings = typeof QueueSettings.Type

/** A partition whose lease ran out: its queue has claimable messages again. */
export const Expired = Schema.Struct({
  tenant: Schema.String,
  queue: Schema.String,
  partition: Schema.String
})
export type Expired = typeof Expired.Type

export interface StoreShape {
  /** Inserts the messages, all or none; their ids in order. Committed when it succeeds. */
  readonly push: (
    tenant: string,
    queue: string,
    messages: ReadonlyArray<Outgoing>
  ) => Effect.Effect<ReadonlyArray<string>, SqlError.SqlError>
  /**
   * Claims up to `batch` visible messages under a new lease of `leaseSeconds`; `more` says whether a
   * visible message was left unclaimed.
   */
  readonly claim: (
    tenant: string,
    queue: string,
    batch: number,
    leaseSeconds: number
  ) => Effect.Effect<
    { readonly lease: string; readonly messages: ReadonlyArray<Claimed>; readonly more: boolean },
    SqlError.SqlError
  >
  /**
   * Hands back messages of `ids` held under `lease` that no consumer received (their pop went away
   * before it answered): claimable again at once, the delivery not counted. How many.
   */
  readonly release: (
    tenant: string,
    queue: string,
    lease: string,
    ids: ReadonlyArray<string>
  ) => Effect.Effect<number, SqlError.SqlError>
  /** Deletes the messages of `ids` still held under `lease`; how many. */
  readonly ack: (
    tenant: string,
    queue: string,
    lease: string,
    ids: ReadonlyArray<string>
  ) => Effect.Effect<number, SqlError.SqlError>
  readonly queueSettings: (
    tenant: string,
    queue: string
  ) => Effect.Effect<Option.Option<QueueSettings>, SqlError.SqlError>
  readonly configure: (
    tenant: string,
    queue: string,
    settings: QueueSettings
  ) => Effect.Effect<void, SqlError.SqlError>
  /** Hands back leases that ran out: one row per partition, for the caller to announce. */
  readonly releaseExpired: (limit: number) => Effect.Effect<ReadonlyArray<Expired>, SqlError.SqlError>
}

export class Store extends Context.Service<Store, StoreShape>()("broker/Store") {}

/**
 * The rows a statement returned, checked: what comes back from the database is data from outside.
 * Built once per row type, at module load: `Schema.Array(schema)` is a new AST each time it is called,
 * and a decoder is compiled (and memoized) per AST, so building it per statement compiled one per push.
 */
const decodeRows = <S extends Schema.ConstraintDecoder<unknown>>(schema: S) => {
  const decode = Schema.decodeUnknownEffect(Schema.Array(schema))
  return (rows: ReadonlyArray<unknown>): Effect.Effect<ReadonlyArray<S["Type"]>> => Effect.orDie(decode(rows))
}

/**
 * A `bigserial` id, as the API gives it: a decimal string. `@effect/sql-pg` 4 reads `int8` columns as
 * `bigint` (node-postgres, under effect 3's client, read them as strings); the SQL is unchanged.
 */
const Id = Schema.BigInt.pipe(
  Schema.decodeTo(
    Schema.String,
    SchemaTransformation.transform({ decode: (id) => id.toString(), encode: (id) => BigInt(id) })
  )
)

const IdRow = Schema.Struct({ id: Id })
const decodeIds = decodeRows(IdRow)
/** A claimed row, with whether the claim left a visible row unleased. */
const ClaimedRow = Schema.Struct({ ...Claimed.fields, id: Id, more: Schema.Boolean })
const decodeClaimed = decodeRows(ClaimedRow)
const SettingsRow = Schema.Struct({ lease_time_seconds: Schema.Number, encrypted: Schema.Boolean })
const decodeSettings = decodeRows(SettingsRow)
const decodeExpired = decodeRows(Expired)

/**
 * The tables, created once however many replicas start together: the advisory lock makes the others
 * wait for the first instead of racing it to the catalog.
 */
const migrate = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql.withTransaction(
    Effect.gen(function* () {
      yield* sql`SELECT pg_advisory_xact_lock(hashtext('broker_schema'))`
      yield* sql`CREATE TABLE IF NOT EXISTS broker_messages (
        id bigserial PRIMARY KEY,
        tenant text NOT NULL,
        queue text NOT NULL,
        partition text NOT NULL,
        payload jsonb NOT NULL,
        visible_at timestamptz NOT NULL DEFAULT now(),
        lease uuid,
        deliveries integer NOT NULL DEFAULT 0
      )`
      yield* sql`CREATE INDEX IF NOT EXISTS broker_messages_queue ON broker_messages (tenant, queue, id)`
      yield* sql`CREATE INDEX IF NOT EXISTS broker_messages_leased
        ON broker_messages (visible_at) WHERE lease IS NOT NULL`
      yield* sql`CREATE TABLE IF NOT EXISTS broker_queues (
        tenant text NOT NULL,
        queue text NOT NULL,
        lease_time_seconds integer NOT NULL,
        encrypted boolean NOT NULL,
        PRIMARY KEY (tenant, queue)
      )`
    })
  )
})

export const make: Effect.Effect<StoreShape, SqlError.SqlError, SqlClient.SqlClient> = Effect.gen(
  function* () {
    const sql = yield* SqlClient.SqlClient
    yield* migrate

    const push: StoreShape["push"] = (tenant, queue, messages) => {
      const rows: ReadonlyArray<Record<string, unknown>> = messages.map((message) => ({
        tenant,
        queue,
        partition: message.partition,
        payload: JSON.stringify(message.payload)
      }))
      // `sql.insert` takes one row or a non-empty list; the API never pushes none.
      return Arr.isReadonlyArrayNonEmpty(rows)
        ? sql`INSERT INTO broker_messages ${sql.insert(rows)} RETURNING id`.pipe(
            Effect.flatMap(decodeIds),
            Effect.map((rows) => rows.map((row) => row.id))
          )
        : Effect.succeed([])
    }

    const claim: StoreShape["claim"] = (tenant, queue, batch, leaseSeconds) => {
      const lease = randomUUID()
      // The rows are picked once, in a materialized CTE: as `WHERE id IN (SELECT ... LIMIT n FOR UPDATE
      // SKIP LOCKED)` PostgreSQL may run the subquery again for a row a concurrent claim changed, and
      // then claim more than `batch` rows (seen under the bench's load: a pop of 1,000 answered more).
      // `more` (whether a visible row was left: the waiting pops' group claims again, and a push's
      // peers have news) looks without locking. A probe row locked until the statement ends would be
      // skipped by a concurrent claim on another replica, and neither would lease it: a pop waiting
      // there would wait for its re-poll. Looking without a lock sees rows a concurrent claim is
      // about to lease, so a claim that leased nothing says nothing is left: its group does not claim
      // again and again while another statement holds the rows.
      return sql`WITH picked AS MATERIALIZED (
        SELECT id FROM broker_messages
        WHERE tenant = ${tenant} AND queue = ${queue} AND visible_at <= now()
        ORDER BY id
        LIMIT ${batch}
        FOR UPDATE SKIP LOCKED
      ), claimed AS (
        UPDATE broker_messages AS m
        SET lease = ${lease},
            visible_at = now() + make_interval(secs => ${leaseSeconds}),
            deliveries = m.deliveries + 1
        FROM picked
        WHERE m.id = picked.id
        RETURNING m.id, m.partition, m.payload, m.deliveries
      )
      SELECT id, partition, payload, deliveries, EXISTS (
        SELECT 1 FROM broker_messages
        WHERE tenant = ${tenant} AND queue = ${queue} AND visible_at <= now()
          AND id NOT IN (SELECT id FROM picked)
      ) AS more
      FROM claimed
      ORDER BY id`.pipe(
        Effect.flatMap(decodeClaimed),
        Effect.map((rows) => ({
          lease,
          messages: rows.map(({ more: _, ...message }) => message),
          more: rows[0]?.more ?? false
        }))
      )
    }

    const ack: StoreShape["ack"] = (tenant, queue, lease, ids) =>
      ids.length === 0
        ? Effect.succeed(0)
        : sql`DELETE FROM broker_messages
          WHERE tenant = ${tenant} AND queue = ${queue} AND lease = ${lease} AND id = ANY(${ids}::bigint[])
          RETURNING id`.pipe(Effect.map((rows) => rows.length))

    const release: StoreShape["release"] = (tenant, queue, lease, ids) =>
      ids.length === 0
        ? Effect.succeed(0)
        : sql`UPDATE broker_messages
          SET lease = NULL, visible_at = now(), deliveries = GREATEST(deliveries - 1, 0)
          WHERE tenant = ${tenant} AND queue = ${queue} AND lease = ${lease} AND id = ANY(${ids}::bigint[])
          RETURNING id`.pipe(Effect.map((rows) => rows.length))

    const queueSettings: StoreShape["queueSettings"] = (tenant, queue) =>
      sql`SELECT lease_time_seconds, encrypted FROM broker_queues
        WHERE tenant = ${tenant} AND queue = ${queue}`.pipe(
        Effect.flatMap(decodeSettings),
        Effect.map((rows) =>
          Option.map(Option.fromUndefinedOr(rows[0]), (row) => ({
            leaseTimeSeconds: row.lease_time_seconds,
            encrypted: row.encrypted
          }))
        )
      )

    const configure: StoreShape["configure"] = (tenant, queue, settings) =>
      sql`INSERT INTO broker_queues (tenant, queue, lease_time_seconds, encrypted)
        VALUES (${tenant}, ${queue}, ${settings.leaseTimeSeconds}, ${settings.encrypted})
        ON CONFLICT (tenant, queue) DO UPDATE
        SET lease_time_seconds = EXCLUDED.lease_time_seconds, encrypted = EXCLUDED.encrypted`.pipe(
        Effect.asVoid
      )

    const releaseExpired: StoreShape["releaseExpired"] = (limit) =>
      sql`WITH released AS (
        UPDATE broker_messages SET lease = NULL
        WHERE id IN (
          SELECT id FROM broker_messages
          WHERE lease IS NOT NULL AND visible_at <= now()
          LIMIT ${limit}
          FOR UPDATE SKIP LOCKED
        )
        RETURNING tenant, queue, partition
      )
      SELECT DISTINCT tenant, queue, partition FROM released`.pipe(Effect.flatMap(decodeExpired))

    return { push, claim, release, ack, queueSettings, configure, releaseExpired }
  }
)

/** The store over the `SqlClient` in context; the tables are created when it is built. */
export const layer: Layer.Layer<Store, SqlError.SqlError, SqlClient.SqlClient> = Layer.effect(Store, make)
