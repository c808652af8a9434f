/**
 * A resumable, slice-by-slice scanner for large batch payloads (`MESSAGE_AVAILABLE_BATCH`, tag 2, and
 * `HOTLIST_DIRTY_BATCH`, tag 5; spec "The frame set").
 *
 * Why: a peer may send back-to-back 16 MiB batch frames (the framing cap, spec "Framing"), and one
 * `JSON.parse` of 16 MiB blocks the event loop for tens to hundreds of milliseconds, during which every
 * other peer's wakes wait. {@link BatchScanner} validates the whole payload text with exactly the
 * grammar `JSON.parse` accepts, in steps of bounded work, so the caller can yield to the event loop
 * between steps. On the way it records the `[start, end)` character range of each element of the
 * top-level `"items"` array, so that {@link parseItems} can then materialise the items in bounded
 * chunks, one small `JSON.parse` per chunk.
 *
 * The grammar (RFC 8259, as V8's `JSON.parse` implements it): whitespace is space, tab, LF and CR only
 * (no BOM); strings take the escapes `\" \\ \/ \b \f \n \r \t \uXXXX` and no raw code unit below 0x20;
 * lone surrogates are accepted (the text is a JS string, so they are just code units); numbers are
 * `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; `true`, `false`, `null`; objects and arrays nest to
 * any depth, tracked on an explicit stack, never by recursion. Like `JSON.parse`, the last of duplicate
 * top-level `"items"` keys wins, and keys are compared after unescaping (`"\u0069tems"` is `"items"`).
 *
 * The ranges are kept in one growable `Uint32Array` of `[start0, end0, start1, end1, ...]`: 16 MiB can
 * hold a few hundred thousand items, and an array of objects would cost far more than the items.
 *
 * @internal
 */
import * as Effect from "effect/Effect"

/** What one {@link BatchScanner.step} left: more work, a finished valid JSON text, or not JSON at all. */
export type ScanStatus = "more" | "done" | "invalid"

/**
 * The outcome of a scan.
 *
 * - `Pending`: {@link BatchScanner.step} has not yet returned `"done"` or `"invalid"`.
 * - `Invalid`: the text is not JSON (`JSON.parse` would throw).
 * - `NoItems`: the text is JSON, but not an object whose (last) `"items"` is an array; the caller
 *   treats this as an invalid frame too.
 * - `Items`: the text is JSON and its top-level `"items"` is an array of `count` elements; element `k`
 *   is `text.slice(ranges[2k], ranges[2k + 1])`.
 */
export type ScanResult =
  | { readonly _tag: "Pending" }
  | { readonly _tag: "Invalid"; readonly reason: string }
  | { readonly _tag: "NoItems"; readonly reason: string }
  | { readonly _tag: "Items"; readonly count: number; readonly ranges: Uint32Array }

// Scanner modes. The structural ones (up to M_AFTER) skip whitespace; the string and number ones are
// inside a token and are resumable at any character. `run` dispatches on their order.
const M_VALUE = 0 // a value is expected (top level, after ':' or after ',' in an array)
const M_VALUE_OR_CLOSE = 1 // just after '[': a value or ']'
const M_KEY_OR_CLOSE = 2 // just after '{': a key or '}'
const M_KEY = 3 // after ',' in an object: a key
const M_COLON = 4 // after a key: ':'
const M_AFTER = 5 // after a value: ',' or a closing bracket, or only whitespace at depth 0
const M_STRING = 6 // inside a string (a key or a value)
// Where a number may end:
const M_NUM_ZERO = 7 // after a leading '0': '.', 'e', 'E' or the end of the number
const M_NUM_INT = 8 // in the integer digits after [1-9]
const M_NUM_FRAC = 9 // in the fraction digits
const M_NUM_EXP = 10 // in the exponent digits
// Where a number needs more:
const M_NUM_MINUS = 11 // after '-': a digit
const M_NUM_DOT = 12 // after '.': a digit
const M_NUM_E_SIGN = 13 // after the exponent sign: a digit
const M_NUM_E = 14 // after 'e' or 'E': a sign or a digit
const M_FINISHED = 15 // "done" or "invalid" was returned

