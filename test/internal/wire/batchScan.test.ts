import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as fc from "fast-check"
import { BatchScanner, parseItems, type ScanResult, scan } from "../../../src/internal/wire/batchScan.js"
import { numRuns } from "../../fixtures/budget.js"

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

/** Runs a scanner to the end, cycling through `budgets` (one whole step when empty). */
const scanWith = (text: string, budgets: ReadonlyArray<number> = []): ScanResult => {
  const scanner = new BatchScanner(text)
  let k = 0
  for (;;) {
    const budget = budgets.length === 0 ? Number.MAX_SAFE_INTEGER : (budgets[k++ % budgets.length] ?? 1)
    const status = scanner.step(budget)
    if (status !== "more") {
      assert.strictEqual(scanner.step(budget), status, "a finished scanner stays finished")
      return scanner.result()
    }
  }
}

type Oracle = { readonly ok: false } | { readonly ok: true; readonly value: unknown }

const oracle = (text: string): Oracle => {
  try {
    const value: unknown = JSON.parse(text)
    return { ok: true, value }
  } catch {
    return { ok: false }
  }
}

const isRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/** Checks a scan result against JSON.parse: validity, the items/no-items verdict, and the items. */
const checkAgainstOracle = (text: string, result: ScanResult): void => {
  const expected = oracle(text)
  assert.notStrictEqual(result._tag, "Pending")
  if (!expected.ok) {
    assert.strictEqual(result._tag, "Invalid", `JSON.parse rejects ${JSON.stringify(text.slice(0, 80))}`)
    return
  }
  assert.notStrictEqual(result._tag, "Invalid", `JSON.parse accepts ${JSON.stringify(text.slice(0, 80))}`)
  const value = expected.value
  const items = isRecord(value) && Object.hasOwn(value, "items") ? value.items : undefined
  if (!Array.isArray(items)) {
    assert.strictEqual(result._tag, "NoItems")
    return
  }
  if (result._tag !== "Items") {
    assert.fail(`expected Items, got ${result._tag}`)
    return
  }
  assert.strictEqual(result.count, items.length)
  assert.strictEqual(result.ranges.length, items.length * 2)
  assert.deepStrictEqual(parseItems(text, result.ranges, 0, result.count), items)
  // Every range is exactly one element.
  for (let k = 0; k < result.count; k++) {
    const one: unknown = JSON.parse(text.slice(result.ranges[2 * k], result.ranges[2 * k + 1]))
    assert.deepStrictEqual(one, items[k])
  }
}

const sameResult = (a: ScanResult, b: ScanResult): void => {
  assert.strictEqual(a._tag, b._tag)
  if (a._tag === "Items" && b._tag === "Items") {
    assert.strictEqual(a.count, b.count)
    assert.deepStrictEqual(Array.from(a.ranges), Array.from(b.ranges))
  }
  if ((a._tag === "Invalid" || a._tag === "NoItems") && (b._tag === "Invalid" || b._tag === "NoItems")) {
    assert.strictEqual(a.reason, b.reason)
    assert.isAtMost(a.reason.length, 100)
  }
}

// ---------------------------------------------------------------------------------------------
// a randomised JSON writer: whitespace everywhere JSON allows, strings escaped in every legal way
// ---------------------------------------------------------------------------------------------

interface Style {
  /** Whitespace runs, used in turn wherever whitespace may go. */
  readonly ws: ReadonlyArray<string>
  /** Per character of a string, in turn: 0 raw, 1 short escape if any, 2 \\u lower hex, 3 \\u upper hex. */
  readonly escapes: ReadonlyArray<number>
}

const writer = (style: Style) => {
  let w = 0
  let e = 0
  const ws = (): string => (style.ws.length === 0 ? "" : (style.ws[w++ % style.ws.length] ?? ""))
  const esc = (): number =>
    style.escapes.length === 0 ? 0 : (style.escapes[e++ % style.escapes.length] ?? 0)
  const short: Record<string, string> = {
    '"': '\\"',
    "\\": "\\\\",
    "/": "\\/",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t"
  }
  const str = (s: string): string => {
    let out = '"'
    for (const ch of s.split("")) {
      const code = ch.charCodeAt(0)
      const hex = code.toString(16).padStart(4, "0")
      const mode = esc()
      const mustEscape = code < 0x20 || ch === '"' || ch === "\\"
      if (mode === 1 && short[ch] !== undefined) out += short[ch]
      else if (mode === 2 || (mustEscape && mode !== 3)) out += `\\u${hex}`
      else if (mode === 3) out += `\\u${hex.toUpperCase()}`
      else out += ch
    }
    return `${out}"`
  }
  const value = (v: unknown): string => {
    if (Array.isArray(v)) {
      if (v.length === 0) return `[${ws()}]`
      return `[${v.map((x) => `${ws()}${value(x)}${ws()}`).join(",")}]`
    }
    if (isRecord(v)) {
      const keys = Object.keys(v)
      if (keys.length === 0) return `{${ws()}}`
      return `{${keys.map((k) => `${ws()}${str(k)}${ws()}:${ws()}${value(v[k])}${ws()}`).join(",")}}`
    }
    if (typeof v === "string") return str(v)
    return JSON.stringify(v) ?? "null"
  }
  return { value, str, ws }
}

