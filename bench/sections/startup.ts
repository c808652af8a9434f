/**
 * `startup`: what a `queen-mesh node` costs to start and to keep, what each optional part adds, and
 * what a host pays for the library.
 *
 * - Start-up: `queen-mesh node --quiet` with three peers (baseline nodes in one other process that dial
 *   it back), from spawn to its `listening` line, over several runs; the node's CPU at that moment. Three
 *   builds of the same sources, run by turns: the bundle `queen-mesh` ships (`dist/cli.js`, built by
 *   `npm run build`: scripts/bundle-cli.ts) with its code cache, the same without it
 *   (`QUEEN_MESH_COMPILE_CACHE=0`), and tsc's modules (`.bench-dist/src/cli.js`).
 * - Idle RSS: the same node once its three links are up (three `peer_up` lines) and a few seconds
 *   have passed; and once more per build, what it is spent on: `/proc`'s anonymous and file-backed
 *   resident memory, and the node's own `process.memoryUsage()`, V8 heap spaces and code statistics
 *   (read by a preloaded module on SIGUSR2).
 * - Per part, end to end (the bundle): the node with one configured peer that is not there (so the
 *   mesh is active and listens), plain, with TLS (`QUEEN_MESH_TLS=psk`), and with the PostgreSQL lane
 *   pointed at a closed loopback port (its module and `pg` load; it keeps retrying, the node runs):
 *   start-up and RSS.
 * - Per part, import only: a fresh `node` importing a set of the node's modules and nothing else, time
 *   from process start to done and RSS, medians; each part is the difference between two sets.
 * - Host: an Effect program (the `effect` barrel, a runtime) with `Mesh.layer` and three peers against
 *   the same program without it (bench/hostCost.ts): RSS and heap after the links are up and two GCs,
 *   and again at rest, once V8 has given back the young generation start-up grew.
 */
import { spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"
import { Schema } from "effect"
import { CliNode, envFor, isEvent, modulesEntry } from "../cli.js"
import { type Driver, freePort, Numbers, SECRET, stopAll } from "../driver.js"
import { breakdown, memoryProbe, readProbe } from "../memoryProbe.js"
import { check, fmt, row } from "../report.js"
import { section } from "../section.js"
import { median, round, sleep } from "../stats.js"

interface StartupPlan {
  readonly startup: {
    /** Runs of the node with three peers (start-up each time, idle RSS each time). */
    readonly runs: number
    /** How long the node idles, links up, before its RSS is read. */
    readonly idleMs: number
    /** Runs of each part's end-to-end node. */
    readonly partRuns: number
    /** Rounds of the import sets. */
    readonly importRuns: number
    /** How long a host program settles before its memory is read. */
    readonly hostSettleMs: number
  }
}

const PEERS = 3
const MiB = 1024 * 1024
const here = Path.dirname(fileURLToPath(import.meta.url))
const benchDist = Path.resolve(here, "..")
const root = Path.resolve(benchDist, "../..")
const srcModule = (path: string) => pathToFileURL(Path.resolve(benchDist, "../src", path)).href

/**
 * The builds of the CLI: what ships (the bundle behind `dist/cli.js`, with its code cache), the same
 * bundle with the cache off, and tsc's modules.
 */
const builds = {
  bundle: { file: Path.join(root, "dist", "cli.js"), env: {} },
  uncached: { file: Path.join(root, "dist", "cli.js"), env: { QUEEN_MESH_COMPILE_CACHE: "0" } },
  modules: { file: modulesEntry, env: {} }
} as const
type Build = keyof typeof builds

/** The newest mtime of the files under `dir` (recursively) passing `test`. */
const newest = (dir: string, test: (file: string) => boolean): number =>
  Fs.readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && test(entry.name))
    .reduce((max, entry) => Math.max(max, Fs.statSync(Path.join(entry.parentPath, entry.name)).mtimeMs), 0)

/** The bundle must be built from the sources as they are: `npm run build` writes it. */
const checkBundle = () => {
  const entry = Path.join(root, "dist", "bin", "queen-mesh.cjs")
  if (!Fs.existsSync(entry)) throw new Error(`${entry} is missing: run \`npm run build\` first`)
  const src = newest(Path.join(root, "src"), (file) => /\.(ts|html|css|js)$/.test(file))
  if (Fs.statSync(entry).mtimeMs < src)
    throw new Error(`${entry} is older than src/: run \`npm run build\` first`)
}

