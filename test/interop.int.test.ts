/**
 * Interop with upstream Queen replicas (issue "One cluster with upstream Queen replicas", item 7): a
 * queen-mesh node over real loopback TCP, spoken to exactly as the Rust server's `mesh.rs` speaks, in
 * both directions, at upstream's revision after 2719e64: `EPH_ADMIN` (tag 20), HELLO v2 (`http_addr`,
 * `eph_epoch`) and `eph_members`, group-scoped hot-list hints, UUID-only tenants, names of up to 255
 * characters, `messages_dropped` as queue-full drops. The upstream side is `fixtures/upstream.ts`,
 * written on `node:net` without any queen-mesh code, so these tests check the wire, not our codec
 * against itself.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  Duration,
  Effect,
  Fiber,
  Layer,
  Option,
  Redacted,
  References,
  Result,
  Stream,
  SubscriptionRef
} from "effect"
import * as EphemeralAdmin from "../src/EphemeralAdmin.js"
import type * as LocalWaker from "../src/LocalWaker.js"
import * as Membership from "../src/Membership.js"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import type { MeshEvent } from "../src/MeshEvent.js"
import type { ActiveStats } from "../src/MeshStats.js"
import {
  allConnected,
  eventually,
  freePort,
  hearsFrom,
  type Node,
  nodeFromContext
} from "./fixtures/cluster.js"
import { SECRET } from "./fixtures/secret.js"
import {
  dialUpstream,
  encodeFrame,
  healthProbe,
  listenUpstream,
  parseU64Hex,
  type Received,
  T,
  UPSTREAM_DEFAULT_TENANT,
  UPSTREAM_HTTP_ADDR,
  type UpstreamLink,
  type UpstreamListener,
  upstreamAdvert,
  upstreamDispatch,
  upstreamEphMembers,
  upstreamMac
} from "./fixtures/upstream.js"

const OUR_ID = "qm-node-1"
const UPSTREAM_ID = "queen-upstream-1"
/**
 * Our heartbeat interval where the test watches heartbeats; quiet links use an hour. The dead threshold
 * (ours, and upstream's as its model reads it) is far longer: a peer heard once stays alive through
 * whatever stall a busy machine puts between a HELLO and the assertion that reads it.
 */
const HEARTBEAT_MS = 100
const DEAD_MS = 10_000
const quiet = { heartbeatInterval: Duration.hours(1), deadThreshold: Duration.hours(2) }
/** What our node advertises in its HELLO: `http://127.0.0.1:7632`, boot epoch `00c0ffee`. */
const OUR_HTTP_PORT = 7632
const OUR_HTTP_ADDR = `http://127.0.0.1:${OUR_HTTP_PORT}`
const OUR_EPOCH = "00c0ffee"

/** Tenants are UUIDs on upstream's wire. */
const TENANT_A = "7f3c2b1a-0d4e-4f5a-9b8c-1234567890ab"
const TENANT_B = "0b6f9a52-3c1d-4e8f-a7b2-5d4c3b2a1f09"

/** Names at the limit, `VARCHAR(255)`: 255 characters of any script, and one over. */
const JA_255 = "名".repeat(255)
const EMOJI_255 = "🦀".repeat(255)
const JA_256 = "名".repeat(256)
const EMOJI_256 = "🦀".repeat(256)

interface Applied {
  readonly command: EphemeralAdmin.Command
  readonly from: string
}

/** Our node and what its host `EphemeralAdmin` was asked to apply. */
interface OurNode extends Node {
  readonly applied: ReadonlyArray<Applied>
}

/** Our node on 127.0.0.1, dialling `peers`, with a recording `EphemeralAdmin`, in the current scope. */
const ourNode = (options: {
  readonly port: number
  readonly peers: ReadonlyArray<number>
  readonly config?: Partial<MeshConfig.MeshConfigShape>
  readonly waker?: LocalWaker.LocalWakerOptions
  readonly secret?: string
}) =>
  Effect.gen(function* () {
    const applied: Array<Applied> = []
    const admin = EphemeralAdmin.layer((command, from) => Effect.sync(() => applied.push({ command, from })))
    const config = MeshConfig.layer({
      serverId: OUR_ID,
      port: options.port,
      bindHost: "127.0.0.1",
      peers: options.peers.map((port) => ({ host: "127.0.0.1", port })),
      secret: Redacted.make(options.secret ?? SECRET),
      heartbeatInterval: Duration.millis(HEARTBEAT_MS),
      deadThreshold: Duration.millis(DEAD_MS),
      advertiseHost: "127.0.0.1",
      httpPort: OUR_HTTP_PORT,
      ephEpoch: OUR_EPOCH,
      ...options.config
    })
    const context = yield* Layer.build(
      Mesh.layerTcp(options.waker === undefined ? {} : { waker: options.waker }).pipe(
        Layer.provide(Layer.merge(config, admin))
      )
    ).pipe(Effect.provideService(References.MinimumLogLevel, "Error"))
    const node: OurNode = { ...nodeFromContext(context), applied }
    return node
  })

interface Pair {
  readonly node: OurNode
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
    readonly waker?: LocalWaker.LocalWakerOptions
    /** Upstream's HELLO fields over its defaults; `undefined` leaves one out. */
    readonly hello?: Readonly<Record<string, unknown>>
    /** `false`: upstream's HELLO as at 2719e64, without `http_addr` and `eph_epoch`. */
    readonly advertise?: boolean
    /** Shared by both sides; `""` is open mode. */
    readonly secret?: string
  } = {}
) =>
  Effect.gen(function* () {
    const secret = options.secret ?? SECRET
    const upstream = yield* listenUpstream({ secret, serverId: UPSTREAM_ID })
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
      ...(options.hello === undefined ? {} : { hello: options.hello }),
      ...(options.advertise === undefined ? {} : { advertise: options.advertise })
    })
    yield* eventually(hearsFrom(node, 1))
    yield* eventually(allConnected(node))
    yield* eventually(Effect.sync(() => upstream.connections.some((c) => c.serverId === OUR_ID)))
    return { node, port, upstream, link } satisfies Pair
  })

const activeStats = (node: Node): Effect.Effect<ActiveStats> =>
  Effect.flatMap(node.mesh.stats, (stats) =>
    stats.enabled ? Effect.succeed(stats) : Effect.die(new Error("the mesh is not active"))
  )

/** Our `eph_members` list in upstream's printed shape, to compare with upstream's. */
const ourEphMembers = (node: Node) =>
  Effect.map(node.mesh.members, (members) =>
    Membership.ephemeralMembers(members).map((m) => ({
      server_id: m.serverId,
      http_addr: m.httpAddr,
      epoch: m.epoch
    }))
  )

/** Parks a pop on `queue` for `tenant`, returning once it is registered. */
const park = (node: Node, queue: string, tenant: Option.Option<string>) =>
  Effect.gen(function* () {
    const before = yield* node.waker.parked
    // Started at once, so the pop is parked before a wake in flight for another pop can change the
    // count (effect 4 runs a forked fiber later than effect 3 did).
    const fiber = yield* Effect.forkChild(
      node.waker.awaitWake({ queue, tenant }, { maxWait: "10 seconds" }),
      {
        startImmediately: true
      }
    )
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
    const fiber = yield* park(node, queue, Option.some(TENANT_A))
    yield* link.send(T.MESSAGE_AVAILABLE, { queue, partition: "", tenant: TENANT_A })
    assert.strictEqual(yield* Fiber.join(fiber), "woken")
  })

const stillParked = <A, E>(fiber: Fiber.Fiber<A, E>) => Effect.sync(() => fiber.pollUnsafe() === undefined)

/** Every event of `node` from now on, collected in the returned array. */
const collectEvents = (node: Node) =>
  Effect.gen(function* () {
    const seen: Array<MeshEvent> = []
    yield* Effect.forkScoped(
      Stream.runForEach(node.mesh.events, (event) => Effect.sync(() => seen.push(event)))
    )
    // Let the collector subscribe before anything it should see happens.
    yield* Effect.yieldNow
    return seen
  })

const ofTag = (frames: ReadonlyArray<Received>, tag: number) => frames.filter((frame) => frame.tag === tag)

/** The connection our node dialled to `upstream`. */
const ourConnection = (upstream: UpstreamListener) => {
  const connection = upstream.connections.find((c) => c.serverId === OUR_ID)
  if (connection === undefined) throw new Error("our node has not dialled the upstream listener")
  return connection
}

/** A field of a parsed JSON payload, without a cast. */
const get = (v: unknown, key: string): unknown =>
  typeof v === "object" && v !== null ? Reflect.get(v, key) : undefined

const itemsOf = (frame: Received): ReadonlyArray<unknown> => {
  const list = get(frame.json, "items")
  return Array.isArray(list) ? list : [frame.json]
}

const maxGap = (times: ReadonlyArray<number>) => {
  let gap = 0
  for (let i = 1; i < times.length; i++) gap = Math.max(gap, times[i]! - times[i - 1]!)
  return gap
}

/** The error of a refused API call (the call must fail). */
const refusal = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.result(effect), (result) => {
    assert.isTrue(Result.isFailure(result), "the call should have been refused")
    return Result.isFailure(result) ? result.failure : undefined
  })

/**
 * An API function as an untyped caller (JavaScript, a decoded JSON line) reaches it: any input. The
 * cast only widens the parameter; what the function does with the input is the point of the test.
 */
const loosely =
  (f: (input: never) => Effect.Effect<void, unknown>) =>
  (input: unknown): Effect.Effect<void, unknown> =>
    Effect.suspend(() => (f as (input: unknown) => Effect.Effect<void, unknown>)(input))

