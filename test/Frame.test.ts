/**
 * The frame codec (spec "Framing" and "The frame set"): tag values, the byte layout, the tenant rules,
 * the payload Schemas and the hand-written encoder's agreement with them, and the 16 MiB cap.
 */
import { assert, describe, it } from "@effect/vitest"
import { Option, Result, Schema } from "effect"
import * as fc from "fast-check"
import * as Frame from "../src/Frame.js"
import * as Codec from "../src/internal/wire/codec.js"
import * as Frames from "../src/internal/wire/frames.js"
import * as Names from "../src/internal/wire/names.js"
import * as Payloads from "../src/internal/wire/payloads.js"
import { FrameDecodeError, FrameTooLargeError } from "../src/MeshError.js"
import * as Arb from "./fixtures/arbitraries.js"
import { assertEqual, plain } from "./fixtures/equality.js"

const utf8 = new TextEncoder()
const text = new TextDecoder("utf-8", { fatal: true })

const decodeJson = (tag: number, json: string) => Frame.decodePayload(tag, utf8.encode(json))

/** The frame a payload decodes to, failing the test on a `FrameDecodeError`. */
const decoded = (tag: number, json: string): Frame.Frame | Frame.UnknownFrame =>
  Result.getOrThrowWith(decodeJson(tag, json), (error) => new Error(`unexpected ${error.message}`))

const assertDecodeError = (
  result: Result.Result<unknown, FrameDecodeError>,
  tag: number
): FrameDecodeError => {
  if (Result.isSuccess(result)) assert.fail(`expected a FrameDecodeError, got ${String(result.success)}`)
  assert.instanceOf(result.failure, FrameDecodeError)
  assert.strictEqual(result.failure._tag, "FrameDecodeError")
  assert.strictEqual(result.failure.tag, tag)
  return result.failure
}

/** The JSON text of an encoded frame, after checking its prefix and tag byte (read by hand, as below). */
const jsonOf = (bytes: Uint8Array, tag: number): string => {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength)
  assert.strictEqual(view.getUint32(0), bytes.length - 4)
  assert.strictEqual(bytes[4], tag)
  return text.decode(bytes.subarray(5))
}

const expectedTag: { readonly [K in Frame.Frame["_tag"]]: number } = {
  MessageAvailable: 1,
  MessageAvailableBatch: 2,
  Heartbeat: 3,
  Hello: 4,
  HotlistDirtyBatch: 5,
  QueueConfigSet: 10,
  QueueConfigDelete: 11,
  MaintenanceModeSet: 40,
  PopMaintenanceModeSet: 41,
  EphAdmin: 20,
  Challenge: 60
}

const roundTrip = <A, I>(schema: Schema.Codec<A, I>, value: A) => {
  const encoded = Schema.encodeSync(schema)(value)
  return { encoded, decoded: Schema.decodeUnknownSync(schema)(encoded) }
}

/** Each frame through the Schema of its own kind. */
const viaSchema = (frame: Frame.Frame): { readonly encoded: unknown; readonly decoded: unknown } => {
  switch (frame._tag) {
    case "MessageAvailable":
      return roundTrip(Payloads.MessageAvailable, frame)
    case "MessageAvailableBatch":
      return roundTrip(Payloads.MessageAvailableBatch, frame)
    case "Heartbeat":
      return roundTrip(Payloads.Heartbeat, frame)
    case "Hello":
      return roundTrip(Payloads.Hello, frame)
    case "HotlistDirtyBatch":
      return roundTrip(Payloads.HotlistDirtyBatch, frame)
    case "QueueConfigSet":
      return roundTrip(Payloads.QueueConfigSet, frame)
    case "QueueConfigDelete":
      return roundTrip(Payloads.QueueConfigDelete, frame)
    case "MaintenanceModeSet":
      return roundTrip(Payloads.MaintenanceModeSet, frame)
    case "PopMaintenanceModeSet":
      return roundTrip(Payloads.PopMaintenanceModeSet, frame)
    case "EphAdmin":
      return roundTrip(Payloads.EphAdmin, frame)
    case "Challenge":
      return roundTrip(Payloads.Challenge, frame)
  }
}