const Ports = Schema.Struct({ ports: Numbers })

const spread = (values: ReadonlyArray<number>) => ({
  median: round(median(values), 1),
  min: round(Math.min(...values), 1),
  max: round(Math.max(...values), 1)
})

/**
 * Preloaded into a node whose start is split into stages. It marks (in ms of the node's own clock,
 * from process start) where the launcher compiles the bundle (`node:vm`'s `Script`, swapped for a
 * subclass that marks), the bundle's first synchronous run (the function the script returns), the
 * first server's `listen` (the HTTP port, bound before the mesh) and its `listening` event, and the
 * write of the `listening` line; and keeps Node's own bootstrap marks, the GC pauses before the line,
 * and the CPU then. Once the GC entries before the line are in, it writes all of it to the file named
 * by the environment.
 */
const STAGES_PROBE = `import vm from "node:vm"
import net from "node:net"
import fs from "node:fs"
import { syncBuiltinESMExports } from "node:module"
import { PerformanceObserver } from "node:perf_hooks"
const marks = { probe: performance.now() }
const mark = (name) => { if (marks[name] === undefined) marks[name] = performance.now() }
const gcs = []
new PerformanceObserver((list) => { for (const e of list.getEntries()) gcs.push([e.startTime, e.duration]) }).observe({ entryTypes: ["gc"] })
class Script extends vm.Script {
  constructor(...args) { mark("compileStart"); super(...args); mark("compileEnd") }
  runInThisContext(...args) {
    const wrapper = super.runInThisContext(...args)
    return typeof wrapper !== "function" ? wrapper : function (...params) {
      mark("runStart")
      try { return wrapper.apply(this, params) } finally { mark("runEnd") }
    }
  }
}
vm.Script = Script
const listen = net.Server.prototype.listen
net.Server.prototype.listen = function (...args) {
  mark("listenCall")
  this.once("listening", () => mark("listenEvent"))
  return listen.apply(this, args)
}
syncBuiltinESMExports()
const write = process.stdout.write
process.stdout.write = function (chunk, ...rest) {
  if (marks.line === undefined && String(chunk).includes('"listening"')) {
    mark("line")
    const cpu = process.cpuUsage()
    const at = marks.line
    setTimeout(() => {
      const before = gcs.filter(([start]) => start < at)
      const t = performance.nodeTiming
      fs.writeFileSync(process.env.QUEEN_BENCH_STAGES_FILE, JSON.stringify({
        ...marks,
        bootstrap: t.bootstrapComplete,
        gcMs: before.reduce((sum, [, ms]) => sum + ms, 0),
        gcCount: before.length,
        cpuMs: (cpu.user + cpu.system) / 1000
      }))
    }, 200)
  }
  return write.call(this, chunk, ...rest)
}`

const StagesReport = Schema.Struct({
  probe: Schema.Number,
  bootstrap: Schema.Number,
  compileStart: Schema.Number,
  compileEnd: Schema.Number,
  runStart: Schema.Number,
  runEnd: Schema.Number,
  listenCall: Schema.Number,
  listenEvent: Schema.Number,
  line: Schema.Number,
  gcMs: Schema.Number,
  gcCount: Schema.Number,
  cpuMs: Schema.Number
})

/** The probes a start may preload: each one's module and the variable naming its file. */
const probes = {
  memory: memoryProbe,
  stages: {
    flags: [`--import=data:text/javascript,${encodeURIComponent(STAGES_PROBE)}`],
    variable: "QUEEN_BENCH_STAGES_FILE"
  }
} as const
type Probe = keyof typeof probes

/**
 * One `queen-mesh node --quiet`: spawn to `listening`, CPU then, and optionally RSS once idle. `probe`
 * preloads the memory probe (read once idle) or the stages probe (read at `listening`).
 */
