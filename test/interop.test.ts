/**
 * Interop with upstream Queen replicas (issue "One cluster with upstream Queen replicas", item 7): a
 * queen-mesh node over real loopback TCP, spoken to exactly as the Rust server's `mesh.rs` speaks, in
 * both directions. The upstream side is `fixtures/upstream.ts`, written on `node:net` without any
 * queen-mesh code, so these tests check the wire, not our codec against itself.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  Duration,
  Effect,
  Fiber,
  Layer,
  Logger,
  LogLevel,
  Option,
  Redacted,
  Stream,
  SubscriptionRef
} from "effect"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import type { MeshEvent } from "../src/MeshEvent.js"
import type { ActiveStats } from "../src/MeshStats.js"
import type * as Waker from "../src/Waker.js"
import {
  allConnected,
  eventually,
  freePort,
  hearsFrom,
  type Node,
  nodeFromContext
} from "./fixtures/cluster.js"
import {
  dialUpstream,
  encodeFrame,
  healthProbe,
  listenUpstream,
  type Received,
  T,
  UPSTREAM_DEFAULT_TENANT,
  type UpstreamLink,
  type UpstreamListener,
  upstreamDispatch,
  upstreamMac
} from "./fixtures/upstream.js"

const OUR_ID = "qm-node-1"
const UPSTREAM_ID = "queen-upstream-1"
const SECRET = "s3cr3t"
/** Our heartbeat interval where the test watches heartbeats; quiet links use an hour. */
const HEARTBEAT_MS = 100
const DEAD_MS = 1000
const quiet = { heartbeatInterval: Duration.hours(1), deadThreshold: Duration.hours(2) }

/** Our node on 127.0.0.1, dialling `peers`, living in the current scope. */
const ourNode = (options: {
  readonly port: number
  readonly peers: ReadonlyArray<number>
  readonly config?: Partial<MeshConfig.MeshConfigShape>
  readonly waker?: Waker.LocalWakerOptions
  readonly secret?: string
}) =>
  Effect.map(
    Layer.build(
      Mesh.layerTcp(options.waker === undefined ? {} : { waker: options.waker }).pipe(
        Layer.provide(
          MeshConfig.layer({
            serverId: OUR_ID,
            port: options.port,
            bindHost: "127.0.0.1",
            peers: options.peers.map((port) => ({ host: "127.0.0.1", port })),
            secret: Redacted.make(options.secret ?? SECRET),
            heartbeatInterval: Duration.millis(HEARTBEAT_MS),
            deadThreshold: Duration.millis(DEAD_MS),
            ...options.config
          })
        )
      )
    ).pipe(Logger.withMinimumLogLevel(LogLevel.Error)),
    nodeFromContext
  )

interface Pair {
  readonly node: Node
  readonly port: number
  readonly upstream: UpstreamListener
  readonly link: UpstreamLink
}

/**
 * One upstream replica and our node, linked both ways: our node dials the upstream listener, the
 * upstream replica dials our node. Returns once both HELLOs verified.
 */
const pair = (
  options: {
    readonly config?: Partial<MeshConfig.MeshConfigShape>
    readonly waker?: Waker.LocalWakerOptions
    readonly helloExtra?: Readonly<Record<string, unknown>>
    /** Shared by both sides; `""` is open mode. */
    readonly secret?: string
  } = {}
) =>
  Effect.gen(function* () {
    const secret = options.secret ?? SECRET
    const upstream = yield* listenUpstream({ secret })
    const port = yield* freePort
    const node = yield* ourNode({
      port,
      peers: [upstream.port],
      secret,
      ...(options.config === undefined ? {} : { config: options.config }),
      ...(options.waker === undefined ? {} : { waker: options.waker })
    })
    const link = yield* dialUpstream({
      port,
      serverId: UPSTREAM_ID,
      secret,
      ...(options.helloExtra === undefined ? {} : { helloExtra: options.helloExtra })
    })
    yield* eventually(hearsFrom(node, 1))
    yield* eventually(allConnected(node))
    yield* eventually(Effect.sync(() => upstream.connections.some((c) => c.serverId === OUR_ID)))
    return { node, port, upstream, link } satisfies Pair
  })

const activeStats = (node: Node): Effect.Effect<ActiveStats> =>
  Effect.flatMap(node.mesh.stats, (stats) =>
    stats.enabled ? Effect.succeed(stats) : Effect.dieMessage("the mesh is not active")
  )

