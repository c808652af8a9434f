import { assert, describe, it } from "@effect/vitest"
import { Option, Result, Schema } from "effect"
import * as fc from "fast-check"
import * as Frame from "../src/Frame.js"
import * as Codec from "../src/internal/wire/codec.js"
import * as Frames from "../src/internal/wire/frames.js"
import * as Quick from "../src/internal/wire/payloadChecks.js"
import { numRuns } from "./fixtures/budget.js"
import { assertEqual } from "./fixtures/equality.js"

// Values shaped like payloads, with every field sometimes missing, null, empty or of the wrong type.
const field = fc.oneof(
  fc.string({ maxLength: 6 }),
  fc.constant(""),
  fc.constant(null),
  fc.integer(),
  fc.boolean(),
  fc.constant([]),
  fc.constant({})
)
const itemLike = fc.record(
  { queue: field, partition: field, tenant: field, extra: field },
  { requiredKeys: [] }
)
const payloadLike = fc.oneof(
  itemLike,
  fc.record({ items: fc.oneof(fc.array(itemLike, { maxLength: 4 }), field) }, { requiredKeys: [] }),
  fc.record({ enabled: field }, { requiredKeys: [] }),
  fc.record({ server_id: field, nonce: field, mac: field }, { requiredKeys: [] }),
  fc.jsonValue({ maxDepth: 3 })
)

/**
 * The hand-written checks of the frames read often, by name; the handshake's frames (read once per
 * connection) go through their Schemas alone. A row added to the table must be placed here.
 */
const quick: {
  readonly [K in keyof typeof Frames.frames]: ((json: unknown) => Frame.Frame | undefined) | null
} = {
  MessageAvailable: Quick.messageAvailable,
  MessageAvailableBatch: Quick.messageAvailableBatch,
  Heartbeat: Quick.heartbeat,
  Hello: null,
  HotlistDirtyBatch: Quick.hotlistDirtyBatch,
  QueueConfigSet: Quick.queueConfigSet,
  QueueConfigDelete: Quick.queueConfigDelete,
  MaintenanceModeSet: Quick.maintenanceModeSet,
  PopMaintenanceModeSet: Quick.popMaintenanceModeSet,
  EphAdmin: Quick.ephAdmin,
  Challenge: null
}
const checked = Object.entries(Frames.frames).flatMap(([name, row]) => {
  const check = quick[name as keyof typeof quick]
  if (check === null) return []
  const schema = Schema.decodeUnknownResult(row.schema)
  return [{ tag: row.tag, check, schema }]
})

describe("Frame quick decoders", () => {
  it("accept exactly what the Schemas accept, and build the same frames", () => {
    fc.assert(
      fc.property(fc.constantFrom(...checked), payloadLike, ({ tag, check, schema: decode }, payload) => {
        // Through JSON, as on the wire.
        const json: unknown = JSON.parse(JSON.stringify(payload))
        const quick = check(json)
        const schema = decode(json)
        if (quick !== undefined) {
          assert.isTrue(Result.isSuccess(schema), "the quick path accepted what the Schema rejects")
          assertEqual(quick, Result.getOrThrow(schema))
        }
        // When the quick path declines, decodePayload defers to the Schema, so the verdicts agree.
        const decoded = Frame.decodePayload(tag, Buffer.from(JSON.stringify(payload)))
        assert.strictEqual(Result.isSuccess(decoded), Result.isSuccess(schema))
      }),
      { numRuns: numRuns(3000) }
    )
  })

  it("take every well-formed payload without falling back to the Schema", () => {
    const item = Frame.queueItem({ queue: "q", partition: "p", tenant: "t" })
    const frames: ReadonlyArray<Frame.Frame> = [
      { _tag: "MessageAvailable", ...item },
      { _tag: "MessageAvailableBatch", items: [item, Frame.queueItem({ queue: "r", partition: "" })] },
      Frame.heartbeat("id"),
      { _tag: "HotlistDirtyBatch", items: [{ ...item, group: Option.none() }] },
      { _tag: "HotlistDirtyBatch", items: [{ ...item, group: Option.some("g") }] },
      {
        _tag: "EphAdmin",
        op: "config_set",
        tenant: "7f9c24e8-3b12-4fef-91e0-66ca3c8b3a4f",
        queue: "q"
      },
      { _tag: "QueueConfigSet", ...Frame.queueRef({ queue: "q" }) },
      { _tag: "QueueConfigDelete", ...Frame.queueRef({ queue: "q", tenant: "t" }) },
      { _tag: "MaintenanceModeSet", enabled: true },
      { _tag: "PopMaintenanceModeSet", enabled: false }
    ]
    for (const frame of frames) {
      const json: unknown = JSON.parse(JSON.stringify(Codec.payloadOf(frame) ?? {}))
      assertEqual(quick[frame._tag]!(json), frame)
    }
  })

  it("encode a MESSAGE_AVAILABLE straight from an item to the same bytes as Frame.encode", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "binary", maxLength: 8 }),
        fc.string({ unit: "binary", maxLength: 8 }),
        fc.option(fc.string({ unit: "binary", maxLength: 8 }), { nil: undefined }),
        (queue, partition, tenant) => {
          const item = Frame.queueItem({ queue: queue === "" ? "q" : queue, partition, tenant })
          const direct = Codec.encodeMessageAvailable(item)
          const viaFrame = Frame.encode({ _tag: "MessageAvailable", ...item })
          assert.isTrue(Buffer.from(viaFrame).equals(direct))
        }
      )
    )
  })
})