const startNode = async (
  env: Record<string, string>,
  idle: { readonly peers: number; readonly ms: number } | undefined,
  build: Build = "bundle",
  probe: Probe | undefined = undefined
) => {
  const probeFile =
    probe === undefined ? "" : Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "queen-mesh-startup-")), "m")
  const flags = probe === undefined ? [] : probes[probe].flags
  const probeEnv = probe === undefined ? {} : { [probes[probe].variable]: probeFile }
  const started = performance.now()
  const node = new CliNode(
    "mesh",
    { file: process.execPath, args: [...flags, builds[build].file, "node", "--quiet"] },
    { ...env, ...builds[build].env, ...probeEnv }
  )
  try {
    const peerUps = new Set<string>()
    node.onLine = (line) => {
      if (isEvent("peer_up")(line)) peerUps.add(line)
    }
    await node.waitFor(isEvent("listening"), 60_000, "listening")
    const listeningMs = performance.now() - started
    const cpuMs = node.cpuUs() / 1000
    let rssMiB = Number.NaN
    if (idle !== undefined) {
      const deadline = Date.now() + 30_000
      while (peerUps.size < idle.peers) {
        if (Date.now() > deadline) throw new Error(`only ${peerUps.size} of ${idle.peers} peer_up lines`)
        await sleep(20)
      }
      await sleep(idle.ms)
      rssMiB = node.rssBytes() / MiB
    }
    const memory =
      probe === "memory"
        ? await breakdown(node.process.pid, () => node.process.kill("SIGUSR2"), probeFile)
        : undefined
    const stages = probe === "stages" ? await readProbe(StagesReport, probeFile, "stages") : undefined
    return { listeningMs, cpuMs, rssMiB, memory, stages }
  } finally {
    await node.stop()
    if (probe !== undefined) Fs.rmSync(Path.dirname(probeFile), { recursive: true, force: true })
  }
}

const withPeers = async <A>(
  driver: Driver,
  port: number,
  use: (ports: ReadonlyArray<number>) => Promise<A>
) => {
  const peers = driver.spawn("idle-peers", { secret: SECRET, count: PEERS, peerPort: port })
  try {
    return await use(Schema.decodeUnknownSync(Ports)((await peers.take("ready", 30_000)).data).ports)
  } finally {
    await stopAll([peers])
  }
}

/**
 * The node with three peers, `runs` times per build, the builds by turns (a change in the machine's
 * load falls on both alike); then once more per build with the memory probe.
 */
const withThreePeers = async (driver: Driver, plan: StartupPlan["startup"]) => {
  const port = await freePort()
  return withPeers(driver, port, async (ports) => {
    const env = envFor({ secret: SECRET }, "startup", port, ports)
    const idle = { peers: PEERS, ms: plan.idleMs }
    const runs: Record<Build, Array<Awaited<ReturnType<typeof startNode>>>> = {
      bundle: [],
      uncached: [],
      modules: []
    }
    const order: ReadonlyArray<Build> = ["bundle", "uncached", "modules"]
    for (let i = 0; i < plan.runs; i++) {
      for (const build of i % 2 === 0 ? order : [...order].reverse()) {
        runs[build].push(await startNode(env, idle, build))
      }
    }
    const summary = (build: Build) => ({
      listeningMs: spread(runs[build].map((r) => r.listeningMs)),
      cpuMs: spread(runs[build].map((r) => r.cpuMs)),
      idleRssMiB: spread(runs[build].map((r) => r.rssMiB))
    })
    const memory = {
      bundle: (await startNode(env, idle, "bundle", "memory")).memory,
      modules: (await startNode(env, idle, "modules", "memory")).memory
    }
    const probed: Array<Awaited<ReturnType<typeof startNode>>> = []
    for (let i = 0; i < plan.runs; i++) probed.push(await startNode(env, undefined, "bundle", "stages"))
    return {
      ...summary("bundle"),
      uncached: summary("uncached"),
      modules: summary("modules"),
      memory,
      stages: stagesOf(probed)
    }
  })
}

/**
 * Where a start of the bundle goes, from the stages probe's runs: each stage's median over the runs
 * (so the stages need not add up to the median start exactly), ms.
 */