const K_ARRAY = 0
const K_OBJECT = 1

const ITEMS_ABSENT = 0
const ITEMS_ARRAY = 1
const ITEMS_NOT_ARRAY = 2

// The longest raw key (with its quotes) that can unescape to "items": five `\uXXXX` escapes.
const MAX_ITEMS_KEY_RAW = 2 + 5 * 6

// The most characters one call of `run` scans.
const SLICE = 64 * 1024

const PENDING: ScanResult = { _tag: "Pending" }

// What a state returns when the text is not JSON (every position is at least 0).
const REJECTED = -1

/** Why a character is refused; {@link refusal} words it. */
type Refusal =
  | "afterTop"
  | "unexpected"
  | "value"
  | "key"
  | "colon"
  | "number"
  | "leadingZero"
  | "escape"
  | "control"

const refusal = (why: Refusal, c: number, at: number): string => {
  const char = describeChar(c)
  switch (why) {
    case "afterTop":
      return `unexpected ${char} after the top-level value at ${at}`
    case "unexpected":
      return `unexpected ${char} at ${at}`
    case "value":
      return `unexpected ${char} where a value was expected at ${at}`
    case "key":
      return `unexpected ${char} where a key was expected at ${at}`
    case "colon":
      return `unexpected ${char} where ':' was expected at ${at}`
    case "number":
      return `bad number at ${at}`
    case "leadingZero":
      return `leading zero in number at ${at}`
    case "escape":
      return `bad escape in string at ${at}`
    case "control":
      return `control character ${char} in string at ${at}`
  }
}

const isHex = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)

/** JSON's whitespace: space, LF, CR, tab. */
const isSpace = (c: number): boolean => c === 32 || c === 10 || c === 13 || c === 9

/** Whether the four characters at `at` are hex digits (the XXXX of a `\uXXXX` escape). */
const isHex4 = (text: string, at: number): boolean =>
  isHex(text.charCodeAt(at)) &&
  isHex(text.charCodeAt(at + 1)) &&
  isHex(text.charCodeAt(at + 2)) &&
  isHex(text.charCodeAt(at + 3))

/** A copy of `a` in an array twice its length (the container stack grows). */
const doubled8 = (a: Uint8Array): Uint8Array<ArrayBuffer> => {
  const grown = new Uint8Array(a.length * 2)
  grown.set(a)
  return grown
}

/** A copy of `a` in an array twice its length (the item ranges grow). */
const doubled32 = (a: Uint32Array): Uint32Array<ArrayBuffer> => {
  const grown = new Uint32Array(a.length * 2)
  grown.set(a)
  return grown
}

const describeChar = (c: number): string =>
  c >= 0x20 && c < 0x7f ? `'${String.fromCharCode(c)}'` : `U+${c.toString(16).padStart(4, "0")}`

/**
 * A resumable validator of one JSON text that records the element ranges of its top-level `"items"`
 * array. Call {@link step} until it returns `"done"` or `"invalid"`, then read {@link result}.
 *
 * @internal
 */
export class BatchScanner {
  private readonly text: string
  private pos = 0
  private mode = M_VALUE
  private status: ScanStatus = "more"
  private reason = ""

  // The container stack: kinds[d] is the kind of the (d + 1)th open container.
  private kinds = new Uint8Array(64)
  private depth = 0

  // The current string token (valid in M_STRING).
  private stringIsKey = false
  private stringStart = 0
  private stringHasEscape = false

  private topIsObject = false
  private itemsState = ITEMS_ABSENT
  // The value about to start at depth 1 belongs to an "items" key.
  private itemsValueNext = false
  // The open container at depth 2 is the items array.
  private itemsOpen = false

  private bounds = new Uint32Array(1024)
  private count = 0

  constructor(text: string) {
    this.text = text
  }

  /** The characters scanned so far. */
  get position(): number {
    return this.pos
  }

  /**
   * The `[start0, end0, start1, end1, ...]` ranges recorded so far (a view, not a copy). Final only
   * once {@link step} returned `"done"` and {@link result} is `Items`.
   */
  get ranges(): Uint32Array {
    return this.bounds.subarray(0, this.count * 2)
  }