/** Parks a pop on `queue` for `tenant`, returning once it is registered. */
const park = (node: Node, queue: string, tenant: Option.Option<string>) =>
  Effect.gen(function* () {
    const before = yield* node.waker.parked
    const fiber = yield* Effect.fork(node.waker.awaitWake({ queue, tenant }, { maxWait: "10 seconds" }))
    yield* eventually(Effect.map(node.waker.parked, (n) => n > before))
    return fiber
  })

let barriers = 0
/**
 * Waits until every frame `link` sent so far has been applied: frames on one connection are applied in
 * order, so once a wake sent after them has woken its pop, they have been too.
 */
const barrier = (node: Node, link: UpstreamLink) =>
  Effect.gen(function* () {
    const queue = `barrier-${barriers++}`
    const fiber = yield* park(node, queue, Option.some("acme"))
    yield* link.send(T.MESSAGE_AVAILABLE, { queue, partition: "", tenant: "acme" })
    assert.strictEqual(yield* Fiber.join(fiber), "woken")
  })

const stillParked = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.map(Fiber.poll(fiber), Option.isNone)

/** Every event of `node` from now on, collected in the returned array. */
const collectEvents = (node: Node) =>
  Effect.gen(function* () {
    const seen: Array<MeshEvent> = []
    yield* Effect.forkScoped(
      Stream.runForEach(node.mesh.events, (event) => Effect.sync(() => seen.push(event)))
    )
    // Let the collector subscribe before anything it should see happens.
    yield* Effect.yieldNow()
    return seen
  })

const ofTag = (frames: ReadonlyArray<Received>, tag: number) => frames.filter((frame) => frame.tag === tag)

const maxGap = (times: ReadonlyArray<number>) => {
  let gap = 0
  for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i]! - times[i - 1]!)
  return gap
}