const wsRun = fc.array(fc.constantFrom(" ", "\t", "\n", "\r"), { maxLength: 3 }).map((cs) => cs.join(""))
const style: fc.Arbitrary<Style> = fc.record({
  ws: fc.array(wsRun, { maxLength: 8 }),
  escapes: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 8 })
})

/** Strings heavy in the characters that matter to a JSON scanner. */
const awkwardString = fc.oneof(
  fc.string(),
  fc.string({ unit: "binary" }),
  fc
    .array(
      fc.constantFrom('"', "\\", "/", "\u0000", "\u001f", "\n", "\ud800", "\udfff", "😀", "a", "\u2028"),
      {
        maxLength: 8
      }
    )
    .map((cs) => cs.join(""))
)
const jsonish = fc.jsonValue({ maxDepth: 4 })
const valueWithAwkward = fc.oneof(
  jsonish,
  awkwardString,
  fc.dictionary(awkwardString, jsonish, { maxKeys: 3 }),
  fc.array(awkwardString, { maxLength: 3 })
)
const batchValue = fc.record(
  {
    items: fc.array(fc.oneof(valueWithAwkward, fc.record({ queue: fc.string(), tenant: fc.string() })), {
      maxLength: 8
    }),
    trace: jsonish,
    other: jsonish
  },
  { requiredKeys: ["items"] }
)
const anyValue = fc.oneof(jsonish, valueWithAwkward, batchValue)

/** Valid JSON texts: plain, and written with whitespace and escapes everywhere they may go. */
const validText = fc.oneof(
  anyValue.map((v) => JSON.stringify(v)),
  fc.tuple(anyValue, style).map(([v, s]) => {
    const w = writer(s)
    return `${w.ws()}${w.value(v)}${w.ws()}`
  })
)

type Mutation =
  | { readonly kind: "delete"; readonly at: number; readonly n: number }
  | { readonly kind: "insert"; readonly at: number; readonly s: string }
  | { readonly kind: "replace"; readonly at: number; readonly s: string }
  | { readonly kind: "truncate"; readonly at: number }

const glyph = fc.constantFrom(...'{}[]",:\\/ \t\n\r0123456789.eE+-truefalsnu\u0000\u001f\ufeffx\u00a0')
const glyphs = fc.array(glyph, { minLength: 1, maxLength: 3 }).map((cs) => cs.join(""))
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant("delete" as const), at: fc.nat(), n: fc.integer({ min: 1, max: 3 }) }),
  fc.record({ kind: fc.constant("insert" as const), at: fc.nat(), s: glyphs }),
  fc.record({ kind: fc.constant("replace" as const), at: fc.nat(), s: glyphs }),
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() })
)

const mutate = (text: string, ms: ReadonlyArray<Mutation>): string =>
  ms.reduce((t, m) => {
    const at = t.length === 0 ? 0 : m.at % (t.length + 1)
    switch (m.kind) {
      case "delete":
        return t.slice(0, at) + t.slice(at + m.n)
      case "insert":
        return t.slice(0, at) + m.s + t.slice(at)
      case "replace":
        return t.slice(0, at) + m.s + t.slice(at + m.s.length)
      default:
        return t.slice(0, at)
    }
  }, text)

const mutatedText = fc
  .tuple(validText, fc.array(mutation, { minLength: 1, maxLength: 3 }))
  .map(([t, ms]) => mutate(t, ms))

const anyText = fc.oneof(validText, mutatedText, fc.string({ maxLength: 12 }))
const budgets = fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 6 })

// ---------------------------------------------------------------------------------------------
// properties
// ---------------------------------------------------------------------------------------------