/** Asserts `effect` is refused with `InvalidInputError` whose detail matches `detail`. */
const refusedInput = <A, E>(effect: Effect.Effect<A, E>, detail: RegExp) =>
  Effect.map(refusal(effect), (error) => {
    assert.strictEqual(get(error, "_tag"), "InvalidInputError")
    assert.match(String(get(error, "detail")), detail)
  })

describe("interop: an upstream Queen replica dials us", () => {
  it.live("HELLO v2: http_addr and eph_epoch are read, the replica is ephemeral-capable", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair({ hello: { http_addr: "http://10.0.0.7:6632", eph_epoch: "1f" } })
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.handshake_failures, 0)
      assert.strictEqual(stats.inbound.authenticated, 1)
      assert.deepStrictEqual(
        stats.servers.map((s) => [s.server_id, s.alive]),
        [[UPSTREAM_ID, true]]
      )
      const heard = (yield* node.mesh.members).flatMap((m) =>
        Option.isSome(m.heard) && Option.getOrUndefined(m.serverId) === UPSTREAM_ID ? [m.heard.value] : []
      )
      assert.strictEqual(heard.length, 1)
      assert.deepStrictEqual(heard[0]!.httpAddr, Option.some("http://10.0.0.7:6632"))
      assert.deepStrictEqual(heard[0]!.ephEpoch, Option.some("1f"))
      assert.isTrue(heard[0]!.ephemeralCapable)
      assert.strictEqual(stats.eph_members, 1)
      assert.deepStrictEqual(yield* ourEphMembers(node), [
        { server_id: UPSTREAM_ID, http_addr: "http://10.0.0.7:6632", epoch: "1f" }
      ])
      // The link works: a wake over it applies.
      yield* barrier(node, link)
      // Legacy auth: our node writes nothing on an inbound link (upstream never reads it).
      assert.strictEqual(link.bytesFromNode(), 0)
      assert.isFalse(link.closed())
    })
  )

  it.live("a HELLO as at 2719e64 (no http_addr, no eph_epoch) is accepted; not ephemeral-capable", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair({ advertise: false })
      assert.isFalse(Object.hasOwn(link.hello, "http_addr") || Object.hasOwn(link.hello, "eph_epoch"))
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.handshake_failures, 0)
      assert.strictEqual(stats.servers_alive, 1)
      assert.strictEqual(stats.eph_members, 0)
      yield* barrier(node, link)
    })
  )

  it.live("the default tenant's UUID wakes pops parked for the default tenant, and only them", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      const absent = yield* park(node, "orders", Option.none())
      const named = yield* park(node, "orders", Option.some(UPSTREAM_DEFAULT_TENANT))
      const other = yield* park(node, "orders", Option.some(TENANT_B))
      yield* link.send(T.MESSAGE_AVAILABLE, {
        queue: "orders",
        partition: "p0",
        tenant: UPSTREAM_DEFAULT_TENANT
      })
      assert.strictEqual(yield* Fiber.join(absent), "woken")
      assert.strictEqual(yield* Fiber.join(named), "woken")
      yield* barrier(node, link)
      assert.isTrue(yield* stillParked(other))
      assert.deepStrictEqual(
        yield* node.waker.takePartitionHints({ queue: "orders", tenant: Option.none() }),
        ["p0"]
      )
      yield* Fiber.interrupt(other)
    })
  )

  it.live("with tenancy off, an absent-tenant pop is woken by the default tenant's UUID", () =>
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

  it.live(
    "UUID tenants: an upper-case UUID is the lowercase tenant; a tenant like acme reads as absent and wakes every tenant's pops",
    () =>
      Effect.gen(function* () {
        const { node, link } = yield* pair()
        const events = yield* collectEvents(node)
        const lower = yield* park(node, "orders", Option.some(TENANT_A))
        const other = yield* park(node, "orders", Option.some(TENANT_B))
        yield* link.send(T.MESSAGE_AVAILABLE, {
          queue: "orders",
          partition: "p1",
          tenant: TENANT_A.toUpperCase()
        })
        assert.strictEqual(yield* Fiber.join(lower), "woken")
        assert.deepStrictEqual(
          yield* node.waker.takePartitionHints({ queue: "orders", tenant: Option.some(TENANT_A) }),
          ["p1"]
        )
        yield* barrier(node, link)
        assert.isTrue(yield* stillParked(other))

        // Not a UUID: upstream's frame_tenant reads it as absent, so every tenant's pops wake.
        const a = yield* park(node, "orders", Option.some(TENANT_A))
        const absent = yield* park(node, "orders", Option.none())
        yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p2", tenant: "acme" })
        assert.strictEqual(yield* Fiber.join(a), "woken")
        assert.strictEqual(yield* Fiber.join(other), "woken")
        assert.strictEqual(yield* Fiber.join(absent), "woken")
        // In a batch too, item by item, and on the hot-list.
        const b = yield* park(node, "batched", Option.some(TENANT_B))
        yield* link.send(T.MESSAGE_AVAILABLE_BATCH, {
          items: [{ queue: "batched", partition: "x", tenant: "ACME" }]
        })
        assert.strictEqual(yield* Fiber.join(b), "woken")
        yield* link.send(T.HOTLIST_DIRTY_BATCH, { items: [{ queue: "h", partition: "", tenant: "acme" }] })
        yield* barrier(node, link)
        assert.deepStrictEqual(yield* node.hotList.take, [
          { queue: "h", partition: "", tenant: Option.none(), group: Option.none() }
        ])
        assert.deepStrictEqual(
          events.flatMap((e) =>
            e._tag === "Wake" && e.item.queue === "orders" ? [[e.item.partition, e.item.tenant]] : []
          ),
          [
            ["p1", Option.some(TENANT_A)],
            ["p2", Option.none()]
          ]
        )
        const stats = yield* activeStats(node)
        assert.strictEqual(stats.frames_invalid, 0)
        assert.strictEqual(stats.items_invalid, 0)
      })
  )

  it.live(
    "a tenant that is not a string, or is over 255 characters, reads as absent: every tenant's pops wake, nothing is invalid",
    () =>
      Effect.gen(function* () {
        const { node, link } = yield* pair()
        for (const tenant of [7, {}, ["x"], true, "t".repeat(256)]) {
          const a = yield* park(node, "odd", Option.some(TENANT_A))
          const absent = yield* park(node, "odd", Option.none())
          yield* link.send(T.MESSAGE_AVAILABLE, { queue: "odd", partition: "p", tenant })
          assert.strictEqual(yield* Fiber.join(a), "woken")
          assert.strictEqual(yield* Fiber.join(absent), "woken")
          const b = yield* park(node, "odd-batch", Option.some(TENANT_B))
          yield* link.send(T.MESSAGE_AVAILABLE_BATCH, {
            items: [{ queue: "odd-batch", partition: "p", tenant }]
          })
          assert.strictEqual(yield* Fiber.join(b), "woken")
        }
        const stats = yield* activeStats(node)
        assert.strictEqual(stats.frames_invalid, 0)
        assert.strictEqual(stats.items_invalid, 0)
      })
  )

  it.live('with tenants: "any", a tenant like acme is kept as given (the old behaviour)', () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair({ config: { tenants: "any" } })
      const acme = yield* park(node, "orders", Option.some("acme"))
      const upper = yield* park(node, "orders", Option.some("ACME"))
      const uuid = yield* park(node, "orders", Option.some(TENANT_A))
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p2", tenant: "acme" })
      assert.strictEqual(yield* Fiber.join(acme), "woken")
      yield* barrier(node, link)
      // Compared as given: "ACME" is another tenant, and so is every UUID.
      assert.isTrue(yield* stillParked(upper))
      assert.isTrue(yield* stillParked(uuid))
      yield* link.send(T.MESSAGE_AVAILABLE, {
        queue: "orders",
        partition: "p3",
        tenant: TENANT_A.toUpperCase()
      })
      assert.strictEqual(yield* Fiber.join(uuid), "woken")
      yield* Fiber.interrupt(upper)
      // Our API takes any tenant in this mode.
      yield* node.mesh.messageAvailable({ queue: "orders", partition: "p4", tenant: "acme" })
    })
  )

  it.live("a batch with an empty-queue item applies the others and counts one invalid item", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      const a = yield* park(node, "a", Option.some(TENANT_A))
      const b = yield* park(node, "b", Option.some(UPSTREAM_DEFAULT_TENANT))
      const before = yield* activeStats(node)
      yield* link.send(T.MESSAGE_AVAILABLE_BATCH, {
        items: [
          { queue: "a", partition: "0", tenant: TENANT_A },
          { queue: "", partition: "1", tenant: TENANT_A },
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
          { queue: "", partition: "x", tenant: TENANT_A },
          { queue: "h", tenant: TENANT_A }
        ]
      })
      yield* barrier(node, link)
      assert.deepStrictEqual(yield* node.hotList.pending, [
        { queue: "h", partition: "", tenant: Option.some(TENANT_A), group: Option.none() }
      ])
      assert.strictEqual((yield* activeStats(node)).items_invalid - before.items_invalid, 2)
    })
  )

  it.live('a missing partition is "": the wake happens and the hint is ""', () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      const pop = yield* park(node, "orders", Option.some(TENANT_A))
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", tenant: TENANT_A })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      assert.deepStrictEqual(
        yield* node.waker.takePartitionHints({ queue: "orders", tenant: Option.some(TENANT_A) }),
        [""]
      )
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.frames_invalid, 0)
      assert.strictEqual(stats.items_invalid, 0)
    })
  )

  it.live("heartbeats with server_id refresh liveness: dead after silence, alive again on one", () =>
    Effect.gen(function* () {
      const upstream = yield* listenUpstream({ secret: SECRET })
      const port = yield* freePort
      const node = yield* ourNode({
        port,
        peers: [upstream.port],
        // The link stays open while the peer is dead: an idle timeout longer than the threshold.
        config: { deadThreshold: Duration.seconds(3), idleTimeout: Duration.seconds(15) }
      })
      const events = yield* collectEvents(node)
      const link = yield* dialUpstream({ port, serverId: UPSTREAM_ID, secret: SECRET })
      const ups = () => events.filter((e) => e._tag === "PeerUp" && e.serverId === UPSTREAM_ID).length
      const downs = () => events.filter((e) => e._tag === "PeerDown" && e.serverId === UPSTREAM_ID).length
      // The HELLO counts as hearing from it.
      yield* eventually(hearsFrom(node, 1))
      assert.strictEqual((yield* activeStats(node)).eph_members, 1)
      // Silence past the dead threshold: dead (the link stays open), and no longer an ephemeral member.
      yield* eventually(Effect.map(activeStats(node), (s) => s.servers_dead === 1 && s.servers_alive === 0))
      yield* eventually(Effect.sync(() => downs() === 1))
      const upsWhileDead = ups()
      assert.isFalse(link.closed())
      assert.strictEqual((yield* activeStats(node)).eph_members, 0)
      assert.deepStrictEqual(yield* ourEphMembers(node), [])
      // One upstream heartbeat brings it back, as an ephemeral member too (the HELLO's advert is kept).
      yield* link.send(T.HEARTBEAT, { server_id: UPSTREAM_ID })
      yield* eventually(Effect.map(activeStats(node), (s) => s.servers_alive === 1 && s.servers_dead === 0))
      yield* eventually(Effect.sync(() => ups() === upsWhileDead + 1))
      assert.strictEqual((yield* activeStats(node)).eph_members, 1)
      // Upstream's heartbeat every interval keeps it alive across two dead thresholds (the margin is
      // wide: only an event-loop stall of almost three seconds could let the monitor run first).
      yield* link.startHeartbeats(100)
      const sentBefore = link.sent()
      yield* eventually(Effect.sync(() => link.sent() - sentBefore >= 60))
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

  it.live("EPH_ADMIN (tag 20): every op is applied to the host's EphemeralAdmin, published and counted", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      const events = yield* collectEvents(node)
      yield* link.send(T.EPH_ADMIN, { op: "reset", tenant: TENANT_A, queue: "tmp-1" })
      yield* link.send(T.EPH_ADMIN, { op: "delete", tenant: TENANT_B.toUpperCase(), queue: "tmp-2" })
      yield* link.send(T.EPH_ADMIN, { op: "config_set", tenant: UPSTREAM_DEFAULT_TENANT, queue: JA_255 })
      // Extra fields a later revision may add are ignored.
      yield* link.send(T.EPH_ADMIN, { op: "reset", tenant: TENANT_A, queue: "tmp-1", partition: "p0" })
      yield* barrier(node, link)
      const expected = [
        { op: "reset", tenant: TENANT_A, queue: "tmp-1" },
        { op: "delete", tenant: TENANT_B, queue: "tmp-2" },
        { op: "config_set", tenant: UPSTREAM_DEFAULT_TENANT, queue: JA_255 },
        { op: "reset", tenant: TENANT_A, queue: "tmp-1" }
      ] as const
      assert.deepStrictEqual(
        node.applied,
        expected.map((command) => ({ command, from: UPSTREAM_ID }))
      )
      assert.deepStrictEqual(
        events.filter((e) => e._tag === "EphAdmin"),
        expected.map((command) => ({ _tag: "EphAdmin" as const, from: UPSTREAM_ID, ...command }))
      )
      const stats = yield* activeStats(node)
      assert.deepStrictEqual(stats.eph_admin.received, { reset: 2, delete: 1, config_set: 1 })
      assert.deepStrictEqual(stats.eph_admin.sent, { reset: 0, delete: 0, config_set: 0 })
      assert.strictEqual(stats.frames_unknown, 0)
      assert.strictEqual(stats.frames_invalid, 0)
      // Nothing else is touched: no wake, no hot-list mark, no cache entry dropped.
      assert.deepStrictEqual(yield* node.hotList.pending, [])
      assert.isFalse(link.closed())
    })
  )

  it.live(
    "EPH_ADMIN refusals: each is counted in frames_invalid, applies nothing, and the link stays open",
    () =>
      Effect.gen(function* () {
        const { node, link } = yield* pair()
        const events = yield* collectEvents(node)
        // What upstream drops whole: op or queue missing or empty; the tenant absent or not a UUID
        // (a destructive verb is never broadened to every tenant holding the queue name).
        const droppedByUpstream: ReadonlyArray<unknown> = [
          { tenant: TENANT_A, queue: "tmp" },
          { op: "", tenant: TENANT_A, queue: "tmp" },
          { op: 5, tenant: TENANT_A, queue: "tmp" },
          { op: "reset", tenant: TENANT_A },
          { op: "reset", tenant: TENANT_A, queue: "" },
          { op: "reset", tenant: TENANT_A, queue: null },
          { op: "reset", queue: "tmp" },
          { op: "reset", tenant: "", queue: "tmp" },
          { op: "reset", tenant: null, queue: "tmp" },
          { op: "reset", tenant: "acme", queue: "tmp" },
          { op: "reset", tenant: `${TENANT_A}0`, queue: "tmp" },
          { op: "reset", tenant: 7, queue: "tmp" },
          [],
          "reset"
        ]
        for (const payload of droppedByUpstream) {
          assert.deepStrictEqual(
            upstreamDispatch({ tag: T.EPH_ADMIN, payload: Buffer.alloc(0), json: payload, at: 0 }),
            [{ kind: "ignored", tag: T.EPH_ADMIN }],
            JSON.stringify(payload)
          )
        }
        // Refused by ours beyond that: an op upstream does not define (its dispatch hands it to a handler
        // that does nothing with it; ours never lets it reach the host), a queue over 255 characters, a
        // payload that is not JSON or is empty.
        const refusedByUs: ReadonlyArray<unknown> = [
          { op: "put", tenant: TENANT_A, queue: "tmp" },
          { op: "RESET", tenant: TENANT_A, queue: "tmp" },
          { op: "reset", tenant: TENANT_A, queue: EMOJI_256 }
        ]
        assert.deepStrictEqual(
          upstreamDispatch({ tag: T.EPH_ADMIN, payload: Buffer.alloc(0), json: refusedByUs[0], at: 0 }),
          [{ kind: "eph_admin", op: "put", tenant: TENANT_A, queue: "tmp" }]
        )
        for (const payload of [...droppedByUpstream, ...refusedByUs]) yield* link.send(T.EPH_ADMIN, payload)
        yield* link.send(T.EPH_ADMIN, Buffer.from("not json"))
        yield* link.send(T.EPH_ADMIN)
        yield* barrier(node, link)
        const stats = yield* activeStats(node)
        assert.strictEqual(stats.frames_invalid, droppedByUpstream.length + refusedByUs.length + 2)
        assert.strictEqual(stats.frames_unknown, 0)
        assert.deepStrictEqual(stats.eph_admin.received, { reset: 0, delete: 0, config_set: 0 })
        assert.deepStrictEqual(node.applied, [])
        assert.deepStrictEqual(
          events.filter((e) => e._tag === "EphAdmin"),
          []
        )
        // The link survived every one of them and still carries a valid verb.
        assert.isFalse(link.closed())
        assert.strictEqual(stats.inbound.authenticated, 1)
        yield* link.send(T.EPH_ADMIN, { op: "delete", tenant: TENANT_A, queue: "tmp" })
        yield* eventually(Effect.sync(() => node.applied.length === 1))
        assert.deepStrictEqual(node.applied, [
          { command: { op: "delete", tenant: TENANT_A, queue: "tmp" }, from: UPSTREAM_ID }
        ])
      })
  )

  it.live(
    "group-scoped hot-list hints: a non-empty group scopes the mark; absent, empty or not a string marks every ring",
    () =>
      Effect.gen(function* () {
        const { node, link } = yield* pair()
        const events = yield* collectEvents(node)
        const items: ReadonlyArray<Record<string, unknown>> = [
          { queue: "h", partition: "p0", tenant: TENANT_A, group: "billing" },
          // The unscoped mark of the same partition is a different hint: every ring of the queue.
          { queue: "h", partition: "p0", tenant: TENANT_A },
          { queue: "h", partition: "p1", tenant: TENANT_A, group: "" },
          { queue: "h", partition: "p2", tenant: TENANT_A, group: 7 },
          { queue: "h", partition: "p3", tenant: TENANT_A, group: null },
          { queue: "h", partition: "p4", tenant: TENANT_A, group: ["billing"] },
          { queue: "h", partition: "p5", group: EMOJI_255 },
          { queue: "h", partition: "p6", tenant: TENANT_A, group: JA_255 }
        ]
        yield* link.send(T.HOTLIST_DIRTY_BATCH, { items })
        // Duplicates in a later frame are the same hints (marking is idempotent).
        yield* link.send(T.HOTLIST_DIRTY_BATCH, {
          items: [
            { queue: "h", partition: "p0", tenant: TENANT_A.toUpperCase(), group: "billing" },
            { queue: "h", partition: "p0", tenant: TENANT_A, group: "" }
          ]
        })
        yield* barrier(node, link)
        const scoped = (partition: string, tenant: Option.Option<string>, group: Option.Option<string>) => ({
          queue: "h",
          partition,
          tenant,
          group
        })
        const a = Option.some(TENANT_A)
        const expected = [
          scoped("p0", a, Option.some("billing")),
          scoped("p0", a, Option.none()),
          scoped("p1", a, Option.none()),
          scoped("p2", a, Option.none()),
          scoped("p3", a, Option.none()),
          scoped("p4", a, Option.none()),
          scoped("p5", Option.none(), Option.some(EMOJI_255)),
          scoped("p6", a, Option.some(JA_255))
        ]
        assert.deepStrictEqual(yield* node.hotList.take, expected)
        // The events carry the scope of each item, duplicates included.
        assert.deepStrictEqual(
          events.flatMap((e) => (e._tag === "HotlistDirty" ? [e.item] : [])),
          [...expected, scoped("p0", a, Option.some("billing")), scoped("p0", a, Option.none())]
        )
        // Upstream reads the same items to the same scopes.
        assert.deepStrictEqual(
          upstreamDispatch({
            tag: T.HOTLIST_DIRTY_BATCH,
            payload: Buffer.alloc(0),
            json: { items },
            at: 0
          }).map((e) => (e.kind === "hotlist_dirty" ? [e.partition, e.tenant, e.group] : e.kind)),
          expected.map((x) => [x.partition, Option.getOrNull(x.tenant), Option.getOrNull(x.group)])
        )
        const stats = yield* activeStats(node)
        assert.strictEqual(stats.items_invalid, 0)
        assert.strictEqual(stats.frames_invalid, 0)
      })
  )

  it.live("names of 255 characters in any script apply; 256 are skipped and counted", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      assert.strictEqual(Buffer.byteLength(EMOJI_255), 1020)
      const ja = yield* park(node, JA_255, Option.some(TENANT_A))
      const emoji = yield* park(node, EMOJI_255, Option.some(TENANT_A))
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: JA_255, partition: EMOJI_255, tenant: TENANT_A })
      yield* link.send(T.MESSAGE_AVAILABLE_BATCH, {
        items: [{ queue: EMOJI_255, partition: JA_255, tenant: TENANT_A }]
      })
      assert.strictEqual(yield* Fiber.join(ja), "woken")
      assert.strictEqual(yield* Fiber.join(emoji), "woken")
      assert.deepStrictEqual(
        yield* node.waker.takePartitionHints({ queue: JA_255, tenant: Option.some(TENANT_A) }),
        [EMOJI_255]
      )
      yield* link.send(T.HOTLIST_DIRTY_BATCH, {
        items: [{ queue: EMOJI_255, partition: EMOJI_255, tenant: TENANT_A, group: EMOJI_255 }]
      })
      yield* link.send(T.QUEUE_CONFIG_SET, { queue: EMOJI_255, tenant: TENANT_A })
      const settings = { leaseTimeSeconds: 30, encrypted: false }
      yield* node.cache.set({ queue: JA_255, tenant: Option.some(TENANT_A) }, settings)
      yield* link.send(T.QUEUE_CONFIG_DELETE, { queue: JA_255, tenant: TENANT_A })
      yield* eventually(Effect.map(node.cache.size, (n) => n === 0))
      yield* barrier(node, link)
      assert.deepStrictEqual(yield* node.hotList.take, [
        {
          queue: EMOJI_255,
          partition: EMOJI_255,
          tenant: Option.some(TENANT_A),
          group: Option.some(EMOJI_255)
        }
      ])
      const clean = yield* activeStats(node)
      assert.strictEqual(clean.frames_invalid, 0)
      assert.strictEqual(clean.items_invalid, 0)

      // One character over: a single-item frame is skipped whole, a batch item alone.
      const over = yield* park(node, "over", Option.some(TENANT_A))
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: JA_256, partition: "", tenant: TENANT_A })
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "over", partition: EMOJI_256, tenant: TENANT_A })
      yield* link.send(T.QUEUE_CONFIG_SET, { queue: EMOJI_256, tenant: TENANT_A })
      yield* link.send(T.MESSAGE_AVAILABLE_BATCH, {
        items: [
          { queue: EMOJI_256, partition: "", tenant: TENANT_A },
          { queue: "over", partition: JA_256, tenant: TENANT_A },
          { queue: "kept", partition: "", tenant: TENANT_A }
        ]
      })
      yield* link.send(T.HOTLIST_DIRTY_BATCH, {
        items: [
          { queue: JA_256, partition: "", tenant: TENANT_A },
          { queue: "kept", partition: EMOJI_256, tenant: TENANT_A },
          { queue: "kept", partition: "", tenant: TENANT_A }
        ]
      })
      yield* barrier(node, link)
      assert.isTrue(yield* stillParked(over))
      assert.deepStrictEqual(yield* node.hotList.pending, [
        { queue: "kept", partition: "", tenant: Option.some(TENANT_A), group: Option.none() }
      ])
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.frames_invalid, 3)
      assert.strictEqual(stats.items_invalid, 4)
      assert.isFalse(link.closed())
      yield* Fiber.interrupt(over)
    })
  )

  it.live("QUEUE_CONFIG_SET with the default tenant's UUID drops the default tenant's entry", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair()
      const settings = { leaseTimeSeconds: 30, encrypted: false }
      const byDefault = { queue: "orders", tenant: Option.none<string>() }
      const byB = { queue: "orders", tenant: Option.some(TENANT_B) }
      yield* node.cache.set(byDefault, settings)
      yield* node.cache.set(byB, settings)
      yield* link.send(T.QUEUE_CONFIG_SET, { queue: "orders", tenant: UPSTREAM_DEFAULT_TENANT })
      yield* eventually(Effect.map(node.cache.get(byDefault), Option.isNone))
      assert.isTrue(Option.isSome(yield* node.cache.get(byB)))
      yield* link.send(T.QUEUE_CONFIG_DELETE, { queue: "orders", tenant: TENANT_B })
      yield* eventually(Effect.map(node.cache.size, (n) => n === 0))
      // A UUID tenant in upper case names the same entry.
      yield* node.cache.set({ queue: "orders", tenant: Option.some(TENANT_A) }, settings)
      yield* link.send(T.QUEUE_CONFIG_SET, { queue: "orders", tenant: TENANT_A.toUpperCase() })
      yield* eventually(Effect.map(node.cache.size, (n) => n === 0))
      // A tenant that is not a UUID reads as absent: the queue's entry is dropped for every tenant.
      yield* node.cache.set({ queue: "orders", tenant: Option.some(TENANT_A) }, settings)
      yield* node.cache.set(byB, settings)
      yield* node.cache.set({ queue: "other", tenant: Option.some(TENANT_A) }, settings)
      yield* link.send(T.QUEUE_CONFIG_DELETE, { queue: "orders", tenant: "acme" })
      yield* eventually(Effect.map(node.cache.size, (n) => n === 1))
      assert.isTrue(Option.isSome(yield* node.cache.get({ queue: "other", tenant: Option.some(TENANT_A) })))
    })
  )

  it.live("frames written in the same segment as the HELLO are applied", () =>
    Effect.gen(function* () {
      const upstream = yield* listenUpstream({ secret: SECRET })
      const port = yield* freePort
      const node = yield* ourNode({ port, peers: [upstream.port], config: quiet })
      const pop = yield* park(node, "orders", Option.some(TENANT_A))
      yield* dialUpstream({
        port,
        serverId: UPSTREAM_ID,
        secret: SECRET,
        afterHello: [
          encodeFrame(T.HEARTBEAT, { server_id: UPSTREAM_ID }),
          encodeFrame(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p9", tenant: TENANT_A })
        ]
      })
      assert.strictEqual(yield* Fiber.join(pop), "woken")
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.messages_received, 2)
      assert.strictEqual(stats.frames_dispatched, 2)
    })
  )

  it.live("a large upstream batch (20,000 items) is applied whole", () =>
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

  it.live("maintenance and pop-maintenance flip both ways", () =>
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

  it.live("messages_received counts every frame after the HELLO, unknown and invalid included", () =>
    Effect.gen(function* () {
      const { node, link } = yield* pair({ config: quiet })
      yield* link.send(T.HEARTBEAT, { server_id: UPSTREAM_ID })
      // The spec's heartbeat has no payload at all.
      yield* link.send(T.HEARTBEAT)
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p0", tenant: TENANT_A })
      yield* link.send(T.EPH_ADMIN, { op: "reset", tenant: TENANT_A, queue: "tmp" })
      // A tag no revision of upstream defines: skipped, the link kept.
      yield* link.send(99, { op: "put", tenant: TENANT_A, queue: "orders" })
      // Invalid: an empty queue, a payload that is not JSON, an EPH_ADMIN without a UUID tenant.
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "", partition: "p0", tenant: TENANT_A })
      yield* link.send(T.MAINTENANCE_MODE_SET, Buffer.from("not json"))
      yield* link.send(T.EPH_ADMIN, { op: "reset", tenant: "acme", queue: "tmp" })
      // Oversized for its tag: skipped unbuffered, still a frame read.
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "q".repeat(20_000), partition: "", tenant: TENANT_A })
      yield* link.send(T.MESSAGE_AVAILABLE_BATCH, { items: [{ queue: "a", tenant: TENANT_A }, { queue: 7 }] })
      // Several frames in one write, and one frame split across writes.
      const split = encodeFrame(T.MESSAGE_AVAILABLE, { queue: "b", partition: "", tenant: TENANT_A })
      yield* link.sendRaw(Buffer.concat([encodeFrame(T.HEARTBEAT), split.subarray(0, 7)]))
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
      assert.strictEqual(stats.frames_invalid, 3)
      assert.strictEqual(stats.frames_oversized, 1)
      assert.strictEqual(stats.items_invalid, 1)
      assert.strictEqual(stats.handshake_failures, 0)
      assert.deepStrictEqual(stats.eph_admin.received, { reset: 1, delete: 0, config_set: 0 })
      assert.isFalse(link.closed())
      assert.strictEqual(link.bytesFromNode(), 0)
    })
  )
})

