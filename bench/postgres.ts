/**
 * A throw-away local PostgreSQL for the LISTEN/NOTIFY comparison: found on `PATH` or under
 * `/usr/lib/postgresql/<version>/bin`, initialised in a temp dir, listening on 127.0.0.1 only, and
 * stopped and removed afterwards, on failure too. As root it runs as the `postgres` user (initdb
 * refuses root) through `runuser`; where none of that is possible the caller skips with the reason.
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"

export interface PgServer {
  readonly port: number
  readonly version: string
  readonly stop: () => void
}

export type PgStart =
  | { readonly ok: true; readonly server: PgServer }
  | { readonly ok: false; readonly reason: string }

const onPath = (name: string): string | undefined => {
  for (const dir of (process.env.PATH ?? "").split(Path.delimiter)) {
    if (dir === "") continue
    const candidate = Path.join(dir, name)
    if (Fs.existsSync(candidate)) return candidate
  }
  return undefined
}

const findBinDir = (): string | undefined => {
  const pgCtl = onPath("pg_ctl")
  if (pgCtl !== undefined && onPath("initdb") !== undefined) return Path.dirname(Fs.realpathSync(pgCtl))
  const root = "/usr/lib/postgresql"
  if (!Fs.existsSync(root)) return undefined
  const versions = Fs.readdirSync(root)
    .filter((v) => Fs.existsSync(Path.join(root, v, "bin", "pg_ctl")))
    .sort((a, b) => Number.parseFloat(b) - Number.parseFloat(a))
  return versions[0] === undefined ? undefined : Path.join(root, versions[0], "bin")
}

const userIds = (name: string): { uid: number; gid: number } | undefined => {
  try {
    const uid = Number(execFileSync("id", ["-u", name], { encoding: "utf8" }).trim())
    const gid = Number(execFileSync("id", ["-g", name], { encoding: "utf8" }).trim())
    return Number.isInteger(uid) && Number.isInteger(gid) ? { uid, gid } : undefined
  } catch {
    return undefined
  }
}

export const startPostgres = (port: number): PgStart => {
  const bin = findBinDir()
  if (bin === undefined) return { ok: false, reason: "no pg_ctl/initdb on PATH or under /usr/lib/postgresql" }
  const asRoot = process.getuid?.() === 0
  let run: (file: string, args: ReadonlyArray<string>) => string
  let owner: { uid: number; gid: number } | undefined
  if (asRoot) {
    owner = userIds("postgres")
    const runuser = onPath("runuser")
    if (owner === undefined || runuser === undefined) {
      return { ok: false, reason: "running as root without a postgres user and runuser to drop to" }
    }
    run = (file, args) =>
      execFileSync(runuser, ["-u", "postgres", "--", file, ...args], { encoding: "utf8", stdio: "pipe" })
  } else {
    run = (file, args) => execFileSync(file, [...args], { encoding: "utf8", stdio: "pipe" })
  }

  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-bench-pg-"))
  const data = Path.join(dir, "data")
  const log = Path.join(dir, "server.log")
  if (owner !== undefined) Fs.chownSync(dir, owner.uid, owner.gid)
  const pgCtl = Path.join(bin, "pg_ctl")
  let started = false
  const stop = () => {
    if (started) {
      try {
        run(pgCtl, ["-D", data, "-m", "immediate", "-w", "-t", "20", "stop"])
      } catch {
        // Already gone.
      }
      started = false
    }
    Fs.rmSync(dir, { recursive: true, force: true })
  }
  try {
    const version = run(pgCtl, ["--version"]).trim()
    run(Path.join(bin, "initdb"), ["-D", data, "-A", "trust", "-U", "bench", "-E", "UTF8", "--no-sync"])
    started = true
    run(pgCtl, [
      "-D",
      data,
      "-l",
      log,
      "-w",
      "-t",
      "30",
      "-o",
      `-p ${port} -c listen_addresses=127.0.0.1 -k ${dir} -c fsync=off -c full_page_writes=off`,
      "start"
    ])
    return { ok: true, server: { port, version, stop } }
  } catch (error) {
    let detail = error instanceof Error ? error.message.split("\n")[0] : String(error)
    try {
      detail += ` (${Fs.readFileSync(log, "utf8").trim().split("\n").slice(-2).join(" | ")})`
    } catch {
      // No log.
    }
    stop()
    return { ok: false, reason: `PostgreSQL did not start: ${detail}` }
  }
}