const stagesOf = (runs: ReadonlyArray<Awaited<ReturnType<typeof startNode>>>) => {
  const reports = runs.flatMap((r) => (r.stages === undefined ? [] : [{ ...r.stages, total: r.listeningMs }]))
  const stage = (f: (r: (typeof reports)[number]) => number) => round(median(reports.map(f)), 1)
  return {
    runs: reports.length,
    /** Spawn to the line in the driver, with the probe loaded. */
    probedListeningMs: stage((r) => r.total),
    /** Before the node's clock starts (fork, exec, loading `node`) and the line's way back to the driver. */
    outside: stage((r) => r.total - r.line),
    /** Node's own start, to its bootstrap's end (what bare `node` also pays). */
    nodeBootstrap: stage((r) => r.bootstrap),
    /** The ES module loader's start and the probe's own import (a start without the probe pays the first). */
    loaderAndProbe: stage((r) => r.probe - r.bootstrap),
    /** `dist/cli.js` and the launcher's module loaded, the bundle and its code cache read. */
    launcher: stage((r) => r.compileStart - r.probe),
    /** V8 compiling the bundle from its code cache. */
    compile: stage((r) => r.compileEnd - r.compileStart),
    /** The bundle's first synchronous run: its entry's modules and `main` up to its first wait. */
    firstRun: stage((r) => r.runEnd - r.runStart),
    /** `node`'s modules on first use, its configuration and logs, up to the HTTP port's `listen`. */
    toHttpListen: stage((r) => r.listenCall - r.runEnd),
    /** The HTTP port bound. */
    httpListen: stage((r) => r.listenEvent - r.listenCall),
    /** The mesh's layer (its listener, the links' start) and the routes served, to the line's write. */
    meshToLine: stage((r) => r.line - r.listenEvent),
    /** GC pauses before the line, and how many. */
    gcMs: stage((r) => r.gcMs),
    gcCount: stage((r) => r.gcCount),
    /** The node's CPU at the line (every thread). */
    cpuMs: stage((r) => r.cpuMs)
  }
}

/** Each optional part end to end: one configured peer that is not there, plain / TLS / the lane. */
const parts = async (plan: StartupPlan["startup"]) => {
  const port = await freePort()
  const absent = await freePort()
  const closed = await freePort()
  const base = envFor({ secret: SECRET }, "startup-part", port, [absent])
  const variants: Record<string, Record<string, string>> = {
    plain: base,
    tls: { ...base, QUEEN_MESH_TLS: "psk" },
    lane: { ...base, QUEEN_MESH_PG_URL: `postgres://127.0.0.1:${closed}/queen` }
  }
  const out: Record<string, { listeningMs: number; rssMiB: number }> = {}
  for (const [name, env] of Object.entries(variants)) {
    const runs: Array<Awaited<ReturnType<typeof startNode>>> = []
    for (let i = 0; i < plan.partRuns; i++) runs.push(await startNode(env, { peers: 0, ms: 1000 }))
    out[name] = {
      listeningMs: round(median(runs.map((r) => r.listeningMs)), 1),
      rssMiB: round(median(runs.map((r) => r.rssMiB)), 1)
    }
  }
  return out
}

const ImportResult = Schema.Struct({ ms: Schema.Number, cpuMs: Schema.Number, rss: Schema.Number })

/** A fresh `node` importing `specifiers` and nothing else: ms from process start, its CPU, RSS. */
const importOnce = (specifiers: ReadonlyArray<string>) =>
  new Promise<typeof ImportResult.Type>((resolve, reject) => {
    const code = `${specifiers.map((s) => `await import(${JSON.stringify(s)})`).join(";")};
const cpu = process.cpuUsage()
process.stdout.write(JSON.stringify({ ms: performance.now(), cpuMs: (cpu.user + cpu.system) / 1000, rss: process.memoryUsage().rss }))`
    const child = spawn(process.execPath, ["--input-type=module", "-e", code], {
      cwd: root,
      stdio: ["ignore", "pipe", "pipe"]
    })
    let out = ""
    let err = ""
    child.stdout.on("data", (chunk: Buffer) => {
      out += chunk.toString()
    })
    child.stderr.on("data", (chunk: Buffer) => {
      err += chunk.toString()
    })
    child.once("exit", (code) =>
      code === 0
        ? resolve(Schema.decodeUnknownSync(Schema.fromJsonString(ImportResult))(out))
        : reject(new Error(`importing ${specifiers.join(", ")} failed: ${err.slice(-500)}`))
    )
  })