describe("interop: we dial an upstream Queen replica", () => {
  it.live(
    "our HELLO verifies by upstream's rule and carries http_addr and eph_epoch; heartbeats carry server_id every interval",
    () =>
      Effect.gen(function* () {
        const { upstream } = yield* pair()
        const connection = ourConnection(upstream)
        assert.strictEqual(upstream.handshakeFailures(), 0)
        const hello = connection.hello
        const nonce = get(hello, "nonce")
        assert.isTrue(typeof nonce === "string" && /^[0-9a-f]{32}$/.test(nonce))
        assert.strictEqual(get(hello, "mac"), upstreamMac(SECRET, String(nonce)))
        assert.strictEqual(get(hello, "server_id"), OUR_ID)
        // HELLO v2: `http://<advertise host>:<PORT>` and the boot epoch, which upstream parses.
        assert.strictEqual(get(hello, "http_addr"), OUR_HTTP_ADDR)
        assert.strictEqual(get(hello, "eph_epoch"), OUR_EPOCH)
        assert.deepStrictEqual(upstreamAdvert(hello), { httpAddr: OUR_HTTP_ADDR, epoch: 0xc0ffeen })

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

  it.live(
    'the default epoch is a u64 printed as upstream prints it; advertiseHost "" sends neither field',
    () =>
      Effect.gen(function* () {
        assert.match(MeshConfig.processEpoch, /^(?:0|[1-9a-f][0-9a-f]{0,15})$/)
        const upstream = yield* listenUpstream({ secret: SECRET })
        yield* ourNode({
          port: yield* freePort,
          peers: [upstream.port],
          config: { ...quiet, ephEpoch: MeshConfig.processEpoch, httpPort: 6632 }
        })
        yield* eventually(Effect.sync(() => upstream.hellos.has(OUR_ID)))
        assert.deepStrictEqual(upstream.ephMembers(DEAD_MS), [
          {
            server_id: OUR_ID,
            http_addr: "http://127.0.0.1:6632",
            epoch: MeshConfig.processEpoch
          }
        ])

        const bare = yield* listenUpstream({ secret: SECRET })
        yield* ourNode({ port: yield* freePort, peers: [bare.port], config: { ...quiet, advertiseHost: "" } })
        yield* eventually(Effect.sync(() => bare.hellos.has(OUR_ID)))
        const hello = bare.hellos.get(OUR_ID)
        assert.isUndefined(get(hello, "http_addr"))
        assert.isUndefined(get(hello, "eph_epoch"))
        assert.strictEqual(bare.handshakeFailures(), 0)
        assert.deepStrictEqual(bare.ephMembers(DEAD_MS), [])
      })
  )

  it.live("every frame kind we send parses as upstream expects; tenant and group omitted when absent", () =>
    Effect.gen(function* () {
      const { node, upstream } = yield* pair({ config: quiet })
      const connection = ourConnection(upstream)
      const mesh = node.mesh
      yield* mesh.messageAvailable({ queue: "orders", partition: "p0" })
      yield* mesh.messageAvailable({ queue: "orders", partition: "p1", tenant: TENANT_A })
      yield* mesh.messageAvailable({
        queue: "orders",
        partition: "",
        tenant: UPSTREAM_DEFAULT_TENANT.toUpperCase()
      })
      yield* mesh.messageAvailableBatch([
        { queue: "a", partition: "0" },
        { queue: "b", partition: "1", tenant: TENANT_A }
      ])
      yield* mesh.hotlistDirty({ queue: "h", partition: "2", tenant: TENANT_A })
      yield* eventually(Effect.sync(() => ofTag(connection.frames, T.HOTLIST_DIRTY_BATCH).length === 1))
      yield* mesh.hotlistDirty({ queue: "h", partition: "3" })
      yield* eventually(Effect.sync(() => ofTag(connection.frames, T.HOTLIST_DIRTY_BATCH).length === 2))
      yield* mesh.hotlistDirty({ queue: "h", partition: "4", tenant: TENANT_A, group: "billing" })
      yield* eventually(Effect.sync(() => ofTag(connection.frames, T.HOTLIST_DIRTY_BATCH).length === 3))
      yield* mesh.queueConfigSet({ queue: "orders" })
      yield* mesh.queueConfigSet({ queue: "orders", tenant: TENANT_A })
      yield* mesh.queueConfigDelete({ queue: "orders", tenant: UPSTREAM_DEFAULT_TENANT })
      yield* mesh.ephemeralAdmin({ op: "reset", tenant: TENANT_B.toUpperCase(), queue: "tmp-1" })
      yield* mesh.setMaintenance(true)
      yield* mesh.setPopMaintenance(false)
      const expected: ReadonlyArray<readonly [number, unknown]> = [
        [T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p0" }],
        [T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p1", tenant: TENANT_A }],
        [T.MESSAGE_AVAILABLE, { queue: "orders", partition: "", tenant: UPSTREAM_DEFAULT_TENANT }],
        [
          T.MESSAGE_AVAILABLE_BATCH,
          {
            items: [
              { queue: "a", partition: "0" },
              { queue: "b", partition: "1", tenant: TENANT_A }
            ]
          }
        ],
        [T.HOTLIST_DIRTY_BATCH, { items: [{ queue: "h", partition: "2", tenant: TENANT_A }] }],
        [T.HOTLIST_DIRTY_BATCH, { items: [{ queue: "h", partition: "3" }] }],
        [
          T.HOTLIST_DIRTY_BATCH,
          { items: [{ queue: "h", partition: "4", tenant: TENANT_A, group: "billing" }] }
        ],
        [T.QUEUE_CONFIG_SET, { queue: "orders" }],
        [T.QUEUE_CONFIG_SET, { queue: "orders", tenant: TENANT_A }],
        [T.QUEUE_CONFIG_DELETE, { queue: "orders", tenant: UPSTREAM_DEFAULT_TENANT }],
        [T.EPH_ADMIN, { op: "reset", tenant: TENANT_B, queue: "tmp-1" }],
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
        [{ kind: "message_available", queue: "orders", partition: "p0", tenant: null }],
        [{ kind: "message_available", queue: "orders", partition: "p1", tenant: TENANT_A }],
        [{ kind: "message_available", queue: "orders", partition: "", tenant: UPSTREAM_DEFAULT_TENANT }],
        [
          { kind: "message_available", queue: "a", partition: "0", tenant: null },
          { kind: "message_available", queue: "b", partition: "1", tenant: TENANT_A }
        ],
        [{ kind: "hotlist_dirty", queue: "h", partition: "2", tenant: TENANT_A, group: null }],
        [{ kind: "hotlist_dirty", queue: "h", partition: "3", tenant: null, group: null }],
        [{ kind: "hotlist_dirty", queue: "h", partition: "4", tenant: TENANT_A, group: "billing" }],
        [{ kind: "queue_config_set", queue: "orders", tenant: null }],
        [{ kind: "queue_config_set", queue: "orders", tenant: TENANT_A }],
        [{ kind: "queue_config_delete", queue: "orders", tenant: UPSTREAM_DEFAULT_TENANT }],
        [{ kind: "eph_admin", op: "reset", tenant: TENANT_B, queue: "tmp-1" }],
        [{ kind: "maintenance", enabled: true }],
        [{ kind: "pop_maintenance", enabled: false }]
      ])
      // A tenant or group, when present, is a non-empty string: never null, never "".
      for (const frame of connection.frames) {
        for (const item of itemsOf(frame)) {
          for (const key of ["tenant", "group"]) {
            if (typeof item === "object" && item !== null && Object.hasOwn(item, key)) {
              const value = get(item, key)
              assert.isTrue(typeof value === "string" && value !== "", key)
            }
          }
        }
      }
      assert.isUndefined(connection.error)
    })
  )

  it.live("EPH_ADMIN from our API reaches upstream's dispatch; refused input sends nothing", () =>
    Effect.gen(function* () {
      const { node, upstream } = yield* pair({ config: quiet })
      const connection = ourConnection(upstream)
      const mesh = node.mesh
      yield* refusedInput(mesh.ephemeralAdmin({ op: "reset", tenant: "acme", queue: "tmp" }), /UUID/)
      yield* refusedInput(mesh.ephemeralAdmin({ op: "reset", tenant: "", queue: "tmp" }), /UUID/)
      yield* refusedInput(mesh.ephemeralAdmin({ op: "reset", tenant: `${TENANT_A}0`, queue: "tmp" }), /UUID/)
      // An op upstream does not define, through a caller that escapes the types.
      yield* refusedInput(loosely(mesh.ephemeralAdmin)({ op: "put", tenant: TENANT_A, queue: "tmp" }), /op/)
      yield* refusedInput(mesh.ephemeralAdmin({ op: "delete", tenant: TENANT_A, queue: "" }), /queue/)
      yield* refusedInput(mesh.ephemeralAdmin({ op: "delete", tenant: TENANT_A, queue: JA_256 }), /queue/)
      const before = yield* activeStats(node)
      assert.deepStrictEqual(before.eph_admin.sent, { reset: 0, delete: 0, config_set: 0 })

      yield* mesh.ephemeralAdmin({ op: "reset", tenant: TENANT_A, queue: "tmp-1" })
      yield* mesh.ephemeralAdmin({ op: "delete", tenant: TENANT_B.toUpperCase(), queue: EMOJI_255 })
      yield* mesh.ephemeralAdmin({ op: "config_set", tenant: UPSTREAM_DEFAULT_TENANT, queue: "tmp-3" })
      yield* mesh.ephemeralAdmin({ op: "delete", tenant: TENANT_A, queue: "tmp-4" })
      yield* eventually(Effect.sync(() => connection.frames.length >= 4))
      assert.deepStrictEqual(connection.frames.map(upstreamDispatch), [
        [{ kind: "eph_admin", op: "reset", tenant: TENANT_A, queue: "tmp-1" }],
        [{ kind: "eph_admin", op: "delete", tenant: TENANT_B, queue: EMOJI_255 }],
        [{ kind: "eph_admin", op: "config_set", tenant: UPSTREAM_DEFAULT_TENANT, queue: "tmp-3" }],
        [{ kind: "eph_admin", op: "delete", tenant: TENANT_A, queue: "tmp-4" }]
      ])
      // The payload is exactly {op, tenant, queue}: the bare queue name, the tenant as a lowercase UUID.
      assert.deepStrictEqual(connection.frames[1]!.json, { op: "delete", tenant: TENANT_B, queue: EMOJI_255 })
      const stats = yield* activeStats(node)
      assert.deepStrictEqual(stats.eph_admin.sent, { reset: 1, delete: 2, config_set: 1 })
      // Not applied locally: the caller already did.
      assert.deepStrictEqual(node.applied, [])
    })
  )

  it.live(
    "group-scoped marks from our API: group only when scoped; a scoped and an unscoped mark in one window are two items",
    () =>
      Effect.gen(function* () {
        // A window long enough that marks made back to back are in it (the flush waits for it).
        const { node, upstream } = yield* pair({
          config: { ...quiet, hotlistFlushWindow: Duration.millis(50) }
        })
        const connection = ourConnection(upstream)
        const mesh = node.mesh
        yield* Effect.all([
          mesh.hotlistDirty({ queue: "h", partition: "p0", tenant: TENANT_A, group: "billing" }),
          mesh.hotlistDirty({ queue: "h", partition: "p0", tenant: TENANT_A }),
          // Duplicates of both coalesce into them.
          mesh.hotlistDirty({
            queue: "h",
            partition: "p0",
            tenant: TENANT_A.toUpperCase(),
            group: "billing"
          }),
          mesh.hotlistDirty({ queue: "h", partition: "p0", tenant: TENANT_A, group: "" }),
          mesh.hotlistDirty({ queue: "h", partition: "p0", tenant: TENANT_A, group: null }),
          mesh.hotlistDirty({ queue: "h", partition: "p0", tenant: TENANT_A, group: Option.some("audit") }),
          mesh.hotlistDirty({ queue: "h", partition: "p1", group: JA_255 })
        ])
        yield* eventually(Effect.sync(() => ofTag(connection.frames, T.HOTLIST_DIRTY_BATCH).length >= 1))
        const frames = ofTag(connection.frames, T.HOTLIST_DIRTY_BATCH)
        assert.strictEqual(frames.length, 1)
        const sorted = [...itemsOf(frames[0]!)].sort((a, b) =>
          JSON.stringify(a) < JSON.stringify(b) ? -1 : JSON.stringify(a) > JSON.stringify(b) ? 1 : 0
        )
        assert.deepStrictEqual(
          sorted,
          [
            { queue: "h", partition: "p0", tenant: TENANT_A },
            { queue: "h", partition: "p0", tenant: TENANT_A, group: "audit" },
            { queue: "h", partition: "p0", tenant: TENANT_A, group: "billing" },
            { queue: "h", partition: "p1", group: JA_255 }
          ].sort((a, b) =>
            JSON.stringify(a) < JSON.stringify(b) ? -1 : JSON.stringify(a) > JSON.stringify(b) ? 1 : 0
          )
        )
        const scopes = upstreamDispatch(frames[0]!).map((e) =>
          e.kind === "hotlist_dirty" ? `${e.partition}/${e.tenant}/${e.group}` : e.kind
        )
        assert.sameMembers(scopes, [
          `p0/${TENANT_A}/null`,
          `p0/${TENANT_A}/audit`,
          `p0/${TENANT_A}/billing`,
          `p1/null/${JA_255}`
        ])
        // Refused: a group over 255 characters, or not a string.
        yield* refusedInput(mesh.hotlistDirty({ queue: "h", partition: "p2", group: EMOJI_256 }), /group/)
        yield* refusedInput(loosely(mesh.hotlistDirty)({ queue: "h", partition: "p2", group: 7 }), /group/)
      })
  )

  it.live("names of 255 characters in any script go out whole; 256 are refused by our API", () =>
    Effect.gen(function* () {
      const { node, upstream } = yield* pair({ config: quiet })
      const connection = ourConnection(upstream)
      const mesh = node.mesh
      for (const over of [
        mesh.messageAvailable({ queue: JA_256, partition: "" }),
        mesh.messageAvailable({ queue: "q", partition: EMOJI_256 }),
        mesh.messageAvailableBatch([{ queue: EMOJI_256, partition: "" }]),
        mesh.hotlistDirty({ queue: JA_256, partition: "" }),
        mesh.queueConfigSet({ queue: EMOJI_256 }),
        mesh.queueConfigDelete({ queue: JA_256 }),
        mesh.ephemeralAdmin({ op: "reset", tenant: TENANT_A, queue: EMOJI_256 })
      ]) {
        yield* refusedInput(over, /longer than 255 characters/)
      }
      yield* mesh.messageAvailable({ queue: JA_255, partition: EMOJI_255, tenant: TENANT_A })
      yield* mesh.messageAvailableBatch([{ queue: EMOJI_255, partition: JA_255 }])
      yield* mesh.queueConfigSet({ queue: EMOJI_255, tenant: TENANT_A })
      yield* mesh.hotlistDirty({ queue: EMOJI_255, partition: EMOJI_255, tenant: TENANT_A, group: EMOJI_255 })
      yield* eventually(Effect.sync(() => connection.frames.length >= 4))
      assert.deepStrictEqual(connection.frames.map(upstreamDispatch), [
        [{ kind: "message_available", queue: JA_255, partition: EMOJI_255, tenant: TENANT_A }],
        [{ kind: "message_available", queue: EMOJI_255, partition: JA_255, tenant: null }],
        [{ kind: "queue_config_set", queue: EMOJI_255, tenant: TENANT_A }],
        [
          {
            kind: "hotlist_dirty",
            queue: EMOJI_255,
            partition: EMOJI_255,
            tenant: TENANT_A,
            group: EMOJI_255
          }
        ]
      ])
      // Raw UTF-8 on the wire, as serde_json writes it: 4 bytes an emoji, 1,020 bytes a name.
      const hot = connection.frames[3]!.payload
      assert.isAtLeast(hot.length, 3 * 1020)
      assert.isTrue(hot.includes(Buffer.from(EMOJI_255, "utf8")))
    })
  )

  it.live(
    'UUID tenants: by default our API refuses "acme" and sends an upper-case UUID lowercased; with tenants: "any", "acme" goes out and upstream reads it as absent',
    () =>
      Effect.gen(function* () {
        const { node, upstream } = yield* pair({ config: quiet })
        const connection = ourConnection(upstream)
        const mesh = node.mesh
        for (const call of [
          mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: "acme" }),
          mesh.messageAvailableBatch([{ queue: "orders", partition: "p0", tenant: "acme" }]),
          mesh.hotlistDirty({ queue: "orders", partition: "p0", tenant: "acme" }),
          mesh.queueConfigSet({ queue: "orders", tenant: "acme" }),
          mesh.queueConfigDelete({ queue: "orders", tenant: Option.some("acme") })
        ]) {
          yield* refusedInput(call, /"acme" is not a UUID/)
        }
        assert.throws(() => mesh.unsafeMessageAvailable({ queue: "orders", partition: "p0", tenant: "acme" }))
        yield* mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: TENANT_A.toUpperCase() })
        yield* eventually(Effect.sync(() => connection.frames.length === 1))
        assert.deepStrictEqual(connection.frames[0]!.json, {
          queue: "orders",
          partition: "p0",
          tenant: TENANT_A
        })

        // The old behaviour, for clusters of queen-mesh nodes only: an upstream replica reads "acme" as
        // absent and would wake every tenant's queue of that name.
        const any = yield* pair({ config: { ...quiet, tenants: "any" } })
        const anyConnection = ourConnection(any.upstream)
        yield* any.node.mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: "acme" })
        yield* eventually(Effect.sync(() => anyConnection.frames.length === 1))
        assert.deepStrictEqual(anyConnection.frames[0]!.json, {
          queue: "orders",
          partition: "p0",
          tenant: "acme"
        })
        assert.deepStrictEqual(upstreamDispatch(anyConnection.frames[0]!), [
          { kind: "message_available", queue: "orders", partition: "p0", tenant: null }
        ])
      })
  )

  it.live(
    "on a busy link the wakes are upstream's liveness of us: heartbeats wait, nothing goes stale, they return when it quiets",
    () =>
      Effect.gen(function* () {
        const { node, upstream } = yield* pair()
        const connection = ourConnection(upstream)
        let sent = 0
        const busy = yield* Effect.forkChild(
          Effect.forever(
            Effect.andThen(
              Effect.suspend(() => node.mesh.messageAvailable({ queue: "busy", partition: `p${sent++}` })),
              Effect.sleep(Duration.millis(5))
            )
          )
        )
        const start = connection.frames.length
        const during = () => connection.frames.slice(start)
        const stale: Array<number> = []
        const begun = performance.now()
        // Sample upstream's liveness of us (its last frame of any kind) while the wakes flow, for ten
        // heartbeat intervals.
        yield* eventually(
          Effect.sync(() => {
            const last = upstream.lastSeen.get(OUR_ID)!
            const silent = performance.now() - last
            if (silent > DEAD_MS) stale.push(silent)
            return (
              performance.now() - begun >= 10 * HEARTBEAT_MS &&
              ofTag(during(), T.MESSAGE_AVAILABLE).length > 10
            )
          })
        )
        yield* Fiber.interrupt(busy)
        const frames = during()
        assert.isAbove(ofTag(frames, T.MESSAGE_AVAILABLE).length, 10)
        assert.deepStrictEqual(stale, [])
        // Upstream's rule: alive while the last frame is younger than the dead threshold.
        assert.isAtMost(maxGap(frames.map((f) => f.at)), DEAD_MS)
        // A wake every 5 ms: the heartbeat tick (every 100 ms) finds the link busy, and skips its beat.
        assert.isAtMost(ofTag(frames, T.HEARTBEAT).length, 5)
        // Quiet again: the heartbeats come back.
        yield* eventually(
          Effect.sync(() => ofTag(connection.frames.slice(start + frames.length), T.HEARTBEAT).length >= 3)
        )
        const stats = yield* activeStats(node)
        assert.strictEqual(stats.messages_dropped, 0)
      })
  )
})

