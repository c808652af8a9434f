/**
 * The CLI wake taken apart, side by side for `queen-mesh node`, the CLI baseline and (where built)
 * upstream's Rust mesh behind its harness. A raw peer in the driver (the baseline's framing and HELLO)
 * stands in for the other node, so each side is timed with nothing inside the node under test:
 *
 * - send side: the driver writes a push line to node A's stdin and stamps; the raw peer, which A
 *   dialled, stamps the `MESSAGE_AVAILABLE` frame's arrival. Stdin pipe, A, loopback TCP.
 * - receive side: the raw peer, having dialled node B, writes a frame and stamps; the driver stamps
 *   B's `wake` line on its stdout. Loopback TCP, B, stdout pipe.
 *
 * The raw peer dials each node and sends it heartbeats, so its links stay alive both ways. The kinds
 * take turns in blocks; one push at a time. The driver's own event loop is in every figure alike.
 *
 * `node .bench-dist/bench/cliSegments.js [--upstream=<binary>|off] [--rounds=N] [--kinds=mesh,base]
 * [--cpu-prof=seg-mesh-a,seg-mesh-b]` after
 * `tsc -p tsconfig.bench.json`; prints a table and writes `.bench-dist/segments.json`.
 */
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import * as Baseline from "./baseline.js"
import { type CliKind, type CliNode, isEvent, startNode, TENANT, upstreamLinked } from "./cli.js"
import { freePort } from "./driver.js"
import { nowNs } from "./ipc.js"
import { type Distribution, distribution, sleep } from "./stats.js"

const SECRET = "bench-s3cr3t"
const argOf = (name: string): string | undefined =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3)
const defaultUpstream = Path.join(
  Os.tmpdir(),
  "upstream-mesh-harness",
  "target",
  "release",
  "upstream-mesh-node"
)
const upstreamArg = argOf("upstream") ?? process.env.QUEEN_MESH_BENCH_UPSTREAM ?? defaultUpstream
const upstream = upstreamArg !== "off" && Fs.existsSync(upstreamArg) ? upstreamArg : undefined
const rounds = Number(argOf("rounds") ?? "3000")
const warmup = 500
const block = 250

const profiled = new Set((argOf("cpu-prof") ?? "").split(",").filter((r) => r !== ""))
const profileDir = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../bench/profiles")
const options = {
  secret: SECRET,
  freePort,
  execArgv: (role: string) =>
    profiled.has(role)
      ? ["--cpu-prof", `--cpu-prof-dir=${profileDir}`, `--cpu-prof-name=${role}.cpuprofile`]
      : [],
  ...(upstream === undefined ? {} : { upstream })
}

const pushLine = (kind: CliKind, partition: string): string =>
  kind === "upstream"
    ? `ma orders ${partition} ${TENANT}\n`
    : `{"op":"message_available","queue":"orders","partition":"${partition}","tenant":"${TENANT}"}\n`

/** The raw peer: a listener the nodes dial, and a dialled socket per node, each kept alive. */
class RawPeer {
  readonly server: Net.Server
  readonly arrivals = new Map<string, (at: number) => void>()
  private readonly sockets: Array<Net.Socket> = []
  private readonly timer: NodeJS.Timeout

  constructor(readonly port: number) {
    this.server = Net.createServer((socket) => {
      socket.setNoDelay(true)
      this.sockets.push(socket)
      const parser = new Baseline.Parser()
      socket.on("data", (chunk: Buffer) => {
        const at = nowNs()
        parser.push(chunk, (tag, payload) => {
          if (tag !== Baseline.TAG_MESSAGE_AVAILABLE) return
          const item = Baseline.decodeItem(payload)
          const done = item === undefined ? undefined : this.arrivals.get(item.partition)
          if (done !== undefined) {
            this.arrivals.delete(item!.partition)
            done(at)
          }
        })
      })
      socket.on("error", () => {})
    })
    this.server.listen(port, "127.0.0.1")
    this.timer = setInterval(() => {
      const beat = Baseline.encodeFrame(Baseline.TAG_HEARTBEAT, { server_id: "seg-raw" })
      for (const s of this.sockets) if (!s.destroyed) s.write(beat)
    }, 1000)
  }

  /** Dials a node and authenticates as `seg-raw`. */
  dial(port: number): Promise<Net.Socket> {
    return new Promise((resolve, reject) => {
      const socket = Net.connect(port, "127.0.0.1", () => {
        socket.setNoDelay(true)
        socket.write(Baseline.helloFrame("seg-raw", SECRET))
        this.sockets.push(socket)
        resolve(socket)
      })
      socket.once("error", reject)
      socket.on("data", () => {})
    })
  }

  close(): void {
    clearInterval(this.timer)
    for (const s of this.sockets) s.destroy()
    this.server.close()
  }
}

