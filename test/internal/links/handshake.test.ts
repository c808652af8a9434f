/**
 * The HELLO handshake (spec "The handshake"): the HMAC over the nonce's hex string, nonce shape, and
 * every way `verify` accepts or refuses a HELLO without throwing.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option, Redacted, Result } from "effect"
import * as fc from "fast-check"
import * as Frame from "../../../src/Frame.js"
import * as Keyring from "../../../src/internal/keyring.js"
import * as Handshake from "../../../src/internal/links/handshake.js"
import * as Codec from "../../../src/internal/wire/codec.js"
import * as Payloads from "../../../src/internal/wire/payloads.js"
import { HandshakeError } from "../../../src/MeshError.js"
import * as Arb from "../../fixtures/arbitraries.js"
import { assertEqual } from "../../fixtures/equality.js"

const SECRET = "s3cr3t"
const NONCE = "00112233445566778899aabbccddeeff"
const VECTOR_MAC = "04285856936ba6c4fc65577dc6ad15b5943a484aa62a3c4ad2a026ee53d3617a"

const HEX64 = /^[0-9a-f]{64}$/
const HEX32 = /^[0-9a-f]{32}$/

const hello = (mac: string, serverId = "node-a", nonce = NONCE) => ({
  server_id: serverId,
  nonce,
  mac
})

const assertRejected = (
  result: Result.Result<string, HandshakeError>,
  reason: HandshakeError["reason"]
): HandshakeError => {
  if (Result.isSuccess(result)) assert.fail(`expected ${reason}, accepted ${result.success}`)
  assert.instanceOf(result.failure, HandshakeError)
  assert.strictEqual(result.failure._tag, "HandshakeError")
  assert.strictEqual(result.failure.reason, reason)
  return result.failure
}

/** Secrets without NUL: HMAC zero-pads short keys, so "k" and "k\0" are the same key by design. */
const secret = fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 40 })
const hexChar = fc.constantFrom(..."0123456789abcdef")