describe("interop: eph_members, upstream's ephemeral member list, on both sides", () => {
  it.live("each side counts the other: the same list shape, the same count, self excluded", () =>
    Effect.gen(function* () {
      const upstream = yield* listenUpstream({ secret: SECRET, serverId: UPSTREAM_ID })
      const port = yield* freePort
      // A uniform peer list names our node too: that entry is this node, never an ephemeral member.
      const node = yield* ourNode({ port, peers: [upstream.port, port] })
      const link = yield* dialUpstream({ port, serverId: UPSTREAM_ID, secret: SECRET })
      yield* link.startHeartbeats(HEARTBEAT_MS)
      yield* eventually(hearsFrom(node, 1))
      yield* eventually(Effect.sync(() => upstream.hellos.has(OUR_ID)))
      yield* eventually(Effect.map(activeStats(node), (s) => s.inbound.self_dials >= 1))
      const ours = yield* ourEphMembers(node)
      const theirs = upstream.ephMembers(DEAD_MS)
      assert.deepStrictEqual(ours, [
        { server_id: UPSTREAM_ID, http_addr: UPSTREAM_HTTP_ADDR, epoch: String(link.hello.eph_epoch) }
      ])
      assert.deepStrictEqual(theirs, [{ server_id: OUR_ID, http_addr: OUR_HTTP_ADDR, epoch: "c0ffee" }])
      // Upstream's model of our view gives the same list.
      assert.deepStrictEqual(
        upstreamEphMembers([{ serverId: UPSTREAM_ID, hello: link.hello, lastSeen: performance.now() }], {
          self: OUR_ID,
          deadMs: DEAD_MS,
          now: performance.now()
        }),
        ours
      )
      assert.strictEqual((yield* activeStats(node)).eph_members, theirs.length)
    })
  )

  it.live("capable exactly when upstream's u64::from_str_radix(epoch, 16) parses; sorted by server id", () =>
    Effect.gen(function* () {
      const port = yield* freePort
      const node = yield* ourNode({ port, peers: [yield* freePort], config: quiet })
      // Each replica advertises one epoch; capable ones print as upstream prints the u64.
      const cases: ReadonlyArray<readonly [string, Readonly<Record<string, unknown>>]> = [
        ["up-00", { eph_epoch: "1f" }],
        ["up-01", { eph_epoch: "+00C0FFEE" }],
        ["up-02", { eph_epoch: "ffffffffffffffff" }],
        ["up-03", { eph_epoch: `${"0".repeat(30)}1` }],
        ["up-04", { eph_epoch: "0" }],
        ["up-05", { eph_epoch: "10000000000000000" }],
        ["up-06", { eph_epoch: "xyz" }],
        ["up-07", { eph_epoch: "" }],
        ["up-08", { eph_epoch: "+" }],
        ["up-09", { eph_epoch: "-1" }],
        ["up-10", { eph_epoch: " 1" }],
        ["up-11", { eph_epoch: "0x1f" }],
        ["up-12", { eph_epoch: 31 }],
        ["up-13", { eph_epoch: null }],
        ["up-14", { eph_epoch: undefined }],
        ["up-15", { http_addr: undefined }],
        ["up-16", { http_addr: 6632 }],
        ["up-17", { eph_epoch: "++1" }]
      ]
      // Dialled in reverse, so the sort is the member list's own.
      const links: Array<UpstreamLink> = []
      for (const [serverId, hello] of [...cases].reverse()) {
        links.push(yield* dialUpstream({ port, serverId, secret: SECRET, hello }))
        // One at a time: the listener holds few unauthenticated connections per address.
        yield* eventually(hearsFrom(node, links.length))
      }
      const model = upstreamEphMembers(
        links.map((link) => ({
          serverId: String(link.hello.server_id),
          hello: link.hello,
          lastSeen: performance.now()
        })),
        { self: OUR_ID, deadMs: DEAD_MS, now: performance.now() }
      )
      assert.deepStrictEqual(
        model.map((m) => [m.server_id, m.epoch]),
        [
          ["up-00", "1f"],
          ["up-01", "c0ffee"],
          ["up-02", "ffffffffffffffff"],
          ["up-03", "1"],
          ["up-04", "0"]
        ]
      )
      assert.isUndefined(parseU64Hex("10000000000000000"))
      assert.deepStrictEqual(yield* ourEphMembers(node), model)
      assert.strictEqual((yield* activeStats(node)).eph_members, model.length)
      const capable = (yield* node.mesh.members).flatMap((m) =>
        Option.isSome(m.heard) && m.heard.value.ephemeralCapable
          ? [Option.getOrElse(m.serverId, () => "")]
          : []
      )
      assert.sameMembers(
        capable,
        model.map((m) => m.server_id)
      )
    })
  )

  it.live(
    "the advert is overwritten on every HELLO: a bad epoch or none makes it incapable, a good one capable",
    () =>
      Effect.gen(function* () {
        const port = yield* freePort
        const node = yield* ourNode({ port, peers: [yield* freePort], config: quiet })
        let hellos = 0
        /** One connection of the replica: its HELLO, verified, then the connection closes. */
        const helloOnce = (hello: Readonly<Record<string, unknown>>, advertise = true) =>
          Effect.scoped(
            Effect.gen(function* () {
              const seen = ++hellos
              yield* dialUpstream({ port, serverId: UPSTREAM_ID, secret: SECRET, hello, advertise })
              yield* eventually(Effect.map(activeStats(node), (s) => s.inbound.authenticated_total >= seen))
            })
          )
        yield* helloOnce({ eph_epoch: "a1" })
        assert.deepStrictEqual(yield* ourEphMembers(node), [
          { server_id: UPSTREAM_ID, http_addr: UPSTREAM_HTTP_ADDR, epoch: "a1" }
        ])
        // The replica restarted with an epoch upstream cannot parse: not capable any more.
        yield* helloOnce({ eph_epoch: "not-hex" })
        assert.deepStrictEqual(yield* ourEphMembers(node), [])
        assert.strictEqual((yield* activeStats(node)).eph_members, 0)
        // A new incarnation and a new address: capable again, with both.
        yield* helloOnce({ eph_epoch: "b2", http_addr: "http://10.0.0.9:7000" })
        assert.deepStrictEqual(yield* ourEphMembers(node), [
          { server_id: UPSTREAM_ID, http_addr: "http://10.0.0.9:7000", epoch: "b2" }
        ])
        // Rolled back to 2719e64: a HELLO without either field forgets both.
        yield* helloOnce({}, false)
        assert.deepStrictEqual(yield* ourEphMembers(node), [])
        const heard = (yield* node.mesh.members).flatMap((m) =>
          Option.isSome(m.heard) ? [m.heard.value] : []
        )
        assert.strictEqual(heard.length, 1)
        assert.isTrue(Option.isNone(heard[0]!.httpAddr) && Option.isNone(heard[0]!.ephEpoch))
        assert.isFalse(heard[0]!.ephemeralCapable)
      })
  )
})

