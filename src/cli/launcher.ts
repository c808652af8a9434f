/**
 * What `dist/cli.js` runs: the `queen-mesh` bundle (`dist/bin/queen-mesh.cjs`, one script built by
 * scripts/bundle-cli.ts) compiled with V8's code cache when one is beside it, and the stack-trace
 * mapper (src/cli/stackTraces.ts).
 *
 * Why a script and a cache of our own: a node's start-up was mostly V8 compiling the bundle (the
 * first call of each of thousands of functions compiles it), and Node 20 keeps no compile cache for
 * ES modules (`module.enableCompileCache` is Node 22's). A script compiled with the cache V8 wrote
 * after an earlier start skips that work (docs/cli.md, "Start-up and memory").
 *
 * The cache (`queen-mesh.cjs.<V8 version>-<arch>.cache`, beside the bundle) is written by `npm run
 * build`, and again a second after a start that had none or whose cache V8 refused (another Node, other
 * V8 flags), when the process runs with no flags of its own and the directory is writable. V8 checks a
 * cache against the source and its own version and flags before it uses any of it; a refused one only
 * costs the compile it would have saved. `QUEEN_MESH_COMPILE_CACHE=0` turns it off, `=report` prints
 * on stderr whether it was used; any other value but `1` exits 2 naming the variable.
 *
 * @internal
 */
import * as Fs from "node:fs"
import * as Module from "node:module"
import * as Path from "node:path"
import * as Url from "node:url"
import * as Vm from "node:vm"
import { mapStackTraces } from "./stackTraces.js"

/** The bundle's file name under `dist/bin/`. */
export const BUNDLE = "queen-mesh.cjs"

/** The parameters the bundle's wrapper function takes, in order (scripts/bundle-cli.ts writes it). */
export const WRAPPER_PARAMETERS = [
  "exports",
  "require",
  "module",
  "__filename",
  "__dirname",
  "__queenMeshImportMetaUrl",
  "__queenMeshImport"
] as const

/** The launcher's `import()`: a script compiled from a cache has none of its own (src/cli/importExternal.ts). */
const importModule = (specifier: string): Promise<unknown> => import(specifier)

/** Where the code cache of `bundle` is for this Node: its V8 version and architecture in the name. */
export const cacheFile = (bundle: string): string => `${bundle}.${process.versions.v8}-${process.arch}.cache`

/** What became of the cache at this start. */
export type CacheState = "used" | "absent" | "refused" | "off"

const readCache = (file: string): Buffer | undefined => {
  try {
    return Fs.readFileSync(file)
  } catch {
    return undefined
  }
}

/** Writes the cache through a file of its own and a rename, so a reader never sees half of one. */
const writeCache = (file: string, data: Buffer, report: boolean) => {
  const partial = `${file}.${process.pid}.partial`
  try {
    Fs.writeFileSync(partial, data)
    Fs.renameSync(partial, file)
    if (report) process.stderr.write(`queen-mesh: compile cache written: ${file}\n`)
  } catch (error) {
    // A read-only install keeps starting without a cache; nothing else depends on it.
    Fs.rmSync(partial, { force: true })
    if (report) process.stderr.write(`queen-mesh: compile cache not written: ${String(error)}\n`)
  }
}

/**
 * Compiles and runs the bundle at `bundle` (a path), with its code cache when there is a usable one;
 * the cache's state at this start.
 */
export const runBundle = (bundle: string, env: NodeJS.ProcessEnv = process.env): CacheState => {
  const setting = env.QUEEN_MESH_COMPILE_CACHE ?? ""
  if (!["", "1", "0", "report"].includes(setting)) {
    process.stderr.write(
      `queen-mesh: invalid environment: QUEEN_MESH_COMPILE_CACHE: expected 1, 0 or report, got ${JSON.stringify(setting)}\n`
    )
    process.exit(2)
  }
  const off = setting === "0"
  const report = setting === "report"
  const cache = cacheFile(bundle)
  const cachedData = off ? undefined : readCache(cache)
  // The bundle is ASCII (scripts/bundle-cli.ts checks), so Latin-1 reads it as UTF-8 would: without
  // UTF-8's decoding, a few milliseconds of a start for a megabyte.
  const script = new Vm.Script(Fs.readFileSync(bundle, "latin1"), {
    filename: bundle,
    ...(cachedData === undefined ? {} : { cachedData })
  })
  const state: CacheState = off
    ? "off"
    : cachedData === undefined
      ? "absent"
      : script.cachedDataRejected === true
        ? "refused"
        : "used"
  if (report) process.stderr.write(`queen-mesh: compile cache ${state}: ${cache}\n`)
  // V8 flags change what a cache is valid for: a run with its own writes none.
  if ((state === "absent" || state === "refused") && process.execArgv.length === 0 && !env.NODE_OPTIONS) {
    // After the start, so the cache holds what starting compiled; unref'd, so a short command is not
    // held up by it.
    setTimeout(() => writeCache(cache, script.createCachedData(), report), 1000).unref()
  }
  const wrapper: unknown = script.runInThisContext()
  if (typeof wrapper !== "function") throw new Error(`${bundle} is not the queen-mesh bundle`)
  const module = { exports: {} }
  wrapper.call(
    module.exports,
    module.exports,
    Module.createRequire(bundle),
    module,
    bundle,
    Path.dirname(bundle),
    Url.pathToFileURL(bundle).href,
    importModule
  )
  return state
}

/**
 * The launcher's work: the bundle, then traces mapped through the listed files' maps (paths under
 * `bin`, a `file:` URL ending in `/`).
 *
 * The mapper goes in once the bundle's first synchronous run is over (or has thrown): effect reads a
 * trace of its own as it loads, and mapping that one would read and decode the bundle's whole map at
 * every start (milliseconds, and megabytes kept). A trace is formatted when its `stack` is first read,
 * so an error thrown while the bundle loads is still mapped when it is printed.
 */
export const launch = (bin: string, mapped: ReadonlyArray<string>): void => {
  try {
    runBundle(Url.fileURLToPath(new URL(BUNDLE, bin)))
  } finally {
    mapStackTraces(bin, mapped)
  }
}
