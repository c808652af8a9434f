/**
 * Entry point of every bench child process: `node child.js <role> <params as JSON>`. Runs the role,
 * reports a failure to the driver as an `error` message, and exits when the role ends or, at the
 * latest, shortly after the driver says `stop`.
 */
import { Schema } from "effect"
import * as Broadcast from "./broadcast.js"
import * as Codec from "./codec.js"
import * as Fairness from "./fairness.js"
import { runGroupedWake } from "./groupedWake.js"
import * as Idle from "./idle.js"
import { flushParent, toParent } from "./ipc.js"
import * as Latency from "./latency.js"
import { runParkedBench } from "./parked.js"
import * as Throughput from "./throughput.js"
import { runTlsBench } from "./tls.js"

const Params = Schema.Record(Schema.String, Schema.Unknown)
const num = (params: Record<string, unknown>, key: string, fallback = 0): number => {
  const value = params[key]
  return typeof value === "number" ? value : fallback
}
const str = (params: Record<string, unknown>, key: string): string => {
  const value = params[key]
  return typeof value === "string" ? value : ""
}
const nums = (params: Record<string, unknown>, key: string): ReadonlyArray<number> => {
  const value = params[key]
  return Array.isArray(value) ? value.filter((v): v is number => typeof v === "number") : []
}

const role = process.argv[2] ?? ""
const params = Schema.decodeUnknownSync(Schema.fromJsonString(Params))(process.argv[3] ?? "{}")

const wake = (): Latency.WakeParams => ({
  port: num(params, "port"),
  peerPort: num(params, "peerPort"),
  secret: str(params, "secret"),
  total: num(params, "total"),
  pollMs: num(params, "pollMs", 100),
  pgPort: num(params, "pgPort")
})
const receiver = (): Throughput.ReceiverParams => ({
  frames: num(params, "frames"),
  secret: str(params, "secret"),
  dummyPeerPort: num(params, "dummyPeerPort")
})
const flood = (): Broadcast.FloodParams => ({
  peers: nums(params, "peers"),
  secret: str(params, "secret"),
  calls: num(params, "calls"),
  yieldEvery: num(params, "yieldEvery", 64),
  sync: params.sync === true
})

const idle = (): Idle.IdleParams => ({
  port: num(params, "port"),
  peers: nums(params, "peers"),
  secret: str(params, "secret"),
  durationMs: num(params, "durationMs", 60_000)
})

const roles: Record<string, () => Promise<void>> = {
  codec: async () => {
    toParent({
      kind: "result",
      data: Codec.runCodec({ sampleMs: num(params, "sampleMs", 200), samples: num(params, "samples", 5) })
    })
  },
  "recv-mesh": () => Throughput.receiveMesh(receiver()),
  "recv-base": () => Throughput.receiveBaseline(receiver()),
  send: () =>
    Throughput.send({
      port: num(params, "port"),
      frames: num(params, "frames"),
      secret: str(params, "secret"),
      framesPerWrite: num(params, "framesPerWrite", 512)
    }),
  "wake-mesh-a": () => Latency.meshPusher(wake()),
  "wake-mesh-b": () => Latency.meshParker(wake()),
  "wake-meshsync-a": () => Latency.meshSyncPusher(wake()),
  "wake-meshsync-b": () => Latency.meshParker(wake()),
  "wake-base-a": () => Latency.baselinePusher(wake()),
  "wake-base-b": () => Latency.baselineParker(wake()),
  "wake-off-a": () => Latency.offPusher(wake()),
  "wake-off-b": () => Latency.offParker(wake()),
  "wake-pg-a": () => Latency.pgPusher(wake()),
  "wake-pg-b": () => Latency.pgParker(wake()),
  "flood-mesh": () => Broadcast.floodMesh(flood()),
  "flood-base": () => Broadcast.floodBaseline(flood()),
  "flood-meshsync": () => Broadcast.floodMesh(flood()),
  sink: () => Broadcast.sink({ secret: str(params, "secret") }),
  sinks: () => Broadcast.sinks({ secret: str(params, "secret"), count: num(params, "count", 1) }),
  parked: async () => {
    toParent({ kind: "result", data: await runParkedBench(nums(params, "sizes")) })
  },
  "grouped-wake": async () => {
    toParent({
      kind: "result",
      data: await runGroupedWake({
        parked: num(params, "parked", 10_000),
        rounds: num(params, "rounds", 200),
        ungroupedRounds: num(params, "ungroupedRounds", 20)
      })
    })
  },
  tls: async () => {
    toParent({ kind: "result", data: await runTlsBench(num(params, "rounds", 1000)) })
  },
  "idle-mesh": () => Idle.idleMesh(idle()),
  "idle-base": () => Idle.idleBaseline(idle()),
  "idle-peers": () =>
    Idle.idlePeers({
      secret: str(params, "secret"),
      count: num(params, "count", 3),
      peerPort: num(params, "peerPort")
    }),
  "fair-recv": () =>
    Fairness.fairReceiver({ secret: str(params, "secret"), dummyPeerPort: num(params, "dummyPeerPort") }),
  "fair-good": () =>
    Fairness.fairGood({
      port: num(params, "port"),
      secret: str(params, "secret"),
      durationMs: num(params, "durationMs", 5000),
      everyMs: num(params, "everyMs", 50)
    }),
  "fair-hostile": () =>
    Fairness.fairHostile({
      port: num(params, "port"),
      secret: str(params, "secret"),
      invalid: params.invalid === true
    }),
  stall: () => Broadcast.stall()
}

// `stop` ends the process shortly after, whatever the role is doing.
process.on("message", (raw) => {
  if (typeof raw === "object" && raw !== null && Reflect.get(raw, "kind") === "stop") {
    setTimeout(() => process.exit(0), 500).unref()
  }
})
// A driver that went away takes its children with it.
process.on("disconnect", () => process.exit(0))

const run = roles[role]
if (run === undefined) {
  toParent({ kind: "error", data: `unknown role ${role}` })
  process.exit(2)
}
run().then(
  () => flushParent().then(() => process.exit(0)),
  (error: unknown) => {
    const detail = error instanceof Error ? (error.stack ?? error.message) : String(error)
    toParent({ kind: "error", data: `${role}: ${detail}` })
    return flushParent().then(() => process.exit(1))
  }
)