/** The import sets; each part is the difference between two of them. */
const importSets = {
  bare: [],
  effectBarrel: ["effect"],
  core: [
    "Mesh.js",
    "MeshConfig.js",
    "TcpTransport.js",
    "HotList.js",
    "QueueConfigCache.js",
    "MaintenanceFlags.js",
    "Waker.js",
    "cli/main.js",
    "cli/commands.js",
    "cli/events.js"
  ].map(srcModule),
  routes: [srcModule("HttpRoutes.js")],
  server: [srcModule("internal/http/nodeServer.js")],
  node: [srcModule("cli/node.js")],
  tls: [srcModule("TlsTransport.js")],
  lane: [srcModule("Postgres.js"), "pg"]
} as const

const imports = async (runs: number) => {
  const sets: Record<string, ReadonlyArray<string>> = {
    bare: importSets.bare,
    effectBarrel: importSets.effectBarrel,
    core: importSets.core,
    coreRoutes: [...importSets.core, ...importSets.routes],
    coreRoutesServer: [...importSets.core, ...importSets.routes, ...importSets.server],
    node: importSets.node,
    nodeTls: [...importSets.node, ...importSets.tls],
    nodeLane: [...importSets.node, ...importSets.lane]
  }
  // Round by round, every set once per round: a change in the machine's load falls on every set alike.
  const results = new Map<string, Array<typeof ImportResult.Type>>()
  for (let i = 0; i < runs; i++) {
    for (const [name, specifiers] of Object.entries(sets)) {
      const list = results.get(name) ?? []
      list.push(await importOnce(specifiers))
      results.set(name, list)
    }
  }
  const out: Record<string, { ms: number; cpuMs: number; rssMiB: number }> = {}
  for (const [name, list] of results) {
    out[name] = {
      ms: round(median(list.map((r) => r.ms)), 1),
      cpuMs: round(median(list.map((r) => r.cpuMs)), 1),
      rssMiB: round(median(list.map((r) => r.rss)) / MiB, 1)
    }
  }
  const delta = (a: string, b: string) => ({
    ms: round(out[a]!.ms - out[b]!.ms, 1),
    cpuMs: round(out[a]!.cpuMs - out[b]!.cpuMs, 1),
    rssMiB: round(out[a]!.rssMiB - out[b]!.rssMiB, 1)
  })
  return {
    sets: out,
    parts: {
      httpRoutes: delta("coreRoutes", "core"),
      httpServer: delta("coreRoutesServer", "coreRoutes"),
      tls: delta("nodeTls", "node"),
      lane: delta("nodeLane", "node")
    }
  }
}

const HostReading = Schema.Struct({
  rss: Schema.Number,
  heapUsed: Schema.Number,
  heapTotal: Schema.Number,
  young: Schema.Number
})
const HostResult = Schema.Struct({
  kind: Schema.String,
  settled: HostReading,
  atRest: HostReading,
  released: Schema.Boolean
})

/** One host program (bench/hostCost.ts), with three peers for the mesh kinds. */
const hostOnce = async (driver: Driver, kind: "bare" | "mesh" | "mesh-subpath", settleMs: number) => {
  const port = await freePort()
  const run = (peers: ReadonlyArray<number>) =>
    new Promise<typeof HostResult.Type>((resolve, reject) => {
      const child = spawn(
        process.execPath,
        [
          "--expose-gc",
          Path.resolve(benchDist, "hostCost.js"),
          kind,
          JSON.stringify({ port, peers, secret: SECRET, settleMs })
        ],
        { stdio: ["ignore", "pipe", "pipe"] }
      )
      let out = ""
      let err = ""
      child.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString()
      })
      child.stderr.on("data", (chunk: Buffer) => {
        err += chunk.toString()
      })
      const timer = setTimeout(() => child.kill("SIGKILL"), 120_000)
      child.once("exit", (code) => {
        clearTimeout(timer)
        if (code === 0) resolve(Schema.decodeUnknownSync(Schema.fromJsonString(HostResult))(out.trim()))
        else reject(new Error(`host program ${kind} failed: ${err.slice(-500)}`))
      })
    })
  return kind === "bare" ? run([]) : withPeers(driver, port, run)
}