describe("interop: a mixed cluster", () => {
  it.live(
    "two upstream replicas and our node exchange every upstream frame kind: nothing is unknown to anyone",
    () =>
      Effect.gen(function* () {
        const ids = ["queen-upstream-1", "queen-upstream-2"] as const
        const listeners = [
          yield* listenUpstream({ secret: SECRET, serverId: ids[0] }),
          yield* listenUpstream({ secret: SECRET, serverId: ids[1] })
        ] as const
        const port = yield* freePort
        const node = yield* ourNode({ port, peers: listeners.map((l) => l.port), config: quiet })
        const links = [
          yield* dialUpstream({ port, serverId: ids[0], secret: SECRET }),
          yield* dialUpstream({ port, serverId: ids[1], secret: SECRET })
        ] as const
        yield* eventually(hearsFrom(node, 2))
        yield* eventually(allConnected(node))
        const events = yield* collectEvents(node)
        const pop = yield* park(node, "orders", Option.some(TENANT_A))
        // Every frame kind upstream sends, from both replicas.
        for (const link of links) {
          yield* link.send(T.HEARTBEAT, { server_id: String(link.hello.server_id) })
          yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p0", tenant: TENANT_A })
          yield* link.send(T.MESSAGE_AVAILABLE_BATCH, {
            items: [{ queue: "orders", partition: "p1", tenant: UPSTREAM_DEFAULT_TENANT }]
          })
          yield* link.send(T.HOTLIST_DIRTY_BATCH, {
            items: [
              { queue: "h", partition: "p0", tenant: TENANT_A, group: "billing" },
              { queue: "h", partition: "p0", tenant: TENANT_A }
            ]
          })
          yield* link.send(T.QUEUE_CONFIG_SET, { queue: "orders", tenant: TENANT_A })
          yield* link.send(T.QUEUE_CONFIG_DELETE, { queue: "orders", tenant: TENANT_A })
          yield* link.send(T.EPH_ADMIN, { op: "reset", tenant: TENANT_A, queue: "tmp" })
          yield* link.send(T.MAINTENANCE_MODE_SET, { enabled: false })
          yield* link.send(T.POP_MAINTENANCE_MODE_SET, { enabled: false })
          yield* barrier(node, link)
        }
        assert.strictEqual(yield* Fiber.join(pop), "woken")
        // And every frame kind we send, to both.
        const mesh = node.mesh
        yield* mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: TENANT_A })
        yield* mesh.messageAvailableBatch([{ queue: "orders", partition: "p1" }])
        yield* mesh.hotlistDirty({ queue: "h", partition: "p0", tenant: TENANT_A, group: "billing" })
        yield* mesh.queueConfigSet({ queue: "orders", tenant: TENANT_A })
        yield* mesh.queueConfigDelete({ queue: "orders" })
        yield* mesh.ephemeralAdmin({ op: "config_set", tenant: TENANT_A, queue: "tmp" })
        yield* mesh.setMaintenance(false)
        yield* mesh.setPopMaintenance(false)
        for (const listener of listeners) {
          yield* eventually(
            Effect.sync(() => ourConnection(listener).frames.filter((f) => f.tag !== T.HEARTBEAT).length >= 8)
          )
          const received = ourConnection(listener).frames
          const kinds = new Set(received.map((f) => f.tag))
          for (const tag of [1, 2, 5, 10, 11, 20, 40, 41]) assert.isTrue(kinds.has(tag), `tag ${tag}`)
          // Upstream's dispatch has a handler for every frame we sent.
          for (const frame of received) {
            for (const effect of upstreamDispatch(frame)) assert.notStrictEqual(effect.kind, "ignored")
          }
          // Each replica counts us as an ephemeral member, and we count both.
          assert.deepStrictEqual(
            listener.ephMembers(60_000).map((m) => m.server_id),
            [OUR_ID]
          )
        }
        const stats = yield* activeStats(node)
        assert.strictEqual(stats.frames_unknown, 0)
        assert.strictEqual(stats.frames_invalid, 0)
        assert.strictEqual(stats.items_invalid, 0)
        assert.strictEqual(stats.messages_received, stats.frames_dispatched)
        assert.strictEqual(stats.eph_members, 2)
        assert.deepStrictEqual(
          (yield* ourEphMembers(node)).map((m) => m.server_id),
          [...ids]
        )
        assert.deepStrictEqual(stats.eph_admin.received, { reset: 2, delete: 0, config_set: 0 })
        assert.deepStrictEqual(stats.eph_admin.sent, { reset: 0, delete: 0, config_set: 1 })
        assert.deepStrictEqual(
          node.applied.map((a) => a.from),
          [...ids]
        )
        assert.strictEqual(events.filter((e) => e._tag === "HotlistDirty").length, 4)
        for (const link of links) assert.isFalse(link.closed())
      })
  )
})