  /** The outcome; `Pending` until {@link step} returns `"done"` or `"invalid"`. */
  result(): ScanResult {
    if (this.status === "more") return PENDING
    if (this.status === "invalid") return { _tag: "Invalid", reason: this.reason }
    if (!this.topIsObject) return { _tag: "NoItems", reason: "top-level value is not an object" }
    if (this.itemsState === ITEMS_ABSENT) return { _tag: "NoItems", reason: 'no "items" key' }
    if (this.itemsState === ITEMS_NOT_ARRAY) return { _tag: "NoItems", reason: '"items" is not an array' }
    return { _tag: "Items", count: this.count, ranges: this.ranges }
  }

  /**
   * Scans at most about `budgetChars` characters (at least one; an escape or a literal may run a few
   * characters past), and returns whether more work remains. With `maxMillis`, the step also ends, early,
   * at the first 64 Ki-character slice boundary after that many milliseconds: a bound on the blocking
   * time when the code is not yet optimized (the first large batch) or the machine is loaded.
   */
  step(budgetChars: number, maxMillis?: number): ScanStatus {
    if (this.status !== "more") return this.status
    const len = this.text.length
    const budget = budgetChars >= 1 ? Math.floor(budgetChars) : 1
    const end = len - this.pos > budget ? this.pos + budget : len
    const deadline = maxMillis === undefined ? Number.POSITIVE_INFINITY : performance.now() + maxMillis
    // In slices of at most SLICE characters: V8 then optimizes `run` as a whole function, with type
    // feedback for its exit path, instead of compiling only its loop (on-stack replacement) and throwing
    // that code away at the first exit, which made the first few 1 MiB steps several times slower.
    while (this.pos < end) {
      const limit = end - this.pos > SLICE ? this.pos + SLICE : end
      if (!this.run(limit)) return "invalid"
      if (this.pos < end && deadline !== Number.POSITIVE_INFINITY && performance.now() >= deadline) break
    }
    if (this.pos < len) return "more"
    return this.finish(this.mode)
  }

  /**
   * The slice loop: scans up to `limit` (at most a few characters past), one state at a time, each
   * state a method that returns where it stopped (or `REJECTED`) and leaves the next state in `mode`;
   * false when the text is not JSON. The structural states (up to M_AFTER) skip whitespace here, so
   * they see only the character that decides.
   *
   * Speed rests on V8 inlining the states into this loop, which it does only within a budget of
   * bytecode (920 bytes on Node 20); a state left out costs a call per token. So the states stay small,
   * strings (most of a batch) are tested first, and an empty container's closing bracket is read in
   * M_AFTER like any other rather than closed in a second place. Measured with string-only batches,
   * this matches the single-function scanner it replaced; number-heavy text, which no valid batch
   * holds, scans about a third slower because the number states fall outside the budget.
   */
  private run(limit: number): boolean {
    const text = this.text
    let i = this.pos
    while (i < limit) {
      const mode = this.mode
      if (mode === M_STRING) i = this.inString(i, limit)
      else if (mode <= M_AFTER) {
        const c = text.charCodeAt(i)
        if (isSpace(c)) i++
        else if (mode === M_AFTER) i = this.afterValueChar(c, i)
        else if (mode <= M_VALUE_OR_CLOSE) i = this.valueStart(c, i)
        else if (mode <= M_KEY) i = this.keyStart(c, i)
        else i = this.colon(c, i)
      } else if (mode === M_FINISHED) return false
      else if (mode <= M_NUM_EXP) i = this.numberTail(i, limit)
      else if (mode === M_NUM_E) i = this.exponentStart(i)
      else i = this.requiredDigit(i)
      if (i === REJECTED) return false
    }
    this.pos = i
    return true
  }

  // --- the states: each scans from `i` and returns where it stopped ---

