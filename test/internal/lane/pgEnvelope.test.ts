/**
 * The PostgreSQL lane's envelope: packing under the payload limit (batches split by item, nothing lost,
 * order kept), the MAC and key rotation, the replay state, and `open`'s refusals, which never throw.
 */
import { createHmac, hkdfSync } from "node:crypto"
import { assert, describe, it } from "@effect/vitest"
import * as Result from "effect/Result"
import * as fc from "fast-check"
import { frameBytes as frame } from "../../../src/Frame.js"
import * as Envelope from "../../../src/internal/lane/pgEnvelope.js"
import { numRuns } from "../../fixtures/budget.js"
import { rawFrame } from "../../fixtures/frames.js"

const CHANNEL = "queen_mesh"
const A = Envelope.key("secret-a")
const B = Envelope.key("secret-b")
const ringA: Envelope.Keyring = { primary: A, accepted: [] }
const ringB: Envelope.Keyring = { primary: B, accepted: [] }
const ringBA: Envelope.Keyring = { primary: B, accepted: [A] }
const EPOCH = Envelope.makeEpoch(1_700_000_000_000, 7)
const RECEIVER: Envelope.Self = { serverId: "receiver", epoch: Envelope.makeEpoch(1_700_000_000_000, 9) }
/** The backend every test sender sends from, and the receiver's own. */
const SENDER_PID = 4242
const RECEIVER_PID = 77
/** A notification from the test sender's backend, on a connection listening since long ago. */
const RECEIPT: Envelope.Receipt = { processId: SENDER_PID, ownPid: RECEIVER_PID, listenedAt: 0 }

const payloadOf = (bytes: Uint8Array): unknown =>
  bytes.length === 5 ? null : JSON.parse(Buffer.from(bytes.subarray(5)).toString("utf8"))

const sender = (auth: Envelope.Auth = ringA, serverId = "sender", epoch = EPOCH, pid = SENDER_PID) => {
  const s = new Envelope.Sender(serverId, epoch, CHANNEL, auth)
  s.bind(pid, 0)
  return s
}

const openAll = (
  payloads: ReadonlyArray<string>,
  auth: Envelope.Auth = ringA,
  state = new Envelope.ReplayState()
): Array<Envelope.ReceivedFrame> => {
  const out: Array<Envelope.ReceivedFrame> = []
  for (const payload of payloads) {
    const opened = Envelope.open(payload, CHANNEL, auth, RECEIVER, state, RECEIPT)
    if (Result.isFailure(opened)) assert.fail(`refused: ${opened.failure}`)
    out.push(...opened.success.frames)
  }
  return out
}

/** Text a `text` payload can hold in any database encoding: ASCII without NUL. */
const asciiNoNul = (text: string): boolean => {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 0 || c > 0x7f) return false
  }
  return true
}

const isBatch = (tag: number) => tag === 2 || tag === 5

const isObject = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** `u` as an object, failing the test when it is not one. */
const objectOf = (u: unknown): Record<string, unknown> => {
  if (!isObject(u)) return assert.fail(`not an object: ${JSON.stringify(u)}`)
  return u
}

/** `u` as a non-empty array, failing the test when it is not one. */
const itemsOf = (u: unknown): ReadonlyArray<unknown> => {
  if (!Array.isArray(u) || u.length === 0) return assert.fail(`not a non-empty array: ${JSON.stringify(u)}`)
  return u
}

/**
 * Checks that `received` is `sent` in order, minus the frames `dropped` names whole: a batch may come as
 * several consecutive pieces of its tag whose items concatenate to its items (less those too large for
 * any notification, which `dropped` counts), each piece with the batch's other fields.
 */
