/**
 * The operators' own tools in ops/: the Grafana dashboard and the Prometheus alerting rules name only
 * metrics, labels and label values a node exports. The exposition is a node's own: nodes on the
 * in-memory network with every optional part running (discovery, a lane, a peer that is down, one
 * with another secret), their metrics synced and rendered as `/metrics` renders them, and read by the
 * strict parser of test/fixtures/prometheus.ts.
 */
import { readFileSync } from "node:fs"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Stream } from "effect"
import { TestClock } from "effect/testing"
import { parse as parseYaml } from "yaml"
import * as Discovery from "../src/Discovery.js"
import * as LaneRefusals from "../src/internal/lane/refusals.js"
import { Lane } from "../src/Lane.js"
import * as MeshConfig from "../src/MeshConfig.js"
import * as MeshMetrics from "../src/MeshMetrics.js"
import * as MeshTest from "../src/MeshTest.js"
import { type Family, parse } from "./fixtures/prometheus.js"

const root = new URL("../", import.meta.url)
const read = (path: string) => readFileSync(new URL(path, root), "utf8")

// ---------------------------------------------------------------------------------------------
// what a node exports
// ---------------------------------------------------------------------------------------------

/** A lane that is down and has refused a notification: its metrics are all there, no database needed. */
const downLane = Layer.succeed(Lane, {
  kind: "pg",
  make: () =>
    Effect.succeed({
      kind: "pg" as const,
      offer: () => false,
      status: Effect.succeed("down" as const),
      statusChanges: Stream.make("down" as const),
      members: Effect.succeed([]),
      stats: Effect.succeed({
        kind: "pg" as const,
        status: "down" as const,
        last_error: "connection refused",
        channel: "queen_mesh",
        epoch: "1f",
        notifications_sent: 3,
        notifications_received: 2,
        bytes_sent: 300,
        bytes_received: 200,
        frames_sent: 3,
        frames_received: 2,
        refused: { ...LaneRefusals.zeroes(LaneRefusals.reasons), bad_mac: 1 },
        dropped: 1,
        buffered: 0,
        reconnects: 1,
        queue_usage: 0.01,
        members_alive: 0,
        members: []
      })
    })
})

const durations = {
  heartbeatInterval: MeshConfig.defaults.heartbeatInterval,
  deadThreshold: MeshConfig.defaults.deadThreshold,
  advertiseHost: ""
}

/** Every family a node exports, with every optional part running. */
const exposition = Effect.gen(function* () {
  const network = yield* MeshTest.network
  const a = yield* MeshTest.node(network, {
    serverId: "ops-a",
    peers: ["ops-b", "ops-gone"],
    config: durations,
    services: Layer.merge(
      Discovery.layer(Discovery.fixed([{ host: "ops-b", port: MeshTest.PORT }])),
      downLane
    )
  })
  const b = yield* MeshTest.node(network, { serverId: "ops-b", peers: ["ops-a"], config: durations })
  // Another secret: its HELLO is refused.
  yield* MeshTest.node(network, { serverId: "ops-c", peers: ["ops-a"], config: durations, secret: "other" })
  for (let i = 0; i < 40; i++) {
    yield* TestClock.adjust(100)
    yield* MeshTest.settle
  }
  // Wakes to a peer that is up and one that is down (dropped).
  for (let i = 0; i < 5; i++) yield* a.mesh.messageAvailable({ queue: "orders", partition: `p${i}` })
  yield* a.mesh.messageAvailableBatch([
    { queue: "orders", partition: "p1" },
    { queue: "emails", partition: "p2" }
  ])
  for (let i = 0; i < 10; i++) {
    yield* TestClock.adjust(100)
    yield* MeshTest.settle
  }
  // Both nodes' series: what a sends, and what b receives.
  yield* a.mesh.syncMetrics
  yield* b.mesh.syncMetrics
  return parse(yield* MeshMetrics.renderPrometheus())
})

/** The labels, and the values of each, that the samples named `name` carry (`_bucket` of a histogram...). */
const labelsOf = (families: ReadonlyMap<string, Family>, name: string) => {
  const family = families.get(name) ?? families.get(name.replace(/_(bucket|sum|count)$/, ""))
  const samples = (family?.samples ?? []).filter((sample) => sample.name === name)
  if (samples.length === 0) return undefined
  const labels = new Map<string, Set<string>>()
  for (const sample of samples) {
    for (const [key, value] of Object.entries(sample.labels)) {
      const values = labels.get(key) ?? new Set<string>()
      values.add(value)
      labels.set(key, values)
    }
  }
  return labels
}

