/**
 * A throw-away embedded PostgreSQL for the bench sections that need one (the broker harness's server,
 * `startServer`: PostgreSQL's default durability, fsync on, synchronous_commit on), on 127.0.0.1 and an
 * ephemeral port, in a temp dir removed when it stops; with the time on CPU of the postmaster and every
 * backend, read from `/proc` (each thread's `schedstat`, in ns).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { type Server, startServer } from "../examples/broker/harness/database.js"
import { processCpuNs } from "./cli.js"

export interface StartOptions {
  /** Server settings beside the defaults, each a `-c name=value`, e.g. a higher `max_connections`. */
  readonly settings?: Readonly<Record<string, string>>
}

export interface Database {
  readonly url: string
  /**
   * The URL of a database of its own for one variant, made on first use. PostgreSQL signals every
   * listener of the notifying database at each commit, whatever its channel, so pairs sharing one
   * database would wake each other's idle backends on every wake (on two cores, that is time taken from
   * the pair measured); listeners of other databases are left alone.
   */
  readonly urlFor: (variant: string) => Promise<string>
  readonly version: string
  /** Time on CPU of the postmaster and every backend, in ns. */
  readonly cpuNs: () => number
  /**
   * The same by process id: a window's cost is {@link cpuDeltaNs} of two readings, which a backend
   * that exits meanwhile (a client closing) does not make negative.
   */
  readonly cpuByPid: () => ReadonlyMap<number, number>
  readonly query: (sql: string) => Promise<ReadonlyArray<Record<string, unknown>>>
  readonly stop: () => Promise<void>
}

export const startDatabase = async (options: StartOptions = {}): Promise<Database | string> => {
  let pg: typeof import("pg").default
  try {
    pg = (await import("pg")).default
  } catch (error) {
    return `pg is not installed (npm install): ${error instanceof Error ? error.message : String(error)}`
  }
  const password = "bench"
  let server: Server
  try {
    server = await startServer({
      password,
      ...(options.settings === undefined ? {} : { settings: options.settings })
    })
  } catch (error) {
    return error instanceof Error ? error.message : String(error)
  }
  const { port, dataDir } = server
  const url = `postgres://postgres:${password}@127.0.0.1:${port}/postgres`
  const admin = new pg.Client({ connectionString: url })
  admin.on("error", () => {})
  await admin.connect()
  const query = async (sql: string) => (await admin.query<Record<string, unknown>>(sql)).rows
  const version = String((await query("SHOW server_version"))[0]?.server_version ?? "?")
  const postmaster = Number(Fs.readFileSync(Path.join(dataDir, "postmaster.pid"), "utf8").split("\n")[0])
  const cpuByPid = () => {
    // A process that ends between the listing and the read reads NaN and is left out.
    const out = new Map<number, number>()
    const add = (pid: number) => {
      const ns = processCpuNs(pid)
      if (Number.isFinite(ns)) out.set(pid, ns)
    }
    add(postmaster)
    for (const name of Fs.readdirSync("/proc")) {
      if (!/^\d+$/.test(name)) continue
      try {
        const stat = Fs.readFileSync(`/proc/${name}/stat`, "utf8")
        const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1])
        if (ppid === postmaster) add(Number(name))
      } catch {
        // A process that ended meanwhile.
      }
    }
    return out
  }
  const cpuNs = () => {
    let ns = 0
    for (const value of cpuByPid().values()) ns += value
    return ns
  }
  let stopped = false
  const made = new Map<string, string>()
  const urlFor = async (variant: string) => {
    const name = `bench_${variant.replace(/[^a-z0-9]/g, "_")}`
    let url_ = made.get(name)
    if (url_ === undefined) {
      await query(`CREATE DATABASE ${name}`)
      url_ = url.replace(/\/postgres$/, `/${name}`)
      made.set(name, url_)
    }
    return url_
  }
  const db: Database = {
    url,
    urlFor,
    version,
    cpuNs,
    cpuByPid,
    query,
    stop: async () => {
      if (stopped) return
      stopped = true
      await admin.end().catch(() => undefined)
      await server.stop().catch(() => undefined)
    }
  }
  return db
}

/**
 * The time on CPU between two readings of {@link Database.cpuByPid}: each process's growth, a process
 * born meanwhile counted whole, one gone meanwhile not at all (what it spent in the window is lost;
 * a closing client's backend spends little).
 */
export const cpuDeltaNs = (
  before: ReadonlyMap<number, number>,
  after: ReadonlyMap<number, number>
): number => {
  let ns = 0
  for (const [pid, value] of after) ns += Math.max(0, value - (before.get(pid) ?? 0))
  return ns
}