describe("Handshake", () => {
  describe("mac", () => {
    it("matches the reference vector", () => {
      assert.strictEqual(Handshake.mac(SECRET, NONCE), VECTOR_MAC)
    })

    it("is 64 lowercase hex characters, deterministic per (secret, nonce)", () => {
      fc.assert(
        fc.property(fc.tuple(secret, Arb.text()), ([key, nonce]) => {
          const mac = Handshake.mac(key, nonce)
          assert.match(mac, HEX64)
          assert.strictEqual(Handshake.mac(key, nonce), mac)
        })
      )
    })

    it("depends on both the secret and the nonce", () => {
      assert.notStrictEqual(Handshake.mac("s3cr3u", NONCE), VECTOR_MAC)
      assert.notStrictEqual(Handshake.mac(SECRET, "00112233445566778899aabbccddeef0"), VECTOR_MAC)
      // Over the nonce's hex string, not its decoded bytes.
      assert.notStrictEqual(Handshake.mac(SECRET, NONCE.toUpperCase()), VECTOR_MAC)
    })
  })

  describe("hello", () => {
    it("helloWithNonce signs the nonce with the secret", () => {
      assertEqual(Handshake.helloWithNonce("node-a", SECRET, NONCE), {
        _tag: "Hello",
        server_id: "node-a",
        nonce: NONCE,
        mac: VECTOR_MAC,
        http_addr: Option.none(),
        eph_epoch: Option.none(),
        key_id: Option.none(),
        v2: Option.none()
      })
    })

    it("helloWithNonce takes the secret as Redacted too", () => {
      assertEqual(
        Handshake.helloWithNonce("node-a", Redacted.make(SECRET), NONCE),
        Handshake.helloWithNonce("node-a", SECRET, NONCE)
      )
    })

    it("helloWithNonce leaves the mac empty in open mode", () => {
      assert.strictEqual(Handshake.helloWithNonce("node-a", "", NONCE).mac, "")
      assert.strictEqual(Handshake.helloWithNonce("node-a", Redacted.make(""), NONCE).mac, "")
    })

    it.effect("makeNonce gives 32 lowercase hex characters, fresh each time", () =>
      Effect.gen(function* () {
        const nonces = yield* Effect.replicateEffect(Handshake.makeNonce, 64)
        for (const nonce of nonces) assert.match(nonce, HEX32)
        assert.strictEqual(new Set(nonces).size, nonces.length)
      })
    )

    it.effect("makeHello gives a fresh 32-hex nonce and a valid mac", () =>
      Effect.gen(function* () {
        const first = yield* Handshake.makeHello("node-a", SECRET)
        const second = yield* Handshake.makeHello("node-a", Redacted.make(SECRET))
        for (const frame of [first, second]) {
          assert.strictEqual(frame._tag, "Hello")
          assert.strictEqual(frame.server_id, "node-a")
          assert.match(frame.nonce, HEX32)
          assert.strictEqual(frame.mac, Handshake.mac(SECRET, frame.nonce))
          assertEqual(Handshake.verify(frame, SECRET), Result.succeed("node-a"))
        }
        assert.notStrictEqual(first.nonce, second.nonce)
      })
    )

    it.effect("makeHello in open mode still carries a nonce and the server id", () =>
      Effect.gen(function* () {
        const frame = yield* Handshake.makeHello("node-b", "")
        assert.match(frame.nonce, HEX32)
        assert.strictEqual(frame.mac, "")
        assertEqual(Handshake.verify(frame, ""), Result.succeed("node-b"))
      })
    )
  })

  describe("verify", () => {
    it("accepts a correct MAC and returns the peer's server id", () => {
      assertEqual(Handshake.verify(hello(VECTOR_MAC), SECRET), Result.succeed("node-a"))
    })

    it("accepts with the secret as Redacted", () => {
      assertEqual(Handshake.verify(hello(VECTOR_MAC), Redacted.make(SECRET)), Result.succeed("node-a"))
      assertRejected(Handshake.verify(hello(VECTOR_MAC), Redacted.make("other")), "BadMac")
    })

    it("rejects a wrong MAC", () => {
      assertRejected(Handshake.verify(hello(Handshake.mac("other", NONCE)), SECRET), "BadMac")
      assertRejected(
        Handshake.verify(hello(VECTOR_MAC, "node-a", "ffeeddccbbaa99887766554433221100"), SECRET),
        "BadMac"
      )
      assertRejected(Handshake.verify(hello("0".repeat(64)), SECRET), "BadMac")
    })

    it("rejects a short or long MAC without throwing", () => {
      assertRejected(Handshake.verify(hello(VECTOR_MAC.slice(0, 63)), SECRET), "BadMac")
      assertRejected(Handshake.verify(hello(VECTOR_MAC.slice(0, 32)), SECRET), "BadMac")
      assertRejected(Handshake.verify(hello(`${VECTOR_MAC}0`), SECRET), "BadMac")
      assertRejected(Handshake.verify(hello(`${VECTOR_MAC}${VECTOR_MAC}`), SECRET), "BadMac")
    })

    it("rejects a 64-character MAC with non-hex characters without throwing", () => {
      const mac = `zz${VECTOR_MAC.slice(2)}`
      assert.strictEqual(mac.length, 64)
      assertRejected(Handshake.verify(hello(mac), SECRET), "BadMac")
      assertRejected(Handshake.verify(hello(`${VECTOR_MAC.slice(0, 62)}  `), SECRET), "BadMac")
      assertRejected(Handshake.verify(hello(`${VECTOR_MAC.slice(0, 60)}😀😀`), SECRET), "BadMac")
    })

    it("rejects an empty MAC when there is a secret", () => {
      const error = assertRejected(Handshake.verify(hello(""), SECRET), "BadMac")
      assert.include(error.message, "MAC")
    })

    it("rejects an empty server_id with MissingServerId, signed or not, secret or not", () => {
      assertRejected(Handshake.verify(hello(VECTOR_MAC, ""), SECRET), "MissingServerId")
      assertRejected(Handshake.verify(hello("", ""), ""), "MissingServerId")
      assertRejected(Handshake.verify(Handshake.helloWithNonce("", SECRET, NONCE), SECRET), "MissingServerId")
    })

    it("open mode (empty secret) accepts unsigned and signed HELLOs", () => {
      assertEqual(Handshake.verify(hello(""), ""), Result.succeed("node-a"))
      assertEqual(Handshake.verify(hello(VECTOR_MAC), ""), Result.succeed("node-a"))
      assertEqual(Handshake.verify(hello("not a mac"), ""), Result.succeed("node-a"))
      assertEqual(Handshake.verify(hello(""), Redacted.make("")), Result.succeed("node-a"))
      assertEqual(Handshake.verify(hello(VECTOR_MAC), Redacted.make("")), Result.succeed("node-a"))
    })

    it("accepts every HELLO signed with the shared secret", () => {
      fc.assert(
        fc.property(fc.tuple(Arb.nonEmptyText, secret, Arb.text()), ([serverId, key, nonce]) => {
          const frame = Handshake.helloWithNonce(serverId, key, nonce)
          assertEqual(Handshake.verify(frame, key), Result.succeed(serverId))
          assertEqual(Handshake.verify(frame, Redacted.make(key)), Result.succeed(serverId))
        })
      )
    })

    it("rejects every HELLO signed with another secret", () => {
      fc.assert(
        fc.property(
          fc.tuple(Arb.nonEmptyText, secret, secret, Arb.text()),
          ([serverId, ours, theirs, nonce]) => {
            fc.pre(ours !== theirs)
            assertRejected(
              Handshake.verify(Handshake.helloWithNonce(serverId, theirs, nonce), ours),
              "BadMac"
            )
          }
        )
      )
    })

    it("rejects a MAC with any one hex digit changed", () => {
      fc.assert(
        fc.property(fc.tuple(fc.integer({ min: 0, max: 63 }), hexChar, Arb.text()), ([at, digit, nonce]) => {
          const good = Handshake.mac(SECRET, nonce)
          fc.pre(good[at] !== digit)
          const bad = `${good.slice(0, at)}${digit}${good.slice(at + 1)}`
          assertRejected(Handshake.verify(hello(bad, "node-a", nonce), SECRET), "BadMac")
        })
      )
    })

    it("never throws on an arbitrary MAC, and accepts none but the right one", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.oneof(Arb.text({ maxLength: 80 }), fc.string({ unit: hexChar, minLength: 64, maxLength: 64 }))
          ),
          ([mac]) => {
            fc.pre(mac.toLowerCase() !== VECTOR_MAC)
            assertRejected(Handshake.verify(hello(mac), SECRET), "BadMac")
            assertEqual(Handshake.verify(hello(mac), ""), Result.succeed("node-a"))
          }
        ),
        { numRuns: 300 }
      )
    })
  })
})

