/**
 * The PostgreSQL lane as a host composes it (`Mesh.layerTcp()` with `Postgres.layer`), over a real
 * server (embedded, or `QUEEN_MESH_TEST_PG_URL`): nodes with no peers bind no port and wake each
 * other's pops through the database, know each other alive and report `clustered`; what a plain client
 * NOTIFYs is refused and counted by reason and never applied; a restarted database or a killed backend
 * is reported, recovered from and caught up after once; a 16 MiB batch crosses whole; lane and TCP
 * together deliver each hint twice, harmlessly. Outcomes, with short intervals, in real time.
 */
import { assert } from "@effect/vitest"
import {
  ConfigProvider,
  Context,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Logger,
  Option,
  Redacted,
  References,
  Result,
  Schedule,
  Scope,
  SubscriptionRef
} from "effect"
import * as Frame from "../src/Frame.js"
import * as HttpRoutes from "../src/HttpRoutes.js"
import * as Keyring from "../src/internal/keyring.js"
import * as Envelope from "../src/internal/lane/pgEnvelope.js"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import type { MeshEvent } from "../src/MeshEvent.js"
import type * as MeshStats from "../src/MeshStats.js"
import * as Postgres from "../src/Postgres.js"
import { eventually, freePort, type Node, nodeFromContext } from "./fixtures/cluster.js"
import { layer } from "./fixtures/layer.js"
import * as Pg from "./fixtures/postgres.js"

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

const SECRET = "lane-s3cr3t"
const CHECK_INTERVAL_MS = 500

let channels = 0
const freshChannel = () => `qm_lane_test_${process.pid}_${++channels}`

interface LaneNode extends Node {
  readonly serverId: string
  /** Every event since the node was built. */
  readonly events: Array<MeshEvent>
  readonly catchUps: Array<Postgres.CatchUp>
}

interface LaneNodeOptions {
  readonly serverId: string
  readonly url: string
  readonly channel: string
  readonly secret?: string
  /** TCP peers on 127.0.0.1, with this node's own port: the lane and the mesh at once. */
  readonly tcp?: { readonly port: number; readonly peers: ReadonlyArray<number> }
  readonly logger?: Logger.Logger<unknown, void>
}

/** A node with the shipped host services, the lane, and TCP only when `tcp` is given. */
const laneNode = (options: LaneNodeOptions): Effect.Effect<LaneNode, unknown, Scope.Scope> =>
  Effect.gen(function* () {
    const catchUps: Array<Postgres.CatchUp> = []
    const built = Layer.build(
      Mesh.layerTcp().pipe(
        Layer.provideMerge(
          Postgres.layer({
            url: Redacted.make(options.url),
            channel: options.channel,
            checkInterval: Duration.millis(CHECK_INTERVAL_MS),
            // Generous: on a busy machine a notification's round may take seconds, and a probe that
            // times out takes the lane down.
            probeTimeout: "10 seconds",
            reconnect: Schedule.spaced("100 millis"),
            onCatchUp: (catchUp) =>
              Effect.sync(() => {
                catchUps.push(catchUp)
              })
          })
        ),
        Layer.provide(
          MeshConfig.layer({
            serverId: options.serverId,
            port: options.tcp?.port ?? 0,
            bindHost: "127.0.0.1",
            peers: (options.tcp?.peers ?? []).map((port) => ({ host: "127.0.0.1", port })),
            secret: Redacted.make(options.secret ?? SECRET),
            // v2 HELLOs, so a link learns the server id it reaches and joins its lane member.
            ...(options.tcp === undefined ? {} : { auth: "required" as const }),
            // Quick heartbeats, and a dead threshold well above a stalled event loop on a busy machine.
            heartbeatInterval: Duration.millis(200),
            deadThreshold: Duration.seconds(5)
          })
        )
      )
    )
    const context = yield* options.logger === undefined
      ? built
      : built.pipe(Effect.provide(Logger.layer([options.logger], { mergeWithExisting: true })))
    const node = nodeFromContext(context)
    const events: Array<MeshEvent> = []
    yield* node.mesh.observe((event) => events.push(event))
    return { ...node, serverId: options.serverId, events, catchUps }
  })

const laneStats = (node: Node): Effect.Effect<MeshStats.LaneStats> =>
  Effect.flatMap(node.mesh.stats, (stats) =>
    stats.enabled && stats.lane !== null
      ? Effect.succeed(stats.lane)
      : Effect.die(new Error("no lane in the stats"))
  )

