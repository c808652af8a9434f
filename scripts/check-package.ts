/**
 * The package's checks (`npm run check:package`, one of `npm test`'s checks): `publint` and `attw
 * --profile esm-only` on the tarball `npm publish` would upload, packed once from the build in `dist/`.
 *
 * It packs without scripts (`npm pack --ignore-scripts`): packing with them runs `prepare`, which is the
 * whole build, and `npm ci` has just run it (`attw --pack` did that, a build's worth of CPU beside the
 * other checks). So `dist/` must be built, and newer than every file of `src/`: a missing or stale build
 * fails here, naming what is out of date, before anything is packed (run `npm run build`). The tarball
 * must hold the library's modules and the CLI's bundle; it goes in a temporary directory, removed at the
 * end whatever happens.
 *
 * `npx tsx scripts/check-package.ts`
 */
import { spawnSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { freshness } from "./buildFreshness.js"
import { bundleEntry, launcher } from "./bundle-cli.js"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
/** `path` relative to the root, with forward slashes, as npm lists a tarball's files. */
const relative = (path: string) => Path.relative(root, path).split(Path.sep).join("/")
const bin = (name: string) => Path.join(root, "node_modules", ".bin", name)

/** A check that failed: its message is printed, and the script exits 1. */
class Failed extends Error {}

/** Packs `dist/` as it is, then runs both tools on the tarball; the exit code. */
const check = (tmp: string): number => {
  if (!Fs.existsSync(Path.join(root, "dist")))
    throw new Failed("dist/ is missing: run `npm run build` (npm ci runs it) before checking the package")
  const { stale } = freshness()
  if (stale.length > 0)
    throw new Failed(
      `the build in dist/ is missing or older than src/ for ${stale.length > 5 ? `${stale.slice(0, 5).join(", ")} and ${stale.length - 5} more` : stale.join(", ")}: run \`npm run build\``
    )
  const pack = spawnSync("npm", ["pack", "--ignore-scripts", "--json", "--pack-destination", tmp], {
    cwd: root,
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024
  })
  if (pack.status !== 0)
    throw new Failed(`npm pack failed (exit ${pack.status})\n${pack.stdout}${pack.stderr}`)
  const [packed]: ReadonlyArray<{ filename: string; files: ReadonlyArray<{ path: string }> }> = JSON.parse(
    pack.stdout
  )
  if (packed === undefined) throw new Failed(`npm pack reported no tarball\n${pack.stdout}${pack.stderr}`)
  const files = new Set(packed.files.map((file) => file.path))
  const missing = ["dist/index.js", "dist/index.d.ts", relative(launcher), relative(bundleEntry)].filter(
    (file) => !files.has(file)
  )
  if (missing.length > 0) throw new Failed(`the tarball lacks ${missing.join(", ")}`)
  const tarball = Path.join(tmp, packed.filename)
  let code = 0
  for (const [name, args] of [
    ["publint", [tarball]],
    ["attw", [tarball, "--profile", "esm-only"]]
  ] as const) {
    const ran = spawnSync(bin(name), args, { cwd: root, stdio: "inherit" })
    if (ran.status !== 0) {
      console.error(`check:package: ${name} failed (exit ${ran.status ?? ran.signal})`)
      code = 1
    }
  }
  return code
}

const tmp = Fs.mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-check-package-"))
try {
  process.exitCode = check(tmp)
} catch (error) {
  if (!(error instanceof Failed)) throw error
  console.error(`check:package: ${error.message}`)
  process.exitCode = 1
} finally {
  Fs.rmSync(tmp, { recursive: true, force: true })
}
