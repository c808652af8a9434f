/**
 * The Prometheus encoder: Effect metrics of every kind, rendered and read back with the strict parser
 * in `test/fixtures/prometheus.ts`. The metric registry is process-global, so every test uses its own
 * metric names and reads only those back.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Fiber, Metric } from "effect"
import * as Prometheus from "../../../src/internal/metrics/prometheus.js"
import { type Family, parse } from "../../fixtures/prometheus.js"

/** The process's registry (Effect's default `MetricRegistry`), read outside any fiber. */
const registry = Context.empty()

/** Renders the registry restricted to names starting with `prefix`, and parses it strictly. */
const scrape = (prefix: string): { readonly text: string; readonly families: Map<string, Family> } => {
  const text = Prometheus.render(Metric.snapshotUnsafe(registry), {
    include: (name) => name.startsWith(prefix)
  })
  return { text, families: parse(text) }
}

const family = (families: Map<string, Family>, name: string): Family => {
  const found = families.get(name)
  if (found === undefined) assert.fail(`no family ${name} in ${JSON.stringify(Array.from(families.keys()))}`)
  return found
}

/** The value of the one sample named `name` with exactly `labels`. */
const sampleValue = (found: Family, name: string, labels: Record<string, string>): number => {
  const matches = found.samples.filter(
    (sample) => sample.name === name && JSON.stringify(sample.labels) === JSON.stringify(sortKeys(labels))
  )
  assert.strictEqual(
    matches.length,
    1,
    `${name}${JSON.stringify(labels)} in ${JSON.stringify(found.samples)}`
  )
  return matches[0]!.value
}

const sortKeys = (labels: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(labels).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))

const count = (text: string, needle: string): number => text.split(needle).length - 1

