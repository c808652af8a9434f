/**
 * The reference broker's claim (`examples/broker/Store.ts`) on a real PostgreSQL: a claim locks only
 * the rows it leases. It once picked one row more than it leased, `FOR UPDATE SKIP LOCKED`, to learn
 * whether rows were left; a concurrent claim on another replica skipped that row while the first
 * statement ran, neither leased it, and a pop waiting there waited for its re-poll. Here the first
 * claim's transaction is held open after it has claimed, so its locks stay: the second claim must
 * still find the row the first one only looked at.
 */
import * as PgClient from "@effect/sql-pg/PgClient"
import { assert } from "@effect/vitest"
import { Deferred, Effect, Fiber, Layer, Logger, Redacted } from "effect"
import * as SqlClient from "effect/sql/SqlClient"
import * as Store from "../examples/broker/Store.js"
import { layer } from "./fixtures/layer.js"
import * as Pg from "./fixtures/postgres.js"

const TENANT = "00000000-0000-0000-0000-000000000001"

const TestLayer = Layer.merge(Pg.layer, Logger.layer([]))

layer(TestLayer, { excludeTestServices: true, timeout: "120 seconds" })("broker Store", (it) => {
  it.effect("a claim locks only what it leases: a concurrent claim finds the rest", () =>
    Effect.gen(function* () {
      const server = yield* Pg.PgServer
      yield* server.query("DROP DATABASE IF EXISTS broker_store WITH (FORCE)")
      yield* server.query("CREATE DATABASE broker_store")
      const run = Effect.gen(function* () {
        const store = yield* Store.make
        const sql = yield* SqlClient.SqlClient
        const pushed = yield* store.push(TENANT, "q", [
          { partition: "p", payload: 1 },
          { partition: "p", payload: 2 }
        ])
        const gate = yield* Deferred.make<void>()
        const claimed = yield* Deferred.make<Effect.Success<ReturnType<Store.StoreShape["claim"]>>>()
        // The first claim, its transaction held open until the second has run.
        const first = yield* sql
          .withTransaction(
            Effect.gen(function* () {
              const result = yield* store.claim(TENANT, "q", 1, 30)
              yield* Deferred.succeed(claimed, result)
              yield* Deferred.await(gate)
              return result
            })
          )
          .pipe(Effect.forkChild)
        const one = yield* Deferred.await(claimed)
        const two = yield* store.claim(TENANT, "q", 1, 30)
        yield* Deferred.succeed(gate, undefined)
        yield* Fiber.join(first)
        assert.deepStrictEqual(
          [one.messages.map((m) => m.id), one.more, two.messages.map((m) => m.id), two.more],
          // The second sees the first's row as visible still (its lease is not committed): a claim
          // that looks without a lock may say rows are left when a concurrent claim is taking them,
          // which costs a follow-up claim, never a row.
          [[pushed[0]], true, [pushed[1]], true]
        )
        // A claim that leases nothing says nothing is left, whatever it saw.
        const three = yield* store.claim(TENANT, "q", 1, 30)
        assert.deepStrictEqual([three.messages.length, three.more], [0, false])
      })
      yield* run.pipe(
        Effect.provide(
          PgClient.layer({ url: Redacted.make(server.urlOf("broker_store")), maxConnections: 4 })
        )
      )
    })
  )
})