describe("interop: stats as upstream dashboards read them", () => {
  it.live("the active body has upstream's fields with upstream's meaning", () =>
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
      assert.strictEqual(stats.eph_members, 1)
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
        "eph_members",
        "handshake_failures",
        "signature_failures",
        "sequence_rejections",
        "maintenance_mode",
        "pop_maintenance_mode"
      ]) {
        assert.isTrue(typeof body === "object" && body !== null && Object.hasOwn(body, key), key)
      }
      const peers = get(body, "peers")
      const peerBody: unknown = Array.isArray(peers) ? peers[0] : undefined
      for (const key of ["host", "port", "connected", "resolved", "resolved_ip"]) {
        assert.isTrue(typeof peerBody === "object" && peerBody !== null && Object.hasOwn(peerBody, key), key)
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

  it.live("messages_dropped counts queue-full drops only; frames lost to a down link are counted apart", () =>
    Effect.gen(function* () {
      const { node, upstream } = yield* pair({ config: { ...quiet, sendQueueCapacity: 4 } })
      // The replica stops reading: the socket fills, then the bounded queue, then frames are dropped.
      yield* upstream.pause
      const big = Array.from({ length: 4000 }, (_, i) => ({
        queue: `stalled-${i}`,
        partition: "p".repeat(200),
        tenant: TENANT_A
      }))
      yield* eventually(
        Effect.andThen(
          node.mesh.messageAvailableBatch(big),
          Effect.map(activeStats(node), (s) => s.messages_dropped > 0)
        ),
        "20 seconds"
      )
      const full = yield* activeStats(node)
      const sum = (key: "dropped_full" | "dropped_down" | "discarded") =>
        full.peers.reduce((n, p) => n + p[key], 0)
      assert.strictEqual(full.messages_dropped, sum("dropped_full"))
      assert.strictEqual(full.messages_dropped_down, 0)
      assert.isAbove(full.peers[0]!.queued, 0)
      assert.isAtMost(full.peers[0]!.queued, 4)

      // The replica goes away: what was queued is discarded, what comes later is dropped as down.
      yield* upstream.close
      yield* eventually(Effect.map(activeStats(node), (s) => !s.peers[0]!.connected))
      yield* node.mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: TENANT_A })
      const down = yield* activeStats(node)
      assert.strictEqual(down.messages_dropped, full.messages_dropped)
      assert.isAbove(down.messages_dropped_down, 0)
      assert.strictEqual(down.messages_dropped_down, down.peers[0]!.dropped_down)
      assert.strictEqual(down.messages_discarded, down.peers[0]!.discarded)
      assert.isAbove(down.messages_discarded, 0)
    })
  )

  it.live("a health probe is not a handshake failure; a wrong secret is, as signature_failures", () =>
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
      // A refused replica is never an ephemeral member, whatever its HELLO advertised.
      assert.strictEqual(refused.eph_members, 1)
    })
  )

  it.live("sent and received counts match between the two sides on a quiet link", () =>
    Effect.gen(function* () {
      const { node, upstream, link } = yield* pair({ config: quiet })
      const connection = ourConnection(upstream)
      // Upstream to us: a heartbeat, a wake, an ephemeral-queue verb.
      yield* link.send(T.HEARTBEAT, { server_id: UPSTREAM_ID })
      yield* link.send(T.MESSAGE_AVAILABLE, { queue: "orders", partition: "p0", tenant: TENANT_A })
      yield* link.send(T.EPH_ADMIN, { op: "reset", tenant: TENANT_A, queue: "orders" })
      // Us to upstream: five frames.
      yield* node.mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: TENANT_A })
      yield* node.mesh.messageAvailableBatch([{ queue: "orders", partition: "p1", tenant: TENANT_A }])
      yield* node.mesh.queueConfigSet({ queue: "orders", tenant: TENANT_A })
      yield* node.mesh.ephemeralAdmin({ op: "delete", tenant: TENANT_A, queue: "orders" })
      yield* node.mesh.setMaintenance(false)
      yield* eventually(
        Effect.map(
          activeStats(node),
          (s) =>
            s.messages_received === link.sent() &&
            s.messages_sent === connection.frames.length &&
            s.messages_sent === 5
        )
      )
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.messages_received, 3)
      assert.strictEqual(upstream.frames.length, 5)
      assert.strictEqual(stats.messages_dropped, 0)
      assert.strictEqual(stats.peers[0]!.written, stats.messages_sent)
    })
  )
})