const host = async (driver: Driver, plan: StartupPlan["startup"]) => {
  const kinds = ["bare", "mesh", "mesh-subpath"] as const
  type Kind = (typeof kinds)[number]
  type Figures = { rssMiB: number; heapMiB: number; youngMiB: number }
  const figures = (readings: ReadonlyArray<typeof HostReading.Type>): Figures => ({
    rssMiB: round(median(readings.map((r) => r.rss)) / MiB, 1),
    heapMiB: round(median(readings.map((r) => r.heapUsed)) / MiB, 1),
    youngMiB: round(median(readings.map((r) => r.young)) / MiB, 1)
  })
  const programs = {} as Record<Kind, { settled: Figures; atRest: Figures; released: boolean }>
  for (const kind of kinds) {
    const results: Array<typeof HostResult.Type> = []
    for (let i = 0; i < Math.max(1, Math.floor(plan.partRuns / 2)); i++) {
      results.push(await hostOnce(driver, kind, plan.hostSettleMs))
    }
    programs[kind] = {
      settled: figures(results.map((r) => r.settled)),
      atRest: figures(results.map((r) => r.atRest)),
      released: results.every((r) => r.released)
    }
  }
  const cost = (kind: "mesh" | "mesh-subpath", when: "settled" | "atRest") => ({
    rssMiB: round(programs[kind][when].rssMiB - programs.bare[when].rssMiB, 1),
    heapMiB: round(programs[kind][when].heapMiB - programs.bare[when].heapMiB, 1)
  })
  return {
    programs,
    /** Once V8 has given back the young generation in both programs: what the host keeps paying. */
    cost: { main: cost("mesh", "atRest"), subpaths: cost("mesh-subpath", "atRest") },
    /** A few seconds after the links are up, the young generation as large as start-up made it. */
    settled: { main: cost("mesh", "settled"), subpaths: cost("mesh-subpath", "settled") },
    released: kinds.every((kind) => programs[kind].released)
  }
}

const run = async (driver: Driver, plan: StartupPlan) => {
  checkBundle()
  const p = plan.startup
  driver.progress(
    `startup: queen-mesh node with ${PEERS} peers, spawn to listening and idle RSS, ${p.runs} runs of the bundle and of the modules`
  )
  const node = await withThreePeers(driver, p)
  driver.progress(`startup: each optional part end to end (${p.partRuns} runs each) and import only`)
  const partsEndToEnd = await parts(p)
  const importOnly = await imports(p.importRuns)
  driver.progress("startup: a host program with Mesh.layer and 3 peers against the same without it")
  const hostCost = await host(driver, p)
  return { peers: PEERS, node, parts: partsEndToEnd, imports: importOnly, host: hostCost }
}

type Startup = Awaited<ReturnType<typeof run>>

const stagesText = (s: Startup["node"]["stages"]) =>
  [
    `spawn to line ${fmt(s.probedListeningMs, 0)}:`,
    `outside node ${fmt(s.outside)}`,
    `node bootstrap ${fmt(s.nodeBootstrap)}`,
    `loader + probe ${fmt(s.loaderAndProbe)}`,
    `launcher + reads ${fmt(s.launcher)}`,
    `compile ${fmt(s.compile)}`,
    `first run ${fmt(s.firstRun)}`,
    `to HTTP listen ${fmt(s.toHttpListen)}`,
    `HTTP listen ${fmt(s.httpListen)}`,
    `mesh to line ${fmt(s.meshToLine)}`
  ].join(" ")

const spreadText = (s: { median: number; min: number; max: number }) =>
  `${fmt(s.median, 0)} (${fmt(s.min, 0)}-${fmt(s.max, 0)})`

