/**
 * Entry point of the write-load section's child processes: `node writeloadChild.js <role> <params as
 * JSON>` (bench/writeloadProcs.ts forks them). Runs the role, reports a failure to the driver as an
 * `error` message, and exits shortly after the driver says `stop` or goes away.
 */
import { Schema } from "effect"
import { handoffProducer, handoffWorker } from "./handoff.js"
import { toParent } from "./ipc.js"
import { consumer, producer } from "./writeload.js"

const Carrier = Schema.Literals(["tcp", "lane", "notify", "none"])
const RoleParams = Schema.Struct({
  carrier: Carrier,
  url: Schema.String,
  secret: Schema.String,
  index: Schema.Number,
  port: Schema.Number,
  peers: Schema.Array(Schema.Number),
  nodes: Schema.Number,
  batch: Schema.Number,
  pollMs: Schema.Number,
  fallbackMs: Schema.Number,
  followUpMs: Schema.Number,
  hintsOnly: Schema.Boolean
})
const HandoffParams = Schema.Struct({
  way: Schema.Literals(["bare", "mesh"]),
  url: Schema.String,
  total: Schema.Number,
  secret: Schema.String,
  port: Schema.Number,
  peers: Schema.Array(Schema.Number)
})

const roles: Record<string, (json: string) => Promise<void>> = {
  producer: (json) => producer(Schema.decodeUnknownSync(Schema.fromJsonString(RoleParams))(json)),
  consumer: (json) => consumer(Schema.decodeUnknownSync(Schema.fromJsonString(RoleParams))(json)),
  "handoff-producer": (json) =>
    handoffProducer(Schema.decodeUnknownSync(Schema.fromJsonString(HandoffParams))(json)),
  "handoff-worker": (json) =>
    handoffWorker(Schema.decodeUnknownSync(Schema.fromJsonString(HandoffParams))(json))
}

process.on("message", (raw) => {
  if (typeof raw === "object" && raw !== null && Reflect.get(raw, "kind") === "stop") {
    setTimeout(() => process.exit(0), 500).unref()
  }
})
process.on("disconnect", () => process.exit(0))

const role = process.argv[2] ?? ""
const run = roles[role]
if (run === undefined) {
  toParent({ kind: "error", data: `unknown write-load role ${role}` })
  process.exit(2)
}
run(process.argv[3] ?? "{}").then(
  () => process.exit(0),
  (error: unknown) => {
    toParent({
      kind: "error",
      data: `${role}: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`
    })
    setTimeout(() => process.exit(1), 200)
  }
)