describe("interop: non-default auth modes", () => {
  it.live("permissive: upstream's legacy HELLO is accepted both ways; the challenge it ignores", () =>
    Effect.gen(function* () {
      const { node, upstream, link } = yield* pair({
        config: { ...quiet, auth: "permissive", challengeWait: Duration.millis(50) }
      })
      const connection = ourConnection(upstream)
      // Our dialer got no challenge from upstream and sent a HELLO upstream verifies, advert included.
      assert.strictEqual(upstream.handshakeFailures(), 0)
      assert.strictEqual(get(connection.hello, "http_addr"), OUR_HTTP_ADDR)
      assert.strictEqual(get(connection.hello, "eph_epoch"), OUR_EPOCH)
      const stats = yield* activeStats(node)
      assert.strictEqual(stats.inbound.legacy_accepted, 1)
      assert.strictEqual(stats.handshake_failures, 0)
      assert.strictEqual(stats.eph_members, 1)
      // Our listener wrote its challenge; upstream never reads it, and the link works regardless.
      assert.isAbove(link.bytesFromNode(), 0)
      yield* barrier(node, link)
      yield* node.mesh.messageAvailable({ queue: "orders", partition: "p0", tenant: TENANT_A })
      yield* eventually(Effect.sync(() => ofTag(connection.frames, T.MESSAGE_AVAILABLE).length === 1))
      assert.deepStrictEqual(upstreamDispatch(connection.frames[0]!), [
        { kind: "message_available", queue: "orders", partition: "p0", tenant: TENANT_A }
      ])
    })
  )

  it.live("open mode (no secret): HELLOs carry an empty mac and are accepted both ways", () =>
    Effect.gen(function* () {
      const { node, upstream, link } = yield* pair({ secret: "", config: quiet })
      const connection = ourConnection(upstream)
      assert.strictEqual(get(connection.hello, "mac"), "")
      assert.strictEqual(link.hello.mac, "")
      assert.strictEqual((yield* activeStats(node)).handshake_failures, 0)
      yield* barrier(node, link)
      yield* node.mesh.setPopMaintenance(true)
      yield* eventually(Effect.sync(() => ofTag(connection.frames, T.POP_MAINTENANCE_MODE_SET).length === 1))
    })
  )
})