describe("BatchScanner", () => {
  // First in the file, so that the scanner's code has not yet seen the sliced and cons strings of the
  // properties below, which the wire never produces (a frame is decoded with Buffer.toString, giving a
  // flat string), and which make V8's optimized charCodeAt polymorphic and the scan 2-3x slower.
  it("scans and parses a 16 MiB batch in 1 MiB steps", () => {
    const MiB = 1024 * 1024
    const parts: Array<string> = []
    let size = 24
    for (let n = 0; size < 16 * MiB - 200; n++) {
      const item = JSON.stringify({
        queue: `orders-${n}`,
        partition: `partition-${n % 97}`,
        tenant: `00000000-0000-0000-0000-${String(n % 1_000_000).padStart(12, "0")}`
      })
      parts.push(item)
      size += item.length + 1
    }
    const n = parts.length
    // As the wire delivers it: bytes decoded with Buffer.toString.
    const bytes = Buffer.from(`{"items":[${parts.join(",")}],"trace":"t"}`, "utf8")
    assert.isAtMost(bytes.length, 16 * MiB)
    const text = bytes.toString("utf8")

    const t0 = performance.now()
    const expected: unknown = JSON.parse(text)
    const parseMs = performance.now() - t0
    const expectedItems = isRecord(expected) ? expected.items : undefined
    if (!Array.isArray(expectedItems)) return assert.fail("generated payload has no items")

    const fmt = (x: number): string => x.toFixed(1)
    const lines = [`batchScan 16 MiB: ${text.length} chars, ${n} items; JSON.parse whole: ${fmt(parseMs)} ms`]
    // One pass, its figures printed and not asserted: the bench's 16 MiB floods time the scanner in a node.
    const scanner = new BatchScanner(text)
    const stepMs: Array<number> = []
    const t1 = performance.now()
    for (;;) {
      const s0 = performance.now()
      const status = scanner.step(MiB)
      stepMs.push(performance.now() - s0)
      if (status !== "more") break
    }
    const scanMs = performance.now() - t1
    const result = scanner.result()
    if (result._tag !== "Items") return assert.fail(result._tag)
    assert.strictEqual(result.count, n)

    const chunkMs: Array<number> = []
    const out: Array<unknown> = []
    for (let from = 0; from < n; from += 5000) {
      const c0 = performance.now()
      const chunk = parseItems(text, result.ranges, from, Math.min(n, from + 5000))
      chunkMs.push(performance.now() - c0)
      for (const item of chunk) out.push(item)
    }
    const chunksMs = chunkMs.reduce((a, b) => a + b, 0)
    assert.strictEqual(out.length, n)
    assert.deepStrictEqual(out[0], expectedItems[0])
    assert.deepStrictEqual(out[n - 1], expectedItems[n - 1])
    assert.strictEqual(JSON.stringify(out), JSON.stringify(expectedItems))
    lines.push(
      `  scan ${fmt(scanMs)} ms (${fmt(scanMs / parseMs)}x JSON.parse) in ${stepMs.length} steps,` +
        ` step max ${fmt(Math.max(...stepMs))} / median ${fmt([...stepMs].sort((a, b) => a - b)[stepMs.length >> 1] ?? 0)} ms;` +
        ` parseItems per 5,000 max ${fmt(Math.max(...chunkMs))} / mean ${fmt(chunksMs / chunkMs.length)} ms,` +
        ` all ${fmt(chunksMs)} ms; scan + parse ${fmt(scanMs + chunksMs)} ms`
    )

    // With a time cap, steps end early at a slice boundary.
    const capped = new BatchScanner(text)
    let steps = 0
    let worst = 0
    for (;;) {
      const s0 = performance.now()
      const status = capped.step(16 * MiB, 4)
      worst = Math.max(worst, performance.now() - s0)
      steps++
      if (status !== "more") break
    }
    assert.strictEqual(capped.result()._tag, "Items")
    assert.isAbove(steps, 1)
    lines.push(`  maxMillis 4: ${steps} steps, worst ${fmt(worst)} ms`)
    console.log(lines.join("\n"))
  })

  it("(1) says valid iff JSON.parse succeeds", () => {
    fc.assert(
      fc.property(anyText, (text) => {
        const result = scanWith(text)
        assert.strictEqual(result._tag !== "Invalid", oracle(text).ok, JSON.stringify(text.slice(0, 80)))
      }),
      { numRuns: numRuns(3000) }
    )
  })

  it("(2) records exactly the items JSON.parse finds", () => {
    fc.assert(
      fc.property(anyText, (text) => {
        checkAgainstOracle(text, scanWith(text))
      }),
      { numRuns: numRuns(2000) }
    )
  })

  it("(3) gives the same result whatever the step budgets", () => {
    fc.assert(
      fc.property(anyText, budgets, (text, bs) => {
        const whole = scanWith(text)
        const split = scanWith(text, bs)
        sameResult(whole, split)
        checkAgainstOracle(text, split)
      }),
      { numRuns: numRuns(2000) }
    )
  })

  it("(5) accepts whitespace everywhere JSON allows it", () => {
    fc.assert(
      fc.property(batchValue, style, budgets, (v, s, bs) => {
        const w = writer(s)
        const text = `${w.ws()}${w.value(v)}${w.ws()}`
        const result = scanWith(text, bs)
        assert.strictEqual(result._tag, "Items")
        checkAgainstOracle(text, result)
      })
    )
  })

  it("(6) keeps the last of duplicate items keys, compared after unescaping", () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.tuple(
            fc.constantFrom("items", "item", "itemss", "Items", "other", "__proto__"),
            fc.oneof(fc.array(jsonish, { maxLength: 4 }), jsonish),
            style
          ),
          { minLength: 1, maxLength: 5 }
        ),
        budgets,
        (entries, bs) => {
          const text = `{${entries.map(([k, v, s]) => `${writer(s).str(k)}:${JSON.stringify(v)}`).join(",")}}`
          checkAgainstOracle(text, scanWith(text, bs))
        }
      )
    )
  })

  it("(6) handles duplicate and escaped items keys (examples)", () => {
    const cases: ReadonlyArray<readonly [string, string]> = [
      ['{"items":[1],"items":[2,3]}', "Items"],
      ['{"items":[1],"items":2}', "NoItems"],
      ['{"items":2,"items":[1, 2 ,3 ]}', "Items"],
      ['{"\\u0069tems":[1]}', "Items"],
      ['{"\\u0069\\u0074\\u0065\\u006D\\u0073":[1,{"items":[9]}]}', "Items"],
      ['{"items\\u0000":[1]}', "NoItems"],
      ['{"a":{"items":[1]}}', "NoItems"],
      ['[{"items":[1]}]', "NoItems"],
      ['{"items":{"0":1}}', "NoItems"],
      ['{"items":[]}', "Items"],
      ['  {"items" : [ ] }  ', "Items"],
      ['{"items":[1],"items":[[2]],"x":{"items":3}}', "Items"]
    ]
    for (const [text, tag] of cases) {
      const result = scanWith(text)
      assert.strictEqual(result._tag, tag, text)
      checkAgainstOracle(text, result)
      sameResult(result, scanWith(text, [1]))
    }
  })

  it("rejects what JSON.parse rejects (examples)", () => {
    const bad = [
      "",
      " ",
      "\ufeff{}",
      "{}x",
      "{} {}",
      "01",
      "-",
      "-01",
      "1.",
      ".5",
      "1e",
      "1e+",
      "+1",
      "0x1",
      "1.5e3.2",
      "tru",
      "nul",
      "True",
      '"\\x"',
      '"\\u12G4"',
      '"\\u123"',
      '"\u0001"',
      '"\t"',
      '"abc',
      '"\\',
      "[1,]",
      "[,1]",
      '{"a":1,}',
      '{"a" 1}',
      "{1:1}",
      "{'a':1}",
      "[1 2]",
      "[}",
      "{]",
      "\u00a0{}",
      "\v{}",
      "[NaN]",
      "[Infinity]"
    ]
    for (const text of bad) {
      assert.isFalse(oracle(text).ok, text)
      const result = scanWith(text)
      assert.strictEqual(result._tag, "Invalid", JSON.stringify(text))
      if (result._tag === "Invalid") assert.isAtMost(result.reason.length, 100)
      sameResult(result, scanWith(text, [1]))
    }
    const good = [
      "0",
      "-0",
      "1e5",
      "1E-5",
      "-0.0e+00",
      '"\ud800"',
      '"\\ud800"',
      '"\u007f\u2028"',
      " \t\n\r[]"
    ]
    for (const text of good) {
      assert.notStrictEqual(scanWith(text)._tag, "Invalid", text)
      assert.notStrictEqual(scanWith(text, [1])._tag, "Invalid", text)
    }
  })

  it("does not echo the payload in its reason", () => {
    const secret = "s".repeat(50)
    for (const text of [
      `{"items":[${secret}]}`,
      `{"${secret}\u0001"}`,
      `${secret}`,
      `{"items":[1]}${secret}`
    ]) {
      const result = scanWith(text)
      if (result._tag !== "Invalid") return assert.fail(`expected Invalid for ${text}`)
      assert.isAtMost(result.reason.length, 100)
      assert.notInclude(result.reason, "sssssssssssssssssssss")
    }
  })

  it("(4) handles 100,000 levels of nesting without recursion", () => {
    const n = 100_000
    const deepArray = "[".repeat(n) + "]".repeat(n)
    const deepObject = `${'{"items":'.repeat(n)}[]${"}".repeat(n)}`
    // JSON.parse agrees on validity; the values are too deep for a recursive deep-equal, so the items
    // are checked by their ranges and by walking them iteratively.
    const texts = [
      deepArray,
      `${'{"a":'.repeat(n)}1${"}".repeat(n)}`,
      `{"items":[${deepArray},${deepObject}]}`,
      "[".repeat(n) + "]".repeat(n - 1),
      "[".repeat(n) + "}".repeat(n),
      "[{".repeat(n),
      `{"items":[${"[".repeat(n)}]}`
    ]
    for (const text of texts) {
      const whole = scanWith(text)
      assert.strictEqual(whole._tag !== "Invalid", oracle(text).ok)
      sameResult(whole, scanWith(text, [7919]))
    }
    const result = scanWith(texts[2] ?? "")
    if (result._tag !== "Items") return assert.fail(result._tag)
    const items = `[${deepArray},${deepObject}]`
    assert.deepStrictEqual(Array.from(result.ranges), [
      10,
      10 + deepArray.length,
      11 + deepArray.length,
      items.length + 8
    ])
    const parsed = parseItems(texts[2] ?? "", result.ranges, 0, 2)
    assert.strictEqual(parsed.length, 2)
    let node: unknown = parsed[0]
    let depth = 0
    while (Array.isArray(node) && node.length > 0) {
      node = node[0]
      depth++
    }
    assert.strictEqual(depth, n - 1)
  })

  it("handles long tokens across many steps", () => {
    const long = "x".repeat(100_000)
    const digits = "7".repeat(100_000)
    const texts = [
      `{"items":["${long}",${digits},-${digits}.${digits}e-${digits},"${"\\u00e9\\n".repeat(10_000)}"]}`,
      `{"${long}":1,"items":[${digits}]}`,
      `{"items":["${long}\u0001"]}`
    ]
    for (const text of texts) {
      const whole = scanWith(text)
      checkAgainstOracle(text, whole)
      sameResult(whole, scanWith(text, [1000]))
      sameResult(whole, scanWith(text, [1, 2, 3]))
    }
  })

  it("bounds the work of each step", () => {
    const text = JSON.stringify({ items: Array.from({ length: 2000 }, (_, k) => ({ queue: `q${k}`, p: k })) })
    const scanner = new BatchScanner(text)
    let previous = 0
    while (scanner.step(100) === "more") {
      assert.isAtMost(scanner.position - previous, 106)
      assert.isAtLeast(scanner.position - previous, 1)
      previous = scanner.position
    }
    assert.strictEqual(scanner.result()._tag, "Items")
  })

  it("parseItems parses any sub-range, and rejects ranges it does not hold", () => {
    const items = [1, "two", { three: [3] }, null, [], true, -5e-7]
    const text = ` { "a" : 1 , "items" :\n[ ${items.map((x) => JSON.stringify(x)).join(" \n,\t ")} ] } `
    const result = scanWith(text)
    if (result._tag !== "Items") return assert.fail(result._tag)
    for (let from = 0; from <= items.length; from++) {
      for (let to = from; to <= items.length; to++) {
        assert.deepStrictEqual(parseItems(text, result.ranges, from, to), items.slice(from, to))
      }
    }
    assert.throws(() => parseItems(text, result.ranges, 0, items.length + 1), RangeError)
    assert.throws(() => parseItems(text, result.ranges, 3, 2), RangeError)
    assert.throws(() => parseItems(text, result.ranges, -1, 2), RangeError)
  })

  it.effect("scan yields to the event loop between steps", () =>
    Effect.gen(function* () {
      let macrotasks = 0
      const text = JSON.stringify({ items: Array.from({ length: 20_000 }, (_, k) => ({ queue: `q${k}` })) })
      const tick = (): void => {
        macrotasks++
        if (macrotasks < 1000) setImmediate(tick)
      }
      setImmediate(tick)
      const result = yield* scan(text, 10_000)
      assert.strictEqual(result._tag, "Items")
      if (result._tag === "Items") assert.strictEqual(result.count, 20_000)
      // More than 30 steps, each followed by a macrotask turn, so the ticker ran in between.
      assert.isAtLeast(macrotasks, 10)
    })
  )
})