describe("Frame", () => {
  it("test fixture: the comparison used here tells Some from None (chai alone does not)", () => {
    assert.notDeepEqual(plain(Option.some("")), plain(Option.none()))
    assert.notDeepEqual(plain({ tenant: Option.some("t") }), plain({ tenant: Option.none() }))
    assert.notDeepEqual(plain(Result.succeed(Option.none())), plain(Result.succeed(Option.some(1))))
    assert.notDeepEqual(plain(Uint8Array.of(1)), plain(Uint8Array.of(2)))
  })

  describe("tags", () => {
    it("has the spec's tag values", () => {
      assertEqual(Frame.Tag, {
        MESSAGE_AVAILABLE: 1,
        MESSAGE_AVAILABLE_BATCH: 2,
        HEARTBEAT: 3,
        HELLO: 4,
        HOTLIST_DIRTY_BATCH: 5,
        EPH_ADMIN: 20,
        QUEUE_CONFIG_SET: 10,
        QUEUE_CONFIG_DELETE: 11,
        MAINTENANCE_MODE_SET: 40,
        POP_MAINTENANCE_MODE_SET: 41,
        CHALLENGE: 60
      })
    })

    it("tagOf maps every frame kind to its tag", () => {
      fc.assert(
        fc.property(Arb.frame, (frame) => {
          assert.strictEqual(Frame.tagOf(frame), expectedTag[frame._tag])
        })
      )
    })

    it("caps frames at 16 MiB behind a 4-byte prefix", () => {
      assert.strictEqual(Frame.MAX_FRAME_LENGTH, 16 * 1024 * 1024)
      assert.strictEqual(Frame.LENGTH_PREFIX_BYTES, 4)
    })
  })

  // The bytes spelled out by hand, not through `Frame.frameBytes` or test/fixtures/frames.ts: these
  // tests are what shows the one frame builder lays frames out as the spec's "Framing" says.
  describe("encode layout", () => {
    it("writes u32 BE length (tag byte + payload bytes), the tag byte, then the JSON", () => {
      const bytes = Frame.encode({
        _tag: "MessageAvailable",
        ...Frame.queueItem({ queue: "q", partition: "p" })
      })
      const json = '{"queue":"q","partition":"p"}'
      assertEqual(Array.from(bytes), [0, 0, 0, 1 + json.length, 1, ...Array.from(utf8.encode(json))])
    })

    it("counts UTF-8 bytes, not characters, in the length prefix", () => {
      const bytes = Frame.encode({
        _tag: "QueueConfigSet",
        ...Frame.queueRef({ queue: "ü😀", tenant: "漢" })
      })
      const json = '{"queue":"ü😀","tenant":"漢"}'
      const payload = utf8.encode(json)
      assert.isAbove(payload.length, json.length)
      assert.strictEqual(jsonOf(bytes, 10), json)
      assert.strictEqual(bytes.length, 5 + payload.length)
    })

    it("writes a prefix with the high byte set as unsigned big-endian", () => {
      // 0x01_00_00 + 1 bytes: the length needs three bytes, in network order.
      const bytes = Frame.encode({
        _tag: "Hello",
        server_id: "x".repeat(0x10000),
        nonce: "",
        mac: "",
        http_addr: Option.none(),
        eph_epoch: Option.none(),
        key_id: Option.none(),
        v2: Option.none()
      })
      const length =
        1 + Buffer.byteLength(JSON.stringify({ server_id: "x".repeat(0x10000), nonce: "", mac: "" }))
      assertEqual(Array.from(bytes.subarray(0, 5)), [
        (length >>> 24) & 0xff,
        (length >>> 16) & 0xff,
        (length >>> 8) & 0xff,
        length & 0xff,
        4
      ])
    })

    it("encodes a heartbeat without server id as the tag byte alone", () => {
      assertEqual(Array.from(Frame.encode(Frame.heartbeat())), [0, 0, 0, 1, 3])
    })

    it("encodes a heartbeat with a server id as its JSON", () => {
      assert.strictEqual(jsonOf(Frame.encode(Frame.heartbeat("x")), 3), '{"server_id":"x"}')
    })

    it("encodes the remaining frames as the spec's payloads", () => {
      assert.strictEqual(
        jsonOf(
          Frame.encode({
            _tag: "Hello",
            server_id: "a",
            nonce: "n",
            mac: "m",
            http_addr: Option.none(),
            eph_epoch: Option.none(),
            key_id: Option.none(),
            v2: Option.none()
          }),
          4
        ),
        '{"server_id":"a","nonce":"n","mac":"m"}'
      )
      assert.strictEqual(
        jsonOf(Frame.encode({ _tag: "MaintenanceModeSet", enabled: true }), 40),
        '{"enabled":true}'
      )
      assert.strictEqual(
        jsonOf(Frame.encode({ _tag: "PopMaintenanceModeSet", enabled: false }), 41),
        '{"enabled":false}'
      )
      assert.strictEqual(
        jsonOf(
          Frame.encode({
            _tag: "MessageAvailableBatch",
            items: [Frame.queueItem({ queue: "a", partition: "0", tenant: "t" })]
          }),
          2
        ),
        '{"items":[{"queue":"a","partition":"0","tenant":"t"}]}'
      )
      assert.strictEqual(jsonOf(Frame.encode({ _tag: "HotlistDirtyBatch", items: [] }), 5), '{"items":[]}')
      assert.strictEqual(
        jsonOf(
          Frame.encode({ _tag: "QueueConfigDelete", ...Frame.queueRef({ queue: "q", tenant: "t" }) }),
          11
        ),
        '{"queue":"q","tenant":"t"}'
      )
    })

    it("encode = encodeResult, and its bytes decode back to the frame", () => {
      fc.assert(
        fc.property(Arb.frame, (frame) => {
          const bytes = Frame.encode(frame)
          assertEqual(Frame.encodeResult(frame), Result.succeed(bytes))
          const payload = Codec.payloadOf(frame)
          assert.strictEqual(
            jsonOf(bytes, expectedTag[frame._tag]),
            payload === undefined ? "" : JSON.stringify(payload)
          )
          assertEqual(Frame.decodePayload(bytes[4]!, bytes.subarray(5)), Result.succeed(frame))
        }),
        { numRuns: 300 }
      )
    })
  })

  describe("tenant", () => {
    const cases: ReadonlyArray<readonly [string, string, Option.Option<string>]> = [
      ["absent", "", Option.none()],
      ["null", ',"tenant":null', Option.none()],
      ['""', ',"tenant":""', Option.none()],
      ['"t"', ',"tenant":"t"', Option.some("t")]
    ]
    for (const [name, field, tenant] of cases) {
      it(`${name} decodes to ${Option.isSome(tenant) ? "Option.some" : "Option.none"} in every queue-carrying frame`, () => {
        assertEqual(decoded(1, `{"queue":"q","partition":"p"${field}}`), {
          _tag: "MessageAvailable",
          queue: "q",
          partition: "p",
          tenant
        })
        assertEqual(decoded(2, `{"items":[{"queue":"q","partition":"p"${field}}]}`), {
          _tag: "MessageAvailableBatch",
          items: [{ queue: "q", partition: "p", tenant }]
        })
        assertEqual(decoded(5, `{"items":[{"queue":"q","partition":"p"${field}}]}`), {
          _tag: "HotlistDirtyBatch",
          items: [{ queue: "q", partition: "p", tenant, group: Option.none() }]
        })
        assertEqual(decoded(10, `{"queue":"q"${field}}`), {
          _tag: "QueueConfigSet",
          queue: "q",
          tenant
        })
        assertEqual(decoded(11, `{"queue":"q"${field}}`), {
          _tag: "QueueConfigDelete",
          queue: "q",
          tenant
        })
      })
    }

    it("keeps a tenant that is only whitespace (it is not empty)", () => {
      assertEqual(decoded(10, '{"queue":"q","tenant":" "}'), {
        _tag: "QueueConfigSet",
        queue: "q",
        tenant: Option.some(" ")
      })
    })

    it("encoder omits an absent tenant: the JSON has no tenant key", () => {
      const none = Frame.queueItem({ queue: "q", partition: "p" })
      const frames: ReadonlyArray<Frame.Frame> = [
        { _tag: "MessageAvailable", ...none },
        { _tag: "MessageAvailableBatch", items: [none, none] },
        { _tag: "HotlistDirtyBatch", items: [{ ...none, group: Option.none() }] },
        { _tag: "QueueConfigSet", ...Frame.queueRef({ queue: "q" }) },
        { _tag: "QueueConfigDelete", ...Frame.queueRef({ queue: "q", tenant: Option.none() }) }
      ]
      for (const frame of frames) {
        const json = jsonOf(Frame.encode(frame), expectedTag[frame._tag])
        assert.notInclude(json, "tenant")
        assert.notInclude(json, "null")
      }
    })

    it("encoder writes a tenant key exactly when the tenant is present", () => {
      fc.assert(
        fc.property(Arb.queueItem, (item) => {
          const wire: unknown = JSON.parse(jsonOf(Frame.encode({ _tag: "MessageAvailable", ...item }), 1))
          assertEqual(
            wire,
            Option.match(item.tenant, {
              onNone: () => ({ queue: item.queue, partition: item.partition }),
              onSome: (tenant) => ({ queue: item.queue, partition: item.partition, tenant })
            })
          )
        }),
        { numRuns: 200 }
      )
    })

    it("tenantOf treats undefined, null and empty as absent", () => {
      assertEqual(Frame.tenantOf(undefined), Option.none())
      assertEqual(Frame.tenantOf(null), Option.none())
      assertEqual(Frame.tenantOf(""), Option.none())
      assertEqual(Frame.tenantOf(Option.none()), Option.none())
      assertEqual(Frame.tenantOf(Option.some("")), Option.none())
      assertEqual(Frame.tenantOf("t"), Option.some("t"))
      assertEqual(Frame.tenantOf(Option.some("t")), Option.some("t"))
    })

    it("queueItem, queueRef and heartbeat build frames the wire would produce", () => {
      assertEqual(Frame.queueItem({ queue: "q", partition: "p", tenant: "" }), {
        queue: "q",
        partition: "p",
        tenant: Option.none()
      })
      assertEqual(Frame.queueItem({ queue: "q", partition: "p", tenant: null }), {
        queue: "q",
        partition: "p",
        tenant: Option.none()
      })
      assertEqual(Frame.queueRef({ queue: "q", tenant: "t" }), {
        queue: "q",
        tenant: Option.some("t")
      })
      assertEqual(Frame.heartbeat(), { _tag: "Heartbeat", server_id: Option.none() })
      assertEqual(Frame.heartbeat("x"), { _tag: "Heartbeat", server_id: Option.some("x") })
    })
  })

  describe("upstream's current wire", () => {
    const TENANT = "7f9c24e8-3b12-4fef-91e0-66ca3c8b3a4f"

    it("EPH_ADMIN (tag 20): {op, tenant, queue}, a UUID tenant lowercased, any of the three ops", () => {
      for (const op of ["reset", "delete", "config_set"] as const) {
        assertEqual(decoded(20, `{"op":"${op}","tenant":"${TENANT.toUpperCase()}","queue":"tmp"}`), {
          _tag: "EphAdmin",
          op,
          tenant: TENANT,
          queue: "tmp"
        })
      }
      assert.strictEqual(
        jsonOf(Frame.encode({ _tag: "EphAdmin", op: "delete", tenant: TENANT, queue: "tmp" }), 20),
        `{"op":"delete","tenant":"${TENANT}","queue":"tmp"}`
      )
    })

    it("EPH_ADMIN refuses what upstream drops: no op or queue, an empty one, a tenant absent or not a UUID", () => {
      const refused = [
        `{"tenant":"${TENANT}","queue":"tmp"}`,
        `{"op":"","tenant":"${TENANT}","queue":"tmp"}`,
        `{"op":"reset","tenant":"${TENANT}"}`,
        `{"op":"reset","tenant":"${TENANT}","queue":""}`,
        '{"op":"reset","queue":"tmp"}',
        '{"op":"reset","tenant":null,"queue":"tmp"}',
        '{"op":"reset","tenant":"","queue":"tmp"}',
        '{"op":"reset","tenant":"acme","queue":"tmp"}',
        `{"op":"drop","tenant":"${TENANT}","queue":"tmp"}`,
        `{"op":"reset","tenant":"${TENANT}","queue":"${"q".repeat(Frame.MAX_NAME_CHARS + 1)}"}`,
        "[]"
      ]
      for (const json of refused) assertDecodeError(decodeJson(20, json), 20)
      assert.isTrue(Result.isFailure(Frames.validEphAdmin({ op: "reset", tenant: "acme", queue: "tmp" })))
      assert.isTrue(Result.isSuccess(Frames.validEphAdmin({ op: "reset", tenant: TENANT, queue: "tmp" })))
    })

    it("a hot-list item's group: present and non-empty scopes it; absent, empty or not a string does not", () => {
      const group = (field: string) => {
        const frame = decoded(5, `{"items":[{"queue":"q","partition":"p"${field}}]}`)
        if (frame._tag !== "HotlistDirtyBatch") return assert.fail(`decoded as ${frame._tag}`)
        return Option.getOrNull(frame.items[0]!.group)
      }
      assert.strictEqual(group(',"group":"billing"'), "billing")
      assert.strictEqual(group(""), null)
      assert.strictEqual(group(',"group":""'), null)
      assert.strictEqual(group(',"group":null'), null)
      assert.strictEqual(group(',"group":7'), null)
      assert.strictEqual(group(',"group":{"name":"x"}'), null)
      // Encoding writes the group only when the mark is scoped, as upstream does.
      const item = Frame.queueItem({ queue: "q", partition: "p" })
      assert.strictEqual(
        jsonOf(
          Frame.encode({
            _tag: "HotlistDirtyBatch",
            items: [
              { ...item, group: Option.some("billing") },
              { ...item, group: Option.none() }
            ]
          }),
          5
        ),
        '{"items":[{"queue":"q","partition":"p","group":"billing"},{"queue":"q","partition":"p"}]}'
      )
    })

    it("names are 255 characters of any script: 255 emoji (1,020 bytes) pass, 256 do not", () => {
      for (const unit of ["q", "漢", "😀"]) {
        const name = unit.repeat(Frame.MAX_NAME_CHARS)
        assertEqual(decoded(1, JSON.stringify({ queue: name, partition: name })), {
          _tag: "MessageAvailable",
          queue: name,
          partition: name,
          tenant: Option.none()
        })
        assert.isTrue(Result.isSuccess(Frames.validItem({ queue: name, partition: name })))
        const over = unit.repeat(Frame.MAX_NAME_CHARS + 1)
        assertDecodeError(decodeJson(1, JSON.stringify({ queue: over, partition: "p" })), 1)
        assertDecodeError(decodeJson(1, JSON.stringify({ queue: "q", partition: over })), 1)
        assert.isTrue(Result.isFailure(Frames.validItem({ queue: over, partition: "p" })))
        assert.isTrue(Result.isFailure(Frames.validHotItem({ queue: "q", partition: "p", group: over })))
      }
      assert.strictEqual(Buffer.byteLength("😀".repeat(Frame.MAX_NAME_CHARS)), Frame.MAX_NAME_BYTES)
      // The biggest single-item frame fits its cap: every name at 255 characters, each escaped to 12 bytes.
      const worst = "\ud83d\ude00".repeat(Frame.MAX_NAME_CHARS)
      const json = `{"queue":"${worst}","partition":"${worst}","tenant":"${worst}"}`
      assert.isAtMost(1 + json.length, Payloads.SMALL_FRAME_LENGTH)
      assert.strictEqual(Result.isSuccess(decodeJson(1, json)), true)
    })

    it("tenants: uuid refuses a name at the API, any accepts it; a UUID in any case is one tenant", () => {
      const named = { queue: "q", partition: "p", tenant: "acme" }
      const refused = Frames.validItem(named, "uuid")
      if (Result.isSuccess(refused)) return assert.fail("expected a refusal")
      assert.include(refused.failure, '"acme" is not a UUID')
      assert.isTrue(Result.isSuccess(Frames.validItem(named, "any")))
      assert.isTrue(Result.isFailure(Frames.validRef({ queue: "q", tenant: "acme" }, "uuid")))
      assertEqual(
        Frames.validItem({ queue: "q", partition: "p", tenant: TENANT.toUpperCase() }, "uuid"),
        Result.succeed(Frame.queueItem({ queue: "q", partition: "p", tenant: TENANT }))
      )
      assert.isTrue(Result.isSuccess(Frames.validItem({ queue: "q", partition: "p" }, "uuid")))
    })

    it("HELLO v2 fields: strings are kept, anything else is absent, and they are written back as given", () => {
      const hello = decoded(
        4,
        '{"server_id":"s","nonce":"n","mac":"m","http_addr":"http://queen-b:6632","eph_epoch":"1f"}'
      )
      if (hello._tag !== "Hello") return assert.fail(`decoded as ${hello._tag}`)
      assertEqual([hello.http_addr, hello.eph_epoch], [Option.some("http://queen-b:6632"), Option.some("1f")])
      const odd = decoded(4, '{"server_id":"s","nonce":"n","mac":"m","http_addr":7,"eph_epoch":null}')
      if (odd._tag !== "Hello") return assert.fail(`decoded as ${odd._tag}`)
      assertEqual([odd.http_addr, odd.eph_epoch], [Option.none(), Option.none()])
      assert.strictEqual(
        jsonOf(Frame.encode(hello), 4),
        '{"server_id":"s","nonce":"n","mac":"m","http_addr":"http://queen-b:6632","eph_epoch":"1f"}'
      )
    })
  })

  describe("queue names", () => {
    const badItems = [
      '{"queue":"","partition":"p","tenant":"t"}',
      '{"partition":"p","tenant":"t"}',
      '{"queue":null,"partition":"p"}',
      '{"queue":7,"partition":"p"}',
      `{"queue":"${"q".repeat(Frame.MAX_NAME_CHARS + 1)}","partition":"p"}`,
      `{"queue":"${"😀".repeat(Frame.MAX_NAME_CHARS + 1)}","partition":"p"}`,
      `{"queue":"q","partition":"${"漢".repeat(Frame.MAX_NAME_CHARS + 1)}"}`
    ]

    it("tag 1: an item with an empty, missing or over-long name is a FrameDecodeError", () => {
      for (const item of badItems) assertDecodeError(decodeJson(1, item), 1)
    })

    it("a tenant that is not a string or is over-long is absent, as upstream reads it: the hint reaches every tenant", () => {
      for (const tenant of ["7", "{}", "[]", "true", `"${"t".repeat(Frame.MAX_NAME_CHARS + 1)}"`]) {
        assertEqual(decoded(1, `{"queue":"q","partition":"p","tenant":${tenant}}`), {
          _tag: "MessageAvailable",
          queue: "q",
          partition: "p",
          tenant: Option.none()
        })
        assertEqual(decoded(10, `{"queue":"q","tenant":${tenant}}`), {
          _tag: "QueueConfigSet",
          queue: "q",
          tenant: Option.none()
        })
        const batch = decoded(2, `{"items":[{"queue":"q","tenant":${tenant}}]}`)
        assert.isTrue(batch._tag === "MessageAvailableBatch" && batch.skipped === undefined)
      }
    })

    for (const tag of [2, 5]) {
      it(`tag ${tag}: a batch skips each bad item, counts it, and keeps the rest (per-item leniency)`, () => {
        for (const item of badItems) {
          const frame = decoded(tag, `{"items":[{"queue":"ok","partition":"p"},${item},{"queue":"ok2"}]}`)
          assert.isTrue(frame._tag === "MessageAvailableBatch" || frame._tag === "HotlistDirtyBatch")
          if (frame._tag === "MessageAvailableBatch" || frame._tag === "HotlistDirtyBatch") {
            assert.deepStrictEqual(
              frame.items.map((i) => [i.queue, i.partition]),
              [
                ["ok", "p"],
                ["ok2", ""]
              ]
            )
            assert.strictEqual(frame.skipped, 1)
          }
        }
      })
    }

    for (const tag of [10, 11]) {
      it(`tag ${tag}: an empty or missing queue is a FrameDecodeError`, () => {
        assertDecodeError(decodeJson(tag, '{"queue":"","tenant":"t"}'), tag)
        assertDecodeError(decodeJson(tag, '{"tenant":"t"}'), tag)
        assertDecodeError(decodeJson(tag, "{}"), tag)
      })
    }

    it("a missing or null partition is the empty partition, as upstream takes it", () => {
      assertEqual(decoded(1, '{"queue":"q"}'), {
        _tag: "MessageAvailable",
        queue: "q",
        partition: "",
        tenant: Option.none()
      })
      assertEqual(decoded(1, '{"queue":"q","partition":null}'), {
        _tag: "MessageAvailable",
        queue: "q",
        partition: "",
        tenant: Option.none()
      })
    })

    it("the error names the failing field", () => {
      const error = assertDecodeError(decodeJson(1, '{"queue":"","partition":"p"}'), 1)
      assert.include(error.detail, "queue")
      assert.include(error.message, "tag 1")
    })

    it("a UUID tenant is kept lowercased; any other tenant as given", () => {
      assertEqual(decoded(10, '{"queue":"q","tenant":"00000000-0000-0000-0000-00000000000A"}'), {
        _tag: "QueueConfigSet",
        queue: "q",
        tenant: Option.some("00000000-0000-0000-0000-00000000000a")
      })
      assertEqual(decoded(10, '{"queue":"q","tenant":"Acme"}'), {
        _tag: "QueueConfigSet",
        queue: "q",
        tenant: Option.some("Acme")
      })
    })
  })

  describe("decodePayload", () => {
    it("refuses deeply nested payloads of every tag with a short detail, never a throw", () => {
      for (const depth of [2_200, 100_000]) {
        const json = "[".repeat(depth) + "]".repeat(depth)
        for (const tag of Object.values(Frame.Tag)) {
          const error = assertDecodeError(decodeJson(tag, json), tag)
          assert.isAtMost(error.detail.length, Names.MAX_DETAIL_LENGTH + 32)
        }
      }
      const wide = JSON.stringify({ queue: 1, partition: "x".repeat(100_000) })
      const error = assertDecodeError(decodeJson(1, wide), 1)
      assert.isAtMost(error.message.length, Names.MAX_DETAIL_LENGTH + 64)
    })

    it("ignores unknown extra JSON fields", () => {
      assertEqual(decoded(1, '{"queue":"q","partition":"p","tenant":"t","priority":9,"x":{"y":[1]}}'), {
        _tag: "MessageAvailable",
        queue: "q",
        partition: "p",
        tenant: Option.some("t")
      })
      assertEqual(decoded(2, '{"items":[{"queue":"q","partition":"p","extra":true}],"count":1}'), {
        _tag: "MessageAvailableBatch",
        items: [{ queue: "q", partition: "p", tenant: Option.none() }]
      })
      assertEqual(decoded(3, '{"server_id":"s","load":0.5}'), {
        _tag: "Heartbeat",
        server_id: Option.some("s")
      })
      assertEqual(decoded(4, '{"server_id":"s","nonce":"n","mac":"m","version":2}'), {
        _tag: "Hello",
        server_id: "s",
        nonce: "n",
        mac: "m",
        http_addr: Option.none(),
        eph_epoch: Option.none(),
        key_id: Option.none(),
        v2: Option.none()
      })
      assertEqual(decoded(10, '{"queue":"q","by":"admin"}'), {
        _tag: "QueueConfigSet",
        queue: "q",
        tenant: Option.none()
      })
      assertEqual(decoded(40, '{"enabled":true,"reason":"upgrade"}'), {
        _tag: "MaintenanceModeSet",
        enabled: true
      })
      assertEqual(decoded(41, '{"enabled":false,"_tag":"Hello"}'), {
        _tag: "PopMaintenanceModeSet",
        enabled: false
      })
    })

    it("decodes a heartbeat with an empty payload", () => {
      assertEqual(Frame.decodePayload(3, new Uint8Array(0)), Result.succeed(Frame.heartbeat()))
    })

    it('decodes a heartbeat with {"server_id":"x"}', () => {
      assertEqual(decoded(3, '{"server_id":"x"}'), {
        _tag: "Heartbeat",
        server_id: Option.some("x")
      })
    })

    it("decodes a heartbeat with {} or a null server_id as no server id", () => {
      assertEqual(decoded(3, "{}"), Frame.heartbeat())
      assertEqual(decoded(3, '{"server_id":null}'), Frame.heartbeat())
    })

    it("decodes an unknown tag to an Unknown frame carrying its payload", () => {
      const payload = utf8.encode('{"anything":1}')
      assertEqual(Frame.decodePayload(99, payload), Result.succeed({ _tag: "Unknown", tag: 99, payload }))
      const empty = new Uint8Array(0)
      assertEqual(Frame.decodePayload(0, empty), Result.succeed({ _tag: "Unknown", tag: 0, payload: empty }))
      const junk = Uint8Array.of(0xff, 0x00)
      assertEqual(
        Frame.decodePayload(255, junk),
        Result.succeed({ _tag: "Unknown", tag: 255, payload: junk })
      )
    })

    it("every tag outside the table is Unknown, whatever its payload", () => {
      fc.assert(
        fc.property(Arb.unknownTag, fc.uint8Array({ maxLength: 32 }), (tag, payload) => {
          assertEqual(Frame.decodePayload(tag, payload), Result.succeed({ _tag: "Unknown", tag, payload }))
        })
      )
    })

    for (const tag of Object.values(Frame.Tag)) {
      it(`tag ${tag}: a payload that is not JSON is a FrameDecodeError, not a throw`, () => {
        assertDecodeError(decodeJson(tag, "not json"), tag)
        assertDecodeError(decodeJson(tag, '{"queue":'), tag)
        assertDecodeError(Frame.decodePayload(tag, Uint8Array.of(0xff, 0xfe, 0x7b)), tag)
        assertDecodeError(decodeJson(tag, "null"), tag)
        assertDecodeError(decodeJson(tag, "[]"), tag)
        assertDecodeError(decodeJson(tag, "42"), tag)
        if (tag !== Frame.Tag.HEARTBEAT) assertDecodeError(Frame.decodePayload(tag, new Uint8Array(0)), tag)
      })
    }

    it("rejects payloads of the wrong shape", () => {
      assertDecodeError(decodeJson(2, '{"items":{}}'), 2)
      assertEqual(decoded(5, '{"items":[null]}'), { _tag: "HotlistDirtyBatch", items: [], skipped: 1 })
      assertDecodeError(decodeJson(5, "{}"), 5)
      assertDecodeError(decodeJson(3, '{"server_id":5}'), 3)
      assertDecodeError(decodeJson(4, '{"server_id":"s","nonce":"n"}'), 4)
      assertDecodeError(decodeJson(4, '{"server_id":"s","nonce":1,"mac":"m"}'), 4)
      assertDecodeError(decodeJson(40, '{"enabled":"true"}'), 40)
      assertDecodeError(decodeJson(41, "{}"), 41)
    })

    it("never throws on arbitrary payload bytes for any tag", () => {
      fc.assert(
        fc.property(
          fc.integer({ min: 0, max: 255 }),
          fc.oneof(
            fc.uint8Array({ maxLength: 64 }),
            Arb.text().map((s) => utf8.encode(s))
          ),
          (tag, payload) => {
            const result = Frame.decodePayload(tag, payload)
            if (Result.isFailure(result)) assert.instanceOf(result.failure, FrameDecodeError)
          }
        ),
        { numRuns: 300 }
      )
    })
  })

  describe("Schemas", () => {
    for (const [kind, arbitrary] of Object.entries(Arb.frameByKind)) {
      it(`${kind}: the Schema round-trips, and payloadOf agrees with Schema.encode`, () => {
        fc.assert(
          fc.property(arbitrary, (frame) => {
            assert.strictEqual(frame._tag, kind)
            const { decoded, encoded } = viaSchema(frame)
            assertEqual(decoded, frame)
            const payload = Codec.payloadOf(frame)
            if (payload === undefined) {
              // Only a heartbeat without server id has an empty payload; its Schema form is `{}`.
              assertEqual(frame, Frame.heartbeat())
              assertEqual(encoded, {})
            } else {
              assertEqual(payload, encoded)
            }
            assert.isTrue(Schema.is(Frame.Frame)(frame))
          }),
          { numRuns: 150 }
        )
      })
    }

    it("the Frame union rejects values that are not frames", () => {
      assert.isFalse(
        Schema.is(Frame.Frame)({ _tag: "MessageAvailable", queue: "", partition: "p", tenant: Option.none() })
      )
      assert.isFalse(Schema.is(Frame.Frame)({ _tag: "Nope", enabled: true }))
      assert.isFalse(Schema.is(Frame.Frame)({ _tag: "Heartbeat", server_id: "x" }))
    })
  })

  describe("size cap", () => {
    const items = (count: number, queue: (i: number) => string) =>
      Array.from({ length: count }, (_, i) =>
        Frame.queueItem({
          queue: queue(i),
          partition: `partition-${i}`,
          tenant: i % 2 === 0 ? "tenant" : undefined
        })
      )

    it("encodeResult rejects a batch above 16 MiB with FrameTooLargeError; encode throws it", () => {
      const frame: Frame.Frame = {
        _tag: "MessageAvailableBatch",
        items: items(17_000, () => "q".repeat(1024))
      }
      const result = Frame.encodeResult(frame)
      if (Result.isSuccess(result)) assert.fail("expected FrameTooLargeError")
      assert.instanceOf(result.failure, FrameTooLargeError)
      assert.isAbove(result.failure.length, Frame.MAX_FRAME_LENGTH)
      assert.strictEqual(result.failure.length, 1 + Buffer.byteLength(JSON.stringify(Codec.payloadOf(frame))))
      assert.throws(() => Frame.encode(frame), FrameTooLargeError)
    })

    it("a 100,000-item batch stays under the cap and decodes back", () => {
      const frame: Frame.HotlistDirtyBatch = {
        _tag: "HotlistDirtyBatch",
        items: items(100_000, (i) => `queue-${i % 97}`).map((item, i) => ({
          ...item,
          group: i % 3 === 0 ? Option.some(`group-${i % 5}`) : Option.none()
        }))
      }
      const bytes = Result.getOrThrow(Frame.encodeResult(frame))
      assert.isAtMost(bytes.length - 4, Frame.MAX_FRAME_LENGTH)
      const back = Result.getOrThrow(Frame.decodePayload(bytes[4]!, bytes.subarray(5)))
      if (back._tag !== "HotlistDirtyBatch") return assert.fail(`decoded as ${back._tag}`)
      assert.strictEqual(back.items.length, 100_000)
      assertEqual(
        [back.items[0], back.items[1], back.items[99_999]],
        [frame.items[0], frame.items[1], frame.items[99_999]]
      )
      // Whole-batch equality, cheaply: the decoded frame re-encodes to the very same bytes.
      assert.isTrue(Buffer.from(Frame.encode(back)).equals(bytes))
    })

    it("accepts a frame of exactly 16 MiB and rejects one byte more", () => {
      const hello = (padding: number): Frame.Frame => ({
        _tag: "Hello",
        server_id: "s".repeat(padding),
        nonce: "",
        mac: "",
        http_addr: Option.none(),
        eph_epoch: Option.none(),
        key_id: Option.none(),
        v2: Option.none()
      })
      const overhead = 1 + Buffer.byteLength(JSON.stringify(Codec.payloadOf(hello(0))))
      const exact = Result.getOrThrow(Frame.encodeResult(hello(Frame.MAX_FRAME_LENGTH - overhead)))
      assert.strictEqual(exact.length, 4 + Frame.MAX_FRAME_LENGTH)
      assert.strictEqual(new DataView(exact.buffer, exact.byteOffset).getUint32(0), Frame.MAX_FRAME_LENGTH)
      assertEqual(
        Frame.encodeResult(hello(Frame.MAX_FRAME_LENGTH - overhead + 1)),
        Result.fail(new FrameTooLargeError({ length: Frame.MAX_FRAME_LENGTH + 1 }))
      )
    })
  })
})
