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

// Scanner modes. The structural ones skip whitespace; the string and number ones are inside a token and
// are resumable at any character.
const M_VALUE = 0 // a value is expected (top level, after ':' or after ',' in an array)
const M_VALUE_OR_CLOSE = 1 // just after '[': a value or ']'
const M_KEY_OR_CLOSE = 2 // just after '{': a key or '}'
const M_KEY = 3 // after ',' in an object: a key
const M_COLON = 4 // after a key: ':'
const M_AFTER = 5 // after a value: ',' or a closing bracket, or only whitespace at depth 0
const M_STRING = 6 // inside a string (a key or a value)
const M_NUM_MINUS = 7 // after '-': a digit
const M_NUM_ZERO = 8 // after a leading '0': '.', 'e', 'E' or the end of the number
const M_NUM_INT = 9 // in the integer digits after [1-9]
const M_NUM_DOT = 10 // after '.': a digit
const M_NUM_FRAC = 11 // in the fraction digits
const M_NUM_E = 12 // after 'e' or 'E': a sign or a digit
const M_NUM_E_SIGN = 13 // after the exponent sign: a digit
const M_NUM_EXP = 14 // in the exponent digits
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

const isHex = (c: number): boolean => (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)

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

  /** Scans up to `limit` (at most a few characters past); false when the text is not JSON. */
  private run(limit: number): boolean {
    const text = this.text
    let i = this.pos
    let mode = this.mode
    let c = 0

    while (i < limit) {
      switch (mode) {
        case M_STRING: {
          // The hot loop: plain string characters until the closing quote.
          for (;;) {
            if (i >= limit) break
            c = text.charCodeAt(i)
            if (c === 34) break
            if (c === 92) {
              const e = text.charCodeAt(i + 1)
              if (
                e === 34 ||
                e === 92 ||
                e === 47 ||
                e === 98 ||
                e === 102 ||
                e === 110 ||
                e === 114 ||
                e === 116
              ) {
                i += 2
              } else if (
                e === 117 &&
                isHex(text.charCodeAt(i + 2)) &&
                isHex(text.charCodeAt(i + 3)) &&
                isHex(text.charCodeAt(i + 4)) &&
                isHex(text.charCodeAt(i + 5))
              ) {
                i += 6
              } else {
                return this.reject(`bad escape in string at ${i}`)
              }
              this.stringHasEscape = true
              continue
            }
            if (c < 32) return this.reject(`control character ${describeChar(c)} in string at ${i}`)
            i++
          }
          if (i >= limit) break
          // c === '"': the string ends.
          i++
          if (this.stringIsKey) {
            if (this.depth === 1 && this.isItemsKey(this.stringStart, i)) {
              this.itemsValueNext = true
              this.count = 0
            }
            mode = M_COLON
          } else {
            mode = this.afterValue(i)
          }
          break
        }

        case M_AFTER: {
          c = text.charCodeAt(i)
          if (c === 32 || c === 10 || c === 13 || c === 9) {
            i++
            break
          }
          const depth = this.depth
          if (depth === 0)
            return this.reject(`unexpected ${describeChar(c)} after the top-level value at ${i}`)
          const kind = this.kinds[depth - 1]
          if (c === 44) {
            i++
            mode = kind === K_ARRAY ? M_VALUE : M_KEY
          } else if (c === 93 && kind === K_ARRAY) {
            i++
            mode = this.close(i)
          } else if (c === 125 && kind === K_OBJECT) {
            i++
            mode = this.close(i)
          } else {
            return this.reject(`unexpected ${describeChar(c)} at ${i}`)
          }
          break
        }

        case M_VALUE:
        case M_VALUE_OR_CLOSE: {
          c = text.charCodeAt(i)
          if (c === 32 || c === 10 || c === 13 || c === 9) {
            i++
            break
          }
          if (c === 93 && mode === M_VALUE_OR_CLOSE) {
            i++
            mode = this.close(i)
            break
          }
          const depth = this.depth
          if (depth === 2 && this.itemsOpen) this.recordStart(i)
          else if (depth === 1 && this.itemsValueNext) {
            this.itemsValueNext = false
            this.itemsState = c === 91 ? ITEMS_ARRAY : ITEMS_NOT_ARRAY
            if (c === 91) this.itemsOpen = true
          } else if (depth === 0) this.topIsObject = c === 123
          if (c === 34) {
            this.stringIsKey = false
            this.stringStart = i
            this.stringHasEscape = false
            i++
            mode = M_STRING
          } else if (c === 123) {
            this.push(K_OBJECT)
            i++
            mode = M_KEY_OR_CLOSE
          } else if (c === 91) {
            this.push(K_ARRAY)
            i++
            mode = M_VALUE_OR_CLOSE
          } else if (c >= 49 && c <= 57) {
            i++
            mode = M_NUM_INT
          } else if (c === 48) {
            i++
            mode = M_NUM_ZERO
          } else if (c === 45) {
            i++
            mode = M_NUM_MINUS
          } else if (c === 116 && text.startsWith("true", i)) {
            i += 4
            mode = this.afterValue(i)
          } else if (c === 102 && text.startsWith("false", i)) {
            i += 5
            mode = this.afterValue(i)
          } else if (c === 110 && text.startsWith("null", i)) {
            i += 4
            mode = this.afterValue(i)
          } else {
            return this.reject(`unexpected ${describeChar(c)} where a value was expected at ${i}`)
          }
          break
        }

        case M_KEY:
        case M_KEY_OR_CLOSE: {
          c = text.charCodeAt(i)
          if (c === 32 || c === 10 || c === 13 || c === 9) {
            i++
            break
          }
          if (c === 34) {
            this.stringIsKey = true
            this.stringStart = i
            this.stringHasEscape = false
            i++
            mode = M_STRING
          } else if (c === 125 && mode === M_KEY_OR_CLOSE) {
            i++
            mode = this.close(i)
          } else {
            return this.reject(`unexpected ${describeChar(c)} where a key was expected at ${i}`)
          }
          break
        }

        case M_COLON: {
          c = text.charCodeAt(i)
          if (c === 32 || c === 10 || c === 13 || c === 9) {
            i++
            break
          }
          if (c !== 58) return this.reject(`unexpected ${describeChar(c)} where ':' was expected at ${i}`)
          i++
          mode = M_VALUE
          break
        }

        case M_NUM_MINUS:
        case M_NUM_DOT:
        case M_NUM_E_SIGN: {
          c = text.charCodeAt(i)
          if (c < 48 || c > 57) return this.reject(`bad number at ${i}`)
          i++
          mode =
            mode === M_NUM_MINUS
              ? c === 48
                ? M_NUM_ZERO
                : M_NUM_INT
              : mode === M_NUM_DOT
                ? M_NUM_FRAC
                : M_NUM_EXP
          break
        }

        case M_NUM_E: {
          c = text.charCodeAt(i)
          if (c === 43 || c === 45) {
            i++
            mode = M_NUM_E_SIGN
          } else if (c >= 48 && c <= 57) {
            i++
            mode = M_NUM_EXP
          } else {
            return this.reject(`bad number at ${i}`)
          }
          break
        }

        case M_NUM_INT:
        case M_NUM_FRAC:
        case M_NUM_EXP:
        case M_NUM_ZERO: {
          if (mode !== M_NUM_ZERO) {
            while (i < limit) {
              c = text.charCodeAt(i)
              if (c < 48 || c > 57) break
              i++
            }
            if (i >= limit) break
          }
          c = text.charCodeAt(i)
          if (c === 46 && (mode === M_NUM_ZERO || mode === M_NUM_INT)) {
            i++
            mode = M_NUM_DOT
          } else if ((c === 101 || c === 69) && mode !== M_NUM_EXP) {
            i++
            mode = M_NUM_E
          } else if (c >= 48 && c <= 57) {
            // Only reachable after a leading zero.
            return this.reject(`leading zero in number at ${i}`)
          } else {
            // The number ended just before i; what follows is checked as an M_AFTER character.
            mode = this.afterValue(i)
          }
          break
        }

        default:
          return false
      }
    }

    this.pos = i
    this.mode = mode
    return true
  }

  /** At the end of the text: a complete top-level value, or not JSON. */
  private finish(mode: number): ScanStatus {
    let m = mode
    // A number may end at the end of the text.
    if (m === M_NUM_ZERO || m === M_NUM_INT || m === M_NUM_FRAC || m === M_NUM_EXP)
      m = this.afterValue(this.pos)
    if (m === M_AFTER && this.depth === 0) {
      this.status = "done"
      this.mode = M_FINISHED
      return "done"
    }
    return this.fail(this.pos === 0 ? "empty text" : "unexpected end of text")
  }

  private reject(reason: string): false {
    this.fail(reason)
    return false
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
    if (depth === this.kinds.length) {
      const grown = new Uint8Array(depth * 2)
      grown.set(this.kinds)
      this.kinds = grown
    }
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
    if (at === this.bounds.length) {
      const grown = new Uint32Array(at * 2)
      grown.set(this.bounds)
      this.bounds = grown
    }
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
 * reads and timers of other peers run in between. `Effect.yieldNow()` would not do: the default scheduler
 * resumes it on a microtask, and lets the event loop run only about once every 2,048 yields.
 *
 * @internal
 */
export const scan = (text: string, budgetChars: number, maxMillis?: number): Effect.Effect<ScanResult> =>
  Effect.suspend(() => {
    const scanner = new BatchScanner(text)
    const loop: Effect.Effect<ScanResult> = Effect.suspend(() =>
      scanner.step(budgetChars, maxMillis) === "more"
        ? Effect.zipRight(yieldToEventLoop, loop)
        : Effect.succeed(scanner.result())
    )
    return loop
  })

/**
 * Yields to the event loop: resumes from a `setImmediate` callback, after pending I/O callbacks.
 *
 * @internal
 */
export const yieldToEventLoop: Effect.Effect<void> = Effect.async<void>((resume) => {
  const handle = setImmediate(() => resume(Effect.void))
  return Effect.sync(() => clearImmediate(handle))
})
