/**
 * The metrics sync's engine, on a table of its own: a counter follows the growth of what it mirrors
 * (never down), a gauge is set, every series carries the node's `server_id` first, and a row with no
 * samples creates no metric.
 */
import { assert, describe, it } from "@effect/vitest"
import { Context, Metric, Option, Predicate } from "effect"
import { only, row, TableSync } from "../../../src/internal/metrics/tableSync.js"
import { seriesValue } from "../../../src/MeshMetrics.js"

interface Fake {
  readonly total: number
  readonly byPeer: ReadonlyArray<readonly [string, number]>
  readonly depth: number | undefined
}

const names = {
  total: "table_sync_test_total",
  byPeer: "table_sync_test_by_peer_total",
  depth: "table_sync_test_depth"
}

const table = [
  row({ name: names.total, kind: "counter", help: "a total", labels: [], read: (c: Fake) => only(c.total) }),
  row({
    name: names.byPeer,
    kind: "counter",
    help: "per peer",
    labels: ["peer"],
    read: (c: Fake) => c.byPeer.map(([peer, n]) => [[peer], n] as const)
  }),
  row({
    name: names.depth,
    kind: "gauge",
    help: "a depth",
    labels: [],
    read: (c: Fake) => (c.depth === undefined ? [] : only(c.depth))
  })
]

const counter = (name: string, tags: Readonly<Record<string, string>>): number | undefined => {
  const state = Option.getOrUndefined(seriesValue(name, tags))
  return Predicate.hasProperty(state, "count") ? Number(state.count) : undefined
}

const gauge = (name: string, tags: Readonly<Record<string, string>>): number | undefined => {
  const state = Option.getOrUndefined(seriesValue(name, tags))
  return Predicate.hasProperty(state, "value") ? Number(state.value) : undefined
}

describe("TableSync", () => {
  it("counters follow growth and never go down; gauges are set; all under the node's server_id", () => {
    const server = `table-sync-${process.pid}-a`
    const sync = new TableSync<Fake>(server, table)
    sync.apply({ total: 3, byPeer: [["b", 1]], depth: 7 })
    assert.strictEqual(counter(names.total, { server_id: server }), 3)
    assert.strictEqual(counter(names.byPeer, { server_id: server, peer: "b" }), 1)
    assert.strictEqual(gauge(names.depth, { server_id: server }), 7)
    sync.apply({
      total: 5,
      byPeer: [
        ["b", 1],
        ["c", 4]
      ],
      depth: 2
    })
    assert.strictEqual(counter(names.total, { server_id: server }), 5)
    assert.strictEqual(counter(names.byPeer, { server_id: server, peer: "c" }), 4)
    assert.strictEqual(gauge(names.depth, { server_id: server }), 2)
    // A value that went down (a counter that cannot) leaves the counter where it was.
    sync.apply({ total: 1, byPeer: [], depth: 0 })
    assert.strictEqual(counter(names.total, { server_id: server }), 5)
    assert.strictEqual(gauge(names.depth, { server_id: server }), 0)
  })

  it("a counter exists (at 0) from the first sync that reads it; a row with no samples creates nothing", () => {
    const server = `table-sync-${process.pid}-b`
    new TableSync<Fake>(server, table).apply({ total: 0, byPeer: [], depth: undefined })
    assert.strictEqual(counter(names.total, { server_id: server }), 0)
    assert.isTrue(Option.isNone(seriesValue(names.depth, { server_id: server })))
  })

  it("two nodes in one process keep their series apart, each with the description as its help", () => {
    const [a, b] = [`table-sync-${process.pid}-c`, `table-sync-${process.pid}-d`]
    new TableSync<Fake>(a, table).apply({ total: 2, byPeer: [], depth: 1 })
    new TableSync<Fake>(b, table).apply({ total: 9, byPeer: [], depth: 1 })
    assert.strictEqual(counter(names.total, { server_id: a }), 2)
    assert.strictEqual(counter(names.total, { server_id: b }), 9)
    const snapshot = Metric.snapshotUnsafe(Context.empty()).find(
      (s) => s.id === names.total && s.attributes?.server_id === a
    )
    assert.strictEqual(snapshot?.description, "a total")
  })
})