interface Rig {
  readonly kind: CliKind
  readonly a: CliNode
  readonly b: CliNode
  readonly toB: Net.Socket
  readonly peer: RawPeer
  send: Array<number>
  receive: Array<number>
  done: number
}

const rig = async (kind: CliKind): Promise<Rig> => {
  const peerPort = await freePort()
  const peer = new RawPeer(peerPort)
  const pa = await freePort()
  const pb = await freePort()
  const a = startNode(options, kind, `seg-${kind}-a`, pa, [peerPort])
  const b = startNode(options, kind, `seg-${kind}-b`, pb, [peerPort])
  await Promise.all([
    a.waitFor(isEvent("listening"), 15_000, "listening"),
    b.waitFor(isEvent("listening"), 15_000, "listening")
  ])
  const toB = await peer.dial(pb)
  await peer.dial(pa)
  if (kind === "upstream") await Promise.all([upstreamLinked(a, 1, 15_000), upstreamLinked(b, 1, 15_000)])
  else await sleep(500)
  return { kind, a, b, toB, peer, send: [], receive: [], done: 0 }
}

/** One push through A to the raw peer, then one frame from the raw peer through B; µs each. */
const round = async (r: Rig, n: number): Promise<[number, number]> => {
  const sendPart = `s-${n}`
  const arrived = new Promise<number>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${r.kind}: push ${n} never reached the raw peer`)),
      5_000
    )
    r.peer.arrivals.set(sendPart, (at) => {
      clearTimeout(timer)
      resolve(at)
    })
  })
  const t0 = nowNs()
  r.a.write(pushLine(r.kind, sendPart))
  const t1 = await arrived
  const receivePart = `r-${n}`
  const line = r.b.waitFor((l) => l.includes(`"${receivePart}"`), 5_000, `wake ${receivePart}`)
  let t3 = 0
  r.b.onLine = (l, at) => {
    if (l.includes(`"${receivePart}"`)) t3 = at
  }
  const t2 = nowNs()
  r.toB.write(
    Baseline.encodeFrame(Baseline.TAG_MESSAGE_AVAILABLE, {
      queue: "orders",
      partition: receivePart,
      tenant: TENANT
    })
  )
  await line
  r.b.onLine = undefined
  return [(t1 - t0) / 1000, (t3 - t2) / 1000]
}

/** Ends a node; a profiled one by closing its stdin, so it exits on its own and writes its profile. */
const finish = (node: CliNode, role: string): Promise<void> => {
  if (!profiled.has(role)) return node.stop()
  return new Promise((resolve) => {
    const timer = setTimeout(() => node.stop().then(resolve), 30_000)
    node.process.once("exit", () => {
      clearTimeout(timer)
      resolve()
    })
    node.process.stdin!.end()
  })
}

const main = async () => {
  const only = argOf("kinds")?.split(",")
  const kinds = (upstream === undefined ? ["mesh", "base"] : ["mesh", "base", "upstream"]).filter(
    (k): k is CliKind => only === undefined || only.includes(k)
  )
  if (upstream === undefined) console.log("upstream's Rust mesh not found: its rows are skipped")
  const rigs: Array<Rig> = []
  for (const kind of kinds) rigs.push(await rig(kind))
  try {
    while (rigs.some((r) => r.done < warmup + rounds)) {
      for (const r of rigs) {
        for (let i = 0; i < block && r.done < warmup + rounds; i++) {
          const [send, receive] = await round(r, r.done)
          if (r.done >= warmup) {
            r.send.push(send)
            r.receive.push(receive)
          }
          r.done++
        }
      }
    }
  } finally {
    for (const r of rigs) {
      r.peer.close()
      await Promise.all([finish(r.a, `seg-${r.kind}-a`), finish(r.b, `seg-${r.kind}-b`)])
    }
  }
  const out: Record<string, { send: Distribution; receive: Distribution }> = {}
  for (const r of rigs) out[r.kind] = { send: distribution(r.send), receive: distribution(r.receive) }
  const f = (d: Distribution) => `${d.p50.toFixed(1)} / ${d.p99.toFixed(1)}`
  console.log(`| side (µs, p50 / p99)            | ${rigs.map((r) => r.kind).join(" | ")} |`)
  console.log(`| stdin -> A -> frame on the wire | ${rigs.map((r) => f(out[r.kind]!.send)).join(" | ")} |`)
  console.log(`| frame -> B -> line on stdout    | ${rigs.map((r) => f(out[r.kind]!.receive)).join(" | ")} |`)
  const here = Path.dirname(fileURLToPath(import.meta.url))
  Fs.writeFileSync(
    Path.resolve(here, "../segments.json"),
    `${JSON.stringify({ date: new Date().toISOString(), rounds, out }, null, 2)}\n`
  )
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error)
    process.exit(1)
  }
)
