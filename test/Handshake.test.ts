/**
 * The HELLO handshake (spec "The handshake"): the HMAC over the nonce's hex string, nonce shape, and
 * every way `verify` accepts or refuses a HELLO without throwing.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, FastCheck as fc, Redacted } from "effect"
import type * as Frame from "../src/Frame.js"
import * as Handshake from "../src/Handshake.js"
import { HandshakeError } from "../src/MeshError.js"
import * as Arb from "./fixtures/arbitraries.js"
import { assertEqual } from "./fixtures/equality.js"

const SECRET = "s3cr3t"
const NONCE = "00112233445566778899aabbccddeeff"
const VECTOR_MAC = "04285856936ba6c4fc65577dc6ad15b5943a484aa62a3c4ad2a026ee53d3617a"

const HEX64 = /^[0-9a-f]{64}$/
const HEX32 = /^[0-9a-f]{32}$/

const hello = (mac: string, serverId = "node-a", nonce = NONCE): Frame.HelloPayload => ({
  server_id: serverId,
  nonce,
  mac
})

const assertRejected = (
  result: Either.Either<string, HandshakeError>,
  reason: HandshakeError["reason"]
): HandshakeError => {
  if (Either.isRight(result)) assert.fail(`expected ${reason}, accepted ${result.right}`)
  assert.instanceOf(result.left, HandshakeError)
  assert.strictEqual(result.left._tag, "HandshakeError")
  assert.strictEqual(result.left.reason, reason)
  return result.left
}

/** Secrets without NUL: HMAC zero-pads short keys, so "k" and "k\0" are the same key by design. */
const secret = fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 40 })
const hexChar = fc.constantFrom(..."0123456789abcdef")

describe("Handshake", () => {
  describe("mac", () => {
    it("matches the reference vector", () => {
      assert.strictEqual(Handshake.mac(SECRET, NONCE), VECTOR_MAC)
    })

    it.prop(
      "is 64 lowercase hex characters, deterministic per (secret, nonce)",
      [secret, Arb.text()],
      ([key, nonce]) => {
        const mac = Handshake.mac(key, nonce)
        assert.match(mac, HEX64)
        assert.strictEqual(Handshake.mac(key, nonce), mac)
      }
    )

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
        mac: VECTOR_MAC
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
          assertEqual(Handshake.verify(frame, SECRET), Either.right("node-a"))
        }
        assert.notStrictEqual(first.nonce, second.nonce)
      })
    )

    it.effect("makeHello in open mode still carries a nonce and the server id", () =>
      Effect.gen(function* () {
        const frame = yield* Handshake.makeHello("node-b", "")
        assert.match(frame.nonce, HEX32)
        assert.strictEqual(frame.mac, "")
        assertEqual(Handshake.verify(frame, ""), Either.right("node-b"))
      })
    )
  })

  describe("verify", () => {
    it("accepts a correct MAC and returns the peer's server id", () => {
      assertEqual(Handshake.verify(hello(VECTOR_MAC), SECRET), Either.right("node-a"))
    })

    it("accepts with the secret as Redacted", () => {
      assertEqual(Handshake.verify(hello(VECTOR_MAC), Redacted.make(SECRET)), Either.right("node-a"))
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
      assertEqual(Handshake.verify(hello(""), ""), Either.right("node-a"))
      assertEqual(Handshake.verify(hello(VECTOR_MAC), ""), Either.right("node-a"))
      assertEqual(Handshake.verify(hello("not a mac"), ""), Either.right("node-a"))
      assertEqual(Handshake.verify(hello(""), Redacted.make("")), Either.right("node-a"))
      assertEqual(Handshake.verify(hello(VECTOR_MAC), Redacted.make("")), Either.right("node-a"))
    })

    it.prop(
      "accepts every HELLO signed with the shared secret",
      [Arb.nonEmptyText, secret, Arb.text()],
      ([serverId, key, nonce]) => {
        const frame = Handshake.helloWithNonce(serverId, key, nonce)
        assertEqual(Handshake.verify(frame, key), Either.right(serverId))
        assertEqual(Handshake.verify(frame, Redacted.make(key)), Either.right(serverId))
      }
    )

    it.prop(
      "rejects every HELLO signed with another secret",
      [Arb.nonEmptyText, secret, secret, Arb.text()],
      ([serverId, ours, theirs, nonce]) => {
        fc.pre(ours !== theirs)
        assertRejected(Handshake.verify(Handshake.helloWithNonce(serverId, theirs, nonce), ours), "BadMac")
      }
    )

    it.prop(
      "rejects a MAC with any one hex digit changed",
      [fc.integer({ min: 0, max: 63 }), hexChar, Arb.text()],
      ([at, digit, nonce]) => {
        const good = Handshake.mac(SECRET, nonce)
        fc.pre(good[at] !== digit)
        const bad = `${good.slice(0, at)}${digit}${good.slice(at + 1)}`
        assertRejected(Handshake.verify(hello(bad, "node-a", nonce), SECRET), "BadMac")
      }
    )

    it.prop(
      "never throws on an arbitrary MAC, and accepts none but the right one",
      [fc.oneof(Arb.text({ maxLength: 80 }), fc.string({ unit: hexChar, minLength: 64, maxLength: 64 }))],
      ([mac]) => {
        fc.pre(mac.toLowerCase() !== VECTOR_MAC)
        assertRejected(Handshake.verify(hello(mac), SECRET), "BadMac")
        assertEqual(Handshake.verify(hello(mac), ""), Either.right("node-a"))
      },
      { fastCheck: { numRuns: 300 } }
    )
  })
})