const aliveOnLane = (node: Node, count: number) =>
  Effect.map(laneStats(node), (lane) => lane.status === "up" && lane.members_alive === count)

const clustered = (node: Node) => Effect.map(node.mesh.health, (health) => health.status === "clustered")

const wakesFrom = (node: LaneNode, from: string) =>
  node.events.filter((e): e is Extract<MeshEvent, { _tag: "Wake" }> => e._tag === "Wake" && e.from === from)

const laneStatuses = (node: LaneNode) =>
  node.events.flatMap((e) => (e._tag === "LaneStatus" ? [e.status] : []))

/** Parks a pop on `node` for `queue` and waits until it is parked. */
const park = (node: Node, queue: string) =>
  Effect.gen(function* () {
    const before = yield* node.waker.parked
    const fiber = yield* Effect.forkChild(
      node.waker.awaitWake({ queue, tenant: Option.none() }, { maxWait: "30 seconds" })
    )
    yield* eventually(Effect.map(node.waker.parked, (n) => n > before))
    return fiber
  })

const threeNodes = (url: string, channel: string, prefix: string) =>
  Effect.gen(function* () {
    const nodes: Array<LaneNode> = []
    for (const name of ["a", "b", "c"]) {
      nodes.push(yield* laneNode({ serverId: `${prefix}-${name}`, url, channel }))
    }
    for (const node of nodes) yield* eventually(aliveOnLane(node, 2), "60 seconds")
    return nodes as [LaneNode, LaneNode, LaneNode]
  })

// Logs are noise here (one test captures its own); the assertions say what happened.
const TestLayer = Layer.merge(Pg.layer, Logger.layer([]))
const external = Pg.externalUrl !== undefined

// ---------------------------------------------------------------------------------------------
// tests
// ---------------------------------------------------------------------------------------------

