/**
 * The throw-away PostgreSQL of `queen-mesh demo --lane pg` and of the test suite (`src/cli/embeddedPostgres.ts`)
 * run from binaries kept in a private (0700) directory, as they are in a checkout cloned inside
 * `mktemp -d` or under `/root`. As root the server runs as `postgres`, which cannot enter such a
 * directory: the binaries must be staged where it can. The staging runs everywhere (the first test);
 * the case that needs it, root, runs where the suite runs as root and says why it is skipped elsewhere.
 */
import { spawnSync } from "node:child_process"
import { existsSync } from "node:fs"
import * as Fs from "node:fs/promises"
import * as Os from "node:os"
import * as Path from "node:path"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import pg from "pg"
import * as EmbeddedPostgres from "../src/cli/embeddedPostgres.js"
import { freePort } from "./fixtures/cluster.js"

const PASSWORD = "pw"
const isRoot = process.getuid?.() === 0

/** A copy of the package's binaries inside a fresh private (0700) directory, removed with the scope. */
const privateBinaries = Effect.acquireRelease(
  Effect.promise(async () => {
    const parent = await Fs.mkdtemp(Path.join(Os.tmpdir(), "queen-mesh-private-"))
    return parent
  }),
  (parent) => Effect.promise(() => Fs.rm(parent, { recursive: true, force: true }))
).pipe(
  Effect.tap((parent) => Effect.promise(() => Fs.chmod(parent, 0o700))),
  Effect.flatMap((parent) =>
    Effect.flatMap(EmbeddedPostgres.packageBinaries, (source) =>
      Effect.promise(async () => {
        const binaries = Path.join(parent, "checkout", "native")
        await Fs.cp(source, binaries, { recursive: true, verbatimSymlinks: true })
        return { parent, binaries }
      })
    )
  )
)

/** One query on a fresh connection. */
const selectOne = (port: number) =>
  Effect.promise(async () => {
    const client = new pg.Client({
      connectionString: `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/postgres`
    })
    client.on("error", () => {})
    await client.connect()
    try {
      return (await client.query<{ one: number }>("SELECT 1 AS one")).rows
    } finally {
      await client.end()
    }
  })

/** Starts a server from `binaries` in a scope of its own, queries it, and closes the scope. */
const roundTrip = (options: Omit<EmbeddedPostgres.EmbeddedPostgresOptions, "port" | "password">) =>
  Effect.gen(function* () {
    const scope = yield* Scope.make()
    const port = yield* freePort
    const server = yield* Scope.provide(
      EmbeddedPostgres.make({ port, password: PASSWORD, ...options }),
      scope
    )
    yield* server.start
    assert.deepStrictEqual(yield* selectOne(port), [{ one: 1 }])
    // stop and start again on the same directory, as a restart does
    yield* server.stop
    yield* server.start
    assert.deepStrictEqual(yield* selectOne(port), [{ one: 1 }])
    yield* Scope.close(scope, Exit.void)
    assert.isFalse(existsSync(server.directory), "the server's directory is removed with its scope")
    return server
  })

describe("the embedded PostgreSQL of the demo and the tests", () => {
  it.live(
    "runs binaries staged out of a private (0700) directory into a directory of its own",
    () =>
      Effect.gen(function* () {
        const { parent, binaries } = yield* privateBinaries
        const server = yield* roundTrip({ binaries, stage: true })
        assert.isTrue(server.binaries.startsWith(server.directory), "it ran its own staged copy")
        assert.isFalse(server.directory.startsWith(parent))
      }),
    120_000
  )

  it.live.skipIf(!isRoot)(
    `as root, runs as postgres though the checkout's binaries are out of that user's reach${isRoot ? "" : " (skipped: not root; only root runs the server as another user)"}`,
    () =>
      Effect.gen(function* () {
        const { binaries } = yield* privateBinaries
        // The defaults (no `stage` given) stage them, and the server runs (as `postgres`, made if missing).
        const server = yield* roundTrip({ binaries })
        assert.notStrictEqual(server.binaries, binaries)
        // The case itself: the postgres user cannot run the binaries where the checkout keeps them.
        const id = (flag: string) => Number(spawnSync("id", [flag, "postgres"], { encoding: "utf8" }).stdout)
        const direct = spawnSync(Path.join(binaries, "bin", "postgres"), ["--version"], {
          uid: id("-u"),
          gid: id("-g")
        })
        assert.strictEqual(direct.error && "code" in direct.error ? direct.error.code : undefined, "EACCES")
      }),
    120_000
  )
})
