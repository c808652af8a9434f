/**
 * The table of the mesh's metrics: one row per metric name (the histograms are observed on the hot
 * paths instead), and what each row reads from a node's counters.
 */
import { assert, describe, it } from "@effect/vitest"
import { Option } from "effect"
import * as LaneRefusals from "../../../src/internal/lane/refusals.js"
import type { PeerLinkState } from "../../../src/internal/links/peerLink.js"
import * as MetricNames from "../../../src/internal/metrics/metricNames.js"
import { type NodeCounters, table } from "../../../src/internal/metrics/metricTable.js"
import { handshakeReasonList, handshakeReasons } from "../../../src/MeshError.js"
import * as MeshHealth from "../../../src/MeshHealth.js"
import type { LaneStats } from "../../../src/MeshStats.js"

const rejections = Object.fromEntries(handshakeReasonList.map((reason) => [reason, 0])) as Record<
  (typeof handshakeReasonList)[number],
  number
>

/** A node with no peers, no servers heard, no discovery and no lane. */
const quiet: NodeCounters = {
  links: [],
  listener: {
    framesRead: 0,
    framesDispatched: 0,
    framesInvalid: 0,
    framesUnknown: 0,
    framesOversized: 0,
    itemsInvalid: 0,
    rejections,
    inbound: {
      open: 0,
      authenticated: 0,
      authenticated_total: 0,
      closed_silent: 0,
      closed_idle: 0,
      legacy_accepted: 0,
      self_dials: 0
    },
    readByPeer: []
  },
  servers: [],
  health: MeshHealth.solo,
  membership: {
    joined: { config: 0, dns: 0, discovery: 0 },
    left: { config: 0, dns: 0, discovery: 0 }
  },
  discovery: Option.none(),
  lane: Option.none(),
  eph: { sent: { reset: 0, delete: 0, config_set: 0 }, received: { reset: 0, delete: 0, config_set: 0 } }
}

const noRefusals = Object.fromEntries(LaneRefusals.reasons.map((reason) => [reason, 0])) as Record<
  LaneRefusals.Refusal,
  number
>

const lane: LaneStats = {
  kind: "pg",
  status: "up",
  last_error: null,
  channel: "queen_mesh",
  epoch: "e",
  notifications_sent: 4,
  notifications_received: 5,
  bytes_sent: 40,
  bytes_received: 50,
  frames_sent: 4,
  frames_received: 5,
  refused: { ...noRefusals, bad_mac: 2 },
  dropped: 1,
  buffered: 0,
  reconnects: 3,
  queue_usage: null,
  members_alive: 1,
  members: []
}

/** A peer's link, its counters zero but for `counts`; reconnects 6 and queued 7 to tell them apart. */
const link = (name: string, counts: Partial<PeerLinkState["counters"]>): PeerLinkState => ({
  connected: true,
  resolvedIp: Option.none(),
  lastResolvedIp: Option.none(),
  lastError: Option.none(),
  counters: {
    queued: 7,
    queued_bytes: 0,
    handed: 0,
    written: 0,
    dropped_full: 0,
    dropped_down: 0,
    discarded: 0,
    reconnects: 6,
    silent_closes: 0,
    stalled_closes: 0,
    ...counts
  },
  host: "a",
  port: 1,
  name,
  self: false,
  foundBy: "config",
  learnedId: Option.none(),
  writtenByTag: [],
  droppedByTag: []
})

const samples = (name: string, counters: NodeCounters) => {
  const found = table.find((one) => one.name === name)
  assert.isDefined(found, name)
  return [...found.read(counters)].map(([labels, value]): [Array<string>, number] => [[...labels], value])
}

