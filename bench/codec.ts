/**
 * Codec: ns per frame to encode and to decode one frame, for a single `MESSAGE_AVAILABLE`, a 100-item
 * batch and a 100,000-item batch. Ours decodes through `FrameDecoder` and `Frame.decodePayload`
 * (framing + Schema validation); the baseline through its `Parser` and `JSON.parse` plus hand checks.
 * Runs in a child of its own, single-threaded, with a warm-up before every figure.
 */
import { Result } from "effect"
import * as Frame from "../src/Frame.js"
import { FrameDecoder } from "../src/internal/wire/frameDecoder.js"
import * as Baseline from "./baseline.js"
import { median, round } from "./stats.js"

export interface CodecParams {
  readonly sampleMs: number
  readonly samples: number
}

export interface CodecCase {
  readonly name: string
  readonly items: number
  readonly frameBytes: number
  readonly encodeNs: { readonly ours: number; readonly baseline: number }
  readonly decodeNs: { readonly ours: number; readonly baseline: number }
}

let sink = 0

/** Median ns per call of `fn` over `samples` timed samples of about `sampleMs` each. */
const time = (fn: () => void, params: CodecParams): number => {
  // Calibrate: find a count that takes about sampleMs.
  let count = 1
  for (;;) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < count; i++) fn()
    const ms = Number(process.hrtime.bigint() - start) / 1e6
    if (ms >= params.sampleMs / 4) {
      count = Math.max(1, Math.round((count * params.sampleMs) / Math.max(ms, 0.001)))
      break
    }
    count *= 2
  }
  const results: Array<number> = []
  for (let s = 0; s < params.samples; s++) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < count; i++) fn()
    results.push(Number(process.hrtime.bigint() - start) / count)
  }
  return median(results)
}

const item = (i: number): Baseline.Item => ({
  queue: "orders",
  partition: `p-${i}`,
  tenant: "ac3e0000-0000-4000-8000-00000000ac3e"
})

const runCase = (name: string, items: number, params: CodecParams): CodecCase => {
  const plain = Array.from({ length: items }, (_, i) => item(i))
  const ours: Frame.Frame =
    items === 1
      ? { _tag: "MessageAvailable", ...Frame.queueItem(plain[0]!) }
      : { _tag: "MessageAvailableBatch", items: plain.map((p) => Frame.queueItem(p)) }
  const tag = items === 1 ? Baseline.TAG_MESSAGE_AVAILABLE : Baseline.TAG_MESSAGE_AVAILABLE_BATCH
  const basePayload: object = items === 1 ? plain[0]! : { items: plain }

  const encodedOurs = Frame.encodeResult(ours)
  if (Result.isFailure(encodedOurs)) throw new Error(`${name}: ${encodedOurs.failure.message}`)
  const bytes = Buffer.from(encodedOurs.success)
  const baseBytes = Baseline.encodeFrame(tag, basePayload)
  if (!bytes.equals(baseBytes)) throw new Error(`${name}: the two encoders disagree on the bytes`)
  if (bytes.length - 4 > Frame.MAX_FRAME_LENGTH) throw new Error(`${name}: over the 16 MiB cap`)

  const encodeOurs = time(() => {
    sink += Frame.encode(ours).length
  }, params)
  const encodeBase = time(() => {
    sink += Baseline.encodeFrame(tag, basePayload).length
  }, params)

  const decoder = new FrameDecoder()
  let decodedItems = 0
  const onOurs = (t: number, payload: Uint8Array) => {
    const frame = Frame.decodePayload(t, payload)
    if (Result.isFailure(frame)) throw frame.failure
    const value = frame.success
    decodedItems += value._tag === "MessageAvailableBatch" ? value.items.length : 1
  }
  const decodeOurs = time(() => {
    const failure = decoder.push(bytes, onOurs)
    if (failure !== undefined) throw failure
  }, params)

  const parser = new Baseline.Parser()
  const onBase = (t: number, payload: Buffer) => {
    if (t === Baseline.TAG_MESSAGE_AVAILABLE) {
      const value = Baseline.decodeItem(payload)
      if (value === undefined) throw new Error("baseline rejected a valid frame")
      decodedItems += 1
    } else {
      const value = Baseline.decodeItems(payload)
      if (value === undefined) throw new Error("baseline rejected a valid batch")
      decodedItems += value.length
    }
  }
  const decodeBase = time(() => {
    if (!parser.push(baseBytes, onBase)) throw new Error("baseline framing failed")
  }, params)
  sink += decodedItems

  return {
    name,
    items,
    frameBytes: bytes.length,
    encodeNs: { ours: round(encodeOurs, 1), baseline: round(encodeBase, 1) },
    decodeNs: { ours: round(decodeOurs, 1), baseline: round(decodeBase, 1) }
  }
}

/** Items of `item(i)` that fit in one batch frame under the 16 MiB cap. */
const itemsUnderCap = (): number => {
  let bytes = 12 // {"items":[]}
  let n = 0
  for (;;) {
    const size = JSON.stringify(item(n)).length + 1
    if (bytes + size > Frame.MAX_FRAME_LENGTH - 1) return n
    bytes += size
    n++
  }
}

export const runCodec = (params: CodecParams): ReadonlyArray<CodecCase> => {
  const cases = [
    runCase("single", 1, params),
    runCase("batch100", 100, params),
    runCase("batch10k", 10_000, params)
  ]
  // The big batches: fewer, longer samples are enough, each call being milliseconds.
  cases.push(runCase("batch100k", 100_000, { ...params, sampleMs: params.sampleMs * 3 }))
  cases.push(runCase("batch16MiB", itemsUnderCap(), { sampleMs: 1, samples: 3 }))
  if (sink === -1) console.log(sink)
  return cases
}