const rows = (r: Startup) => {
  const part = (name: string) => r.parts[name]
  const plain = part("plain")
  const vsPlain = (name: string) => {
    const p = part(name)
    return p === undefined || plain === undefined
      ? "-"
      : `${fmt(p.listeningMs - plain.listeningMs, 0)} ms, ${fmt(p.rssMiB - plain.rssMiB)} MiB`
  }
  const imp = (x: { ms: number; cpuMs: number; rssMiB: number }) =>
    `${fmt(x.ms, 0)} ms (CPU ${fmt(x.cpuMs, 0)} ms), ${fmt(x.rssMiB)} MiB`
  const memory = (m: (typeof r.node.memory)["bundle"]) =>
    m === undefined
      ? "-"
      : `anon ${fmt(m.rssAnon)} + file ${fmt(m.rssFile)}; heap ${fmt(m.heapTotal)} (used ${fmt(m.heapUsed)}: new ${fmt(m.newSpace)}, old ${fmt(m.oldSpace)}, code ${fmt(m.codeSpace)}, large ${fmt(m.largeObjects)}); code+bytecode ${fmt(m.codeAndBytecode)}, script source ${fmt(m.scriptSource)}, external ${fmt(m.external)}`
  return [
    row(
      "startup: node, 3 peers, spawn to listening (ms, median (min-max)): bundle / tsc's modules",
      spreadText(r.node.listeningMs),
      spreadText(r.node.modules.listeningMs)
    ),
    row(
      "startup: the bundle without its code cache: to listening / CPU then (ms)",
      spreadText(r.node.uncached.listeningMs),
      spreadText(r.node.uncached.cpuMs)
    ),
    row(
      "startup: node's CPU at listening (ms): bundle / modules",
      spreadText(r.node.cpuMs),
      spreadText(r.node.modules.cpuMs)
    ),
    row(
      "startup: idle node RSS, 3 peers (MiB): bundle / modules",
      spreadText(r.node.idleRssMiB),
      spreadText(r.node.modules.idleRssMiB)
    ),
    row(
      "startup: where a start of the bundle goes (ms, medians, stages probe)",
      stagesText(r.node.stages),
      `GC ${fmt(r.node.stages.gcMs)} ms in ${fmt(r.node.stages.gcCount, 0)} pauses, CPU ${fmt(r.node.stages.cpuMs, 0)} ms; ${r.node.stages.runs} runs`
    ),
    row("startup: idle node, where the RSS goes (MiB), bundle", memory(r.node.memory.bundle)),
    row("startup: idle node, where the RSS goes (MiB), modules", memory(r.node.memory.modules)),
    row(
      "startup: plain node, 1 absent peer: listening (ms) / RSS (MiB)",
      plain === undefined ? "-" : `${fmt(plain.listeningMs, 0)} / ${fmt(plain.rssMiB)}`
    ),
    row("startup: TLS adds, end to end", vsPlain("tls")),
    row("startup: the lane adds, end to end", vsPlain("lane")),
    row("startup: import only, TLS", imp(r.imports.parts.tls)),
    row("startup: import only, the lane (Postgres + pg)", imp(r.imports.parts.lane)),
    row("startup: import only, the HTTP routes and cluster page", imp(r.imports.parts.httpRoutes)),
    row("startup: import only, the routes' Node server adapter", imp(r.imports.parts.httpServer)),
    row(
      "startup: import only, bare node / effect barrel / the node command (ms; CPU ms)",
      `${fmt(r.imports.sets.bare?.ms, 0)} / ${fmt(r.imports.sets.effectBarrel?.ms, 0)} / ${fmt(r.imports.sets.node?.ms, 0)}`,
      `${fmt(r.imports.sets.bare?.cpuMs, 0)} / ${fmt(r.imports.sets.effectBarrel?.cpuMs, 0)} / ${fmt(r.imports.sets.node?.cpuMs, 0)}`
    ),
    row(
      "startup: host with Mesh.layer + 3 peers vs without, at rest: RSS / heap (MiB more)",
      `${fmt(r.host.cost.main.rssMiB)} / ${fmt(r.host.cost.main.heapMiB)}`,
      `subpaths: ${fmt(r.host.cost.subpaths.rssMiB)} / ${fmt(r.host.cost.subpaths.heapMiB)}${r.host.released ? "" : " (V8 kept its young generation past the deadline)"}`
    ),
    row(
      "startup: the same, settled (young generation as start-up left it): RSS / heap (MiB more)",
      `${fmt(r.host.settled.main.rssMiB)} / ${fmt(r.host.settled.main.heapMiB)}`,
      `subpaths: ${fmt(r.host.settled.subpaths.rssMiB)} / ${fmt(r.host.settled.subpaths.heapMiB)}`
    ),
    row(
      "startup: host programs, RSS settled / at rest (MiB): bare, main entry, subpaths",
      (["bare", "mesh", "mesh-subpath"] as const)
        .map((k) => `${fmt(r.host.programs[k].settled.rssMiB)} / ${fmt(r.host.programs[k].atRest.rssMiB)}`)
        .join(", "),
      `young generation committed settled: ${(["bare", "mesh", "mesh-subpath"] as const).map((k) => fmt(r.host.programs[k].settled.youngMiB)).join(", ")} MiB`
    )
  ]
}

