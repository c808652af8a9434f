/**
 * The package as a consumer gets it: the exports map names exactly the public modules, and the packed
 * tarball, installed next to the Effect versions we support (test/fixtures/consumer/), shares their one
 * copy of `effect`, hides the CLI and the internals, and runs the README's first example and a
 * three-node cluster on the public test kit. Packs the build in dist/, which must be fresh: `npm run
 * build` after changing src/ (`npm ci` runs it); `npm test`'s `check:package` fails first on a stale one.
 */
import { execFile } from "node:child_process"
import { cpSync, mkdtempSync, readdirSync, readFileSync, realpathSync, renameSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { freshness } from "../scripts/buildFreshness.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const template = fileURLToPath(new URL("fixtures/consumer", import.meta.url))

interface Manifest {
  readonly exports: Record<string, unknown>
  readonly sideEffects: ReadonlyArray<string>
  readonly dependencies: Record<string, string>
  readonly peerDependencies: Record<string, string>
  readonly devDependencies: Record<string, string>
}
const manifest: Manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))

/** The public modules: the files directly under src/, bar the CLI entry and the barrel. */
const publicModules = readdirSync(join(root, "src"))
  .filter(
    (file) => file.endsWith(".ts") && !file.endsWith(".d.ts") && file !== "cli.ts" && file !== "index.ts"
  )
  .map((file) => file.slice(0, -".ts".length))
  .sort()

const moduleEntry = (name: string) => ({ types: `./dist/${name}.d.ts`, import: `./dist/${name}.js` })

/** How a child process ended: its exit code (null if it was killed) and what it printed. */
interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** The variables of npm's own run and of the mesh, left out so the child sees a clean project. */
const NOT_INHERITED =
  /^(npm_package_|npm_lifecycle_|npm_command$|npm_config_local_prefix$|INIT_CWD$|QUEEN_|HOSTNAME$)/i
const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !NOT_INHERITED.test(key)))

const run = (command: string, args: ReadonlyArray<string>, cwd: string, timeout: number) =>
  new Promise<Ran>((resolve) => {
    execFile(command, args, { cwd, env, timeout, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
      resolve({ code, stdout, stderr })
    })
  })

const output = (ran: Ran) => `exit ${ran.code}\n--- stdout\n${ran.stdout}\n--- stderr\n${ran.stderr}`

describe("package.json", () => {
  it("exports the root, package.json and exactly the top-level modules of src/ (not cli, not internal)", () => {
    const expected = [
      ".",
      ...publicModules.map((name) => `./${name}`),
      "./internal/*",
      "./package.json"
    ].sort()
    const actual = Object.keys(manifest.exports).sort()
    const missing = expected.filter((key) => !actual.includes(key))
    const extra = actual.filter((key) => !expected.includes(key))
    assert.deepStrictEqual(
      { missing, extra },
      { missing: [], extra: [] },
      'package.json "exports" must list every src/*.ts module except cli.ts and index.ts, and nothing else'
    )
    assert.deepStrictEqual(manifest.exports["."], moduleEntry("index"))
    assert.strictEqual(manifest.exports["./package.json"], "./package.json")
    // The runtime's machinery is no one's to import: `null` closes the path, as @effect/cluster does.
    assert.strictEqual(manifest.exports["./internal/*"], null)
    for (const name of publicModules)
      assert.deepStrictEqual(manifest.exports[`./${name}`], moduleEntry(name), name)
  })

  it("marks only the CLI entry as having side effects", () => {
    assert.deepStrictEqual(manifest.sideEffects, ["./dist/cli.js"])
  })

  it("takes Effect and the platform as peers, pinned exactly for development", () => {
    for (const name of ["effect", "@effect/platform-node"]) {
      assert.match(manifest.peerDependencies[name] ?? "", /^\^\d+\.\d+\.\d+$/, `${name} peer range`)
      assert.match(manifest.devDependencies[name] ?? "", /^\d+\.\d+\.\d+$/, `${name} exact dev pin`)
      assert.notProperty(manifest.dependencies ?? {}, name, `${name} must not be a dependency`)
    }
  })
})

