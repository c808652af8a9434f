/**
 * The bundles: the CLI's own (`dist/cli.js` and `dist/bin/`, written by `npm run build` through
 * scripts/bundle-cli.ts) and a host's, made here with esbuild as a broker would bundle the library.
 * Each runs from a directory of its own with no `src/` beside it, and serves the cluster page and its
 * script from what it carries. The CLI's bundle runs its optional parts only on first use (the build's
 * metafile says what each input imports statically), its source map names our files, and its code
 * cache is written, used, and refused when it is not V8's.
 */
import { execFile, spawn } from "node:child_process"
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync
} from "node:fs"
import { SourceMap } from "node:module"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"
import { afterAll, assert, beforeAll, describe, it } from "@effect/vitest"
import { Effect, Schema } from "effect"
import * as esbuild from "esbuild"
import { bundleDirectory, bundleEntry, bundleOptions, external, launcher } from "../scripts/bundle-cli.js"
import { BUNDLE, cacheFile } from "../src/cli/launcher.js"
import { freePort } from "./fixtures/ports.js"
import { SECRET } from "./fixtures/secret.js"

const root = fileURLToPath(new URL("..", import.meta.url))
const viewFile = (file: string) => readFileSync(join(root, "src", "view", file), "utf8")
const version: string = Schema.decodeUnknownSync(
  Schema.fromJsonString(Schema.Struct({ version: Schema.String }))
)(readFileSync(join(root, "package.json"), "utf8")).version