const assertReassembles = (
  sent: ReadonlyArray<Uint8Array>,
  received: ReadonlyArray<Envelope.ReceivedFrame>,
  dropped: ReadonlyArray<Envelope.Dropped>,
  room: number
) => {
  const gone = new Set(dropped.filter((d) => d.items === 0).map((d) => d.index))
  let at = 0
  sent.forEach((bytes, index) => {
    if (gone.has(index)) return
    const tag = bytes[4]!
    const payload = payloadOf(bytes)
    if (!isBatch(tag) || !isObject(payload) || !Array.isArray(payload.items) || payload.items.length === 0) {
      const whole = received[at]
      assert.isDefined(whole, `frame ${index} missing`)
      assert.strictEqual(whole!.tag, tag)
      assert.deepStrictEqual(whole!.json, payload)
      at++
      return
    }
    const { items, ...others } = payload
    const { items: _, ...fixedPart } = { ...payload, items: [] }
    void _
    const othersText = Envelope.asciiJson(JSON.stringify(fixedPart))
    const fixed = `[${tag},{"items":[]}]`.length + (othersText === "{}" ? 0 : othersText.length - 1)
    const fits = items.filter((item) => fixed + Envelope.asciiJson(JSON.stringify(item)).length <= room)
    const partial = dropped.find((d) => d.index === index)
    assert.strictEqual(partial?.items ?? 0, items.length - fits.length, `items dropped from batch ${index}`)
    const got: Array<unknown> = []
    while (got.length < fits.length) {
      const piece = received[at]
      assert.isDefined(piece, `batch ${index} ended early`)
      assert.strictEqual(piece!.tag, tag)
      const { items: part, ...rest } = objectOf(piece!.json)
      assert.deepStrictEqual(rest, others)
      got.push(...itemsOf(part))
      at++
    }
    assert.deepStrictEqual(got, fits)
  })
  assert.strictEqual(at, received.length, "frames received that were never sent")
}

// ---------------------------------------------------------------------------------------------
// arbitraries
// ---------------------------------------------------------------------------------------------

const name = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ maxLength: 20, unit: "binary" }),
  fc.constantFrom("orders", "é漢😀", '"\\\n', "\u2028", "\ud800")
)
const item = fc.record({ queue: name, partition: name, tenant: fc.option(name, { nil: undefined }) })
const batchPayload = fc
  .tuple(
    fc.oneof(
      { weight: 3, arbitrary: fc.array(item, { maxLength: 10 }) },
      { weight: 1, arbitrary: fc.array(item, { minLength: 50, maxLength: 400 }) }
    ),
    fc.option(fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 }), {
      nil: undefined
    })
  )
  .map(([items, others]) => JSON.stringify({ ...others, items }))
const anyFrame: fc.Arbitrary<Uint8Array> = fc.oneof(
  fc.tuple(fc.constantFrom(2, 5), batchPayload).map(([tag, payload]) => frame(tag, payload)),
  fc.tuple(fc.integer({ min: 0, max: 255 }), fc.json({ maxDepth: 3 })).map(([tag, json]) => frame(tag, json)),
  fc.integer({ min: 0, max: 255 }).map((tag) => frame(tag, "")),
  fc.tuple(fc.constantFrom(1, 10, 11), item).map(([tag, value]) => frame(tag, JSON.stringify(value)))
)

// ---------------------------------------------------------------------------------------------
// tests
// ---------------------------------------------------------------------------------------------