// The checks run side by side: each is a child process of its own in the one installed consumer.
describe.concurrent("the packed tarball in a consumer project", () => {
  let tmp = ""
  let consumer = ""
  let packed: ReadonlyArray<string> = []

  beforeAll(async () => {
    const { stale, orphans } = freshness()
    if (stale.length > 0)
      throw new Error(`dist/ is older than src/ for ${stale.join(", ")}: run \`npm run build\` first`)
    if (orphans.length > 0)
      throw new Error(
        `dist/ holds output with no source (${orphans.join(", ")}): remove dist/ and run \`npm run build\``
      )
    tmp = realpathSync(mkdtempSync(join(tmpdir(), "queen-mesh-package-")))
    // The build is fresh (checked above), so pack it as it is rather than rebuild under other tests.
    const pack = await run(
      "npm",
      ["pack", "--ignore-scripts", "--json", "--pack-destination", tmp],
      root,
      120_000
    )
    if (pack.code !== 0) throw new Error(`npm pack failed\n${output(pack)}`)
    const [result]: ReadonlyArray<{ filename: string; files: ReadonlyArray<{ path: string }> }> = JSON.parse(
      pack.stdout
    )
    if (result === undefined) throw new Error(`npm pack reported nothing\n${output(pack)}`)
    packed = result.files.map((file) => file.path)
    consumer = join(tmp, "consumer")
    cpSync(template, consumer, { recursive: true })
    renameSync(join(tmp, result.filename), join(consumer, "queen-mesh.tgz"))
    const install = await run(
      "npm",
      ["install", "--no-audit", "--no-fund", "--prefer-offline"],
      consumer,
      300_000
    )
    if (install.code !== 0) throw new Error(`npm install in the consumer failed\n${output(install)}`)
  }, 480_000)

  afterAll(() => {
    if (tmp !== "") rmSync(tmp, { recursive: true, force: true })
  })

  it("holds the build, the sources its maps point at, README.md and docs/, and no tests", () => {
    for (const file of ["package.json", "README.md", "docs/cli.md", "dist/index.js", "dist/index.d.ts"])
      assert.include(packed, file)
    assert.include(packed, "dist/cli.js")
    assert.include(packed, "src/index.ts")
    for (const name of publicModules) assert.include(packed, `dist/${name}.js`)
    const unexpected = packed.filter(
      (file) =>
        !(/^(dist|src|docs)\//.test(file) || ["package.json", "README.md", "LICENSE"].includes(file)) ||
        /\.test\./.test(file)
    )
    assert.deepStrictEqual(unexpected, [])
  })

  it("ships the cluster page's files, and the installed routes serve them", async () => {
    for (const file of ["src/view/cluster.html", "src/view/cluster.css", "src/view/cluster.js"])
      assert.include(packed, file)
    const ran = await run(process.execPath, ["cluster-page.mjs"], consumer, 30_000)
    assert.strictEqual(ran.code, 0, output(ran))
    // The mesh logs its start on stdout too: the answers are the last line.
    assert.deepStrictEqual(JSON.parse(ran.stdout.trim().split("\n").at(-1) ?? ""), {
      "/cluster/": [200, "text/html; charset=utf-8"],
      "/cluster/cluster.js": [200, "text/javascript; charset=utf-8"],
      "/cluster/cluster.css": [200, "text/css; charset=utf-8"],
      "/cluster/view.json": [200, "application/json"]
    })
  })

  it("installs one copy of effect, shared with the consumer", () => {
    // Every installed package named `effect`, at any depth of the consumer's tree (what `npm ls effect
    // --all` lists, without starting npm).
    const modules = join(consumer, "node_modules")
    const copies = readdirSync(modules, { recursive: true, encoding: "utf8" })
      .filter((file) => /^(?:.*\/node_modules\/)?effect\/package\.json$/.test(file))
      .map((file) => {
        const { version }: { readonly version: string } = JSON.parse(
          readFileSync(join(modules, file), "utf8")
        )
        return `${join(modules, dirname(file))}@${version}`
      })
    assert.deepStrictEqual(copies, [`${join(consumer, "node_modules", "effect")}@4.1.5`])
  })

  it("keeps the CLI and the internal modules out of reach", async () => {
    const specifiers = [
      "queen-mesh/cli",
      "queen-mesh/cli/main",
      "queen-mesh/internal/wire/names",
      "queen-mesh/internal/wire/names.js",
      "queen-mesh/internal/links/listener.js",
      "queen-mesh/dist/index.js",
      // Runtime machinery that was public before and moved under internal/.
      "queen-mesh/Listener",
      "queen-mesh/Peers",
      "queen-mesh/Dispatch",
      "queen-mesh/Liveness",
      "queen-mesh/FrameDecoder",
      "queen-mesh/Handshake"
    ]
    // One process tries them all, each as a consumer's `import()` would, and says how each ended.
    const script = `const outcomes = {}
for (const specifier of ${JSON.stringify(specifiers)}) {
  try {
    await import(specifier)
    outcomes[specifier] = "imported"
  } catch (error) {
    outcomes[specifier] = String(error?.code ?? error)
  }
}
console.log(JSON.stringify(outcomes))`
    const ran = await run(process.execPath, ["--input-type=module", "-e", script], consumer, 120_000)
    assert.strictEqual(ran.code, 0, output(ran))
    assert.deepStrictEqual(
      JSON.parse(ran.stdout),
      Object.fromEntries(specifiers.map((specifier) => [specifier, "ERR_PACKAGE_PATH_NOT_EXPORTED"]))
    )
  })

  let imports: Promise<Ran> | undefined
  const importAll = () => {
    imports ??= run(process.execPath, ["imports.mjs"], consumer, 120_000)
    return imports
  }

  it("imports { Frame } from the root, and every module in the exports map", async () => {
    const ran = await importAll()
    assert.strictEqual(ran.code, 0, output(ran))
    assert.deepStrictEqual(JSON.parse(ran.stdout).loaded, publicModules)
  })

  it("re-exports every public module from the root as the same namespace", async () => {
    const ran = await importAll()
    assert.strictEqual(ran.code, 0, output(ran))
    assert.deepStrictEqual(JSON.parse(ran.stdout).notInRoot, [], "missing from src/index.ts")
  })

  it("runs the README's first example: no peers, so nothing binds, a local wake, exit 0", async () => {
    const readme = readFileSync(join(root, "README.md"), "utf8")
    const example = /```ts\n([\s\S]*?)```/.exec(readme)?.[1]
    assert.isDefined(example, "README.md has no ts example")
    const copy = readFileSync(join(template, "readme-example.mjs"), "utf8")
    assert.isTrue(
      copy.endsWith(example ?? ""),
      "test/fixtures/consumer/readme-example.mjs no longer matches the README's first example: copy it again"
    )
    const ran = await run(process.execPath, ["readme-example.mjs"], consumer, 120_000)
    assert.strictEqual(ran.code, 0, output(ran))
    const log = ran.stdout + ran.stderr
    assert.include(log, "woken", output(ran))
    assert.include(log, "no_peers", output(ran))
  })

  it("runs three nodes on the public MeshTest kit under TestClock: a wake crosses, a stopped node dies", async () => {
    const ran = await run(process.execPath, ["consumer-cluster.mjs"], consumer, 120_000)
    if (ran.code === 2 && ran.stderr.includes("MeshTest missing"))
      assert.fail(`MeshTest missing: ${ran.stderr.trim()} (the lead adds src/MeshTest.ts)`)
    assert.strictEqual(ran.code, 0, output(ran))
    assert.include(ran.stdout, "wake: the pop on b was woken", output(ran))
    assert.include(ran.stdout, "liveness: b sees c dead", output(ran))
  })
})