describe("the metric table", () => {
  it("has one row per metric name, the hot paths' histograms aside, and nothing else", () => {
    const histograms: ReadonlyArray<string> = [MetricNames.names.applySeconds, MetricNames.names.writeFrames]
    const expected = Object.values(MetricNames.names).filter((name) => !histograms.includes(name))
    assert.deepStrictEqual(table.map((one) => one.name).sort(), [...expected].sort())
  })

  it("every row has help, distinct labels, and leaves server_id to the engine", () => {
    for (const one of table) {
      assert.isNotEmpty(one.help, one.name)
      assert.strictEqual(new Set(one.labels).size, one.labels.length, one.name)
      assert.notInclude(one.labels, "server_id", one.name)
    }
  })

  it("every sample has one value per label", () => {
    const busy: NodeCounters = { ...quiet, lane: Option.some({ ...lane, queue_usage: 0.5 }) }
    for (const one of table) {
      for (const [labels] of one.read(busy)) assert.strictEqual(labels.length, one.labels.length, one.name)
    }
  })

  it("what does not exist yet has no series: no discovery, no lane, no queue usage read", () => {
    assert.deepStrictEqual(samples(MetricNames.names.discoveryRounds, quiet), [])
    assert.deepStrictEqual(samples(MetricNames.names.laneUp, quiet), [])
    assert.deepStrictEqual(samples(MetricNames.names.laneRefused, quiet), [])
    const withLane = { ...quiet, lane: Option.some(lane) }
    assert.deepStrictEqual(samples(MetricNames.names.laneQueueUsage, withLane), [])
    assert.deepStrictEqual(samples(MetricNames.names.laneUp, withLane), [[[], 1]])
    assert.deepStrictEqual(
      samples(MetricNames.names.laneRefused, withLane),
      LaneRefusals.reasons.map((reason) => [[reason], reason === "bad_mac" ? 2 : 0])
    )
    assert.deepStrictEqual(samples(MetricNames.names.laneNotifications, withLane), [
      [["sent"], 4],
      [["received"], 5]
    ])
  })

  it("derived values: refusals summed, unauthenticated inbound never negative, health one-hot", () => {
    const counters: NodeCounters = {
      ...quiet,
      listener: {
        ...quiet.listener,
        rejections: { ...rejections, BadMac: 2, MissingServerId: 3 },
        inbound: { ...quiet.listener.inbound, open: 1, authenticated: 2 }
      },
      health: { ...MeshHealth.solo, status: "degraded", reason: "partial" },
      discovery: Option.some({
        source: "dns:x",
        rounds: 10,
        failedRounds: 4,
        lastError: Option.none(),
        found: true
      })
    }
    assert.deepStrictEqual(samples(MetricNames.names.handshakeFailures, counters), [[[], 5]])
    assert.deepStrictEqual(samples(MetricNames.names.connectionsOpen, counters), [
      [["inbound", "true"], 2],
      [["inbound", "false"], 0],
      [["outbound", "true"], 0]
    ])
    const health = samples(MetricNames.names.health, counters)
    assert.deepStrictEqual(
      health.filter(([, value]) => value === 1),
      [[["degraded"], 1]]
    )
    assert.strictEqual(health.length, MeshHealth.Status.literals.length)
    assert.deepStrictEqual(samples(MetricNames.names.discoveryRounds, counters), [
      [["ok"], 6],
      [["failed"], 4]
    ])
  })

  it("link counters and refusals under their one name, the stats body's", () => {
    const counters: NodeCounters = {
      ...quiet,
      links: [
        link("a:1", { dropped_full: 1, dropped_down: 2, discarded: 3, silent_closes: 4, stalled_closes: 5 })
      ],
      listener: { ...quiet.listener, rejections: { ...rejections, BadMac: 2 } }
    }
    assert.deepStrictEqual(samples(MetricNames.names.drops, counters), [
      [["a:1", "dropped_full"], 1],
      [["a:1", "dropped_down"], 2],
      [["a:1", "discarded"], 3]
    ])
    assert.deepStrictEqual(samples(MetricNames.names.livenessCloses, counters), [
      [["a:1", "silent_closes"], 4],
      [["a:1", "stalled_closes"], 5]
    ])
    assert.deepStrictEqual(samples(MetricNames.names.reconnects, counters), [[["a:1"], 6]])
    assert.deepStrictEqual(samples(MetricNames.names.queueDepth, counters), [[["a:1"], 7]])
    const refused = samples(MetricNames.names.rejections, counters)
    assert.deepStrictEqual(
      refused.map(([labels]) => labels[0]),
      handshakeReasonList.map((reason) => handshakeReasons[reason].stat)
    )
    assert.deepStrictEqual(
      refused.filter(([, value]) => value > 0),
      [[["bad_mac"], 2]]
    )
  })
})
