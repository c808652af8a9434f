/**
 * `codec`: ns per frame to encode and to decode, ours and the baseline's, from one item to a batch
 * filling the 16 MiB cap (the child is bench/codec.ts), and how flat the cost per item stays as
 * batches grow.
 */
import { Schema } from "effect"
import type { Driver } from "../driver.js"
import { check, fmt, type Row, row } from "../report.js"
import { section } from "../section.js"
import { ratio, round } from "../stats.js"

interface CodecPlan {
  readonly codec: { readonly sampleMs: number; readonly samples: number }
}

const Pair = Schema.Struct({ ours: Schema.Number, baseline: Schema.Number })
const CodecCase = Schema.Struct({
  name: Schema.String,
  items: Schema.Number,
  frameBytes: Schema.Number,
  encodeNs: Pair,
  decodeNs: Pair
})

const perItem = (ns: typeof Pair.Type, items: number) => ({
  ours: round(ns.ours / items, 1),
  baseline: round(ns.baseline / items, 1)
})

const run = async (driver: Driver, plan: CodecPlan) => {
  driver.progress("codec")
  const child = driver.spawn("codec", plan.codec)
  const message = await child.take("result", 300_000)
  await child.stop()
  const cases = Schema.decodeUnknownSync(Schema.Array(CodecCase))(message.data)
  return cases.map((c) => ({
    ...c,
    encodeRatio: ratio(c.encodeNs.ours, c.encodeNs.baseline),
    decodeRatio: ratio(c.decodeNs.ours, c.decodeNs.baseline),
    perItemNs: { encode: perItem(c.encodeNs, c.items), decode: perItem(c.decodeNs, c.items) }
  }))
}

type Cases = Awaited<ReturnType<typeof run>>

/** ns per item of the batches, worst over the larger sizes against the 100-item batch. */
const flatness = (
  cases: Cases | undefined,
  side: "encode" | "decode",
  who: "ours" | "baseline" = "ours"
): number | undefined => {
  const batch100 = cases?.find((c) => c.name === "batch100")
  if (cases === undefined || batch100 === undefined) return undefined
  const base = batch100.perItemNs[side][who]
  return round(Math.max(...cases.filter((c) => c.items > 100).map((c) => c.perItemNs[side][who] / base)), 3)
}

const codecRow = (what: string, ns: typeof Pair.Type, perItemNs: typeof Pair.Type, r: number | null): Row =>
  row(
    `${what} (ns/frame; ns/item)`,
    `${fmt(ns.ours)}; ${fmt(perItemNs.ours)}`,
    `${fmt(ns.baseline)}; ${fmt(perItemNs.baseline)}`,
    fmt(r, 2)
  )

const rows = (cases: Cases): ReadonlyArray<Row> =>
  cases.flatMap((c) => [
    codecRow(`encode ${c.name}`, c.encodeNs, c.perItemNs.encode, c.encodeRatio),
    codecRow(`decode ${c.name}`, c.decodeNs, c.perItemNs.decode, c.decodeRatio)
  ])

const targets = (cases: Cases | undefined) => {
  const batch100k = cases?.find((c) => c.name === "batch100k")
  return [
    check(
      "decode 100-item batch, ours / baseline",
      cases?.find((c) => c.name === "batch100")?.decodeRatio,
      "<= 2",
      (v) => v <= 2
    ),
    check(
      "encode ns per item, worst batch / 100-item batch",
      flatness(cases, "encode"),
      "<= 2",
      (v) => v <= 2
    ),
    check(
      "decode ns per item, worst batch / 100-item batch",
      flatness(cases, "decode"),
      "<= 2",
      (v) => v <= 2
    ),
    check(
      "decode of the 100k-item batch (ms)",
      batch100k === undefined ? undefined : round(batch100k.decodeNs.ours / 1e6, 1),
      "< 100",
      (v) => v < 100
    )
  ]
}

export const codec = section({
  names: ["codec"],
  plan: {
    full: { codec: { sampleMs: 150, samples: 5 } },
    quick: { codec: { sampleMs: 40, samples: 3 } }
  },
  run,
  results: (cases) => ({
    codec: cases,
    codecFlatness: {
      what: "ns per item, worst of the 10k, 100k and 16 MiB batches over the 100-item batch's",
      encode: { ours: flatness(cases, "encode"), baseline: flatness(cases, "encode", "baseline") },
      decode: { ours: flatness(cases, "decode"), baseline: flatness(cases, "decode", "baseline") }
    }
  }),
  rows,
  targets,
  notes: () => [
    "Codec: median ns per call over timed samples in one process; decode is framing plus validation (Schema for ours, JSON.parse plus hand checks for the baseline); both encoders produce identical bytes. Sizes 1, 100, 10k, 100k items and a batch filling the 16 MiB cap; flatness compares ns per item with the 100-item batch's."
  ]
})