describe("internal/prometheus", () => {
  it("names the 0.0.4 content type", () => {
    assert.strictEqual(Prometheus.contentType, "text/plain; version=0.0.4; charset=utf-8")
  })

  it("renders an empty selection as an empty body", () => {
    assert.strictEqual(Prometheus.render([]), "")
    assert.strictEqual(Prometheus.render(Metric.snapshotUnsafe(registry), { include: () => false }), "")
  })

  it.effect("renders a counter tagged with Metric.tagged, HELP from its description", () =>
    Effect.gen(function* () {
      // `Metric.tagged` is effect 4's `Metric.withAttributes`.
      const sent = Metric.counter("pm_counter_sent_total", { description: "Frames sent.", incremental: true })
      yield* Metric.update(Metric.withAttributes(sent, { server_id: "a" }), 3)
      yield* Metric.update(Metric.withAttributes(sent, { server_id: "a" }), 1)
      yield* Metric.update(Metric.withAttributes(sent, { server_id: "b" }), 1)

      const { text, families } = scrape("pm_counter_")
      const found = family(families, "pm_counter_sent_total")
      assert.strictEqual(found.type, "counter")
      assert.strictEqual(found.help, "Frames sent.")
      assert.strictEqual(sampleValue(found, "pm_counter_sent_total", { server_id: "a" }), 4)
      assert.strictEqual(sampleValue(found, "pm_counter_sent_total", { server_id: "b" }), 1)
      // One block for the name, whatever the number of tag sets.
      assert.strictEqual(count(text, "# TYPE pm_counter_sent_total"), 1)
      assert.strictEqual(count(text, "# HELP pm_counter_sent_total"), 1)
      assert.include(text, 'pm_counter_sent_total{server_id="a"} 4\n')
    })
  )

  it("renders a counter built from MetricKey.tagged and updated with unsafeUpdate(1, [])", () => {
    // Effect 4 has no `MetricKey`: a counter made with its attributes, updated with `updateUnsafe`.
    const make = () =>
      Metric.counter("pm_key_dials_total", {
        description: "Dials.",
        incremental: true,
        attributes: { server_id: "a" }
      })
    const dials = make()
    for (let i = 0; i < 5; i++) dials.updateUnsafe(1, registry)
    // The same name, description and attributes through the Effect API land on the same series.
    Effect.runSync(Metric.update(make(), 1))
    // `incremental` drops decrements, so the Prometheus counter never goes down.
    dials.updateUnsafe(-10, registry)

    const found = family(scrape("pm_key_").families, "pm_key_dials_total")
    assert.strictEqual(found.type, "counter")
    assert.strictEqual(found.help, "Dials.")
    assert.deepStrictEqual(found.samples, [
      { name: "pm_key_dials_total", labels: { server_id: "a" }, value: 6 }
    ])
  })

  it.effect("renders gauges, with NaN and infinities spelled as the format wants", () =>
    Effect.gen(function* () {
      const peers = Metric.gauge("pm_gauge_peers", { description: "Connected peers." })
      yield* Metric.update(Metric.withAttributes(peers, { server_id: "a" }), 3)
      yield* Metric.update(Metric.withAttributes(peers, { server_id: "b" }), -2.5)
      yield* Metric.update(Metric.withAttributes(peers, { server_id: "nan" }), Number.NaN)
      yield* Metric.update(Metric.withAttributes(peers, { server_id: "inf" }), Number.POSITIVE_INFINITY)
      yield* Metric.update(Metric.withAttributes(peers, { server_id: "-inf" }), Number.NEGATIVE_INFINITY)

      const { text, families } = scrape("pm_gauge_")
      const found = family(families, "pm_gauge_peers")
      assert.strictEqual(found.type, "gauge")
      assert.strictEqual(sampleValue(found, "pm_gauge_peers", { server_id: "a" }), 3)
      assert.strictEqual(sampleValue(found, "pm_gauge_peers", { server_id: "b" }), -2.5)
      assert.isNaN(sampleValue(found, "pm_gauge_peers", { server_id: "nan" }))
      assert.strictEqual(sampleValue(found, "pm_gauge_peers", { server_id: "inf" }), Number.POSITIVE_INFINITY)
      assert.strictEqual(
        sampleValue(found, "pm_gauge_peers", { server_id: "-inf" }),
        Number.NEGATIVE_INFINITY
      )
      assert.include(text, 'pm_gauge_peers{server_id="nan"} NaN\n')
      assert.include(text, 'pm_gauge_peers{server_id="inf"} +Inf\n')
      assert.include(text, 'pm_gauge_peers{server_id="-inf"} -Inf\n')
    })
  )

  it.effect("renders a bigint counter as its digits", () =>
    Effect.gen(function* () {
      const big = Metric.counter("pm_bigint_total", { bigint: true, incremental: true })
      yield* Metric.update(big, 9_007_199_254_740_993n)
      const { text } = scrape("pm_bigint_")
      assert.include(text, "pm_bigint_total 9007199254740993\n")
    })
  )

  it.effect("renders a histogram as cumulative buckets ending in +Inf, _sum and _count", () =>
    Effect.gen(function* () {
      // Boundaries 1, 2, 4, 8, and the +Inf Effect appends.
      const rtt = Metric.histogram("pm_histogram_rtt_seconds", {
        boundaries: Metric.exponentialBoundaries({ start: 1, factor: 2, count: 5 }),
        description: "Heartbeat round trips."
      })
      const a = Metric.withAttributes(rtt, { server_id: "a" })
      for (const value of [0.5, 1, 3, 10]) yield* Metric.update(a, value)
      yield* Metric.update(Metric.withAttributes(rtt, { server_id: "b" }), 2)

      const { text, families } = scrape("pm_histogram_")
      const found = family(families, "pm_histogram_rtt_seconds")
      assert.strictEqual(found.type, "histogram")
      assert.strictEqual(found.help, "Heartbeat round trips.")
      const bucket = (server: string, le: string) =>
        sampleValue(found, "pm_histogram_rtt_seconds_bucket", { server_id: server, le })
      assert.deepStrictEqual(
        ["1", "2", "4", "8", "+Inf"].map((le) => bucket("a", le)),
        [2, 2, 3, 3, 4]
      )
      assert.strictEqual(sampleValue(found, "pm_histogram_rtt_seconds_sum", { server_id: "a" }), 14.5)
      assert.strictEqual(sampleValue(found, "pm_histogram_rtt_seconds_count", { server_id: "a" }), 4)
      assert.deepStrictEqual(
        ["1", "2", "4", "8", "+Inf"].map((le) => bucket("b", le)),
        [0, 1, 1, 1, 1]
      )
      assert.strictEqual(count(text, "# TYPE pm_histogram_rtt_seconds histogram"), 1)
    })
  )

  it.effect("renders a frequency as a counter per occurrence, the occurrence in a key label", () =>
    Effect.gen(function* () {
      const kinds = Metric.frequency("pm_frequency_frames_total", {
        description: "Frames by kind.",
        preregisteredWords: ["PING"]
      })
      const a = Metric.withAttributes(kinds, { server_id: "a" })
      yield* Metric.update(a, "WAKE")
      yield* Metric.update(a, "WAKE")
      yield* Metric.update(a, "HELLO")
      // A tag named like the occurrence label gives way to it.
      yield* Metric.update(Metric.withAttributes(kinds, { key: "shadowed" }), "WAKE")

      const found = family(scrape("pm_frequency_").families, "pm_frequency_frames_total")
      assert.strictEqual(found.type, "counter")
      assert.strictEqual(found.help, "Frames by kind.")
      const name = "pm_frequency_frames_total"
      assert.strictEqual(sampleValue(found, name, { server_id: "a", key: "WAKE" }), 2)
      assert.strictEqual(sampleValue(found, name, { server_id: "a", key: "HELLO" }), 1)
      assert.strictEqual(sampleValue(found, name, { server_id: "a", key: "PING" }), 0)
      assert.strictEqual(sampleValue(found, name, { key: "WAKE" }), 1)
    })
  )

  // Live: a summary's observations are stamped with the clock, and the scrape reads them by the real one.
  it.live("renders a summary with quantile labels, NaN before any observation", () =>
    Effect.gen(function* () {
      const latency = Metric.summary("pm_summary_latency", {
        maxAge: "1 minute",
        maxSize: 100,
        quantiles: [0.5, 0.99]
      })
      const empty = Metric.summary("pm_summary_empty", {
        maxAge: "1 minute",
        maxSize: 100,
        quantiles: [0.5]
      })
      for (const value of [1, 2, 3]) yield* Metric.update(latency, value)
      yield* Metric.value(empty)
      // The quantiles are Effect's own estimate; the encoder only carries them.
      const state = yield* Metric.value(latency)
      const estimate = (q: number) => state.quantiles.find(([quantile]) => quantile === q)?.[1] ?? Number.NaN

      const { families } = scrape("pm_summary_")
      const found = family(families, "pm_summary_latency")
      assert.strictEqual(found.type, "summary")
      assert.strictEqual(sampleValue(found, "pm_summary_latency", { quantile: "0.5" }), estimate(0.5))
      assert.strictEqual(sampleValue(found, "pm_summary_latency", { quantile: "0.99" }), estimate(0.99))
      assert.strictEqual(sampleValue(found, "pm_summary_latency_sum", {}), 6)
      assert.strictEqual(sampleValue(found, "pm_summary_latency_count", {}), 3)
      assert.isNaN(sampleValue(family(families, "pm_summary_empty"), "pm_summary_empty", { quantile: "0.5" }))
    })
  )

  it.effect("escapes HELP and label values, and the parser reads them back", () =>
    Effect.gen(function* () {
      const help = 'Back\\slash, "quotes"\nand a second line.'
      const value = 'a "quoted" \\ value\nover two lines'
      const odd = Metric.counter("pm_escape_total", { description: help })
      yield* Metric.update(Metric.withAttributes(odd, { peer: value }), 1)

      const { text, families } = scrape("pm_escape_")
      assert.include(text, '# HELP pm_escape_total Back\\\\slash, "quotes"\\nand a second line.\n')
      assert.include(text, 'pm_escape_total{peer="a \\"quoted\\" \\\\ value\\nover two lines"} 1\n')
      const found = family(families, "pm_escape_total")
      assert.strictEqual(found.help, help)
      assert.strictEqual(sampleValue(found, "pm_escape_total", { peer: value }), 1)
    })
  )

  it.effect("sorts labels, and turns characters Prometheus does not allow in names into _", () =>
    Effect.gen(function* () {
      const dotted = Metric.counter("pm_names.dotted-name_total")
      yield* Metric.update(
        Metric.withAttributes(Metric.withAttributes(dotted, { zone: "z" }), { "app-id": "q" }),
        1
      )
      const { text } = scrape("pm_names")
      assert.include(
        text,
        '# TYPE pm_names_dotted_name_total counter\npm_names_dotted_name_total{app_id="q",zone="z"} 1\n'
      )
    })
  )

  it.effect("keeps the output valid when keys collide", () =>
    Effect.gen(function* () {
      // Same name, another kind: the first registered decides the family.
      yield* Metric.update(Metric.counter("pm_collide_kind"), 1)
      yield* Metric.update(Metric.gauge("pm_collide_kind"), 7)
      // Same name and tags but another description: two registry entries, one series.
      yield* Metric.update(
        Metric.withAttributes(Metric.counter("pm_collide_series_total"), { server_id: "a" }),
        1
      )
      yield* Metric.update(
        Metric.withAttributes(Metric.counter("pm_collide_series_total", { description: "Other." }), {
          server_id: "a"
        }),
        5
      )

      const { families } = scrape("pm_collide_")
      const kind = family(families, "pm_collide_kind")
      assert.strictEqual(kind.type, "counter")
      assert.deepStrictEqual(kind.samples, [{ name: "pm_collide_kind", labels: {}, value: 1 }])
      const series = family(families, "pm_collide_series_total")
      assert.strictEqual(sampleValue(series, "pm_collide_series_total", { server_id: "a" }), 1)
      assert.strictEqual(series.help, "Other.")
    })
  )

  it("renders the whole registry, Effect's runtime metrics included, as a valid exposition", () => {
    // Effect 4 records its runtime metrics (`child_fiber*`) only under `Metric.enableRuntimeMetrics`.
    Effect.runSync(
      Effect.forkChild(Effect.void).pipe(Effect.flatMap(Fiber.await), Metric.enableRuntimeMetrics)
    )
    const all = parse(Prometheus.render(Metric.snapshotUnsafe(registry)))
    assert.strictEqual(family(all, "child_fibers_started").type, "counter")
    assert.strictEqual(family(all, "child_fibers_active").type, "gauge")
    const without = parse(
      Prometheus.render(Metric.snapshotUnsafe(registry), { include: Prometheus.withoutRuntimeMetrics })
    )
    assert.isFalse(Array.from(without.keys()).some(Prometheus.isRuntimeMetric))
    assert.isAbove(without.size, 0)
  })

  // Effect 3's `RuntimeFlags.RuntimeMetrics` is effect 4's `Metric.FiberRuntimeMetrics` reference: off
  // by default, turned on or off for a program by `Metric.enableRuntimeMetrics` /
  // `Metric.disableRuntimeMetrics` or their layers. It counts child fibers only.
  describe("the runtime-metrics switch (RuntimeFlags.RuntimeMetrics)", () => {
    /** `child_fibers_started` over all tag sets; reading the registry starts no fiber. */
    const started = (): number =>
      Metric.snapshotUnsafe(registry)
        .filter((snapshot) => snapshot.id === "child_fibers_started")
        .map((snapshot) => (snapshot.type === "Counter" ? Number(snapshot.state.count) : 0))
        .reduce((a, b) => a + b, 0)
    const tenFibers = Effect.forEach(Array.from({ length: 10 }), () =>
      Effect.forkChild(Effect.void).pipe(Effect.flatMap(Fiber.await))
    )
    const delta = (run: () => void): number => {
      const before = started()
      run()
      return started() - before
    }

    it("is on in the default runtime", () => {
      // Effect 4: off in the default runtime, on under `Metric.enableRuntimeMetrics` (the ten forks).
      assert.strictEqual(
        delta(() => Effect.runSync(tenFibers)),
        0
      )
      assert.strictEqual(
        delta(() => Effect.runSync(tenFibers.pipe(Metric.enableRuntimeMetrics))),
        10
      )
    })

    it("is off for a program under Effect.withRuntimeFlagsPatch, or the RuntimeFlags.disableRuntimeMetrics layer", () => {
      // Effect 4: `Metric.disableRuntimeMetrics`, or the `Metric.disableRuntimeMetricsLayer` layer,
      // inside a program that has them on.
      const patched = delta(() =>
        Effect.runSync(tenFibers.pipe(Metric.disableRuntimeMetrics, Metric.enableRuntimeMetrics))
      )
      const layered = delta(() =>
        Effect.runSync(
          tenFibers.pipe(Effect.provide(Metric.disableRuntimeMetricsLayer), Metric.enableRuntimeMetrics)
        )
      )
      assert.strictEqual(patched, 0)
      assert.strictEqual(layered, 0)
    })

    it("is off from the root fiber on in a runtime built with Runtime.disableRuntimeFlag", () => {
      // Effect 4 has no runtime flags: a program run with the reference off counts nothing.
      assert.strictEqual(
        delta(() => Effect.runSync(tenFibers.pipe(Metric.disableRuntimeMetrics))),
        0
      )
    })

    it("comes back inside a program with the RuntimeFlags.enableRuntimeMetrics layer", () => {
      // Effect 4: the `Metric.enableRuntimeMetricsLayer` layer, inside a program that has them off.
      assert.isAtLeast(
        delta(() =>
          Effect.runSync(
            tenFibers.pipe(Effect.provide(Metric.enableRuntimeMetricsLayer), Metric.disableRuntimeMetrics)
          )
        ),
        10
      )
    })
  })

  it("formats values as Go floats", () => {
    assert.deepStrictEqual(
      [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 0, -0, 0.1, 1e21, 1e-7, 12n].map(
        Prometheus.formatValue
      ),
      ["NaN", "+Inf", "-Inf", "0", "0", "0.1", "1e+21", "1e-7", "12"]
    )
  })
})