layer(TestLayer, { excludeTestServices: true, timeout: "180 seconds" })("Postgres lane", (it) => {
  it.effect(
    "three nodes on the lane alone: no port, wakes cross every way, each alive to the others, clustered",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const [a, b, c] = yield* threeNodes(server.url, freshChannel(), "alone")
        for (const node of [a, b, c]) {
          assert.isTrue(node.mesh.active)
          assert.isTrue(Option.isNone(node.mesh.port), "no mesh port is bound")
          const stats = yield* node.mesh.stats
          assert.isTrue(stats.enabled)
          if (!stats.enabled) return
          assert.isNull(stats.port)
          assert.deepStrictEqual(stats.peers, [])
          assert.strictEqual(stats.lane?.kind, "pg")
          assert.strictEqual(stats.lane?.members_alive, 2)
          yield* eventually(clustered(node))
          const health = yield* node.mesh.health
          assert.deepStrictEqual(
            { status: health.status, expected: health.expected, healthy: health.healthy, lane: health.lane },
            { status: "clustered", expected: 2, healthy: 2, lane: "up" }
          )
          assert.strictEqual(HttpRoutes.readiness(stats).ready, true)
          const members = yield* node.mesh.members
          const others = [a, b, c].filter((n) => n !== node).map((n) => n.serverId)
          assert.deepStrictEqual(
            members.map((m) => [Option.getOrNull(m.serverId), m.foundBy, Option.map(m.lane, (l) => l.alive)]),
            others.map((id) => [id, "lane", Option.some(true)])
          )
          // Each member's epoch is what its own lane announces.
          for (const member of members) {
            const owner = [a, b, c].find((n) => n.serverId === Option.getOrNull(member.serverId))!
            assert.strictEqual(
              Option.getOrNull(Option.map(member.lane, (l) => l.epoch)),
              (yield* laneStats(owner)).epoch
            )
          }
        }
        // Every sender wakes the pops parked on both others.
        for (const from of [a, b, c]) {
          const queue = `orders-${from.serverId}`
          const others = [a, b, c].filter((n) => n !== from)
          const pops = yield* Effect.forEach(others, (n) => park(n, queue))
          yield* from.mesh.messageAvailable({ queue, partition: "p7" })
          for (const pop of pops) assert.strictEqual(yield* Fiber.join(pop), "woken")
          for (const n of others) {
            assert.deepStrictEqual(yield* n.waker.takePartitionHints({ queue, tenant: Option.none() }), [
              "p7"
            ])
          }
        }
        // The lane's own heartbeats go on meanwhile, so a frame can be waiting for its NOTIFY at any one
        // reading: the buffer empties, it does not stay empty.
        yield* eventually(Effect.map(laneStats(a), (lane) => lane.buffered === 0))
        const lane = yield* laneStats(a)
        assert.strictEqual(lane.status, "up")
        assert.isAbove(lane.notifications_sent, 0)
        assert.isAbove(lane.frames_received, 0)
        assert.strictEqual(lane.dropped, 0)
        assert.deepStrictEqual(
          Object.entries(lane.refused).filter(([, n]) => n > 0),
          [],
          "nothing refused between honest nodes"
        )
        assert.deepStrictEqual(laneStatuses(a), ["up"])
      }),
    180_000
  )

  it.effect(
    "what a plain client NOTIFYs (wrong MAC, replay, old epoch, garbage, oversized, non-ASCII) is refused, counted and never applied",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const raw = yield* Pg.rawClient(server.url)
        const captured = yield* raw.listen(channel)
        const [a, b] = yield* threeNodes(server.url, channel, "hostile")
        const pop = yield* park(b, "genuine")
        yield* a.mesh.messageAvailable({ queue: "genuine", partition: "p0" })
        assert.strictEqual(yield* Fiber.join(pop), "woken")
        yield* eventually(Effect.sync(() => captured.some((p) => p.includes('"queue":"genuine"'))))
        const genuine = captured.find((p) => p.includes('"queue":"genuine"'))!
        const before = yield* laneStats(b)

        const keys = Keyring.fromSecrets(SECRET)
        const wake = (queue: string) =>
          Frame.encode({ _tag: "MessageAvailable", ...Frame.queueItem({ queue, partition: "p" }) })
        const sealed = (sender: Envelope.Sender, frames: ReadonlyArray<Uint8Array>) =>
          Envelope.seal(sender, frames).payloads[0]!
        const [head, keyId, mac] = genuine.split(".", 3)
        const flipped = `${head}.${keyId}.${mac![0] === "0" ? "1" : "0"}${genuine.slice(head!.length + keyId!.length + 3)}`
        const oldEpoch = sealed(new Envelope.Sender(a.serverId, Envelope.makeEpoch(0, 0), channel, keys), [
          wake("old-epoch")
        ])
        const otherKey = sealed(
          new Envelope.Sender(
            "mallory",
            Envelope.makeEpoch(Date.now(), 1),
            channel,
            Keyring.fromSecrets("guess")
          ),
          [wake("other-key")]
        )
        const unsigned = sealed(
          new Envelope.Sender("mallory", Envelope.makeEpoch(Date.now(), 2), channel, "open"),
          [wake("unsigned")]
        )
        const hostile: ReadonlyArray<readonly [string, string]> = [
          [flipped, "bad_mac"],
          [genuine, "replayed"],
          [oldEpoch, "old_epoch"],
          [otherKey, "unknown_key"],
          [unsigned, "unauthenticated"],
          ["hello", "malformed"],
          ["qm2.not.an.envelope", "malformed"],
          ["\u00e9\u6f22\u{1f600}".repeat(500), "malformed"]
        ]
        for (const [payload] of hostile) yield* raw.notify(channel, payload)
        // Oversized: PostgreSQL itself refuses it, so nothing reaches the lane.
        const oversized = yield* Effect.result(raw.notify(channel, "x".repeat(8000)))
        assert.isTrue(Result.isFailure(oversized), "pg_notify refuses 8000 bytes")

        // Authenticated (whoever holds the key), but frames that mean nothing on the lane or are not frames.
        const insider = new Envelope.Sender("insider", Envelope.makeEpoch(Date.now(), 3), channel, keys)
        insider.bind(raw.pid, raw.clockOffset)
        yield* raw.notify(
          channel,
          sealed(insider, [
            Frame.frameBytes(Frame.Tag.HELLO, JSON.stringify({ server_id: "insider" })),
            Frame.frameBytes(Frame.Tag.CHALLENGE, JSON.stringify({ nonce: "00" })),
            Frame.frameBytes(Frame.Tag.MESSAGE_AVAILABLE, JSON.stringify({ queue: 5 }))
          ])
        )
        const expected: Record<string, number> = {
          malformed: 3,
          unknown_key: 1,
          bad_mac: 1,
          unauthenticated: 1,
          old_epoch: 1,
          replayed: 1,
          invalid_frame: 1,
          handshake_frame: 2
        }
        const increase = (now: MeshStats.LaneStats) =>
          Object.fromEntries(
            Object.entries(now.refused)
              .map(
                ([reason, n]) =>
                  [
                    reason,
                    n - (Object.entries(before.refused).find(([r]) => r === reason)?.[1] ?? 0)
                  ] as const
              )
              .filter(([, n]) => n > 0)
          )
        yield* eventually(
          Effect.map(laneStats(b), (now) =>
            Object.keys(expected).every((reason) => increase(now)[reason] === expected[reason])
          )
        )
        const after = yield* laneStats(b)
        assert.deepStrictEqual(increase(after), expected)
        assert.strictEqual(after.status, "up")
        // Nothing applied: one genuine wake from a, none from anyone else, no pop woken for the forgeries.
        assert.strictEqual(wakesFrom(b, a.serverId).length, 1)
        assert.deepStrictEqual(
          b.events.filter((e) => e._tag === "Wake" && e.from !== a.serverId),
          []
        )
        assert.deepStrictEqual(
          b.events.flatMap((e) => (e._tag === "InvalidFrame" ? [[e.from, e.tag]] : [])),
          [["insider", Frame.Tag.MESSAGE_AVAILABLE]]
        )
        assert.deepStrictEqual(laneStatuses(b), ["up"])

        // The lane still carries hints.
        const again = yield* park(b, "still")
        yield* a.mesh.messageAvailable({ queue: "still", partition: "p1" })
        assert.strictEqual(yield* Fiber.join(again), "woken")
      }),
    180_000
  )

  it.effect(
    "a restarted node never applies a recording of its previous boot: refused as own_server_id and warned once; its peer refuses it as old_epoch",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const raw = yield* Pg.rawClient(server.url)
        const captured = yield* raw.listen(channel, (payload) => Envelope.probeNonce(payload) !== undefined)
        const firstBoot = yield* Scope.make()
        const a1 = yield* laneNode({ serverId: "n-a", url: server.url, channel }).pipe(
          Scope.provide(firstBoot)
        )
        const b = yield* laneNode({ serverId: "n-b", url: server.url, channel })
        for (const node of [a1, b]) yield* eventually(aliveOnLane(node, 1), "20 seconds")
        // The first boot flips maintenance on and off; a recorder keeps all it sent.
        yield* a1.mesh.setMaintenance(true)
        yield* eventually(SubscriptionRef.get(b.flags.maintenance))
        yield* a1.mesh.setMaintenance(false)
        yield* eventually(Effect.map(SubscriptionRef.get(b.flags.maintenance), (on) => !on))
        const fromFirstBoot = captured.filter((payload) => payload.includes('"s":"n-a"'))
        assert.isTrue(fromFirstBoot.some((payload) => payload.includes('"enabled":true')))
        yield* Scope.close(firstBoot, Exit.void)

        const logs: Array<{ readonly level: string; readonly message: string }> = []
        const capture = Logger.make(({ logLevel, message }) => {
          logs.push({
            level: logLevel,
            message: Array.isArray(message) ? message.map(String).join(" ") : String(message)
          })
        })
        const a2 = yield* laneNode({ serverId: "n-a", url: server.url, channel, logger: capture })
        const epoch = (yield* laneStats(a2)).epoch
        // b has heard the new boot, so the first one's epoch is old to it.
        yield* eventually(
          Effect.map(laneStats(b), (lane) =>
            lane.members.some((m) => m.server_id === "n-a" && m.epoch === epoch)
          ),
          "20 seconds"
        )
        yield* eventually(aliveOnLane(a2, 1), "20 seconds")
        const before = (yield* laneStats(b)).refused
        for (const payload of fromFirstBoot) yield* raw.notify(channel, payload)
        yield* eventually(
          Effect.map(
            Effect.zip(laneStats(a2), laneStats(b)),
            ([own, peer]) =>
              own.refused.own_server_id === fromFirstBoot.length &&
              (peer.refused.old_epoch ?? 0) - (before.old_epoch ?? 0) === fromFirstBoot.length
          ),
          "20 seconds"
        )
        // Nothing of it applied: no maintenance, no member or peer_up for itself, health unchanged.
        assert.isFalse(yield* SubscriptionRef.get(a2.flags.maintenance))
        assert.isFalse(yield* SubscriptionRef.get(b.flags.maintenance))
        assert.deepStrictEqual(
          (yield* laneStats(a2)).members.map((m) => m.server_id),
          ["n-b"]
        )
        assert.deepStrictEqual(
          a2.events.filter((e) => e._tag === "PeerUp" && e.serverId === "n-a"),
          []
        )
        assert.deepStrictEqual(wakesFrom(a2, "n-a"), [])
        assert.strictEqual((yield* a2.mesh.health).status, "clustered")
        const warnings = logs.filter((l) => l.level === "Warn" && l.message.includes("another boot"))
        assert.strictEqual(warnings.length, 1, "warned once, however many came")
      }),
    60_000
  )

  it.effect.skipIf(external)(
    "a restarted database: down (event, isolated, /readyz 503), back up with one catch-up, wakes flow again",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const a = yield* laneNode({ serverId: "restart-a", url: server.url, channel })
        const b = yield* laneNode({ serverId: "restart-b", url: server.url, channel })
        for (const node of [a, b]) yield* eventually(clustered(node), "60 seconds")

        yield* Effect.ensuring(
          Effect.gen(function* () {
            yield* server.stop
            // A down lane is found at once (the server closes the connection), or at the next check.
            for (const node of [a, b]) {
              yield* eventually(
                Effect.map(node.mesh.health, (h) => h.status === "isolated" && h.lane === "down"),
                "60 seconds"
              )
              assert.include(laneStatuses(node), "down")
              const stats = yield* node.mesh.stats
              const ready = HttpRoutes.readiness(stats)
              assert.deepStrictEqual(
                [ready.ready, ready.status, ready.reason],
                [false, "isolated", "lane_down"]
              )
              assert.isString(stats.enabled ? stats.lane?.last_error : undefined)
            }
          }),
          Effect.orDie(server.start)
        )
        for (const node of [a, b]) {
          yield* eventually(
            Effect.map(clustered(node), (ok) => ok && node.catchUps.length === 1),
            "60 seconds"
          )
          assert.deepStrictEqual(laneStatuses(node).slice(0, 2), ["up", "down"])
          assert.strictEqual(laneStatuses(node).at(-1), "up")
        }
        const pop = yield* park(b, "after-restart")
        yield* a.mesh.messageAvailable({ queue: "after-restart", partition: "p9" })
        assert.strictEqual(yield* Fiber.join(pop), "woken")
        // Some checks later (ten more notifications heard on each lane, its own probes among them), still
        // one catch-up each, and it says since when the lane was away.
        const heard = yield* Effect.forEach([a, b], (node) =>
          Effect.map(laneStats(node), (lane) => lane.notifications_received)
        )
        yield* eventually(
          Effect.map(Effect.forEach([a, b], laneStats), (lanes) =>
            lanes.every((lane, i) => lane.notifications_received >= heard[i]! + 10)
          ),
          "60 seconds"
        )
        for (const node of [a, b]) {
          assert.strictEqual(node.catchUps.length, 1)
          assert.strictEqual(node.catchUps[0]!.reconnects, 1)
          assert.strictEqual(node.catchUps[0]!.channel, channel)
          assert.isAbove(node.catchUps[0]!.downSince, 0)
          const lane = yield* laneStats(node)
          assert.strictEqual(lane.reconnects, 1)
          assert.strictEqual(lane.status, "up")
        }
      }),
    180_000
  )

  it.effect(
    "pg_terminate_backend of the lane's backend is detected, reported and recovered from",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const a = yield* laneNode({ serverId: "victim", url: server.url, channel })
        const b = yield* laneNode({ serverId: "witness", url: server.url, channel })
        for (const node of [a, b]) yield* eventually(aliveOnLane(node, 1), "60 seconds")
        const killed = yield* server.query(
          "SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1",
          [`queen-mesh lane ${a.serverId}`]
        )
        assert.deepStrictEqual(killed, [{ killed: true }])
        // The server says why it ends the session, so the lane need not wait for a check to see it.
        yield* eventually(
          Effect.sync(() => laneStatuses(a).includes("down")),
          "60 seconds"
        )
        yield* eventually(
          Effect.sync(() => laneStatuses(a).at(-1) === "up" && a.catchUps.length === 1),
          "60 seconds"
        )
        assert.strictEqual(b.catchUps.length, 0)
        const pop = yield* park(a, "after-kill")
        yield* b.mesh.messageAvailable({ queue: "after-kill", partition: "p" })
        assert.strictEqual(yield* Fiber.join(pop), "woken")
        assert.include((yield* laneStats(a)).last_error ?? "", "terminating connection")
      }),
    180_000
  )

  it.effect(
    "a 16 MiB MESSAGE_AVAILABLE_BATCH crosses the lane split into valid notifications; every item applies",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const raw = yield* Pg.rawClient(server.url)
        const payloads = yield* raw.listen(channel)
        const a = yield* laneNode({ serverId: "big-a", url: server.url, channel })
        const b = yield* laneNode({ serverId: "big-b", url: server.url, channel })
        for (const node of [a, b]) yield* eventually(aliveOnLane(node, 1), "60 seconds")

        // As many items as keep the frame just under the 16 MiB cap.
        const item = (i: number) => ({
          queue: `q-${"x".repeat(200)}`,
          partition: `p-${i.toString().padStart(8, "0")}-${"y".repeat(180)}`
        })
        const one = Frame.encode({ _tag: "MessageAvailableBatch", items: [Frame.queueItem(item(0))] }).length
        const two = Frame.encode({
          _tag: "MessageAvailableBatch",
          items: [Frame.queueItem(item(0)), Frame.queueItem(item(1))]
        }).length
        const count = Math.floor((Frame.MAX_FRAME_LENGTH - one) / (two - one))
        const items = Array.from({ length: count }, (_, i) => item(i))
        const bytes = Frame.encodeResult({ _tag: "MessageAvailableBatch", items: items.map(Frame.queueItem) })
        assert.isTrue(Result.isSuccess(bytes), "one frame")
        if (Result.isSuccess(bytes))
          assert.isAbove(bytes.success.length, Frame.MAX_FRAME_LENGTH - 2 * (two - one))

        const sentBefore = (yield* laneStats(a)).notifications_sent
        yield* a.mesh.messageAvailableBatch(items)
        yield* eventually(
          Effect.sync(() => wakesFrom(b, a.serverId).length >= count),
          "120 seconds"
        ).pipe(
          // Late or lost: the lanes' own counters (reconnects, drops, refusals) say which.
          Effect.catch((error) =>
            Effect.flatMap(Effect.all([laneStats(a), laneStats(b)]), ([sender, receiver]) =>
              Effect.fail(
                new Error(
                  `${error.message}: ${wakesFrom(b, a.serverId).length} of ${count} items at b\n` +
                    `a's lane: ${JSON.stringify(sender)}\nb's lane: ${JSON.stringify(receiver)}`
                )
              )
            )
          )
        )
        const woken = wakesFrom(b, a.serverId).map((e) => e.item.partition)
        assert.strictEqual(woken.length, count)
        assert.deepStrictEqual(
          woken,
          items.map((i) => i.partition)
        )
        // b can hear the last notification before a has read its statement's result.
        yield* eventually(
          Effect.map(laneStats(a), (lane) => lane.buffered === 0 && lane.notifications_sent > sentBefore),
          "60 seconds"
        )
        const lane = yield* laneStats(a)
        assert.strictEqual(lane.dropped, 0)
        const notifications = lane.notifications_sent - sentBefore
        assert.isAbove(notifications, 2000)
        const big = payloads.filter((p) => p.length > 4000)
        assert.isAtLeast(big.length, notifications - 50)
        for (const payload of payloads) {
          assert.isAtMost(Buffer.byteLength(payload, "utf8"), 7999)
          assert.isTrue(payload.startsWith("qm2.") || payload.startsWith("qmp1."))
        }
        assert.strictEqual((yield* laneStats(b)).status, "up")
      }),
    180_000
  )

  it.effect(
    "lane and TCP at once: hints arrive both ways over both, and the duplicate is harmless",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const ports = [yield* freePort, yield* freePort] as const
        const a = yield* laneNode({
          serverId: "both-a",
          url: server.url,
          channel,
          tcp: { port: ports[0], peers: [ports[1]] }
        })
        const b = yield* laneNode({
          serverId: "both-b",
          url: server.url,
          channel,
          tcp: { port: ports[1], peers: [ports[0]] }
        })
        for (const node of [a, b]) {
          yield* eventually(aliveOnLane(node, 1), "60 seconds")
          yield* eventually(clustered(node), "60 seconds")
          assert.isTrue(Option.isSome(node.mesh.port))
        }
        for (const [from, to] of [
          [a, b],
          [b, a]
        ] as const) {
          const queue = `dual-${from.serverId}`
          const pop = yield* park(to, queue)
          yield* from.mesh.messageAvailable({ queue, partition: "p1" })
          assert.strictEqual(yield* Fiber.join(pop), "woken")
          // The same hint arrives once per carrier; the second finds nothing parked and only refreshes
          // the partition hint, which is a set.
          yield* eventually(
            Effect.sync(() => wakesFrom(to, from.serverId).filter((e) => e.item.queue === queue).length === 2)
          )
          assert.deepStrictEqual(yield* to.waker.takePartitionHints({ queue, tenant: Option.none() }), ["p1"])
          assert.strictEqual(yield* to.waker.parked, 0)
        }
        // One member per server: its link, its inbound HELLO and its lane presence together.
        const members = yield* a.mesh.members
        assert.deepStrictEqual(
          members.map((m) => [
            Option.getOrNull(m.serverId),
            m.foundBy,
            Option.isSome(m.link),
            Option.isSome(m.heard),
            Option.isSome(m.lane)
          ]),
          [["both-b", "config", true, true, true]]
        )
        const stats = yield* a.mesh.stats
        assert.isTrue(stats.enabled && stats.messages_received > 0 && (stats.lane?.frames_received ?? 0) > 0)
        if (!stats.enabled) return
        // One server, heard on both carriers; its lane entry knows it as the configured peer.
        assert.deepStrictEqual(
          stats.servers.map((server) => [server.server_id, server.alive, server.heard_on.join("+")]),
          [["both-b", true, "tcp+lane"]]
        )
        assert.deepStrictEqual([stats.servers_alive, stats.servers_dead], [1, 0])
        assert.deepStrictEqual(
          stats.lane?.members.map((member) => [member.server_id, member.found_by]),
          [["both-b", "config"]]
        )
      }),
    180_000
  )

  it.effect(
    "a database that cannot be reached: the layer builds, the lane is down and the log names the likely cause",
    () =>
      Effect.gen(function* () {
        const closedPort = yield* freePort
        const logs: Array<{ level: string; message: string; annotations: Record<string, unknown> }> = []
        const capture = Logger.make(({ logLevel, message, fiber }) => {
          logs.push({
            level: logLevel,
            message: Array.isArray(message) ? message.map(String).join(" ") : String(message),
            annotations: { ...fiber.getRef(References.CurrentLogAnnotations) }
          })
        })
        const node = yield* laneNode({
          serverId: "unreachable",
          url: `postgres://nobody:pw@127.0.0.1:${closedPort}/postgres`,
          channel: freshChannel(),
          secret: "",
          logger: capture
        })
        yield* eventually(
          Effect.sync(() => logs.some((l) => l.level === "Error" && l.message.includes("did not come up"))),
          "60 seconds"
        )
        const error = logs.find((l) => l.level === "Error" && l.message.includes("did not come up"))!
        assert.strictEqual(error.annotations.reason, "Connect")
        assert.include(String(error.annotations.likely_cause), "QUEEN_MESH_PG_URL")
        assert.isTrue(
          logs.some((l) => l.level === "Warn" && l.message.includes("PostgreSQL lane in open mode")),
          "open mode says so"
        )
        assert.notInclude(JSON.stringify(logs), ":pw@", "the password is never logged")
        const stats = yield* node.mesh.stats
        assert.isTrue(stats.enabled)
        assert.strictEqual(stats.enabled ? stats.lane?.status : undefined, "down")
        const health = yield* node.mesh.health
        assert.deepStrictEqual([health.status, health.lane], ["isolated", "down"])
        assert.isFalse(HttpRoutes.readiness(stats).ready)
        assert.strictEqual(stats.enabled ? stats.key_id : "", null)
      }),
    180_000
  )

  it.effect(
    "layerConfigIfSet: the lane when QUEEN_MESH_PG_URL is set, no lane when it is unset or empty",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const meshWith = (env: Record<string, string>) =>
          Layer.build(
            Mesh.layerTcp().pipe(
              Layer.provideMerge(Postgres.layerConfigIfSet({ checkInterval: "1 second" })),
              Layer.provide(MeshConfig.layer({ serverId: "if-set", port: 0, bindHost: "127.0.0.1" })),
              Layer.provide(ConfigProvider.layer(ConfigProvider.fromEnv({ env })))
            )
          )
        for (const env of [{}, { QUEEN_MESH_PG_URL: "" }, { QUEEN_MESH_PG_URL: "  " }]) {
          const context = yield* meshWith(env)
          const mesh = Context.get(context, Mesh.Mesh)
          assert.isFalse(mesh.active, JSON.stringify(env))
          assert.isFalse((yield* mesh.stats).enabled)
          assert.isDefined(Context.get(context, Postgres.PostgresLane).catchUps)
        }
        const context = yield* meshWith({
          QUEEN_MESH_PG_URL: server.url,
          QUEEN_MESH_PG_CHANNEL: `if_set_${process.pid}`
        })
        const node = nodeFromContext(context)
        yield* eventually(Effect.map(laneStats(node), (lane) => lane.status === "up"))
        // A malformed URL is still refused, naming the variable.
        const error = yield* Effect.flip(meshWith({ QUEEN_MESH_PG_URL: "mysql://u:secret@db/q" }))
        assert.include(String(error), "QUEEN_MESH_PG_URL")
        assert.notInclude(String(error), "secret")
      })
  )

  it.effect("bad options fail the layer with a typed error; the environment is read and checked", () =>
    Effect.gen(function* () {
      const build = (options: Postgres.PostgresOptions) =>
        Effect.scoped(Layer.build(Postgres.layer(options))).pipe(Effect.flip)
      for (const [options, words] of [
        [{ url: "" }, "empty"],
        [{ url: "mysql://h/db" }, "scheme"],
        [{ url: "not a url" }, "not a URL"],
        [{ url: "postgres://h/db", channel: "" }, "empty"],
        [{ url: "postgres://h/db", channel: "c".repeat(64) }, "63 bytes"],
        [{ url: "postgres://h/db", checkInterval: 0 }, "checkInterval"],
        [{ url: "postgres://h/db", heartbeatInterval: "2 seconds", deadThreshold: "1 second" }, "shorter"],
        [{ url: "postgres://h/db", maxMembers: 0 }, "maxMembers"]
      ] as const) {
        const error = yield* build(options)
        assert.strictEqual(error._tag, "PostgresError")
        assert.strictEqual(error._tag === "PostgresError" ? error.reason : "", "InvalidOptions")
        assert.include(error.message, words)
      }

      const fromEnv = (env: Record<string, string>) =>
        Effect.provideService(Postgres.config, ConfigProvider.ConfigProvider, ConfigProvider.fromEnv({ env }))
      const read = yield* fromEnv({ QUEEN_MESH_PG_URL: "postgres://u:secret@db:5432/queen" })
      assert.strictEqual(Redacted.value(read.url), "postgres://u:secret@db:5432/queen")
      assert.isTrue(Option.isNone(read.channel))
      assert.notInclude(String(read.url), "secret", "the URL stays redacted")
      const named = yield* fromEnv({
        QUEEN_MESH_PG_URL: "postgresql:///queen",
        QUEEN_MESH_PG_CHANNEL: "Ours"
      })
      assert.deepStrictEqual(named.channel, Option.some("Ours"))
      for (const [env, words] of [
        [{}, "QUEEN_MESH_PG_URL"],
        [{ QUEEN_MESH_PG_URL: "http://u:secret@db/queen" }, "scheme"],
        [{ QUEEN_MESH_PG_URL: "u:secret@db" }, "QUEEN_MESH_PG_URL"],
        [
          { QUEEN_MESH_PG_URL: "postgres://db/q", QUEEN_MESH_PG_CHANNEL: "x".repeat(64) },
          "QUEEN_MESH_PG_CHANNEL"
        ]
      ] as const) {
        const error = yield* Effect.flip(fromEnv(env))
        assert.include(String(error), words)
        assert.notInclude(String(error), "secret", "the connection string is never repeated")
      }
      // The default channel follows the cluster label and is always a valid channel.
      assert.strictEqual(Postgres.channelFor(""), "queen_mesh")
      assert.strictEqual(Postgres.channelFor("eu_1"), "queen_mesh_eu_1")
      for (const label of ["EU-West", "x".repeat(256), '\u00e9t\u00e9 "quoted"', "eu-1", "eu_1_"]) {
        const channel = Postgres.channelFor(label)
        assert.isUndefined(Postgres.channelProblem(channel), label)
        assert.isTrue(channel.startsWith("queen_mesh_"))
      }
      assert.notStrictEqual(
        Postgres.channelFor("eu-1"),
        Postgres.channelFor("eu_1"),
        "labels never share a channel"
      )
    })
  )
})