export const startupSection = section({
  names: ["startup"],
  plan: {
    full: { startup: { runs: 9, idleMs: 5000, partRuns: 5, importRuns: 7, hostSettleMs: 3000 } },
    quick: { startup: { runs: 5, idleMs: 3000, partRuns: 3, importRuns: 3, hostSettleMs: 2000 } }
  },
  run,
  results: (result) => ({ startup: result }),
  rows,
  targets: (r: Startup | undefined) => [
    check(
      "queen-mesh node spawn to listening, median (ms)",
      r?.node.listeningMs.median,
      "<= 300",
      (v) => v <= 300
    ),
    check(
      "idle queen-mesh node RSS, 3 peers, median (MiB)",
      r?.node.idleRssMiB.median,
      "<= 75",
      (v) => v <= 75
    ),
    check(
      "host with Mesh.layer + 3 peers: RSS more than without, at rest (MiB)",
      r?.host.cost.main.rssMiB,
      "<= 15",
      (v) => v <= 15
    ),
    check(
      "host with Mesh.layer + 3 peers: heap more than without, at rest (MiB)",
      r?.host.cost.main.heapMiB,
      "<= 15",
      (v) => v <= 15
    )
  ],
  notes: (_, plan) => [
    `Start-up: \`queen-mesh node --quiet\` with ${PEERS} baseline peers that dial it back, spawn to its \`listening\` line, ${plan.startup.runs} runs of each build by turns: the bundle that ships (\`dist/cli.js\`, \`npm run build\`; the targets) and tsc's modules of the same sources; idle RSS once its ${PEERS} \`peer_up\` lines are out and ${plan.startup.idleMs / 1000} s have passed. Where a start goes: ${plan.startup.runs} more runs of the bundle with a preloaded probe that marks, on the node's own clock, Node's bootstrap, the launcher's compile of the bundle (node:vm's Script), the bundle's first synchronous run, the HTTP port's listen and the \`listening\` line's write, and sums the GC pauses before the line; each stage's median over the runs ("outside node" is the driver's spawn to line less the node's own time to the line: fork, exec and the line's way back). Where the RSS goes: one more run of each build, \`/proc\`'s anonymous and file-backed resident memory, and from inside (a preloaded probe, after a full GC) the V8 heap by space, compiled code and bytecode, the scripts' source text and external memory.`,
    "Per part end to end: the node with one configured peer that is not there (the mesh active, listening), plain, with QUEEN_MESH_TLS=psk, and with QUEEN_MESH_PG_URL at a closed loopback port (the lane's module and pg load; it retries); medians. Import only: a fresh node importing a set of modules, ms from process start, its CPU and RSS, medians over rounds that run every set once, each part the difference of two sets (start-up differences under ~50 ms are within the noise of a busy machine).",
    "Host: the effect barrel and a runtime, with Mesh.layer (shipped in-memory services, TCP) and 3 peers imported from the main entry (as the README does) or from subpaths, against the same program without it; RSS and heap in use twice: settled (the links up, a pause, two GCs) and at rest (once V8's memory reducer, which runs in any process that goes idle, has given back the young generation start-up grew in both programs, then two GCs; at most 60 s). The targets are read at rest; settled also counts the young generation's pages each program touched, which the bare program, allocating nothing, mostly never does."
  ]
})