interface Ran {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

const run = (args: ReadonlyArray<string>, cwd: string, env?: NodeJS.ProcessEnv) =>
  new Promise<Ran>((resolve) => {
    execFile(process.execPath, args, { cwd, timeout: 60_000, env }, (error, stdout, stderr) => {
      const code = error === null ? 0 : typeof error.code === "number" ? error.code : null
      resolve({ code, stdout, stderr })
    })
  })

const output = (ran: Ran) => `exit ${ran.code}\n--- stdout\n${ran.stdout}\n--- stderr\n${ran.stderr}`

/** What a GET of each of the page's paths answered: status, content type, body. */
const Answer = Schema.Tuple([Schema.Number, Schema.NullOr(Schema.String), Schema.String])
const Answers = Schema.Record(Schema.String, Answer)

const fetchPage = async (base: string) => {
  const answers: Record<string, typeof Answer.Type> = {}
  for (const path of ["/cluster/", "/cluster/cluster.js", "/cluster/cluster.css"]) {
    const response = await fetch(`${base}${path}`)
    answers[path] = [response.status, response.headers.get("content-type"), await response.text()]
  }
  return answers
}

const assertPage = (answers: Readonly<Record<string, typeof Answer.Type>>) => {
  assert.deepStrictEqual(answers["/cluster/"], [200, "text/html; charset=utf-8", viewFile("cluster.html")])
  assert.deepStrictEqual(answers["/cluster/cluster.js"], [
    200,
    "text/javascript; charset=utf-8",
    viewFile("cluster.js")
  ])
  assert.deepStrictEqual(answers["/cluster/cluster.css"], [
    200,
    "text/css; charset=utf-8",
    viewFile("cluster.css")
  ])
}

let tmp = ""
beforeAll(() => {
  for (const file of [launcher, bundleEntry])
    if (!existsSync(file)) throw new Error(`${file} is missing: run \`npm run build\` first`)
  tmp = mkdtempSync(join(tmpdir(), "queen-mesh-bundle-"))
})
afterAll(() => {
  if (tmp !== "") rmSync(tmp, { recursive: true, force: true })
})

describe("a host's bundle of the library", () => {
  it("serves the cluster page and its files from one bundled file", async () => {
    // The host as a broker writes it, importing the package by name (its exports map, its dist/).
    const host = join(tmp, "host")
    mkdirSync(join(host, "node_modules"), { recursive: true })
    symlinkSync(root, join(host, "node_modules", "queen-mesh"), "dir")
    writeFileSync(
      join(host, "main.mjs"),
      `import { Effect, Layer } from "effect"
import { HttpRoutes, Mesh, MeshConfig } from "queen-mesh"

const program = Effect.gen(function* () {
  const port = yield* HttpRoutes.serve({ host: "127.0.0.1", port: 0 })
  const answers = {}
  for (const path of ["/cluster/", "/cluster/cluster.js", "/cluster/cluster.css"]) {
    const response = yield* Effect.promise(() => fetch(\`http://127.0.0.1:\${port}\${path}\`))
    answers[path] = [response.status, response.headers.get("content-type"), yield* Effect.promise(() => response.text())]
  }
  console.log(JSON.stringify(answers))
})

const MeshLive = Mesh.layerTcp().pipe(Layer.provide(MeshConfig.layer({ serverId: "bundled-host", peers: [] })))
Effect.runPromise(program.pipe(Effect.provide(MeshLive), Effect.scoped))
`
    )
    // One file, in a directory with nothing beside it: no src/view/, no node_modules/.
    const out = join(tmp, "host-out")
    await esbuild.build({
      entryPoints: [join(host, "main.mjs")],
      bundle: true,
      platform: "node",
      format: "esm",
      target: "node20",
      outfile: join(out, "host.mjs"),
      external: [...external],
      // The host resolves effect from its own node_modules; here, the repository's.
      nodePaths: [join(root, "node_modules")],
      // CommonJS inside (a host's own packages) requires Node's built-ins.
      banner: {
        js: 'import { createRequire } from "node:module"; const require = createRequire(import.meta.url);'
      },
      logLevel: "error"
    })
    assert.deepStrictEqual(readdirSync(out), ["host.mjs"])
    const ran = await run([join(out, "host.mjs")], out)
    assert.strictEqual(ran.code, 0, output(ran))
    // The mesh logs its start on stdout too: the answers are the last line.
    const last = ran.stdout.trim().split("\n").at(-1) ?? ""
    assertPage(Schema.decodeUnknownSync(Schema.fromJsonString(Answers))(last))
  })
})

describe("the CLI's bundle", () => {
  /** `dist/cli.js` and `dist/bin/` with the package.json, copied where there is no src/ to read. */
  const copy = (name: string) => {
    const pkg = join(tmp, name)
    mkdirSync(join(pkg, "dist"), { recursive: true })
    cpSync(launcher, join(pkg, "dist", "cli.js"))
    cpSync(bundleDirectory, join(pkg, "dist", "bin"), { recursive: true })
    cpSync(join(root, "package.json"), join(pkg, "package.json"))
    return join(pkg, "dist", "cli.js")
  }

  it("reports the package's version from where it is installed", async () => {
    const ran = await run([copy("cli-version"), "--version"], tmp)
    assert.strictEqual(ran.code, 0, output(ran))
    assert.strictEqual(ran.stdout.trim(), version)
  })

  it("serves the node's cluster page and its files from what it carries", async () => {
    const cli = copy("cli-node")
    const absent = await Effect.runPromise(freePort)
    const child = spawn(process.execPath, [cli, "node", "--quiet"], {
      cwd: tmp,
      env: {
        PATH: process.env.PATH ?? "",
        QUEEN_SERVER_ID: "bundled-cli",
        QUEEN_MESH_PORT: "0",
        QUEEN_MESH_BIND_ADDR: "127.0.0.1",
        QUEEN_MESH_PEERS: `127.0.0.1:${absent}`,
        QUEEN_SYNC_SECRET: SECRET,
        QUEEN_MESH_HTTP_HOST: "127.0.0.1",
        QUEEN_MESH_HTTP_PORT: "0",
        QUEEN_MESH_LOG_LEVEL: "warning",
        NO_COLOR: "1"
      },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let stderr = ""
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString()
    })
    const listening = Schema.decodeUnknownOption(
      Schema.fromJsonString(Schema.Struct({ event: Schema.Literal("listening"), http_port: Schema.Number }))
    )
    try {
      const httpPort = await new Promise<number>((resolve, reject) => {
        let out = ""
        child.stdout.on("data", (chunk: Buffer) => {
          out += chunk.toString()
          for (const line of out.split("\n")) {
            const event = listening(line)
            if (event._tag === "Some") resolve(event.value.http_port)
          }
        })
        child.once("exit", (code) => reject(new Error(`the node exited with ${code}\n${stderr}`)))
      })
      assertPage(await fetchPage(`http://127.0.0.1:${httpPort}`))
    } finally {
      child.kill("SIGTERM")
    }
  })

  it("runs the optional parts only on first use", async () => {
    const built = await esbuild.build({ ...bundleOptions(join(tmp, "meta")), write: false, metafile: true })
    const inputs = built.metafile.inputs
    /** The inputs run with `from`: its static imports, followed; a dynamic `import()` runs on first use. */
    const staticClosure = (from: ReadonlyArray<string>) => {
      const seen = new Set<string>()
      const visit = (name: string) => {
        if (seen.has(name) || inputs[name] === undefined) return
        seen.add(name)
        for (const imported of inputs[name]?.imports ?? [])
          if (imported.kind === "import-statement" && imported.external !== true) visit(imported.path)
      }
      for (const name of from) visit(name)
      return [...seen]
    }
    const all = Object.keys(inputs)
    assert.include(all, "src/cli/node.ts")
    // Not in the bundle at all: the platform's Node HTTP server and what it brings.
    for (const part of [
      /@effect\/platform-node\/dist\/esm\/NodeHttpServer\.js$/,
      /node_modules\/(undici|ws)\//
    ])
      assert.isFalse(
        all.some((input) => part.test(input)),
        `${part} is in the bundle`
      )
    // What every run runs (`--help`, `--version`): no command, no mesh.
    const atStart = staticClosure(["src/cli.ts"])
    for (const part of [/^src\/cli\/(node|stats|demo)\.ts$/, /^src\/Mesh\.ts$/])
      assert.isFalse(
        atStart.some((input) => part.test(input)),
        `${part} runs for --help and --version`
      )
    // What `queen-mesh node` runs before it listens: the mesh and its HTTP routes (docs/cli.md,
    // "Start-up and memory"), and none of the parts run on first use.
    const node = staticClosure(["src/cli.ts", "src/cli/node.ts"])
    assert.include(node, "src/Mesh.ts")
    assert.include(node, "src/HttpRoutes.ts")
    const lazy = [
      /^src\/TlsTransport\.ts$/,
      /^src\/internal\/transport\/tls/,
      /^src\/Postgres\.ts$/,
      /^src\/internal\/lane\/pg/,
      /^src\/ClusterView\.ts$/,
      /^src\/internal\/view\/pageFiles\.ts$/
    ]
    assert.deepStrictEqual(
      node.filter((input) => lazy.some((pattern) => pattern.test(input))),
      [],
      "run on first use, not at start"
    )
    for (const name of external)
      assert.isFalse(
        all.some((input) => input.includes(`node_modules/${name}/`)),
        `${name} stays outside the bundle`
      )
  })

  it("is ASCII, so the launcher's Latin-1 read gives the text UTF-8 would", () => {
    const bytes = readFileSync(bundleEntry)
    const at = bytes.findIndex((byte) => byte > 0x7f)
    assert.strictEqual(at, -1, `a byte outside ASCII at ${at}`)
    // The page's files hold characters outside ASCII, escaped in the script: the bundle still has them.
    assert.include(bytes.toString("latin1"), "connecting\\u2026")
  })

  it("maps its code back to our sources, and a package's code to nothing of ours", () => {
    // The launcher (src/cli/launcher.ts) installs the mapper (src/cli/stackTraces.ts,
    // test/cli.stackTraces.test.ts) with the files whose maps name our sources.
    const launched = readFileSync(launcher, "utf8")
    const installed = /^launch\(new URL\("\.\/bin\/", import\.meta\.url\)\.href, (\[.*\])\)$/m.exec(launched)
    assert.isNotNull(installed, launched)
    const listed = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Array(Schema.String)))(installed![1])
    assert.include(listed, BUNDLE)
    const map = new SourceMap(JSON.parse(readFileSync(`${bundleEntry}.map`, "utf8")))
    const source = (entry: object) => ("originalSource" in entry ? entry.originalSource : undefined)
    const lines = readFileSync(bundleEntry, "utf8").split("\n")
    const at = (needle: string) => {
      const line = lines.findIndex((text) => text.includes(needle))
      assert.isAtLeast(line, 0, needle)
      return map.findEntry(line, lines[line]!.indexOf(needle))
    }
    // Ours: the node command's `node stopping` line.
    const needle = '"node stopping"'
    const ours = at(needle)
    assert.match(String(source(ours)), /(^|\/)src\/cli\/node\.ts$/, JSON.stringify(ours))
    const sourceLines = readFileSync(join(root, "src", "cli", "node.ts"), "utf8").split("\n")
    assert.include(sourceLines["originalLine" in ours ? ours.originalLine : -1] ?? "", needle)
    // A package's: effect's own key of a reference, credited to no file of ours.
    const theirs = at('"effect/References/CurrentLogSpans"')
    assert.isUndefined(source(theirs), JSON.stringify(theirs))
  })

