import { assert, describe, it } from "@effect/vitest"
import { HintStore } from "../../../src/internal/waker/hintStore.js"

const roomy = { maxKeys: 100, maxPerKey: 100, maxBytes: 1_000_000 }

describe("HintStore", () => {
  it("keeps partitions per queue and tenant, once each, until taken", () => {
    const hints = new HintStore(roomy)
    hints.record("q", "t1", "p1")
    hints.record("q", "t1", "p2")
    hints.record("q", "t1", "p1")
    hints.record("q", "t2", "p3")
    assert.deepStrictEqual(hints.take("q", "t1"), ["p1", "p2"])
    assert.deepStrictEqual(hints.take("q", "t1"), [])
    assert.deepStrictEqual(hints.take("q", "t2"), ["p3"])
    assert.strictEqual(hints.keyCount, 0)
    assert.strictEqual(hints.byteCount, 0)
    assert.strictEqual(hints.dropped, 0)
  })

  it("charges each hint its queue, tenant and partition in UTF-8 bytes, and gives them back on take", () => {
    const hints = new HintStore(roomy)
    hints.record("qé", "t", "p1")
    // "qé" is 3 bytes, "t" 1, "p1" 2.
    assert.strictEqual(hints.byteCount, 6)
    hints.record("qé", "t", "p22")
    assert.strictEqual(hints.byteCount, 6 + 7)
    hints.take("qé", "t")
    assert.strictEqual(hints.byteCount, 0)
  })

  it("counts what a bound keeps out: keys, partitions per key, bytes", () => {
    const keys = new HintStore({ ...roomy, maxKeys: 2 })
    keys.record("a", "t", "p")
    keys.record("b", "t", "p")
    keys.record("c", "t", "p")
    assert.strictEqual(keys.keyCount, 2)
    assert.strictEqual(keys.dropped, 1)
    // A key taken frees its place.
    keys.take("a", "t")
    keys.record("c", "t", "p")
    assert.deepStrictEqual(keys.take("c", "t"), ["p"])

    const perKey = new HintStore({ ...roomy, maxPerKey: 2 })
    for (const p of ["p1", "p2", "p3", "p1"]) perKey.record("q", "t", p)
    assert.deepStrictEqual(perKey.take("q", "t"), ["p1", "p2"])
    assert.strictEqual(perKey.dropped, 1)

    const none = new HintStore({ ...roomy, maxPerKey: 0 })
    none.record("q", "t", "p")
    assert.strictEqual(none.keyCount, 0)
    assert.strictEqual(none.dropped, 1)

    const bytes = new HintStore({ ...roomy, maxBytes: 10 })
    bytes.record("q", "t", "p1") // 4 bytes
    bytes.record("q", "t", "p2") // 8
    bytes.record("q", "t", "p3") // 12: over
    bytes.record("qq", "tt", "pppppp") // a new key of 10 bytes: over
    assert.strictEqual(bytes.byteCount, 8)
    assert.strictEqual(bytes.dropped, 2)
    assert.deepStrictEqual(bytes.take("q", "t"), ["p1", "p2"])
  })
})