describe("interop: an upstream Queen replica dials us", () => {
  it.scopedLive("a HELLO with the later fields http_addr and eph_epoch is accepted", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair({
        helloExtra: { http_addr: "http://10.0.0.7:6632", eph_epoch: 3 }
      })
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.handshake_failures, 0)
      assert.strictEqual(stats.inbound.authenticated, 1)
      assert.deepStrictEqual(
        stats.servers.map((s) => [s.server_id, s.alive]),
        [[UPSTREAM_ID, true]]
      )
      // The link works: a wake over it applies.
      yield* barrier(node, link)
      // Legacy auth: our node writes nothing on an inbound link (upstream never reads it).
      assert.strictEqual(link.bytesFromNode(), 0)
      assert.isFalse(link.closed())
    })
  )

  it.scopedLive("the default tenant's UUID wakes pops parked for the default tenant, and only them", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      const absent = yield* park(node, "orders", Option.none())
      const named = yield* park(node, "orders", Option.some(UPSTREAM_DEFAULT_TENANT))
      const acme = yield* park(node, "orders", Option.some("acme"))
      yield* link.send(T.MESSAGE_AVAILABLE, {
        queue: "orders",
        partition: "p0",
        tenant: UPSTREAM_DEFAULT_TENANT
      })
      assert.strictEqual(yield* Fiber.join(absent), "woken")
      assert.strictEqual(yield* Fiber.join(named), "woken")
      yield* barrier(node, link)
      assert.isTrue(yield* stillParked(acme))
      assert.deepStrictEqual(
        yield* node.waker.takePartitionHints({ queue: "orders", tenant: Option.none() }),
        ["p0"]
      )
      yield* Fiber.interrupt(acme)
    })
  )

  it.scopedLive("with tenancy off, an absent-tenant pop is woken by the default tenant's UUID", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair({ waker: { tenancy: false } })
      const pop = yield* park(node, "orders", Option.none())
      yield* link.send(T.MESSAGE_AVAILABLE, {
        queue: "orders",
        partition: "p0",
        tenant: UPSTREAM_DEFAULT_TENANT
      })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
    })
  )

  it.scopedLive("an upper-case UUID tenant is the lowercase tenant; a name like acme is kept as given", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      const uuid = "7f3c2b1a-0d4e-4f5a-9b8c-1234567890ab"
      const lower = yield* park(node, "orders", Option.some(uuid))
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p1", tenant: uuid.toUpperCase() })
      assert.strictEqual(yield* Fiber.join(lower), "woken")
      assert.deepStrictEqual(
        yield* node.waker.takePartitionHints({ queue: "orders", tenant: Option.some(uuid) }),
        ["p1"]
      )

      const acme = yield* park(node, "orders", Option.some("acme"))
      const upper = yield* park(node, "orders", Option.some("ACME"))
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p2", tenant: "acme" })
      assert.strictEqual(yield* Fiber.join(acme), "woken")
      yield* barrier(node, link)
      // Not a UUID: compared as given, so "ACME" is another tenant.
      assert.isTrue(yield* stillParked(upper))
      yield* Fiber.interrupt(upper)
    })
  )

  it.scopedLive("a batch with an empty-queue item applies the others and counts one invalid item", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      const a = yield* park(node, "a", Option.some("acme"))
      const b = yield* park(node, "b", Option.some(UPSTREAM_DEFAULT_TENANT))
      const before = yield* activeStats(node)
      yield* link.send(T.MESSAGE_AVAILABLE_BATCH, {
        items: [
          { queue: "a", partition: "0", tenant: "acme" },
          { queue: "", partition: "1", tenant: "acme" },
          { queue: "b", partition: "2", tenant: UPSTREAM_DEFAULT_TENANT }
        ]
      })
      assert.strictEqual(yield* Fiber.join(a), "woken")
      assert.strictEqual(yield* Fiber.join(b), "woken")
      const after = yield* activeStats(node)
      assert.strictEqual(after.items_invalid - before.items_invalid, 1)
      assert.strictEqual(after.frames_dispatched - before.frames_dispatched, 1)
      assert.strictEqual(after.frames_invalid, before.frames_invalid)
      // The hot-list batch is just as lenient.
      yield* link.send(T.HOTLIST_DIRTY_BATCH, {
        items: [
          { queue: "", partition: "x", tenant: "acme" },
          { queue: "h", tenant: "acme" }
        ]
      })
      yield* barrier(node, link)
      assert.deepStrictEqual(yield* node.hotList.pending, [
        { queue: "h", partition: "", tenant: Option.some("acme") }
      ])
      assert.strictEqual((yield* activeStats(node)).items_invalid - before.items_invalid, 2)
    })
  )

  it.scopedLive('a missing partition is "": the wake happens and the hint is ""', () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      const pop = yield* park(node, "orders", Option.some("acme"))
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", tenant: "acme" })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      assert.deepStrictEqual(
        yield* node.waker.takePartitionHints({ queue: "orders", tenant: Option.some("acme") }),
        [""]
      )
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.frames_invalid, 0)
      assert.strictEqual(stats.items_invalid, 0)
    })
  )

  it.scopedLive("heartbeats with server_id refresh liveness: dead after silence, alive again on one", () =>
    Effect.gen(function* () {
      const upstream = yield* listenUpstream({ secret: SECRET })
      const port = yield* freePort
      const node = yield* ourNode({
        port,
        peers: [upstream.port],
        // The link stays open while the peer is dead: an idle timeout longer than the threshold.
        config: { deadThreshold: Duration.millis(600), idleTimeout: Duration.seconds(5) }
      })
      const events = yield* collectEvents(node)
      const link = yield* dialUpstream({ port, serverId: UPSTREAM_ID, secret: SECRET })
      const ups = () => events.filter((e) => e._tag === "PeerUp" && e.serverId === UPSTREAM_ID).length
      const downs = () => events.filter((e) => e._tag === "PeerDown" && e.serverId === UPSTREAM_ID).length
      // The HELLO counts as hearing from it.
      yield* eventually(hearsFrom(node, 1))
      // Silence past the dead threshold: dead (the link stays open).
      yield* eventually(Effect.map(activeStats(node), (s) => s.servers_dead === 1 && s.servers_alive === 0))
      yield* eventually(Effect.sync(() => downs() === 1))
      const upsWhileDead = ups()
      assert.isFalse(link.closed())
      // One upstream heartbeat brings it back.
      yield* link.send(T.HEARTBEAT, { server_id: UPSTREAM_ID })
      yield* eventually(Effect.map(activeStats(node), (s) => s.servers_alive === 1 && s.servers_dead === 0))
      yield* eventually(Effect.sync(() => ups() === upsWhileDead + 1))
      // Upstream's heartbeat every interval keeps it alive across dead thresholds (the margin is wide:
      // only an event-loop stall of over half a second could let the monitor run first).
      yield* link.startHeartbeats(50)
      const sentBefore = link.sent()
      yield* eventually(Effect.sync(() => link.sent() - sentBefore >= 30))
      yield* link.stopHeartbeats
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.servers_alive, 1)
      assert.strictEqual(downs(), 1)
      assert.strictEqual(stats.frames_invalid, 0)
      assert.deepStrictEqual(
        stats.servers.map((s) => s.server_id),
        [UPSTREAM_ID]
      )
    })
  )

  it.scopedLive("a tag 20 frame {op, tenant, queue} is counted unknown and the link stays open", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      yield* link.send(T.LATER_OP, { op: "put", tenant: UPSTREAM_DEFAULT_TENANT, queue: "orders" })
      const pop = yield* park(node, "orders", Option.some(UPSTREAM_DEFAULT_TENANT))
      yield* link.send(T.MESSAGE_AVAILABLE, {
        queue: "orders",
        partition: "p0",
        tenant: UPSTREAM_DEFAULT_TENANT
      })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.frames_unknown, 1)
      assert.strictEqual(stats.frames_invalid, 0)
      assert.strictEqual(stats.inbound.authenticated, 1)
      assert.isFalse(link.closed())
    })
  )

  it.scopedLive("QUEUE_CONFIG_SET with the default tenant's UUID drops the default tenant's entry", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      const settings = { leaseTimeSeconds: 30, encrypted: false }
      const byDefault = { queue: "orders", tenant: Option.none<string>() }
      const byAcme = { queue: "orders", tenant: Option.some("acme") }
      yield* node.cache.set(byDefault, settings)
      yield* node.cache.set(byAcme, settings)
      yield* link.send(T.QUEUE_CONFIG_SET, { queue: "orders", tenant: UPSTREAM_DEFAULT_TENANT })
      yield* eventually(Effect.map(node.cache.get(byDefault), Option.isNone))
      assert.isTrue(Option.isSome(yield* node.cache.get(byAcme)))
      yield* link.send(T.QUEUE_CONFIG_DELETE, { queue: "orders", tenant: "acme" })
      yield* eventually(Effect.map(node.cache.size, (n) => n === 0))
      // A UUID tenant in upper case names the same entry.
      const uuid = "7f3c2b1a-0d4e-4f5a-9b8c-1234567890ab"
      yield* node.cache.set({ queue: "orders", tenant: Option.some(uuid) }, settings)
      yield* link.send(T.QUEUE_CONFIG_SET, { queue: "orders", tenant: uuid.toUpperCase() })
      yield* eventually(Effect.map(node.cache.size, (n) => n === 0))
    })
  )

  it.scopedLive("frames written in the same segment as the HELLO are applied", () =>
    Effect.gen(function* () {
      const upstream = yield* listenUpstream({ secret: SECRET })
      const port = yield* freePort
      const node = yield* ourNode({ port, peers: [upstream.port], config: quiet })
      const pop = yield* park(node, "orders", Option.some("acme"))
      yield* dialUpstream({
        port,
        serverId: UPSTREAM_ID,
        secret: SECRET,
        afterHello: [
          encodeFrame(T.HEARTBEAT, { server_id: UPSTREAM_ID }),
          encodeFrame(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p9", tenant: "acme" })
        ]
      })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.messages_received, 2)
      assert.strictEqual(stats.frames_dispatched, 2)
    })
  )

  it.scopedLive("a large upstream batch (20,000 items) is applied whole", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair({ config: quiet })
      const last = yield* park(node, "q-19999", Option.some(UPSTREAM_DEFAULT_TENANT))
      const first = yield* park(node, "q-0", Option.some(UPSTREAM_DEFAULT_TENANT))
      const items = Array.from({ length: 20_000 }, (_, i) => ({
        queue: `q-${i}`,
        partition: `p-${i}`,
        tenant: UPSTREAM_DEFAULT_TENANT
      }))
      yield* link.send(T.MESSAGE_AVAILABLE_BATCH, { items })
      assert.strictEqual(yield* Fiber.join(first), "woken")
      assert.strictEqual(yield* Fiber.join(last), "woken")
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.items_invalid, 0)
      assert.strictEqual(stats.frames_oversized, 0)
      assert.isFalse(link.closed())
    })
  )

  it.scopedLive("maintenance and pop-maintenance flip both ways", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      yield* link.send(T.MAINTENANCE_MODE_SET, { enabled: true })
      yield* eventually(SubscriptionRef.get(node.flags.maintenance))
      yield* link.send(T.POP_MAINTENANCE_MODE_SET, { enabled: true })
      yield* eventually(SubscriptionRef.get(node.flags.popMaintenance))
      yield* link.send(T.MAINTENANCE_MODE_SET, { enabled: false })
      yield* link.send(T.POP_MAINTENANCE_MODE_SET, { enabled: false })
      yield* eventually(
        Effect.map(
          Effect.all([
            SubscriptionRef.get(node.flags.maintenance),
            SubscriptionRef.get(node.flags.popMaintenance)
          ]),
          ([m, p]) => !m && !p
        )
      )
      const stats = yield* activeStats(node)
      assert.isFalse(stats.maintenance_mode)
      assert.isFalse(stats.pop_maintenance_mode)
    })
  )

  it.scopedLive("messages_received counts every frame after the HELLO, unknown and invalid included", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair({ config: quiet })
      yield* link.send(T.HEARTBEAT, { server_id: UPSTREAM_ID })
      // The spec's heartbeat has no payload at all.
      yield* link.send(T.HEARTBEAT)
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p0", tenant: "acme" })
      yield* link.send(T.LATER_OP, { op: "put", tenant: "acme", queue: "orders" })
      // Invalid: an empty queue, and a payload that is not JSON (upstream ignores both, counting them).
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "", partition: "p0", tenant: "acme" })
      yield* link.send(T.MAINTENANCE_MODE_SET, Buffer.from("not json"))
      // Oversized for its tag: skipped unbuffered, still a frame read.
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "q".repeat(20_000), partition: "", tenant: "acme" })
      yield* link.send(T.MESSAGE_AVAILABLE_BATCH, { items: [{ queue: "a", tenant: "acme" }, { queue: 7 }] })
      // Several frames in one write, and one frame split across writes.
      const split = Buffer.concat([
        Buffer.from([0, 0, 0, 1, T.HEARTBEAT]),
        Buffer.from(JSON.stringify({ queue: "b", partition: "", tenant: "acme" }))
      ])
      split.writeUInt32BE(split.length - 4, 0)
      split[4] = T.MESSAGE_AVAILABLE
      yield* link.sendRaw(Buffer.concat([Buffer.from([0, 0, 0, 1, T.HEARTBEAT]), split.subarray(0, 7)]))
      yield* link.sendRaw(split.subarray(7))
      const framesSent = link.sent() + 2
      yield* barrier(node, link)
      const stats = yield* activeStats(node)
      // Everything after the HELLO, the barrier's wake included.
      assert.strictEqual(stats.messages_received, framesSent + 1)
      assert.strictEqual(
        stats.messages_received,
        stats.frames_dispatched + stats.frames_invalid + stats.frames_unknown + stats.frames_oversized
      )
      assert.strictEqual(stats.frames_unknown, 1)
      assert.strictEqual(stats.frames_invalid, 2)
      assert.strictEqual(stats.frames_oversized, 1)
      assert.strictEqual(stats.items_invalid, 1)
      assert.strictEqual(stats.handshake_failures, 0)
      assert.isFalse(link.closed())
      assert.strictEqual(link.bytesFromNode(), 0)
    })
  )
})