// ---------------------------------------------------------------------------------------------
// v2: challenge-response HELLO
// ---------------------------------------------------------------------------------------------

const LISTENER = "node-b"
const DIALER = "node-a"
const LABEL = "prod"
const LISTENER_NONCE = "ffeeddccbbaa99887766554433221100"
/** Computed with an independent HKDF/HMAC implementation (Python's hmac), not with this module. */
const VECTOR_MAC_V2 = "3485649b497e519128a5192dc52186c97a4a9aaa3f744fd67daed2c58c52ea73"

const challengeOf = (nonce = LISTENER_NONCE, serverId = LISTENER, label = LABEL): Frame.Challenge => ({
  _tag: "Challenge",
  server_id: serverId,
  nonce,
  label
})

const options = (
  mode: Handshake.HandshakeMode,
  overrides: Partial<Handshake.JudgeOptions> = {}
): Handshake.JudgeOptions => ({
  secret: SECRET,
  mode,
  challenge: Option.some(challengeOf()),
  selfId: LISTENER,
  label: LABEL,
  ...overrides
})

const assertRefused = <A>(
  result: Result.Result<A, HandshakeError>,
  reason: HandshakeError.Reason
): HandshakeError => {
  if (Result.isSuccess(result)) assert.fail(`expected ${reason}, accepted ${JSON.stringify(result.success)}`)
  assert.instanceOf(result.failure, HandshakeError)
  assert.strictEqual(result.failure._tag, "HandshakeError")
  assert.strictEqual(result.failure.reason, reason)
  assert.isString(result.failure.message)
  return result.failure
}

const accepted = (serverId: string, version: 1 | 2) => Result.succeed({ serverId, version })

/** The verdict without the nonce it carries (the tests compare who and how). */
const verifyHello = (hello: Frame.Hello, options: Handshake.JudgeOptions) =>
  Result.map(Handshake.verifyHello(hello, options), ({ serverId, version }) => ({ serverId, version }))

const legacyHello = (serverId = DIALER): Frame.Hello => Handshake.helloWithNonce(serverId, SECRET, NONCE)

type V2Fields = Frame.Hello["v2"] extends Option.Option<infer A> ? A : never

const withV2 = (hello: Frame.Hello, patch: Partial<V2Fields>): Frame.Hello =>
  Option.match(hello.v2, {
    onNone: () => assert.fail("expected a v2 HELLO"),
    onSome: (v2) => ({ ...hello, v2: Option.some({ ...v2, ...patch }) })
  })

const bytes = (text: string): Uint8Array => new TextEncoder().encode(text)

/** A CHALLENGE payload read as a v2 dialer reads it. */
const decodeChallenge = (payload: Uint8Array) => Handshake.readChallenge(Frame.Tag.CHALLENGE, payload)

/** The v2 fields of a HELLO payload: none, or `undefined` when the HELLO Schema refuses them. */
const readV2 = (json: Readonly<Record<string, unknown>>) => {
  const decoded = Frame.decodeJson(Frame.Tag.HELLO, { server_id: DIALER, nonce: NONCE, mac: "", ...json })
  return Result.isSuccess(decoded) && decoded.success._tag === "Hello" ? decoded.success.v2 : undefined
}

