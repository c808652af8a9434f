/**
 * Whether the build in `dist/` is the build of `src/` as it is: each module of `src/` against its output,
 * and every file of `src/` (the cluster page's files included) against the CLI's bundle, which `npm run
 * build` writes last, from all of them. Read by the package's check (`scripts/check-package.ts`) and by
 * the packed-tarball test (test/package.release.test.ts), which both pack `dist/` as it is.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")

/** Every file under `dir`, as paths relative to it. */
const walk = (dir: string): Array<string> =>
  Fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => Path.relative(dir, Path.join(entry.parentPath, entry.name)))

const mtime = (path: string): number | undefined =>
  Fs.existsSync(path) ? Fs.statSync(path).mtimeMs : undefined

export interface Freshness {
  /** Outputs missing or older than their sources, the bundle named once for all of `src/`. */
  readonly stale: ReadonlyArray<string>
  /** Modules in `dist/` with no source in `src/` (a source removed since the build). */
  readonly orphans: ReadonlyArray<string>
}

/** What in `dist/` is missing, older than `src/`, or left from a source that is gone. */
export const freshness = (): Freshness => {
  const sources = walk(Path.join(root, "src"))
  const stale: Array<string> = []
  for (const file of sources.filter((file) => file.endsWith(".ts") && !file.endsWith(".d.ts"))) {
    const output = `dist/${file.replace(/\.ts$/, ".js")}`
    const built = mtime(Path.join(root, output))
    if (built === undefined || built < Fs.statSync(Path.join(root, "src", file)).mtimeMs) stale.push(output)
  }
  const bundle = mtime(Path.join(root, "dist", "bin", "queen-mesh.cjs"))
  if (
    bundle === undefined ||
    mtime(Path.join(root, "dist", "cli.js")) === undefined ||
    sources.some((file) => bundle < Fs.statSync(Path.join(root, "src", file)).mtimeMs)
  )
    stale.push("the CLI's bundle (dist/bin/queen-mesh.cjs, dist/cli.js)")
  const dist = Path.join(root, "dist")
  const orphans = Fs.existsSync(dist)
    ? walk(dist)
        .filter((file) => file.endsWith(".js") && !file.startsWith(`bin${Path.sep}`))
        .filter((file) => !Fs.existsSync(Path.join(root, "src", file.replace(/\.js$/, ".ts"))))
    : []
  return { stale, orphans }
}