describe("interop: we dial an upstream Queen replica", () => {
  it.scopedLive("our HELLO verifies by upstream's rule; heartbeats carry server_id every interval", () =>
    Effect.gen(function* () {
      const { upstream } = yield* pair()
      const connection = upstream.connections.find((c) => c.serverId === OUR_ID)!
      assert.strictEqual(upstream.handshakeFailures(), 0)
      const hello = connection.hello
      assert.isTrue(typeof hello === "object" && hello !== null)
      const nonce: unknown = Reflect.get(hello as object, "nonce")
      const mac: unknown = Reflect.get(hello as object, "mac")
      assert.isTrue(typeof nonce === "string" && /^[0-9a-f]{32}$/.test(nonce))
      assert.strictEqual(mac, upstreamMac(SECRET, String(nonce)))
      assert.strictEqual(Reflect.get(hello as object, "server_id"), OUR_ID)

      yield* eventually(Effect.sync(() => ofTag(connection.frames, T.HEARTBEAT).length >= 6))
      const heartbeats = ofTag(connection.frames, T.HEARTBEAT)
      for (const heartbeat of heartbeats) assert.deepStrictEqual(heartbeat.json, { server_id: OUR_ID })
      const times = heartbeats.map((h) => h.at)
      // Paced by the interval (five gaps of 100 ms are not sent in a burst), and never as far apart as
      // upstream's dead threshold.
      assert.isAtLeast(times[5]! - times[0]!, 2.5 * HEARTBEAT_MS)
      assert.isAtMost(maxGap(times), DEAD_MS)
      assert.isUndefined(connection.error)
      assert.isFalse(connection.closed)
    })
  )

  it.scopedLive("every frame kind we send parses as upstream expects; tenant omitted when absent", () =>
    Effect.gen(function* () {
      const { node, upstream } = yield* pair({ config: quiet })
      const connection = upstream.connections.find((c) => c.serverId === OUR_ID)!
      const mesh = node.mesh
      yield* mesh.messageAvailable({ queue: "orders", partition: "p0" })
      yield* mesh.messageAvailable({ queue: "orders", partition: "p1", tenant: "acme" })
      yield* mesh.messageAvailable({
        queue: "orders",
        partition: "",
        tenant: UPSTREAM_DEFAULT_TENANT.toUpperCase()
      })
      yield* mesh.messageAvailableBatch([
        { queue: "a", partition: "0" },
        { queue: "b", partition: "1", tenant: "acme" }
      ])
      yield* mesh.hotlistDirty({ queue: "h", partition: "2", tenant: "acme" })
      yield* eventually(Effect.sync(() => ofTag(connection.frames, T.HOTLIST_DIRTY_BATCH).length === 1))
      yield* mesh.hotlistDirty({ queue: "h", partition: "3" })
      yield* eventually(Effect.sync(() => ofTag(connection.frames, T.HOTLIST_DIRTY_BATCH).length === 2))
      yield* mesh.queueConfigSet({ queue: "orders" })
      yield* mesh.queueConfigSet({ queue: "orders", tenant: "acme" })
      yield* mesh.queueConfigDelete({ queue: "orders", tenant: UPSTREAM_DEFAULT_TENANT })
      yield* mesh.setMaintenance(true)
      yield* mesh.setPopMaintenance(false)
      const expected: ReadonlyArray<readonly [number, unknown]> = [
        [T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p0" }],
        [T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p1", tenant: "acme" }],
        [T.MESSAGE_AVAILABLE, { queue: "orders", partition: "", tenant: UPSTREAM_DEFAULT_TENANT }],
        [
          T.MESSAGE_AVAILABLE_BATCH,
          {
            items: [
              { queue: "a", partition: "0" },
              { queue: "b", partition: "1", tenant: "acme" }
            ]
          }
        ],
        [T.HOTLIST_DIRTY_BATCH, { items: [{ queue: "h", partition: "2", tenant: "acme" }] }],
        [T.HOTLIST_DIRTY_BATCH, { items: [{ queue: "h", partition: "3" }] }],
        [T.QUEUE_CONFIG_SET, { queue: "orders" }],
        [T.QUEUE_CONFIG_SET, { queue: "orders", tenant: "acme" }],
        [T.QUEUE_CONFIG_DELETE, { queue: "orders", tenant: UPSTREAM_DEFAULT_TENANT }],
        [T.MAINTENANCE_MODE_SET, { enabled: true }],
        [T.POP_MAINTENANCE_MODE_SET, { enabled: false }]
      ]
      yield* eventually(Effect.sync(() => connection.frames.length >= expected.length))
      assert.deepStrictEqual(
        connection.frames.map((f) => [f.tag, f.json]),
        expected.map(([tag, json]) => [tag, json])
      )
      // Upstream's dispatch calls a handler for every one of them, with what we meant.
      assert.deepStrictEqual(connection.frames.map(upstreamDispatch), [
        [{ kind: "message_available", queue: "orders", partition: "p0" }],
        [{ kind: "message_available", queue: "orders", partition: "p1" }],
        [{ kind: "message_available", queue: "orders", partition: "" }],
        [
          { kind: "message_available", queue: "a", partition: "0" },
          { kind: "message_available", queue: "b", partition: "1" }
        ],
        [{ kind: "hotlist_dirty", queue: "h", partition: "2" }],
        [{ kind: "hotlist_dirty", queue: "h", partition: "3" }],
        [{ kind: "queue_config_set", queue: "orders" }],
        [{ kind: "queue_config_set", queue: "orders" }],
        [{ kind: "queue_config_delete", queue: "orders" }],
        [{ kind: "maintenance", enabled: true }],
        [{ kind: "pop_maintenance", enabled: false }]
      ])
      // A tenant, when present, is a string: never null, never an empty string.
      for (const frame of connection.frames) {
        const list: ReadonlyArray<unknown> =
          frame.tag === T.MESSAGE_AVAILABLE_BATCH || frame.tag === T.HOTLIST_DIRTY_BATCH
            ? (Reflect.get(frame.json as object, "items") as ReadonlyArray<unknown>)
            : [frame.json]
        for (const item of list) {
          if (typeof item === "object" && item !== null && Object.hasOwn(item, "tenant")) {
            const tenant: unknown = Reflect.get(item, "tenant")
            assert.isTrue(typeof tenant === "string" && tenant !== "")
          }
        }
      }
      assert.isUndefined(connection.error)
    })
  )

  it.scopedLive(
    "on a busy link frames keep arriving within the heartbeat interval, heartbeats included",
    () =>
      Effect.gen(function* () {
        const { node, upstream } = yield* pair()
        const connection = upstream.connections.find((c) => c.serverId === OUR_ID)!
        let sent = 0
        const busy = yield* Effect.fork(
          Effect.forever(
            Effect.zipRight(
              Effect.suspend(() => node.mesh.messageAvailable({ queue: "busy", partition: `p${sent++}` })),
              Effect.sleep(Duration.millis(5))
            )
          )
        )
        const start = connection.frames.length
        const during = () => connection.frames.slice(start)
        const stale: Array<number> = []
        // Sample upstream's liveness of us (its last frame of any kind) while the wakes flow.
        yield* eventually(
          Effect.sync(() => {
            const last = upstream.lastSeen.get(OUR_ID)!
            const silent = performance.now() - last
            if (silent > DEAD_MS) stale.push(silent)
            return ofTag(during(), T.HEARTBEAT).length >= 4
          })
        )
        yield* Fiber.interrupt(busy)
        const frames = during()
        const wakes = ofTag(frames, T.MESSAGE_AVAILABLE)
        assert.isAbove(wakes.length, 10)
        assert.deepStrictEqual(stale, [])
        // Upstream's rule: alive while the last frame is younger than the dead threshold.
        assert.isAtMost(maxGap(frames.map((f) => f.at)), DEAD_MS)
        // Heartbeats are not starved by the traffic: wakes arrive before and after them.
        const firstHeartbeat = frames.findIndex((f) => f.tag === T.HEARTBEAT)
        assert.isTrue(frames.slice(firstHeartbeat).some((f) => f.tag === T.MESSAGE_AVAILABLE))
        const stats = yield* activeStats(node)
        assert.strictEqual(stats.messages_dropped, 0)
      })
  )
})

describe("interop: stats as upstream dashboards read them", () => {
  it.scopedLive("the active body has upstream's fields with upstream's meaning", () =>
    Effect.gen(function* () {
      const { node, port, upstream } = yield* pair({ config: quiet })
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.enabled, true)
      assert.strictEqual(stats.running, true)
      assert.strictEqual(stats.server_id, OUR_ID)
      assert.strictEqual(stats.transport, "tcp-mesh")
      assert.strictEqual(stats.port, port)
      assert.strictEqual(stats.peer_count, 1)
      assert.strictEqual(stats.peers.length, 1)
      const peer = stats.peers[0]!
      assert.strictEqual(peer.host, "127.0.0.1")
      assert.strictEqual(peer.port, upstream.port)
      assert.strictEqual(peer.connected, true)
      assert.strictEqual(peer.resolved, peer.connected)
      assert.strictEqual(peer.resolved_ip, "127.0.0.1")
      assert.strictEqual(stats.servers_alive, 1)
      assert.strictEqual(stats.servers_dead, 0)
      for (const key of ["messages_sent", "messages_received", "messages_dropped"] as const) {
        assert.isTrue(Number.isSafeInteger(stats[key]) && stats[key] >= 0, key)
      }
      assert.strictEqual(stats.handshake_failures, 0)
      assert.strictEqual(stats.signature_failures, stats.handshake_failures)
      assert.strictEqual(stats.sequence_rejections, 0)
      assert.strictEqual(stats.maintenance_mode, false)
      assert.strictEqual(stats.pop_maintenance_mode, false)
      // Upstream's key set, as its dashboards look the keys up (JSON round trip, as served).
      const body: unknown = JSON.parse(JSON.stringify(stats))
      for (const key of [
        "enabled",
        "running",
        "server_id",
        "transport",
        "port",
        "peer_count",
        "peers",
        "servers_alive",
        "servers_dead",
        "messages_sent",
        "messages_received",
        "messages_dropped",
        "handshake_failures",
        "signature_failures",
        "sequence_rejections",
        "maintenance_mode",
        "pop_maintenance_mode"
      ]) {
        assert.isTrue(Object.hasOwn(body as object, key), key)
      }
      const peerBody: unknown = (Reflect.get(body as object, "peers") as ReadonlyArray<unknown>)[0]
      for (const key of ["host", "port", "connected", "resolved", "resolved_ip"]) {
        assert.isTrue(Object.hasOwn(peerBody as object, key), key)
      }

      // The upstream replica goes away: the link is down, resolved_ip is null, last_resolved_ip kept.
      yield* upstream.close
      yield* eventually(Effect.map(activeStats(node), (s) => !s.peers[0]!.connected))
      const down = (yield* activeStats(node)).peers[0]!
      assert.strictEqual(down.resolved, false)
      assert.strictEqual(down.resolved_ip, null)
      assert.strictEqual(down.last_resolved_ip, "127.0.0.1")
      assert.strictEqual(JSON.parse(JSON.stringify(down)).resolved_ip, null)
    })
  )

  it.scopedLive("a health probe is not a handshake failure; a wrong secret is, as signature_failures", () =>
    Effect.gen(function* () {
      const { node, port } = yield* pair({ config: { ...quiet, authFailureDelay: Duration.millis(0) } })
      const before = yield* activeStats(node)
      yield* healthProbe(port)
      yield* eventually(
        Effect.map(activeStats(node), (s) => s.inbound.closed_silent === before.inbound.closed_silent + 1)
      )
      const probed = yield* activeStats(node)
      assert.strictEqual(probed.handshake_failures, before.handshake_failures)
      assert.strictEqual(probed.signature_failures, before.signature_failures)
      assert.deepStrictEqual(probed.rejections, before.rejections)

      const intruder = yield* dialUpstream({ port, serverId: "queen-intruder", secret: "wrong" })
      yield* eventually(
        Effect.map(activeStats(node), (s) => s.handshake_failures === before.handshake_failures + 1)
      )
      const refused = yield* activeStats(node)
      assert.strictEqual(refused.signature_failures, refused.handshake_failures)
      assert.strictEqual(refused.rejections.bad_mac, before.rejections.bad_mac + 1)
      assert.strictEqual(refused.sequence_rejections, 0)
      yield* eventually(Effect.sync(intruder.closed))
      assert.strictEqual(intruder.bytesFromNode(), 0)
    })
  )

  it.scopedLive("sent and received counts match between the two sides on a quiet link", () =>
    Effect.gen(function* () {
      const { node, upstream, link } = yield* pair({ config: quiet })
      const connection = upstream.connections.find((c) => c.serverId === OUR_ID)!
      // Upstream to us: a heartbeat, a wake, a later revision's frame.
      yield* link.send(T.HEARTBEAT, { server_id: UPSTREAM_ID })
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p0", tenant: "acme" })
      yield* link.send(T.LATER_OP, { op: "put", tenant: "acme", queue: "orders" })
      // Us to upstream: four frames.
      yield* node.mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: "acme" })
      yield* node.mesh.messageAvailableBatch([{ queue: "orders", partition: "p1", tenant: "acme" }])
      yield* node.mesh.queueConfigSet({ queue: "orders", tenant: "acme" })
      yield* node.mesh.setMaintenance(false)
      yield* eventually(
        Effect.map(
          activeStats(node),
          (s) =>
            s.messages_received === link.sent() &&
            s.messages_sent === connection.frames.length &&
            s.messages_sent === 4
        )
      )
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.messages_received, 3)
      assert.strictEqual(upstream.frames.length, 4)
      assert.strictEqual(stats.messages_dropped, 0)
      assert.strictEqual(stats.peers[0]!.written, stats.messages_sent)
    })
  )
})