  /** M_STRING, the hot loop: plain string characters until the closing quote. */
  private inString(start: number, limit: number): number {
    const text = this.text
    let i = start
    for (;;) {
      if (i >= limit) return i
      const c = text.charCodeAt(i)
      if (c === 34) break
      if (c === 92) {
        i = this.escape(i)
        if (i === REJECTED) return REJECTED
        continue
      }
      if (c < 32) return this.refuse("control", i)
      i++
    }
    // The closing quote.
    this.mode = this.stringIsKey ? this.keyEnded(i + 1) : this.afterValue(i + 1)
    return i + 1
  }

  /** A key ended just before `end`: a top-level "items" key makes its value the one to watch. */
  private keyEnded(end: number): number {
    if (this.depth === 1 && this.isItemsKey(this.stringStart, end)) {
      this.itemsValueNext = true
      this.count = 0
    }
    return M_COLON
  }

  /** M_AFTER: after a value, ',' or the closing bracket of its container. */
  private afterValueChar(c: number, i: number): number {
    const depth = this.depth
    if (depth === 0) return this.refuse("afterTop", i)
    const isArray = this.kinds[depth - 1] === K_ARRAY
    if (c === 44) this.mode = isArray ? M_VALUE : M_KEY
    else if (c === (isArray ? 93 : 125)) this.mode = this.close(i + 1)
    else return this.refuse("unexpected", i)
    return i + 1
  }

  /**
   * M_VALUE and M_VALUE_OR_CLOSE: the first character of a value, or the ']' of an empty array, which
   * M_AFTER then reads as it reads any closing bracket.
   */
  private valueStart(c: number, i: number): number {
    if (c === 93 && this.mode === M_VALUE_OR_CLOSE) return this.enter(M_AFTER, i)
    this.noteValueStart(c, i)
    if (c === 34) return this.openString(false, i)
    if (c === 123 || c === 91) return this.open(c, i)
    return this.scalarStart(c, i)
  }

  /** The first character `c` of a number or a literal, at `i`. */
  private scalarStart(c: number, i: number): number {
    if (c >= 49 && c <= 57) return this.enter(M_NUM_INT, i + 1)
    if (c === 48) return this.enter(M_NUM_ZERO, i + 1)
    if (c === 45) return this.enter(M_NUM_MINUS, i + 1)
    return this.literal(c, i)
  }

  /** `true`, `false` or `null`, starting with `c` at `i`. */
  private literal(c: number, i: number): number {
    const literal = c === 116 ? "true" : c === 102 ? "false" : c === 110 ? "null" : undefined
    if (literal !== undefined && this.text.startsWith(literal, i)) {
      this.mode = this.afterValue(i + literal.length)
      return i + literal.length
    }
    return this.refuse("value", i)
  }

  /** M_KEY and M_KEY_OR_CLOSE: a key's opening quote, or the '}' of an empty object (as in valueStart). */
  private keyStart(c: number, i: number): number {
    if (c === 34) return this.openString(true, i)
    if (c === 125 && this.mode === M_KEY_OR_CLOSE) return this.enter(M_AFTER, i)
    return this.refuse("key", i)
  }

  /** M_COLON: the ':' after a key. */
  private colon(c: number, i: number): number {
    if (c !== 58) return this.refuse("colon", i)
    return this.enter(M_VALUE, i + 1)
  }

  /** M_NUM_MINUS, M_NUM_DOT, M_NUM_E_SIGN: the digit a number needs here. */
  private requiredDigit(i: number): number {
    const c = this.text.charCodeAt(i)
    if (c < 48 || c > 57) return this.refuse("number", i)
    const mode = this.mode
    this.mode =
      mode === M_NUM_MINUS ? (c === 48 ? M_NUM_ZERO : M_NUM_INT) : mode === M_NUM_DOT ? M_NUM_FRAC : M_NUM_EXP
    return i + 1
  }

  /** M_NUM_E: after 'e' or 'E', a sign or a digit. */
  private exponentStart(i: number): number {
    const c = this.text.charCodeAt(i)
    if (c === 43 || c === 45) return this.enter(M_NUM_E_SIGN, i + 1)
    if (c >= 48 && c <= 57) return this.enter(M_NUM_EXP, i + 1)
    return this.refuse("number", i)
  }