// ---------------------------------------------------------------------------------------------
// what the tools name
// ---------------------------------------------------------------------------------------------

interface Query {
  /** Where it is: a panel's title or an alert's name. */
  readonly where: string
  readonly expr: string
  /** Labels the query's result is expected to carry (a legend's `{{x}}`, an annotation's `$labels.x`). */
  readonly shown: ReadonlyArray<string>
}

const GROUPING = /\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g
const SELECTOR = /\b(queen_mesh_[a-zA-Z0-9_]+)\s*(\{([^}]*)\})?/g
const MATCHER = /([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"/g

/** Every problem with `query` against the exposition: an unknown metric, label or label value. */
const check = (families: ReadonlyMap<string, Family>, query: Query): Array<string> => {
  const problems: Array<string> = []
  const at = `${query.where}: ${query.expr}`
  const metricLabels = new Set<string>()
  let metrics = 0
  for (const [, name, , matchers] of query.expr.matchAll(SELECTOR)) {
    metrics++
    const labels = labelsOf(families, name!)
    if (labels === undefined) {
      problems.push(`${at}: no metric ${name}`)
      continue
    }
    for (const label of labels.keys()) metricLabels.add(label)
    for (const [, label, op, value] of (matchers ?? "").matchAll(MATCHER)) {
      const values = labels.get(label!)
      if (values === undefined) {
        problems.push(`${at}: ${name} has no label ${label}`)
        continue
      }
      if (value!.includes("$")) continue
      const wanted =
        op === "=" ? [value!] : op === "=~" && /^[A-Za-z0-9_|]+$/.test(value!) ? value!.split("|") : []
      for (const one of wanted)
        if (!values.has(one))
          problems.push(`${at}: ${name}{${label}} is never "${one}" (it is ${[...values].join(", ")})`)
    }
  }
  if (metrics === 0) problems.push(`${at}: names no queen-mesh metric`)
  const grouped: Array<string> = []
  for (const [, kind, list] of query.expr.matchAll(GROUPING)) {
    for (const label of list!
      .split(",")
      .map((l) => l.trim())
      .filter((l) => l !== "")) {
      if (!metricLabels.has(label)) problems.push(`${at}: ${kind} (${label}): no metric here has that label`)
      if (kind === "by") grouped.push(label)
    }
  }
  const aggregated = /\b(sum|max|min|avg|count)\b/.test(query.expr)
  for (const label of query.shown) {
    const available = aggregated ? grouped : [...metricLabels]
    if (!available.includes(label))
      problems.push(`${at}: shows {{${label}}}, which its result does not carry`)
  }
  return problems
}

const shownIn = (text: string): Array<string> =>
  [...text.matchAll(/\{\{\s*(?:\$labels\.)?([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}/g)].map((m) => m[1]!)

interface Panel {
  readonly title?: string
  readonly type?: string
  readonly targets?: ReadonlyArray<{ readonly expr?: string; readonly legendFormat?: string }>
  readonly panels?: ReadonlyArray<Panel>
}

const dashboard: {
  readonly panels: ReadonlyArray<Panel>
  readonly templating: {
    readonly list: ReadonlyArray<{ readonly name: string; readonly definition?: string }>
  }
} = JSON.parse(read("ops/grafana/queen-mesh.json"))

const dashboardQueries: ReadonlyArray<Query> = dashboard.panels
  .flatMap((panel) => [panel, ...(panel.panels ?? [])])
  .flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({
      where: `dashboard "${panel.title}"`,
      expr: target.expr ?? "",
      shown: shownIn(target.legendFormat ?? "")
    }))
  )

interface Rule {
  readonly alert: string
  readonly expr: string
  readonly for?: string
  readonly labels: { readonly severity: string }
  readonly annotations: { readonly summary: string; readonly description: string }
}

const rules: ReadonlyArray<Rule> = (
  parseYaml(read("ops/prometheus/alerts.yml")) as { groups: ReadonlyArray<{ rules: ReadonlyArray<Rule> }> }
).groups.flatMap((group) => group.rules)

const ruleQueries: ReadonlyArray<Query> = rules.map((rule) => ({
  where: `alert ${rule.alert}`,
  expr: rule.expr,
  shown: [...new Set(shownIn(`${rule.annotations.summary} ${rule.annotations.description}`))]
}))

describe("ops/: the dashboard and the alerts", () => {
  it.effect("name only metrics, labels and label values a node exports", () =>
    Effect.gen(function* () {
      const families = yield* exposition
      // The exposition has what the tools are about.
      for (const name of [
        MeshMetrics.names.health,
        MeshMetrics.names.laneUp,
        MeshMetrics.names.discoveryRounds,
        MeshMetrics.names.framesDropped,
        MeshMetrics.names.applySeconds
      ])
        assert.isTrue(families.has(name), name)
      const problems = [...dashboardQueries, ...ruleQueries].flatMap((query) => check(families, query))
      assert.deepStrictEqual(problems, [])
      // The dashboard's node variable, too.
      for (const variable of dashboard.templating.list) {
        const found = /label_values\((\w+),\s*(\w+)\)/.exec(variable.definition ?? "")
        if (found === null) continue
        assert.isTrue(labelsOf(families, found[1]!)?.has(found[2]!), variable.definition)
      }
    })
  )

  it.effect("the check finds a metric, a label or a value that does not exist", () =>
    Effect.gen(function* () {
      const families = yield* exposition
      const bad = (expr: string, shown: ReadonlyArray<string> = []) =>
        check(families, { where: "x", expr, shown })
      assert.lengthOf(bad("queen_mesh_no_such_metric"), 1)
      assert.lengthOf(bad('queen_mesh_health{state="isolated"}'), 1)
      assert.lengthOf(bad('queen_mesh_health{status="lonely"}'), 1)
      assert.lengthOf(bad('queen_mesh_rejections_total{reason="UnknownKey"}'), 1)
      assert.lengthOf(bad("sum by (peer) (queen_mesh_health)"), 1)
      assert.lengthOf(bad("sum by (server_id) (queen_mesh_queue_depth)", ["peer"]), 1)
      assert.deepStrictEqual(bad('rate(queen_mesh_receive_apply_seconds_bucket{le="+Inf"}[1m])'), [])
    })
  )

  it("the dashboard covers health, links, wake latency, drops, refusals, discovery and the lane", () => {
    const all = dashboardQueries.map((query) => query.expr).join("\n")
    for (const name of [
      MeshMetrics.names.health,
      MeshMetrics.names.connectionsOpen,
      MeshMetrics.names.peersAlive,
      MeshMetrics.names.framesReceived,
      `${MeshMetrics.names.applySeconds}_bucket`,
      MeshMetrics.names.drops,
      MeshMetrics.names.queueDepth,
      MeshMetrics.names.rejections,
      MeshMetrics.names.discoveryRounds,
      MeshMetrics.names.membersJoined,
      MeshMetrics.names.laneUp,
      MeshMetrics.names.laneNotifications
    ])
      assert.include(all, name)
    assert.isTrue(dashboard.templating.list.some((variable) => variable.name === "datasource"))
  })

  it("the alerts: isolated for a minute, degraded for five, sustained drops, lane down, refusals, unknown key", () => {
    const byName = new Map(rules.map((rule) => [rule.alert, rule]))
    assert.deepStrictEqual([...byName.keys()].sort(), [
      "QueenMeshDegraded",
      "QueenMeshDropsSustained",
      "QueenMeshHandshakeRefusals",
      "QueenMeshIsolated",
      "QueenMeshLaneDown",
      "QueenMeshUnknownKey"
    ])
    assert.strictEqual(byName.get("QueenMeshIsolated")?.for, "1m")
    assert.strictEqual(byName.get("QueenMeshDegraded")?.for, "5m")
    assert.include(byName.get("QueenMeshUnknownKey")?.expr ?? "", 'reason="unknown_key"')
    for (const rule of rules) {
      assert.oneOf(rule.labels.severity, ["warning", "critical"], rule.alert)
      assert.isAbove(rule.annotations.summary.length, 0, rule.alert)
    }
  })
})