describe("Handshake v2", () => {
  describe("challenge", () => {
    it("uses a tag no upstream frame uses", () => {
      assert.strictEqual(Frame.Tag.CHALLENGE, 60)
      assert.notInclude([1, 2, 3, 4, 5, 10, 11, 20, 40, 41], Frame.Tag.CHALLENGE)
    })

    it.effect("makeChallenge gives a fresh 32-hex nonce per connection", () =>
      Effect.gen(function* () {
        const first = yield* Handshake.makeChallenge(LISTENER, LABEL)
        const second = yield* Handshake.makeChallenge(LISTENER, "")
        assert.strictEqual(first.server_id, LISTENER)
        assert.strictEqual(first.label, LABEL)
        assert.strictEqual(second.label, "")
        assert.match(first.nonce, HEX32)
        assert.notStrictEqual(first.nonce, second.nonce)
      })
    )

    it("encodeChallengeFrame writes the mesh framing: u32 BE length, tag 60, JSON", () => {
      const frame = Frame.encode(challengeOf())
      const json = `{"server_id":"${LISTENER}","nonce":"${LISTENER_NONCE}","label":"${LABEL}"}`
      assertEqual(frame, Frame.frameBytes(60, json))
    })

    it("encodeChallengeFrame omits an empty label, which decodes back to an empty label", () => {
      const frame = Frame.encode(challengeOf(LISTENER_NONCE, LISTENER, ""))
      assert.notInclude(new TextDecoder().decode(frame.subarray(5)), "label")
      assertEqual(
        decodeChallenge(frame.subarray(5)),
        Result.succeed(challengeOf(LISTENER_NONCE, LISTENER, ""))
      )
    })

    it("decodeChallenge reads an absent or null label as empty and ignores unknown fields", () => {
      const base = { server_id: LISTENER, nonce: LISTENER_NONCE }
      const empty = Result.succeed(challengeOf(LISTENER_NONCE, LISTENER, ""))
      assertEqual(decodeChallenge(bytes(JSON.stringify(base))), empty)
      assertEqual(decodeChallenge(bytes(JSON.stringify({ ...base, label: null }))), empty)
      assertEqual(
        decodeChallenge(bytes(JSON.stringify({ ...base, label: LABEL, eph_epoch: 3 }))),
        Result.succeed(challengeOf())
      )
    })

    it("decodeChallenge refuses malformed challenges with a short message", () => {
      const refused = (payload: Uint8Array): string => {
        const result = decodeChallenge(payload)
        if (Result.isSuccess(result)) assert.fail(`accepted ${JSON.stringify(result.success)}`)
        // An excerpt of the payload at most, never the whole of it.
        assert.isAtMost(result.failure.length, 240)
        return result.failure
      }
      const json = (value: unknown) => bytes(JSON.stringify(value))
      refused(bytes("not json"))
      refused(bytes(""))
      refused(new Uint8Array([0xff, 0xfe, 0x00]))
      refused(json(null))
      refused(json([LISTENER, LISTENER_NONCE]))
      refused(json({ server_id: "", nonce: LISTENER_NONCE }))
      refused(json({ server_id: LISTENER, nonce: LISTENER_NONCE.toUpperCase() }))
      refused(json({ server_id: LISTENER, nonce: LISTENER_NONCE.slice(1) }))
      refused(json({ server_id: LISTENER, nonce: 42 }))
      refused(json({ server_id: "x".repeat(257), nonce: LISTENER_NONCE }))
      refused(json({ server_id: "\ud800", nonce: LISTENER_NONCE }))
      refused(json({ server_id: LISTENER, nonce: LISTENER_NONCE, label: 7 }))
      refused(json({ server_id: LISTENER, nonce: LISTENER_NONCE, label: "é".repeat(129) }))
      assert.include(refused(new Uint8Array(Payloads.MAX_CHALLENGE_PAYLOAD_BYTES + 1)), "exceeds")
      assert.include(refused(json({ server_id: "😀".repeat(500), nonce: "x" })), "longer than 256 bytes")
      assert.include(refused(json({ server_id: LISTENER, nonce: ["x".repeat(1000)] })), "chars)")
    })

    it("accepts a 256-byte server id and label", () => {
      const id = "é".repeat(128)
      const frame = Frame.encode(challengeOf(LISTENER_NONCE, id, id))
      assertEqual(decodeChallenge(frame.subarray(5)), Result.succeed(challengeOf(LISTENER_NONCE, id, id)))
    })

    it("encode then decode is the identity on valid challenges", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            Arb.text({ minLength: 1, maxLength: 60 }),
            fc.string({ unit: hexChar, minLength: 32, maxLength: 32 }),
            Arb.text({ maxLength: 60 })
          ),
          ([serverId, nonce, label]) => {
            const wellFormed = (text: string) => !/\p{Cs}/u.test(text) && Buffer.byteLength(text) <= 256
            fc.pre(wellFormed(serverId) && wellFormed(label))
            const challenge = challengeOf(nonce, serverId, label)
            const frame = Frame.encode(challenge)
            const payload = frame.subarray(5)
            assertEqual(frame, Frame.frameBytes(Frame.Tag.CHALLENGE, new TextDecoder().decode(payload)))
            assertEqual(decodeChallenge(payload), Result.succeed(challenge))
          }
        )
      )
    })

    it("decodeChallenge is total: any bytes, any JSON", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.oneof(
              fc.uint8Array({ maxLength: 300 }),
              fc.jsonValue().map((value) => bytes(JSON.stringify(value))),
              fc
                .record({
                  server_id: fc.oneof(Arb.text(), fc.jsonValue()),
                  nonce: fc.oneof(Arb.text(), fc.jsonValue())
                })
                .map((value) => bytes(JSON.stringify(value)))
            )
          ),
          ([payload]) => {
            const result = decodeChallenge(payload)
            if (Result.isFailure(result)) assert.isAtMost(result.failure.length, 240)
            else assert.match(result.success.nonce, HEX32)
          }
        ),
        { numRuns: 300 }
      )
    })
  })

  describe("macV2", () => {
    const input: Handshake.MacV2Input = {
      dialerNonce: NONCE,
      listenerNonce: LISTENER_NONCE,
      sender: DIALER,
      receiver: LISTENER,
      label: LABEL
    }

    it("matches the reference vector (HKDF-SHA256 key, length-prefixed fields)", () => {
      assert.strictEqual(Handshake.macV2(SECRET, input), VECTOR_MAC_V2)
    })

    it("binds every field, and the length prefixes keep field boundaries", () => {
      const variants: ReadonlyArray<Handshake.MacV2Input> = [
        { ...input, dialerNonce: LISTENER_NONCE },
        { ...input, listenerNonce: NONCE },
        { ...input, sender: "node-c" },
        { ...input, receiver: "node-c" },
        { ...input, label: "" },
        { ...input, sender: "node-an", receiver: "ode-b" },
        { ...input, receiver: "node-bprod", label: "" }
      ]
      for (const variant of variants) assert.notStrictEqual(Handshake.macV2(SECRET, variant), VECTOR_MAC_V2)
      assert.notStrictEqual(Handshake.macV2("s3cr3u", input), VECTOR_MAC_V2)
    })

    it("uses a derived key: neither the legacy MAC nor HMAC under the raw secret", () => {
      assert.notStrictEqual(Handshake.macV2(SECRET, input), Handshake.mac(SECRET, NONCE))
      assert.notStrictEqual(Handshake.macV2(SECRET, input), Handshake.mac(SECRET, LISTENER_NONCE))
    })
  })

  describe("wire fields", () => {
    it.effect("helloV2Payload puts the legacy fields first, then the qm2_ fields", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        const payload: Record<string, unknown> = { ...Codec.payloadOf(hello) }
        assert.deepStrictEqual(Object.keys(payload), [
          "server_id",
          "nonce",
          "mac",
          "qm2_challenge",
          "qm2_receiver",
          "qm2_label",
          "qm2_mac",
          "qm2_key"
        ])
        assert.strictEqual(payload.qm2_key, Keyring.keyIdOf(SECRET))
        assert.strictEqual(payload.qm2_challenge, LISTENER_NONCE)
        assert.strictEqual(payload.qm2_receiver, LISTENER)
        assert.strictEqual(payload.qm2_label, LABEL)
        assert.deepStrictEqual(Object.keys({ ...Codec.payloadOf(legacyHello()) }), [
          "server_id",
          "nonce",
          "mac"
        ])
      })
    )

    it.effect("readHelloV2Fields reads back what helloV2Payload writes, through JSON", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        const json: Record<string, unknown> = JSON.parse(JSON.stringify(Codec.payloadOf(hello)))
        const read = readV2(json)
        assert.isDefined(read)
        assertEqual(read, hello.v2)
      })
    )

    it("readHelloV2Fields: none when absent, undefined when partial or malformed", () => {
      const legacy = { server_id: DIALER, nonce: NONCE, mac: VECTOR_MAC, http_addr: "x", eph_epoch: 1 }
      const v2 = { qm2_challenge: LISTENER_NONCE, qm2_receiver: LISTENER, qm2_label: "", qm2_mac: "" }
      assertEqual(readV2(legacy), Option.none())
      assertEqual(
        readV2({ ...legacy, ...v2 }),
        Option.some({ challenge: LISTENER_NONCE, receiver: LISTENER, label: "", mac: "" })
      )
      const { qm2_mac: _, ...partial } = v2
      assert.isUndefined(readV2({ ...legacy, ...partial }))
      assert.isUndefined(readV2({ ...legacy, qm2_label: LABEL }))
      assert.isUndefined(readV2({ ...legacy, ...v2, qm2_mac: null }))
      assert.isUndefined(readV2({ ...legacy, ...v2, qm2_challenge: 1 }))
      assert.isUndefined(readV2({ ...legacy, ...v2, qm2_receiver: ["node-b"] }))
      assert.isUndefined(readV2({ ...legacy, ...v2, qm2_mac: "0".repeat(129) }))
      assert.isUndefined(readV2({ ...legacy, ...v2, qm2_label: "x".repeat(257) }))
      assert.isUndefined(readV2({ ...legacy, ...v2, qm2_receiver: "a\udc00" }))
    })

    it("readHelloV2Fields is total on arbitrary objects", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.dictionary(
              fc.oneof(fc.constantFrom("qm2_challenge", "qm2_receiver", "qm2_label", "qm2_mac"), Arb.text()),
              fc.oneof(Arb.text(), fc.jsonValue())
            )
          ),
          ([json]) => {
            const read = readV2(json)
            assert.isTrue(read === undefined || Option.isOption(read))
          }
        )
      )
    })
  })

  describe("helloV2", () => {
    it.effect("answers a challenge with a fresh nonce, the legacy MAC and the v2 MAC", () =>
      Effect.gen(function* () {
        const first = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        const second = yield* Handshake.helloV2(DIALER, Redacted.make(SECRET), challengeOf())
        for (const hello of [first, second]) {
          assert.strictEqual(hello.server_id, DIALER)
          assert.match(hello.nonce, HEX32)
          assert.strictEqual(hello.mac, Handshake.mac(SECRET, hello.nonce))
          assertEqual(
            hello.v2,
            Option.some({
              challenge: LISTENER_NONCE,
              receiver: LISTENER,
              label: LABEL,
              mac: Handshake.macV2(SECRET, {
                dialerNonce: hello.nonce,
                listenerNonce: LISTENER_NONCE,
                sender: DIALER,
                receiver: LISTENER,
                label: LABEL
              })
            })
          )
        }
        assert.notStrictEqual(first.nonce, second.nonce)
      })
    )

    it.effect("sends the dialer's own label when given one", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, SECRET, challengeOf(), "staging")
        assert.strictEqual(Option.getOrThrow(hello.v2).label, "staging")
        assertRefused(verifyHello(hello, options("required")), "WrongLabel")
      })
    )

    it.effect("leaves both MACs empty in open mode", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, "", challengeOf())
        assert.strictEqual(hello.mac, "")
        assert.strictEqual(Option.getOrThrow(hello.v2).mac, "")
      })
    )
  })

  describe("verifyHello", () => {
    it.effect("accepts a v2 round trip in permissive and required mode as version 2", () =>
      Effect.gen(function* () {
        const challenge = yield* Handshake.makeChallenge(LISTENER, LABEL)
        const wire = decodeChallenge(Frame.encode(challenge).subarray(5))
        const received = Result.getOrThrow(wire)
        const hello = yield* Handshake.helloV2(DIALER, SECRET, received)
        for (const mode of ["permissive", "required"] as const) {
          assertEqual(
            verifyHello(hello, options(mode, { challenge: Option.some(challenge) })),
            accepted(DIALER, 2)
          )
          assertEqual(
            verifyHello(
              hello,
              options(mode, { challenge: Option.some(challenge), secret: Redacted.make(SECRET) })
            ),
            accepted(DIALER, 2)
          )
        }
        // legacy mode ignores the v2 fields
        assertEqual(verifyHello(hello, options("legacy")), accepted(DIALER, 1))
      })
    )

    it.effect("refuses a captured v2 HELLO replayed against a new challenge: BadChallengeAnswer", () =>
      Effect.gen(function* () {
        const captured = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        const fresh = yield* Handshake.makeChallenge(LISTENER, LABEL)
        for (const mode of ["permissive", "required"] as const) {
          const next = options(mode, { challenge: Option.some(fresh) })
          assertRefused(verifyHello(captured, next), "BadChallengeAnswer")
          // echoing the new nonce does not help: qm2_mac binds the old one
          assertRefused(verifyHello(withV2(captured, { challenge: fresh.nonce }), next), "BadChallengeAnswer")
        }
      })
    )

    it.effect("refuses a v2 HELLO forwarded to another node: WrongReceiver", () =>
      Effect.gen(function* () {
        const captured = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        const other = options("required", {
          selfId: "node-c",
          challenge: Option.some(challengeOf(LISTENER_NONCE, "node-c"))
        })
        assertRefused(verifyHello(captured, other), "WrongReceiver")
        // rewriting qm2_receiver breaks qm2_mac
        assertRefused(verifyHello(withV2(captured, { receiver: "node-c" }), other), "BadChallengeAnswer")
        assertRefused(verifyHello(captured, options("permissive", { selfId: "node-c" })), "WrongReceiver")
      })
    )

    it.effect("refuses a v2 HELLO with an altered server_id: the v2 MAC binds the sender", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        const altered = { ...hello, server_id: "node-evil" }
        // the legacy MAC does not cover server_id
        assertEqual(Handshake.verify(altered, SECRET), Result.succeed("node-evil"))
        for (const mode of ["permissive", "required"] as const) {
          assertRefused(verifyHello(altered, options(mode)), "BadChallengeAnswer")
        }
      })
    )

    it.effect("refuses a wrong label: WrongLabel, and a rewritten one breaks the MAC", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        for (const mode of ["permissive", "required"] as const) {
          assertRefused(verifyHello(hello, options(mode, { label: "staging" })), "WrongLabel")
          assertRefused(verifyHello(hello, options(mode, { label: "" })), "WrongLabel")
          assertRefused(
            verifyHello(withV2(hello, { label: "staging" }), options(mode, { label: "staging" })),
            "BadChallengeAnswer"
          )
        }
      })
    )

    it("accepts a legacy HELLO in legacy and permissive mode, refuses it in required mode", () => {
      assertEqual(verifyHello(legacyHello(), options("legacy")), accepted(DIALER, 1))
      assertEqual(verifyHello(legacyHello(), options("permissive")), accepted(DIALER, 1))
      assertEqual(
        verifyHello(legacyHello(), options("permissive", { challenge: Option.none() })),
        accepted(DIALER, 1)
      )
      assertRefused(verifyHello(legacyHello(), options("required")), "LegacyRefused")
      // a legacy HELLO with a bad MAC is BadMac where legacy is allowed
      const forged = { ...legacyHello(), mac: Handshake.mac("other", NONCE) }
      assertRefused(verifyHello(forged, options("legacy")), "BadMac")
      assertRefused(verifyHello(forged, options("permissive")), "BadMac")
      assertRefused(verifyHello(forged, options("required")), "LegacyRefused")
    })

    it.effect("a legacy listener (verify) accepts a v2 HELLO's legacy fields", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        assertEqual(Handshake.verify(hello, SECRET), Result.succeed(DIALER))
        const json: Record<string, unknown> = JSON.parse(JSON.stringify(Codec.payloadOf(hello)))
        const legacyView = {
          server_id: String(json.server_id),
          nonce: String(json.nonce),
          mac: String(json.mac)
        }
        assertEqual(Handshake.verify(legacyView, SECRET), Result.succeed(DIALER))
      })
    )

    it.effect("refuses this node's own server id, legacy or v2, once authenticated", () =>
      Effect.gen(function* () {
        const self = yield* Handshake.helloV2(LISTENER, SECRET, challengeOf())
        for (const mode of ["permissive", "required"] as const) {
          assertRefused(verifyHello(self, options(mode)), "OwnServerId")
        }
        assertRefused(verifyHello(legacyHello(LISTENER), options("permissive")), "OwnServerId")
        // unauthenticated, the MAC is what is wrong
        const forged = { ...legacyHello(LISTENER), mac: "0".repeat(64) }
        assertRefused(verifyHello(forged, options("permissive")), "BadMac")
      })
    )

    it("refuses an empty server_id in every mode", () => {
      for (const mode of ["legacy", "permissive", "required"] as const) {
        assertRefused(verifyHello(legacyHello(""), options(mode)), "MissingServerId")
      }
    })

    it.effect("refuses a qm2_mac that is a legacy MAC, truncated, or not hex: the keys differ", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        const good = Option.getOrThrow(hello.v2).mac
        for (const bad of [
          hello.mac,
          Handshake.mac(SECRET, LISTENER_NONCE),
          good.slice(0, 63),
          `${good}0`,
          "",
          `zz${good.slice(2)}`
        ]) {
          assertRefused(verifyHello(withV2(hello, { mac: bad }), options("required")), "BadChallengeAnswer")
        }
        assertEqual(
          verifyHello(withV2(hello, { mac: good.toUpperCase() }), options("required")),
          accepted(DIALER, 2)
        )
      })
    )

    it.effect("refuses a v2 HELLO whose legacy MAC is wrong: BadMac", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        assertRefused(verifyHello({ ...hello, mac: "" }, options("required")), "BadMac")
        assertRefused(verifyHello({ ...hello, mac: "0".repeat(64) }, options("permissive")), "BadMac")
      })
    )

    it.effect("refuses a v2 answer when this connection sent no challenge", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        assertRefused(
          verifyHello(hello, options("permissive", { challenge: Option.none() })),
          "BadChallengeAnswer"
        )
      })
    )

    it.effect("refuses malformed v2 HELLOs: InvalidHello", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, SECRET, challengeOf())
        const mode = options("required")
        assertRefused(verifyHello({ ...hello, nonce: "short" }, mode), "InvalidHello")
        assertRefused(verifyHello({ ...hello, nonce: hello.nonce.toUpperCase() }, mode), "InvalidHello")
        assertRefused(verifyHello({ ...hello, server_id: "x".repeat(257) }, mode), "InvalidHello")
        assertRefused(verifyHello({ ...hello, server_id: "node-\ud800" }, mode), "InvalidHello")
        assertRefused(verifyHello(withV2(hello, { label: "\udfff" }), mode), "InvalidHello")
      })
    )

    it.effect("open mode: no MAC is checked, the v2 fields still must match; required refuses", () =>
      Effect.gen(function* () {
        const hello = yield* Handshake.helloV2(DIALER, "", challengeOf())
        const open = options("permissive", { secret: "" })
        assertEqual(verifyHello(hello, open), accepted(DIALER, 2))
        assertEqual(verifyHello({ ...legacyHello(), mac: "" }, open), accepted(DIALER, 1))
        assertRefused(verifyHello(hello, { ...open, selfId: "node-c" }), "WrongReceiver")
        assertRefused(verifyHello(hello, { ...open, label: "staging" }), "WrongLabel")
        assertRefused(
          verifyHello(hello, { ...open, challenge: Option.some(challengeOf(NONCE)) }),
          "BadChallengeAnswer"
        )
        // The configuration refuses required mode without a secret; a listener that had it anyway
        // would prove nothing, so it accepts nothing.
        assertRefused(verifyHello(hello, options("required", { secret: "" })), "BadMac")
        assertRefused(verifyHello(hello, options("required", { secret: Redacted.make("") })), "BadMac")
        assertEqual(verifyHello(hello, options("legacy", { secret: "" })), accepted(DIALER, 1))
      })
    )

    it("never throws on arbitrary strings, and accepts no forgery in required mode", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.record({
              server_id: Arb.text({ maxLength: 40 }),
              nonce: fc.oneof(
                Arb.text({ maxLength: 40 }),
                fc.string({ unit: hexChar, minLength: 32, maxLength: 32 })
              ),
              mac: Arb.text({ maxLength: 80 }),
              v2: fc.option(
                fc.record({
                  challenge: fc.oneof(Arb.text({ maxLength: 40 }), fc.constant(LISTENER_NONCE)),
                  receiver: fc.oneof(Arb.text({ maxLength: 40 }), fc.constant(LISTENER)),
                  label: fc.oneof(Arb.text({ maxLength: 40 }), fc.constant(LABEL)),
                  mac: fc.oneof(
                    Arb.text({ maxLength: 80 }),
                    fc.string({ unit: hexChar, minLength: 64, maxLength: 64 })
                  )
                }),
                { nil: undefined }
              )
            }),
            fc.constantFrom<Handshake.HandshakeMode>("legacy", "permissive", "required"),
            fc.option(
              fc
                .record({ server_id: Arb.text(), nonce: Arb.text(), label: Arb.text() })
                .map((fields): Frame.Challenge => ({ _tag: "Challenge", ...fields })),
              { nil: undefined }
            ),
            fc.oneof(fc.constant(SECRET), fc.constant(""), Arb.text({ maxLength: 20 })),
            Arb.text({ maxLength: 20 })
          ),
          ([wire, mode, challenge, key, selfId]) => {
            const hello: Frame.Hello = {
              _tag: "Hello",
              ...wire,
              http_addr: Option.none(),
              eph_epoch: Option.none(),
              key_id: Option.none(),
              v2: Option.fromNullishOr(wire.v2)
            }
            const result = verifyHello(hello, {
              secret: key,
              mode,
              challenge: Option.fromNullishOr(challenge),
              selfId,
              label: LABEL
            })
            if (Result.isFailure(result)) assert.instanceOf(result.failure, HandshakeError)
            else if (mode === "required" && key === SECRET) assert.fail("accepted a forged HELLO")
          }
        ),
        { numRuns: 500 }
      )
    })
  })
})