  /** M_NUM_ZERO, M_NUM_INT, M_NUM_FRAC, M_NUM_EXP: more digits, then what may follow them. */
  private numberTail(start: number, limit: number): number {
    const text = this.text
    const mode = this.mode
    let i = start
    if (mode !== M_NUM_ZERO) {
      while (i < limit) {
        const c = text.charCodeAt(i)
        if (c < 48 || c > 57) break
        i++
      }
      if (i >= limit) return i
    }
    const c = text.charCodeAt(i)
    if (c === 46 && mode <= M_NUM_INT) return this.enter(M_NUM_DOT, i + 1)
    if ((c === 101 || c === 69) && mode !== M_NUM_EXP) return this.enter(M_NUM_E, i + 1)
    // Only reachable after a leading zero.
    if (c >= 48 && c <= 57) return this.refuse("leadingZero", i)
    // The number ended just before i; what follows is checked as an M_AFTER character.
    this.mode = this.afterValue(i)
    return i
  }

  /** The escape at `i` (its backslash): where it ends, or `REJECTED` when it is not one JSON has. */
  private escape(i: number): number {
    const text = this.text
    const e = text.charCodeAt(i + 1)
    this.stringHasEscape = true
    if (e === 34 || e === 92 || e === 47 || e === 98 || e === 102 || e === 110 || e === 114 || e === 116) {
      return i + 2
    }
    if (e === 117 && isHex4(text, i + 2)) return i + 6
    return this.refuse("escape", i)
  }

  /**
   * Ends the scan as not JSON, for the reason `why` names, at the character at `i`. The message is
   * built here, off the states' code, which stays small (see `run`).
   */
  private refuse(why: Refusal, i: number): typeof REJECTED {
    return this.reject(refusal(why, this.text.charCodeAt(i), i))
  }

  // --- transitions and the accounting of the items array ---

  /** Moves to `mode` at `i`. */
  private enter(mode: number, i: number): number {
    this.mode = mode
    return i
  }

  /** A string (a key or a value) opens at `i`. */
  private openString(isKey: boolean, i: number): number {
    this.stringIsKey = isKey
    this.stringStart = i
    this.stringHasEscape = false
    this.mode = M_STRING
    return i + 1
  }

  /** A container opens at `i` with `c`, '[' or '{'. */
  private open(c: number, i: number): number {
    const isArray = c === 91
    this.push(isArray ? K_ARRAY : K_OBJECT)
    this.mode = isArray ? M_VALUE_OR_CLOSE : M_KEY_OR_CLOSE
    return i + 1
  }

  /**
   * A value starts at `i` with `c`: an element of the items array has its start recorded; the value of
   * the top-level "items" key decides whether there is an items array; the top-level value whether
   * the text is an object.
   */
  private noteValueStart(c: number, i: number): void {
    const depth = this.depth
    if (depth === 2) {
      if (this.itemsOpen) this.recordStart(i)
    } else if (depth === 1) {
      if (this.itemsValueNext) this.itemsValueStarts(c)
    } else if (depth === 0) this.topIsObject = c === 123
  }

  /** The value of the top-level "items" key starts with `c`: an array, or not. */
  private itemsValueStarts(c: number): void {
    this.itemsValueNext = false
    this.itemsState = c === 91 ? ITEMS_ARRAY : ITEMS_NOT_ARRAY
    if (c === 91) this.itemsOpen = true
  }

  /** At the end of the text: a complete top-level value, or not JSON. */
  private finish(mode: number): ScanStatus {
    let m = mode
    // A number may end at the end of the text.
    if (m >= M_NUM_ZERO && m <= M_NUM_EXP) m = this.afterValue(this.pos)
    if (m === M_AFTER && this.depth === 0) {
      this.status = "done"
      this.mode = M_FINISHED
      return "done"
    }
    return this.fail(this.pos === 0 ? "empty text" : "unexpected end of text")
  }

  private reject(reason: string): typeof REJECTED {
    this.fail(reason)
    return REJECTED
  }