describe("the strict parser (test/fixtures/prometheus)", () => {
  const ok = '# HELP m A metric.\n# TYPE m counter\nm{a="1"} 1\n'

  it("reads a well-formed body", () => {
    const families = parse(ok)
    assert.deepStrictEqual(family(families, "m"), {
      type: "counter",
      help: "A metric.",
      samples: [{ name: "m", labels: { a: "1" }, value: 1 }]
    })
  })

  const malformed: ReadonlyArray<readonly [string, string]> = [
    ["no final line feed", "# TYPE m counter\nm 1"],
    ["a blank line", "# TYPE m counter\n\nm 1\n"],
    ["a sample before TYPE", "m 1\n# TYPE m counter\n"],
    ["a duplicate TYPE", "# TYPE m counter\n# TYPE m counter\nm 1\n"],
    ["a duplicate HELP", "# HELP m a\n# HELP m b\n# TYPE m counter\nm 1\n"],
    ["TYPE after samples", "# TYPE m counter\nm 1\n# TYPE m gauge\n"],
    ["an unknown type", "# TYPE m meter\nm 1\n"],
    ["HELP without TYPE", "# HELP m a\n"],
    ["another comment", "# TYPE m counter\n# hello\nm 1\n"],
    ["a bad escape in a label", '# TYPE m counter\nm{a="\\t"} 1\n'],
    ["a bad escape in HELP", "# HELP m \\t\n# TYPE m counter\nm 1\n"],
    ["an unterminated label value", '# TYPE m counter\nm{a="1} 1\n'],
    ["a trailing comma", '# TYPE m counter\nm{a="1",} 1\n'],
    ["a duplicate label", '# TYPE m counter\nm{a="1",a="2"} 1\n'],
    ["a bad label name", '# TYPE m counter\nm{1a="1"} 1\n'],
    ["a bad value", "# TYPE m counter\nm one\n"],
    ["Inf without a sign", "# TYPE m gauge\nm Inf\n"],
    ["a timestamp", "# TYPE m counter\nm 1 1700000000000\n"],
    ["a duplicate series", '# TYPE m counter\nm{a="1"} 1\nm{a="1"} 2\n'],
    ["non-contiguous families", "# TYPE m counter\n# TYPE n counter\nn 1\nm 1\n"],
    ["a histogram without +Inf", '# TYPE h histogram\nh_bucket{le="1"} 1\nh_sum 1\nh_count 1\n'],
    [
      "a histogram whose +Inf is not _count",
      '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 1\n'
    ],
    [
      "a histogram that is not cumulative",
      '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n'
    ],
    ["a bare sample of a histogram", "# TYPE h histogram\nh 1\n"]
  ]
  for (const [what, text] of malformed) {
    it(`rejects ${what}`, () => {
      assert.throws(() => parse(text))
    })
  }
})