describe("pgEnvelope", () => {
  describe("keys and epochs", () => {
    it("keyIdOf is the first 8 bytes of HMAC-SHA256(secret, label), in lowercase hex", () => {
      const expected = createHmac("sha256", "s3cr3t").update("queen-mesh/key-id").digest("hex").slice(0, 16)
      assert.strictEqual(Envelope.keyIdOf("s3cr3t"), expected)
      assert.match(Envelope.keyIdOf("s3cr3t"), /^[0-9a-f]{16}$/)
      assert.notStrictEqual(Envelope.keyIdOf("s3cr3t"), Envelope.keyIdOf("s3cr3u"))
      assert.notInclude(Envelope.keyIdOf("s3cr3t"), "s3cr3t")
    })

    it("checkAuth refuses ids that would break the header and empty secrets", () => {
      assert.isUndefined(Envelope.checkAuth("open"))
      assert.isUndefined(Envelope.checkAuth(ringBA))
      assert.isString(Envelope.checkAuth({ primary: { id: "a.b", secret: "x" }, accepted: [] }))
      assert.isString(Envelope.checkAuth({ primary: { id: "-", secret: "x" }, accepted: [] }))
      assert.isString(Envelope.checkAuth({ primary: A, accepted: [{ id: "k", secret: "" }] }))
    })

    it("epochs are 16 lowercase hex and order by boot time", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.integer({ min: 0, max: 2 ** 47 }),
            fc.integer({ min: 1, max: 2 ** 40 }),
            fc.nat(65535),
            fc.nat(65535)
          ),
          ([boot, later, r1, r2]) => {
            const a = Envelope.makeEpoch(boot, r1)
            const b = Envelope.makeEpoch(boot + later, r2)
            assert.isTrue(Envelope.isEpoch(a) && Envelope.isEpoch(b))
            assert.isTrue(a < b)
          }
        )
      )
    })
  })

  describe("packing", () => {
    it("arbitrary frame lists under arbitrary limits: every frame and item arrives, in order", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.array(anyFrame, { maxLength: 30 }),
            fc.integer({ min: 600, max: Envelope.DEFAULT_PAYLOAD_LIMIT })
          ),
          ([frames, limit]) => {
            const s = sender()
            const sealed = Envelope.seal(s, frames, limit)
            for (const payload of sealed.payloads) {
              assert.isAtMost(Buffer.byteLength(payload, "utf8"), limit)
              assert.isTrue(asciiNoNul(payload), "ASCII, no NUL")
            }
            // Only what cannot fit one notification is dropped.
            const room = limit - s.overhead
            for (const d of sealed.dropped) {
              assert.strictEqual(d.reason, "too_large")
              const bytes = frames[d.index]!
              const text =
                bytes.length === 5 ? "null" : Envelope.asciiJson(Buffer.from(bytes.subarray(5)).toString())
              if (d.items === 0) assert.isAbove(`[${bytes[4]},${text}]`.length, room)
            }
            const received = openAll(sealed.payloads)
            assertReassembles(frames, received, sealed.dropped, room)
            assert.strictEqual(received.length, sealed.frames)
            assert.strictEqual(s.seq, sealed.payloads.length)
          }
        ),
        { numRuns: numRuns(200) }
      )
    })

    it("a 16 MiB batch is split into notifications of at most 7999 bytes whose items reassemble exactly", () => {
      const items: Array<{ queue: string; partition: string; tenant: string }> = []
      let length = 13
      let longestItem = 0
      for (let i = 0; ; i++) {
        const it = {
          queue: `queue-${i % 97}`,
          partition: `p-${i}`,
          tenant: "00000000-0000-0000-0000-000000000001"
        }
        const itemLength = JSON.stringify(it).length + 1
        if (length + itemLength >= 16 * 1024 * 1024 - 200) break
        length += itemLength
        longestItem = Math.max(longestItem, itemLength)
        items.push(it)
      }
      const bytes = frame(2, JSON.stringify({ items }))
      assert.isAtMost(bytes.length - 4, 16 * 1024 * 1024)
      const s = sender()
      const sealed = Envelope.seal(s, [bytes])
      assert.deepStrictEqual(sealed.dropped, [])
      for (const payload of sealed.payloads) assert.isAtMost(Buffer.byteLength(payload, "utf8"), 7999)
      // Close to the fewest possible: every notification but the last is full but for less than one item.
      const room = 7999 - s.overhead
      assert.isAtMost(sealed.payloads.length, Math.ceil(bytes.length / (room - longestItem)) + 1)
      const received = openAll(sealed.payloads)
      const got: Array<unknown> = []
      for (const f of received) {
        assert.strictEqual(f.tag, 2)
        got.push(...itemsOf(objectOf(f.json).items))
      }
      assert.strictEqual(got.length, items.length)
      // As JSON, whole (a deep comparison of 200,000 objects alone took seconds); where they differ, the
      // first item that does is named.
      if (JSON.stringify(got) !== JSON.stringify(items)) {
        const differs = got.findIndex((item, i) => JSON.stringify(item) !== JSON.stringify(items[i]))
        assert.fail(`item ${differs}: ${JSON.stringify(got[differs])}`)
      }
    })

    it("small frames of one tick share one notification; a batch keeps its other fields when split", () => {
      const frames = [
        frame(1, '{"queue":"q","partition":"p"}'),
        frame(3, ""),
        frame(40, '{"enabled":true}'),
        frame(5, JSON.stringify({ v: 2, items: Array.from({ length: 300 }, (_, i) => ({ queue: `q${i}` })) }))
      ]
      const sealed = Envelope.seal(sender(), frames, 2000)
      assert.isAbove(sealed.payloads.length, 1)
      const received = openAll(sealed.payloads)
      assert.deepStrictEqual(received.slice(0, 3), [
        { tag: 1, json: { queue: "q", partition: "p" } },
        { tag: 3, json: null },
        { tag: 40, json: { enabled: true } }
      ])
      assert.strictEqual(received[3]!.tag, 5, "the batch's first piece fills the first notification")
      assert.strictEqual(sealed.payloads[0]!.includes('"f":[[1,'), true)
      assertReassembles(frames, received, sealed.dropped, 2000 - sender().overhead)
      assert.isAbove(Buffer.byteLength(sealed.payloads[0]!), 1800, "the first notification is filled")
    })

    it("non-ASCII payloads travel as ASCII and come back equal", () => {
      const frames = [frame(1, JSON.stringify({ queue: "é漢😀\u2028", partition: "\ud800" }))]
      const sealed = Envelope.seal(sender(), frames)
      assert.isTrue(asciiNoNul(sealed.payloads[0]!))
      assert.deepStrictEqual(openAll(sealed.payloads)[0]!.json, { queue: "é漢😀\u2028", partition: "\ud800" })
    })

    it("what cannot go out is reported, never thrown: bad prefixes, non-JSON, oversized frames and items", () => {
      const frames = [
        rawFrame(1, "{}", { length: 9 }),
        rawFrame(1, "{not json"),
        rawFrame(1, Uint8Array.of(0xff)),
        new Uint8Array(3),
        frame(10, JSON.stringify({ queue: "x".repeat(3000) })),
        frame(2, JSON.stringify({ items: [{ queue: "ok" }, { queue: "y".repeat(3000) }, { queue: "ok2" }] })),
        frame(3, "")
      ]
      const sealed = Envelope.seal(sender(), frames, 1500)
      assert.deepStrictEqual(sealed.dropped, [
        { index: 0, reason: "invalid", items: 0 },
        { index: 1, reason: "invalid", items: 0 },
        { index: 2, reason: "invalid", items: 0 },
        { index: 3, reason: "invalid", items: 0 },
        { index: 4, reason: "too_large", items: 0 },
        { index: 5, reason: "too_large", items: 1 }
      ])
      assert.deepStrictEqual(openAll(sealed.payloads), [
        { tag: 2, json: { items: [{ queue: "ok" }, { queue: "ok2" }] } },
        { tag: 3, json: null }
      ])
    })

    it("the overhead is what the report says: 139 bytes plus the server id and the pid, time and sequence digits", () => {
      const s = sender(ringA, "queen-a")
      const [payload] = Envelope.seal(s, [frame(1, '{"queue":"q"}')]).payloads
      const empty = payload!.length - '[1,{"queue":"q"}]'.length
      const time = String(JSON.parse(payload!.slice(payload!.indexOf("{"))).t)
      assert.strictEqual(empty, 139 + "queen-a".length + String(SENDER_PID).length + time.length + 1)
      assert.strictEqual(s.overhead, 139 + "queen-a".length + 10 + 16 + 16)
      const open = sender("open", "queen-a")
      assert.strictEqual(open.overhead, 61 + "queen-a".length + 10 + 16 + 16)
    })
  })

  describe("open", () => {
    const sealOne = (s: Envelope.Sender, tag = 1, json = '{"queue":"q"}') =>
      Envelope.seal(s, [frame(tag, json)]).payloads[0]!

    const refusal = (
      payload: string | undefined,
      auth: Envelope.Auth = ringA,
      state = new Envelope.ReplayState(),
      self = RECEIVER,
      receipt = RECEIPT
    ) => {
      const opened = Envelope.open(payload, CHANNEL, auth, self, state, receipt)
      return Result.isFailure(opened) ? opened.failure : "accepted"
    }

    it("accepts a sealed notification and names sender, epoch, seq and key", () => {
      const opened = Envelope.open(
        sealOne(sender()),
        CHANNEL,
        ringA,
        RECEIVER,
        new Envelope.ReplayState(),
        RECEIPT
      )
      assert.deepStrictEqual(
        opened,
        Result.succeed({
          from: "sender",
          epoch: EPOCH,
          seq: 1,
          frames: [{ tag: 1, json: { queue: "q" } }],
          keyId: A.id
        })
      )
    })

    it("malformed: not the format, bad JSON, wrong field types, over-long sender id", () => {
      const signed = (body: string) => `qm2.${A.id}.${macFor(body)}.${body}`
      for (const payload of [
        undefined,
        "",
        "hello",
        "qm2",
        "qm2.",
        "qm2.a.b",
        "qm9.-.-.{}",
        `qm2.${A.id}.xyz.{}`,
        `qm2.${A.id}.-.{}`,
        `qm2.-.${"0".repeat(64)}.{}`,
        `qm2.a.b.c.${"0".repeat(64)}.{}`,
        "x".repeat(Envelope.MAX_OPEN_LENGTH + 1)
      ]) {
        assert.strictEqual(
          refusal(payload),
          payload === "qm2.-.-.{}" ? "unauthenticated" : "malformed",
          payload
        )
      }
      const pt = `"p":${SENDER_PID},"t":1`
      for (const body of [
        "not json",
        "[]",
        "{}",
        `{"s":"","e":"${EPOCH}",${pt},"q":1,"f":[]}`,
        `{"s":"${"x".repeat(257)}","e":"${EPOCH}",${pt},"q":1,"f":[]}`,
        `{"s":"a","e":"${EPOCH.toUpperCase()}",${pt},"q":1,"f":[]}`,
        `{"s":"a","e":"${EPOCH}",${pt},"q":0,"f":[]}`,
        `{"s":"a","e":"${EPOCH}",${pt},"q":1.5,"f":[]}`,
        `{"s":"a","e":"${EPOCH}",${pt},"q":"1","f":[]}`,
        `{"s":"a","e":"${EPOCH}",${pt},"q":1,"f":{}}`,
        `{"s":"a","e":"${EPOCH}",${pt},"q":1,"f":[[256,null]]}`,
        `{"s":"a","e":"${EPOCH}",${pt},"q":1,"f":[[1]]}`,
        `{"s":"a","e":"${EPOCH}",${pt},"q":1,"f":[[1,null,2]]}`,
        `{"s":1,"e":"${EPOCH}",${pt},"q":1,"f":[]}`,
        `{"s":"a","e":"${EPOCH}","t":1,"q":1,"f":[]}`,
        `{"s":"a","e":"${EPOCH}","p":-1,"t":1,"q":1,"f":[]}`,
        `{"s":"a","e":"${EPOCH}","p":4294967296,"t":1,"q":1,"f":[]}`,
        `{"s":"a","e":"${EPOCH}","p":"1","t":1,"q":1,"f":[]}`,
        `{"s":"a","e":"${EPOCH}","p":1,"q":1,"f":[]}`,
        `{"s":"a","e":"${EPOCH}","p":1,"t":1.5,"q":1,"f":[]}`,
        `{"s":"a","e":"${EPOCH}","p":1,"t":-1,"q":1,"f":[]}`
      ]) {
        assert.strictEqual(refusal(signed(body)), "malformed", body)
      }
      assert.strictEqual(
        refusal(signed(`{"s":"a","e":"${EPOCH}",${pt},"q":1,"f":[[1,null]],"x":1}`)),
        "accepted"
      )
    })

    /** The MAC by the spec's recipe, written out independently of the module. */
    const macFor = (body: string): string => {
      const hkdf = Buffer.from(hkdfSync("sha256", "secret-a", "queen-mesh pg lane v1", CHANNEL, 32))
      const hmac = createHmac("sha256", hkdf)
      for (const field of ["queen-mesh/pg/v1", CHANNEL, body]) {
        const bytes = Buffer.from(field, "utf8")
        const length = Buffer.alloc(4)
        length.writeUInt32BE(bytes.length, 0)
        hmac.update(length)
        hmac.update(bytes)
      }
      return hmac.digest("hex")
    }

    it("LaneMac, HMAC written out by its definition, equals createHmac for any key, channel and body", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.uint8Array({ minLength: 1, maxLength: 100 }),
            fc.string({ maxLength: 63 }),
            fc.fullUnicodeString()
          ),
          ([key, channel, body]) => {
            const hmac = createHmac("sha256", key)
            for (const field of ["queen-mesh/pg/v1", channel, body]) {
              const bytes = Buffer.from(field, "utf8")
              const length = Buffer.alloc(4)
              length.writeUInt32BE(bytes.length, 0)
              hmac.update(length)
              hmac.update(bytes)
            }
            const mac = new Envelope.LaneMac(key, channel)
            // Twice: each MAC starts from the same kept hash states.
            assert.strictEqual(mac.of(body).toString("hex"), hmac.digest("hex"))
            assert.strictEqual(
              mac.of(body).toString("hex"),
              new Envelope.LaneMac(key, channel).of(body).toString("hex")
            )
          }
        )
      )
    })

    it("the MAC is HMAC-SHA256 of the HKDF lane key over the length-prefixed domain, channel and body", () => {
      const payload = sealOne(sender())
      const [, , mac] = payload.split(".", 3)
      const body = payload.slice(payload.indexOf(".", payload.indexOf(".", 4) + 1) + 1)
      assert.strictEqual(mac, macFor(body))
    })

    it("unknown_key, bad_mac, unauthenticated", () => {
      assert.strictEqual(refusal(sealOne(sender(ringB)), ringA), "unknown_key")
      const payload = sealOne(sender())
      const flipped = payload.replace(
        /^(qm2\.[^.]+\.)(.)/,
        (_, head: string, c: string) => head + (c === "0" ? "1" : "0")
      )
      assert.strictEqual(refusal(flipped), "bad_mac")
      assert.strictEqual(refusal(payload.replace('"q":1', '"q":2')), "bad_mac", "the body is covered")
      assert.strictEqual(
        refusal(sealOne(new Envelope.Sender("sender", EPOCH, "other_channel", ringA))),
        "bad_mac",
        "the channel is covered"
      )
      assert.strictEqual(refusal(sealOne(sender("open"))), "unauthenticated")
    })

    it("open mode accepts what comes, with or without a MAC", () => {
      assert.strictEqual(refusal(sealOne(sender("open")), "open"), "accepted")
      assert.strictEqual(refusal(sealOne(sender(ringB)), "open"), "accepted")
    })

    it("own: our id and epoch from our own backend is ignored, unchecked", () => {
      const self = { serverId: "sender", epoch: EPOCH }
      const ours = { processId: SENDER_PID, ownPid: SENDER_PID, listenedAt: 0 }
      assert.strictEqual(refusal(sealOne(sender()), ringA, new Envelope.ReplayState(), self, ours), "own")
      // Only the prefix is read: nobody else can send from our backend.
      assert.strictEqual(
        refusal(sealOne(sender(ringB)), ringA, new Envelope.ReplayState(), self, ours),
        "own"
      )
    })

    it("isEcho, the receiver's shortcut for our own envelopes, answers only what open calls own", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.constantFrom<Envelope.Auth>(ringA, ringB, "open"),
            fc.nat(),
            fc.integer({ min: -1, max: 40 }),
            fc.string({ maxLength: 3 })
          ),
          ([auth, at, cut, insert]) => {
            const self = { serverId: "sender", epoch: EPOCH }
            const ours = { processId: SENDER_PID, ownPid: SENDER_PID, listenedAt: 0 }
            const s = sender(auth)
            const genuine = sealOne(s)
            assert.isTrue(s.isEcho(genuine))
            assert.strictEqual(refusal(genuine, auth, new Envelope.ReplayState(), self, ours), "own")
            // An edit anywhere: whenever isEcho still says ours, open says own too.
            const i = at % (genuine.length + 1)
            const edited = genuine.slice(0, i) + insert + genuine.slice(i + Math.max(0, cut))
            if (s.isEcho(edited)) {
              assert.strictEqual(refusal(edited, auth, new Envelope.ReplayState(), self, ours), "own", edited)
            }
          }
        )
      )
    })

    it("own_server_id: our id with another epoch is refused, whatever the backend and the epoch's age", () => {
      const self = { serverId: "sender", epoch: EPOCH }
      const state = new Envelope.ReplayState()
      for (const bootMillis of [1_600_000_000_000, 1_700_000_000_001, 1_800_000_000_000]) {
        const other = sender(ringA, "sender", Envelope.makeEpoch(bootMillis, 0))
        assert.strictEqual(refusal(sealOne(other), ringA, state, self), "own_server_id")
        const ownBackend = { processId: SENDER_PID, ownPid: SENDER_PID, listenedAt: 0 }
        assert.strictEqual(refusal(sealOne(other), ringA, state, self, ownBackend), "own_server_id")
      }
      assert.strictEqual(state.size, 0, "nothing remembered of ourselves")
    })

    it("our id and epoch from another backend: checked, a forgery bad_mac, a recording replayed", () => {
      const self = { serverId: "sender", epoch: EPOCH }
      const recording = sealOne(sender())
      assert.strictEqual(refusal(recording, ringA, new Envelope.ReplayState(), self), "replayed")
      const forged = recording.replace(/^(qm2\.[^.]+\.)[0-9a-f]{64}/, `$1${"0".repeat(64)}`)
      assert.strictEqual(refusal(forged, ringA, new Envelope.ReplayState(), self), "bad_mac")
    })

    it("wrong_backend: a recording sent again from another backend, to a receiver that never heard its sender", () => {
      const recording = sealOne(sender())
      const elsewhere = { processId: SENDER_PID + 1, ownPid: RECEIVER_PID, listenedAt: 0 }
      const state = new Envelope.ReplayState()
      assert.strictEqual(refusal(recording, ringA, state, RECEIVER, elsewhere), "wrong_backend")
      assert.isUndefined(state.get("sender"), "nothing remembered of a refusal")
      assert.strictEqual(refusal(recording, ringA, state), "accepted", "from its own backend it is live")
      assert.strictEqual(refusal(recording, ringA, state, RECEIVER, elsewhere), "replayed", "known now")
    })

    it("stale: sealed well before this connection began to LISTEN", () => {
      const s = sender()
      const sealedAt = JSON.parse(sealOne(s).split(".").slice(3).join(".")).t as number
      const late = (listenedAt: number) => ({ processId: SENDER_PID, ownPid: RECEIVER_PID, listenedAt })
      const tolerance = Envelope.SEAL_TOLERANCE_MS
      assert.strictEqual(
        refusal(sealOne(s), ringA, undefined, RECEIVER, late(sealedAt + tolerance + 60_000)),
        "stale"
      )
      assert.strictEqual(refusal(sealOne(s), ringA, undefined, RECEIVER, late(sealedAt)), "accepted")
      // The sealing time is the database's: the sender's offset moves it.
      s.bind(SENDER_PID, -3_600_000)
      assert.strictEqual(refusal(sealOne(s), ringA, undefined, RECEIVER, late(sealedAt)), "stale")
    })

    it("replayed and old_epoch; a newer epoch resets the sequence", () => {
      const state = new Envelope.ReplayState()
      const s = sender()
      const first = sealOne(s)
      const second = sealOne(s)
      assert.strictEqual(refusal(second, ringA, state), "accepted")
      assert.strictEqual(refusal(first, ringA, state), "replayed", "a lower seq")
      assert.strictEqual(refusal(second, ringA, state), "replayed", "the same seq")
      const rebooted = sender(ringA, "sender", Envelope.makeEpoch(1_700_000_000_500, 0))
      assert.strictEqual(refusal(sealOne(rebooted), ringA, state), "accepted", "seq 1 of a newer epoch")
      assert.deepStrictEqual(state.get("sender"), { epoch: rebooted.epoch, seq: 1 })
      assert.strictEqual(refusal(sealOne(s), ringA, state), "old_epoch")
    })

    it("the replay state changes only after the MAC verifies", () => {
      const state = new Envelope.ReplayState()
      const s = sender()
      for (let i = 0; i < 5; i++) sealOne(s)
      const forged = sealOne(s).replace(/^(qm2\.[^.]+\.)[0-9a-f]{64}/, `$1${"0".repeat(64)}`)
      assert.strictEqual(refusal(forged, ringA, state), "bad_mac")
      assert.isUndefined(state.get("sender"))
      const late = sender(ringA, "sender", Envelope.makeEpoch(9_000_000_000_000, 0))
      assert.strictEqual(refusal(sealOne(late), ringB, state), "unknown_key")
      assert.isUndefined(state.get("sender"))
      assert.strictEqual(refusal(sealOne(sender()), ringA, state), "accepted")
    })

    it("the replay state is bounded, the longest silent sender forgotten first", () => {
      const state = new Envelope.ReplayState(4)
      const senders = ["a", "b", "c", "d"].map((id) => sender(ringA, id))
      for (const s of senders) assert.strictEqual(refusal(sealOne(s), ringA, state), "accepted")
      assert.strictEqual(
        refusal(sealOne(senders[0]!), ringA, state),
        "accepted",
        "a spoke again: b is oldest"
      )
      assert.strictEqual(refusal(sealOne(sender(ringA, "e")), ringA, state), "accepted")
      assert.strictEqual(state.size, 4)
      assert.isUndefined(state.get("b"))
      assert.isDefined(state.get("a"))
      assert.strictEqual(new Envelope.ReplayState().maxSenders, 256)
    })

    it("keyring rotation: [new, old] accepts both; [new] alone refuses old as unknown_key", () => {
      const fromOld = sealOne(sender(ringA, "old-sender"))
      const fromNew = sealOne(sender(ringBA, "new-sender"))
      assert.strictEqual(refusal(fromOld, ringBA), "accepted")
      assert.strictEqual(refusal(fromNew, ringBA), "accepted")
      assert.strictEqual(refusal(fromNew, ringB), "accepted")
      assert.strictEqual(refusal(fromOld, ringB), "unknown_key")
      assert.strictEqual(fromNew.split(".")[1], B.id, "senders MAC with the primary")
    })

    it("garbage never throws: arbitrary strings, and valid envelopes cut or with bytes replaced", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.oneof(
              fc.string({ unit: "binary", maxLength: 300 }),
              fc.string({ maxLength: 300 }).map((s) => `qm2.${s}`),
              fc.string({ maxLength: 300 }).map((s) => `qm2.-.-.${s}`),
              fc.json().map((s) => `qm2.-.-.${s}`),
              fc
                .tuple(fc.nat(400), fc.nat(400), fc.string({ unit: "binary", maxLength: 20 }))
                .map(([at, cut, junk]) => {
                  const payload = sealOne(sender(), 2, '{"items":[{"queue":"q"}]}')
                  return payload.slice(0, at) + junk + payload.slice(at + (cut % 20))
                })
            ),
            fc.constantFrom<Envelope.Auth>(ringA, "open")
          ),
          ([payload, auth]) => {
            const opened = Envelope.open(
              payload,
              CHANNEL,
              auth,
              RECEIVER,
              new Envelope.ReplayState(),
              RECEIPT
            )
            assert.isTrue(Result.isFailure(opened) || Result.isSuccess(opened))
            if (Result.isFailure(opened)) assert.include(Envelope.refusalReasons, opened.failure)
          }
        ),
        { numRuns: numRuns(500) }
      )
    })

    it("probes are recognised by their prefix and nonce only", () => {
      const nonce = "0123456789abcdef0123456789abcdef"
      assert.strictEqual(Envelope.probeNonce(Envelope.probe(nonce)), nonce)
      assert.isUndefined(Envelope.probeNonce(undefined))
      assert.isUndefined(Envelope.probeNonce(`qmp1.${nonce.toUpperCase()}`))
      assert.isUndefined(Envelope.probeNonce(`qmp1.${nonce}0`))
      assert.strictEqual(refusal(Envelope.probe(nonce)), "malformed", "a probe is not an envelope")
    })
  })
})
