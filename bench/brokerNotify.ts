/**
 * The bench's baseline broker: the reference broker of `examples/broker/` with its mesh off, woken the
 * way PostgreSQL job queues commonly wake their workers instead: a trigger on the messages table
 * NOTIFYs in the push's own transaction (one notification per partition of the statement), and every
 * replica LISTENs on a connection of its own and wakes its parked pops (`mesh.messageAvailable` on an
 * inactive mesh wakes this replica's pops and sends nothing). Everything else (HTTP, SQL, parking, the
 * re-poll) is the reference broker's, so the two differ only in how a push reaches a remote pop.
 *
 * The LISTEN uses `pg` directly: `@effect/sql-pg`'s `listen` goes silent when its connection dies.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect, Layer, Redacted } from "effect"
import pg from "pg"
import { Mesh } from "queen-mesh"
import * as Broker from "../examples/broker/Broker.js"
import { BrokerConfig } from "../examples/broker/BrokerConfig.js"

const CHANNEL = "broker_messages"

const TRIGGER = `
  CREATE OR REPLACE FUNCTION broker_notify() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    PERFORM pg_notify('${CHANNEL}', n.tenant || '/' || n.queue || '/' || n.partition)
      FROM (SELECT DISTINCT tenant, queue, partition FROM new_rows) AS n;
    RETURN NULL;
  END $$;
  CREATE OR REPLACE TRIGGER broker_notify AFTER INSERT ON broker_messages
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION broker_notify();`

const Listen = Layer.effectDiscard(
  Effect.gen(function* () {
    const config = yield* BrokerConfig
    const mesh = yield* Mesh.Mesh
    const client = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const client = new pg.Client({ connectionString: Redacted.value(config.databaseUrl) })
        client.on("error", () => {})
        await client.connect()
        return client
      }),
      (client) => Effect.promise(() => client.end().catch(() => undefined))
    )
    yield* Effect.promise(async () => {
      await client.query("BEGIN")
      await client.query("SELECT pg_advisory_xact_lock(hashtext('broker_notify'))")
      await client.query(TRIGGER)
      await client.query("COMMIT")
    })
    client.on("notification", (message) => {
      const [tenant, queue, partition] = (message.payload ?? "").split("/")
      if (tenant === undefined || queue === undefined || partition === undefined) return
      try {
        mesh.unsafeMessageAvailable({ queue, partition, tenant })
      } catch {
        // Closing.
      }
    })
    yield* Effect.promise(() => client.query(`LISTEN ${CHANNEL}`))
  })
)

Layer.launch(Listen.pipe(Layer.provide(Broker.layer))).pipe(
  NodeRuntime.runMain({ teardown: Broker.teardown })
)