describe("interop: non-default auth modes", () => {
  it.scopedLive("permissive: upstream's legacy HELLO is accepted both ways; the challenge it ignores", () =>
    Effect.gen(function* () {
      const { node, upstream, link } = yield* pair({
        config: { ...quiet, auth: "permissive", challengeWait: Duration.millis(50) }
      })
      const connection = upstream.connections.find((c) => c.serverId === OUR_ID)!
      // Our dialer got no challenge from upstream and sent a HELLO upstream verifies.
      assert.strictEqual(upstream.handshakeFailures(), 0)
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.inbound.legacy_accepted, 1)
      assert.strictEqual(stats.handshake_failures, 0)
      // Our listener wrote its challenge; upstream never reads it, and the link works regardless.
      assert.isAbove(link.bytesFromNode(), 0)
      yield* barrier(node, link)
      yield* node.mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: "acme" })
      yield* eventually(Effect.sync(() => ofTag(connection.frames, T.MESSAGE_AVAILABLE).length === 1))
      assert.deepStrictEqual(upstreamDispatch(connection.frames[0]!), [
        { kind: "message_available", queue: "orders", partition: "p0" }
      ])
    })
  )

  it.scopedLive("open mode (no secret): HELLOs carry an empty mac and are accepted both ways", () =>
    Effect.gen(function* () {
      const { node, upstream, link } = yield* pair({ secret: "", config: quiet })
      const connection = upstream.connections.find((c) => c.serverId === OUR_ID)!
      assert.strictEqual(Reflect.get(Object(connection.hello), "mac"), "")
      assert.strictEqual(link.hello.mac, "")
      assert.strictEqual((yield* activeStats(node)).handshake_failures, 0)
      yield* barrier(node, link)
      yield* node.mesh.setPopMaintenance(true)
      yield* eventually(Effect.sync(() => ofTag(connection.frames, T.POP_MAINTENANCE_MODE_SET).length === 1))
    })
  )
})