  it("writes its code cache after a start, uses it, and refuses one that is not V8's", async () => {
    const cli = copy("cli-cache")
    const cache = cacheFile(join(tmp, "cli-cache", "dist", "bin", BUNDLE))
    rmSync(cache, { force: true })
    const env = { PATH: process.env.PATH ?? "", QUEEN_MESH_COMPILE_CACHE: "report" }
    // A command over before the cache is due (a second after its start) writes none. The timer starts
    // after the spawn, so a command that exited within a second of it cannot have written one; on a
    // machine too busy for that, the command was not a short one, and its cache is removed for the rest.
    const spawned = performance.now()
    const first = await run([cli, "--version"], tmp, env)
    const lasted = performance.now() - spawned
    assert.strictEqual(first.code, 0, output(first))
    assert.strictEqual(first.stdout.trim(), version)
    assert.include(first.stderr, "compile cache absent")
    if (lasted < 1000) assert.isFalse(existsSync(cache), `written by a command that lasted ${lasted} ms`)
    else rmSync(cache, { force: true })
    // A node writes it a second after it starts.
    const absent = await Effect.runPromise(freePort)
    const child = spawn(process.execPath, [cli, "node", "--quiet"], {
      cwd: tmp,
      env: {
        ...env,
        QUEEN_MESH_PORT: "0",
        QUEEN_MESH_BIND_ADDR: "127.0.0.1",
        QUEEN_MESH_PEERS: `127.0.0.1:${absent}`,
        QUEEN_MESH_HTTP_HOST: "127.0.0.1",
        QUEEN_MESH_HTTP_PORT: "0",
        QUEEN_MESH_LOG_LEVEL: "error"
      },
      stdio: ["pipe", "ignore", "pipe"]
    })
    try {
      await new Promise<void>((resolve, reject) => {
        let stderr = ""
        child.stderr.on("data", (chunk: Buffer) => {
          stderr += chunk.toString()
          if (stderr.includes("compile cache written")) resolve()
        })
        child.once("exit", (code) => reject(new Error(`the node exited with ${code}\n${stderr}`)))
      })
    } finally {
      child.kill("SIGTERM")
    }
    assert.isTrue(existsSync(cache))
    const second = await run([cli, "--version"], tmp, env)
    assert.strictEqual(second.code, 0, output(second))
    assert.strictEqual(second.stdout.trim(), version)
    assert.include(second.stderr, "compile cache used")
    // Bytes that are not a cache V8 wrote for this source: refused, and the command runs as before.
    writeFileSync(cache, Buffer.alloc(4096, 7))
    const third = await run([cli, "--version"], tmp, env)
    assert.strictEqual(third.code, 0, output(third))
    assert.strictEqual(third.stdout.trim(), version)
    assert.include(third.stderr, "compile cache refused")
    // Off: no cache read.
    const off = await run([cli, "--version"], tmp, { ...env, QUEEN_MESH_COMPILE_CACHE: "0" })
    assert.strictEqual(off.code, 0, output(off))
    assert.strictEqual(off.stdout.trim(), version)
    assert.notInclude(off.stderr, "compile cache")
    // A bad value: exit 2, naming the variable, before anything runs.
    const bad = await run([cli, "--version"], tmp, { ...env, QUEEN_MESH_COMPILE_CACHE: "yes" })
    assert.strictEqual(bad.code, 2, output(bad))
    assert.strictEqual(bad.stdout, "")
    assert.include(bad.stderr, 'QUEEN_MESH_COMPILE_CACHE: expected 1, 0 or report, got "yes"')
  })
})