  private fail(reason: string): ScanStatus {
    this.status = "invalid"
    this.reason = reason
    this.mode = M_FINISHED
    this.count = 0
    return "invalid"
  }

  /** A value ended just before `end`; records it if it is an element of the items array. */
  private afterValue(end: number): number {
    if (this.depth === 2 && this.itemsOpen) this.recordEnd(end)
    return M_AFTER
  }

  private push(kind: number): void {
    const depth = this.depth
    if (depth === this.kinds.length) this.kinds = doubled8(this.kinds)
    this.kinds[depth] = kind
    this.depth = depth + 1
  }

  /** The container at the top of the stack closed just before `end`. */
  private close(end: number): number {
    const depth = this.depth - 1
    this.depth = depth
    if (depth === 1) this.itemsOpen = false
    return this.afterValue(end)
  }

  private recordStart(start: number): void {
    const at = this.count * 2
    if (at === this.bounds.length) this.bounds = doubled32(this.bounds)
    this.bounds[at] = start
  }

  private recordEnd(end: number): void {
    this.bounds[this.count * 2 + 1] = end
    this.count++
  }

  /** Whether the (validated) key token `text[start, end)`, quotes included, unescapes to "items". */
  private isItemsKey(start: number, end: number): boolean {
    const text = this.text
    if (!this.stringHasEscape) {
      return (
        end - start === 7 &&
        text.charCodeAt(start + 1) === 105 &&
        text.charCodeAt(start + 2) === 116 &&
        text.charCodeAt(start + 3) === 101 &&
        text.charCodeAt(start + 4) === 109 &&
        text.charCodeAt(start + 5) === 115
      )
    }
    if (end - start > MAX_ITEMS_KEY_RAW) return false
    const key: unknown = JSON.parse(text.slice(start, end))
    return key === "items"
  }
}

/**
 * Parses the items `[from, to)` recorded by a scan that returned `Items`, with one `JSON.parse` of
 * `"[" + text.slice(start_from, end_(to-1)) + "]"`. The slice runs from the first character of element
 * `from` to the last of element `to - 1`, so it holds exactly those elements and the original
 * separators between them (whitespace, one comma, whitespace), which are valid array separators; no
 * whitespace or comma is at either end. So the result is exactly `JSON.parse(text).items.slice(from, to)`.
 *
 * @throws RangeError when `[from, to)` is not within the recorded ranges (a defect in the caller).
 * @internal
 */
export const parseItems = (text: string, ranges: Uint32Array, from: number, to: number): Array<unknown> => {
  const count = ranges.length >> 1
  if (!(Number.isInteger(from) && Number.isInteger(to) && 0 <= from && from <= to && to <= count)) {
    throw new RangeError(`parseItems: [${from}, ${to}) is not within 0..${count}`)
  }
  if (from === to) return []
  const parsed: unknown = JSON.parse(`[${text.slice(ranges[from * 2], ranges[to * 2 - 1])}]`)
  return Array.isArray(parsed) ? parsed : []
}

/**
 * Scans `text` to the end, `budgetChars` characters (and at most about `maxMillis` milliseconds, if
 * given) per step, yielding to the event loop (a macrotask, `setImmediate`) between steps so that socket
 * reads and timers of other peers run in between. A fiber yield (`Effect.yieldNow()`) is not enough: the
 * scheduler runs the fibers it resumes together, in batches, and decides itself when I/O gets a turn.
 *
 * @internal
 */
export const scan = (text: string, budgetChars: number, maxMillis?: number): Effect.Effect<ScanResult> =>
  Effect.suspend(() => {
    const scanner = new BatchScanner(text)
    const loop: Effect.Effect<ScanResult> = Effect.suspend(() =>
      scanner.step(budgetChars, maxMillis) === "more"
        ? Effect.andThen(yieldToEventLoop, loop)
        : Effect.succeed(scanner.result())
    )
    return loop
  })

/**
 * Yields to the event loop: resumes from a `setImmediate` callback, after pending I/O callbacks.
 *
 * @internal
 */
export const yieldToEventLoop: Effect.Effect<void> = Effect.callback<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})
