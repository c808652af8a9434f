/**
 * The PostgreSQL lane against a real server (embedded, or `QUEEN_MESH_TEST_PG_URL`): lanes deliver each
 * other's frames and ignore their own, a 2 MiB batch crosses, hostile notifications are refused and
 * counted, a restarted server or a killed backend is recovered from with one catch-up, a deaf connection
 * is found and replaced, the send buffer stays bounded while down, and a standby or a pooler that
 * swallows notifications is named at start. Outcomes only, never speed; real time, short intervals.
 */
import * as Net from "node:net"
import { assert } from "@effect/vitest"
import { Duration, Effect, Layer, Logger, Schedule, type Scope } from "effect"
import * as PgLane from "../../../src/internal/lane/pgConnection.js"
import * as Envelope from "../../../src/internal/lane/pgEnvelope.js"
import { jsonFrame as frame } from "../../fixtures/frames.js"
import { layer } from "../../fixtures/layer.js"
import * as Pg from "../../fixtures/postgres.js"

// ---------------------------------------------------------------------------------------------
// helpers
// ---------------------------------------------------------------------------------------------

const keyring: Envelope.Keyring = { primary: Envelope.key("lane-test-secret"), accepted: [] }

/**
 * Short intervals so the suite takes seconds; outcomes are asserted, never timings. The probe's own
 * timeout stays generous: a busy machine may take seconds to pass a notification round.
 */
const fast = {
  checkInterval: "500 millis",
  probeTimeout: "10 seconds",
  reconnect: Schedule.spaced("100 millis")
} as const

/** The big batch's size: well past one notification's 8000 bytes, a fraction of the frame cap. */
const BATCH_BYTES = 2 * 1024 * 1024

let channels = 0
/** Mixed case, a space and a quote: LISTEN must quote the identifier exactly as pg_notify names it. */
const freshChannel = () => `QM test "${process.pid}" ${++channels}`
let ids = 0
const freshId = (name: string) => `${name}-${process.pid}-${++ids}`

interface Probe {
  readonly lane: PgLane.PgLaneShape
  readonly id: string
  readonly received: Array<{ readonly from: string; readonly frames: ReadonlyArray<Envelope.ReceivedFrame> }>
  readonly refused: Array<PgLane.PgLaneRefusal>
  readonly states: Array<PgLane.PgLaneStatus>
  readonly catchUps: { count: number }
}

/** A lane whose handlers record what it hears. */
const startLane = (
  url: string,
  channel: string,
  name: string,
  options: Partial<PgLane.PgLaneOptions> = {}
): Effect.Effect<Probe, PgLane.PgLaneError, Scope.Scope> =>
  Effect.gen(function* () {
    const id = freshId(name)
    const received: Probe["received"] = []
    const refused: Array<PgLane.PgLaneRefusal> = []
    const states: Array<PgLane.PgLaneStatus> = []
    const catchUps = { count: 0 }
    const lane = yield* PgLane.make(
      { url, channel, serverId: id, keyring, ...fast, ...options },
      {
        onFrames: (from, frames) => received.push({ from, frames }),
        onRefused: (reason) => refused.push(reason),
        onStateChange: (state) => states.push(state.status),
        onCatchUp: () => {
          catchUps.count++
        }
      }
    )
    return { lane, id, received, refused, states, catchUps }
  })

const framesFrom = (probe: Probe, from: string): Array<Envelope.ReceivedFrame> =>
  probe.received.filter((r) => r.from === from).flatMap((r) => [...r.frames])

/** Polls `condition` every 25 ms until it holds; dies after `timeout` naming `what`. */
const eventually = (
  what: string,
  condition: Effect.Effect<boolean> | (() => boolean),
  timeout: Duration.Input = "20 seconds"
): Effect.Effect<void> =>
  Effect.gen(function* () {
    const deadline = Date.now() + Duration.toMillis(Duration.fromInputUnsafe(timeout))
    const check = typeof condition === "function" ? Effect.sync(condition) : condition
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.die(new Error(`timed out waiting for ${what}`))
      yield* Effect.sleep("25 millis")
    }
  })

const upAll = (...probes: ReadonlyArray<Probe>) =>
  Effect.all(
    probes.map((p) => p.lane.awaitUp),
    { concurrency: "unbounded" }
  ).pipe(
    Effect.timeoutOrElse({
      duration: "20 seconds",
      orElse: () => Effect.fail(new Error("lanes did not come up"))
    })
  )

/**
 * A TCP proxy to the server that can swallow every `NotificationResponse` ('A') the server sends, as a
 * pooler in transaction mode effectively does: all of them (`deafNew`), or on the connections open now
 * (`deafenOpen`), a LISTEN connection gone deaf without an error. With `paceMillis` it passes one
 * notification per that many milliseconds, and what follows waits behind it: a server that is slow to
 * deliver a backlog.
 */
const deafProxy = (url: string) =>
  Effect.gen(function* () {
    const target = new URL(url)
    const open = new Set<{ deaf: boolean; readonly sockets: ReadonlyArray<Net.Socket> }>()
    const control = { deafNew: false, paceMillis: 0 }
    const server = yield* Effect.acquireRelease(
      Effect.callback<Net.Server>((resume) => {
        const server = Net.createServer((client) => {
          const upstream = Net.connect(Number(target.port || 5432), target.hostname)
          const link = { deaf: control.deafNew, sockets: [client, upstream] }
          open.add(link)
          let pending = Buffer.alloc(0)
          // In order: a paced notification holds up everything behind it, as a busy server does.
          const queued: Array<Buffer> = []
          let pacing: ReturnType<typeof setTimeout> | undefined
          const forward = (message: Buffer) => {
            if (!(link.deaf && message[0] === 0x41)) client.write(message)
          }
          const drain = () => {
            while (queued.length > 0 && pacing === undefined) {
              const message = queued[0]!
              if (message[0] === 0x41 && control.paceMillis > 0) {
                pacing = setTimeout(() => {
                  pacing = undefined
                  queued.shift()
                  forward(message)
                  drain()
                }, control.paceMillis)
                return
              }
              queued.shift()
              forward(message)
            }
          }
          client.pipe(upstream)
          upstream.on("data", (chunk: Buffer) => {
            pending = Buffer.concat([pending, chunk])
            while (pending.length >= 5) {
              const length = 1 + pending.readUInt32BE(1)
              if (pending.length < length) break
              queued.push(pending.subarray(0, length))
              pending = pending.subarray(length)
            }
            drain()
          })
          const end = () => {
            clearTimeout(pacing)
            open.delete(link)
            client.destroy()
            upstream.destroy()
          }
          client.on("close", end).on("error", end)
          upstream.on("close", end).on("error", end)
        })
        server.listen(0, "127.0.0.1", () => resume(Effect.succeed(server)))
      }),
      (server) =>
        Effect.callback<void>((resume) => {
          for (const link of open) for (const socket of link.sockets) socket.destroy()
          server.close(() => resume(Effect.void))
        })
    )
    const address = server.address()
    const port = typeof address === "object" && address !== null ? address.port : 0
    const proxied = new URL(url)
    proxied.hostname = "127.0.0.1"
    proxied.port = String(port)
    return {
      url: proxied.toString(),
      control,
      deafenOpen: () => {
        for (const link of open) link.deaf = true
      }
    }
  })

// Lane logs (up, down) are noise here; the assertions say what happened.
/** Lanes' probes are theirs; the envelopes are what the tests look at. */
const isProbe = (payload: string) => Envelope.probeNonce(payload) !== undefined

const TestLayer = Layer.merge(Pg.layer, Logger.layer([]))

const external = Pg.externalUrl !== undefined

// ---------------------------------------------------------------------------------------------
// tests
// ---------------------------------------------------------------------------------------------

layer(TestLayer, { excludeTestServices: true, timeout: "180 seconds" })("PostgreSQL lane", (it) => {
  it.effect(
    "a lone notification's statement carries quotes, backslashes and non-ASCII text intact",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const a = yield* startLane(server.url, channel, "a")
        const b = yield* startLane(server.url, channel, "b")
        yield* upAll(a, b)
        // Sent one at a time, so each is a lone NOTIFY with a string constant, not the array form.
        const queues = ["it's", "back\\slash", "both\\'\\\\''", 'quote"d', "caf\u00e9 \u{1f600}", "E'x'"]
        for (const [i, queue] of queues.entries()) {
          assert.isTrue(a.lane.offer(frame(1, { queue, partition: `p${i}` })))
          yield* eventually(`b heard ${JSON.stringify(queue)}`, () => framesFrom(b, a.id).length === i + 1)
        }
        assert.deepStrictEqual(
          framesFrom(b, a.id),
          queues.map((queue, i) => ({ tag: 1, json: { queue, partition: `p${i}` } }))
        )
        const stats = yield* a.lane.stats
        assert.strictEqual(stats.notificationsSent, queues.length)
        assert.deepStrictEqual(b.refused, [])
      }),
    180_000
  )

  it.effect(
    "three lanes on one channel deliver each other's frames, each ignoring its own",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const a = yield* startLane(server.url, channel, "a")
        const b = yield* startLane(server.url, channel, "b")
        const c = yield* startLane(server.url, channel, "c")
        yield* upAll(a, b, c)

        assert.isTrue(a.lane.offer(frame(1, { queue: "orders", partition: "p1" })))
        assert.isTrue(a.lane.offer(frame(40, { enabled: true })))
        assert.isTrue(b.lane.offer(frame(2, { items: [{ queue: "q", partition: "p" }] })))
        assert.isTrue(c.lane.offer(frame(3)))

        yield* eventually("every lane hears the other two", () =>
          [a, b, c].every((to) =>
            [a, b, c].every((from) => to === from || framesFrom(to, from.id).length === (from === a ? 2 : 1))
          )
        )
        for (const to of [b, c]) {
          assert.deepStrictEqual(framesFrom(to, a.id), [
            { tag: 1, json: { queue: "orders", partition: "p1" } },
            { tag: 40, json: { enabled: true } }
          ])
        }
        assert.deepStrictEqual(framesFrom(b, c.id), [{ tag: 3, json: null }], "an empty payload")
        assert.deepStrictEqual(framesFrom(a, b.id), [
          { tag: 2, json: { items: [{ queue: "q", partition: "p" }] } }
        ])
        for (const p of [a, b, c]) assert.deepStrictEqual(framesFrom(p, p.id), [], "its own frames")
        yield* eventually(
          "a saw its own notification and counted it sent",
          Effect.map(a.lane.stats, (s) => s.own === 1 && s.framesSent === 2)
        )
        const stats = yield* a.lane.stats
        assert.strictEqual(stats.notificationsSent, 1, "the frames of one tick share a notification")
        assert.strictEqual(stats.framesSent, 2)
        assert.strictEqual(stats.own, 1)
        assert.strictEqual(stats.framesReceived, 2)
        assert.isTrue(
          Object.values(stats.refused).every((n) => n === 0),
          "nothing refused"
        )
        assert.strictEqual(stats.status, "up")
        assert.isAtLeast(stats.probesReceived, 1)
        assert.deepStrictEqual(a.states, ["up"])
        assert.strictEqual(a.catchUps.count, 0, "no catch-up at the first connect")
      }),
    180_000
  )

  it.effect(
    "a 2 MiB batch crosses split into valid notifications, and every item arrives in order",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const raw = yield* Pg.rawClient(server.url)
        const payloads = yield* raw.listen(channel, isProbe)
        const a = yield* startLane(server.url, channel, "big-a")
        const b = yield* startLane(server.url, channel, "big-b")
        yield* upAll(a, b)

        // 2 MiB: hundreds of notifications, the splitting's every case. The frame cap itself (16 MiB)
        // crosses the lane end to end in test/Postgres.int.test.ts, through two nodes.
        const items: Array<{ queue: string; partition: string; tenant: string }> = []
        let length = '{"items":[]}'.length
        for (let i = 0; ; i++) {
          const item = { queue: `queue-${i % 101}`, partition: `partition-${i}`, tenant: "t-é" }
          const next = length + Buffer.byteLength(JSON.stringify(item)) + 1
          if (1 + next > BATCH_BYTES) break
          items.push(item)
          length = next
        }
        const bytes = frame(2, { items })
        assert.isAbove(bytes.length, BATCH_BYTES - 200)
        assert.isTrue(a.lane.offer(bytes))

        const count = () => framesFrom(b, a.id).reduce((n, f) => n + itemsOf(f).length, 0)
        yield* eventually("every item at b", () => count() >= items.length, "50 seconds")
        const got = framesFrom(b, a.id).flatMap((f) => {
          assert.strictEqual(f.tag, 2)
          return itemsOf(f)
        })
        assert.strictEqual(got.length, items.length)
        assert.deepStrictEqual(got, items)

        // b can hear the last notification before a has read its statement's result.
        yield* eventually(
          "a counted the batch sent",
          Effect.map(a.lane.stats, (s) => s.framesSent === 1)
        )
        const stats = yield* a.lane.stats
        assert.strictEqual(stats.itemsDropped, 0)
        assert.strictEqual(stats.bufferedFrames, 0)
        yield* eventually(
          "the raw listener saw every notification",
          () => payloads.length >= stats.notificationsSent
        )
        assert.strictEqual(payloads.length, stats.notificationsSent)
        assert.isAbove(payloads.length, 250)
        for (const payload of payloads) {
          assert.isAtMost(Buffer.byteLength(payload, "utf8"), 7999)
          assert.isTrue(payload.startsWith("qm2."))
        }
      }),
    180_000
  )

  it.effect(
    "a listener whose backlog arrives slower than its probe timeout stays up: busy, not deaf",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const proxy = yield* deafProxy(server.url)
        const a = yield* startLane(server.url, channel, "backlog-a")
        // b checks every 200 ms with a 1 s probe timeout, through a proxy that will pass one notification
        // per 10 ms: a batch of a few hundred keeps each check's answer and probe seconds behind it.
        const b = yield* startLane(proxy.url, channel, "backlog-b", {
          checkInterval: "200 millis",
          probeTimeout: "1 second"
        })
        yield* upAll(a, b)
        proxy.control.paceMillis = 10
        const items = Array.from({ length: 70_000 }, (_, i) => ({
          queue: `queue-${i % 101}`,
          partition: `p-${i}`
        }))
        assert.isTrue(a.lane.offer(frame(2, { items })))

        const count = () => framesFrom(b, a.id).reduce((n, f) => n + itemsOf(f).length, 0)
        yield* eventually("every item at b", () => count() >= items.length, "120 seconds")
        assert.deepStrictEqual(
          framesFrom(b, a.id).flatMap((f) => itemsOf(f)),
          items
        )
        const stats = yield* b.lane.stats
        assert.isAbove(stats.notificationsReceived, 300, "seconds of backlog")
        assert.strictEqual(stats.checksFailed, 0, "no check judged the busy connection deaf")
        assert.deepStrictEqual(b.states, ["up"])
        assert.strictEqual(b.catchUps.count, 0)
        // A connection that goes quiet is still judged: deafened, it is found out and replaced.
        proxy.deafenOpen()
        yield* eventually("the deaf connection is replaced", () => b.states.includes("down"), "60 seconds")
      }),
    180_000
  )

  it.effect(
    "notifications sent by a plain client with a wrong MAC, a replay, an old epoch or garbage are refused and counted",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const raw = yield* Pg.rawClient(server.url)
        const captured = yield* raw.listen(channel, isProbe)
        const a = yield* startLane(server.url, channel, "honest")
        const b = yield* startLane(server.url, channel, "target")
        yield* upAll(a, b)
        a.lane.offer(frame(40, { enabled: false }))
        yield* eventually(
          "b hears a, and the raw client captured it",
          () => framesFrom(b, a.id).length === 1 && captured.length === 1
        )
        const genuine = captured[0]!

        const [head, keyId, mac] = genuine.split(".", 3)
        const flipped = `${head}.${keyId}.${mac![0] === "0" ? "1" : "0"}${genuine.slice(head!.length + keyId!.length + 3)}`
        const oldEpoch = Envelope.seal(
          new Envelope.Sender(a.id, Envelope.makeEpoch(0, 0), channel, keyring),
          [frame(40, { enabled: true })]
        ).payloads[0]!
        const openMode = Envelope.seal(new Envelope.Sender("mallory", a.lane.epoch, channel, "open"), [
          frame(40, { enabled: true })
        ]).payloads[0]!
        const otherKey = Envelope.seal(
          new Envelope.Sender("mallory", a.lane.epoch, channel, {
            primary: Envelope.key("guess"),
            accepted: []
          }),
          [frame(40, { enabled: true })]
        ).payloads[0]!
        const hostile: ReadonlyArray<readonly [string, PgLane.PgLaneRefusal]> = [
          [flipped, "bad_mac"],
          [genuine, "replayed"],
          [oldEpoch, "old_epoch"],
          [openMode, "unauthenticated"],
          [otherKey, "unknown_key"],
          ["", "malformed"],
          ["hello", "malformed"],
          [`qm2.${keyId}.${mac}.{"s":`, "bad_mac"],
          ["qm2.-.-.not json", "unauthenticated"],
          [`qm2.${"x".repeat(65)}.${mac}.{}`, "malformed"],
          ["\u00ff".repeat(3000), "malformed"]
        ]
        for (const [payload] of hostile) yield* raw.notify(channel, payload)
        // A forged probe is not a refusal: probes are unauthenticated and only a waiting nonce counts.
        yield* raw.notify(channel, Envelope.probe("0".repeat(32)))

        const expected: Record<PgLane.PgLaneRefusal, number> = {
          malformed: 0,
          unknown_key: 0,
          bad_mac: 0,
          unauthenticated: 0,
          own_server_id: 0,
          old_epoch: 0,
          replayed: 0,
          wrong_backend: 0,
          stale: 0
        }
        for (const [, reason] of hostile) expected[reason]++
        yield* eventually(
          "every hostile notification and the forged probe counted at b",
          Effect.map(
            b.lane.stats,
            (s) =>
              Object.values(s.refused).reduce((x, y) => x + y, 0) === hostile.length && s.probesForeign >= 1
          )
        )
        const stats = yield* b.lane.stats
        assert.deepStrictEqual(stats.refused, expected)
        assert.deepStrictEqual([...b.refused].sort(), hostile.map(([, reason]) => reason).sort())
        assert.isAtLeast(stats.probesForeign, 1)
        assert.deepStrictEqual(framesFrom(b, a.id), [{ tag: 40, json: { enabled: false } }])
        assert.deepStrictEqual(framesFrom(b, "mallory"), [])
        assert.strictEqual(b.received.length, 1, "nothing hostile reached onFrames")
        assert.strictEqual(stats.status, "up")

        // The lanes stay up and frames still flow both ways.
        a.lane.offer(frame(41, { enabled: true }))
        b.lane.offer(frame(41, { enabled: false }))
        yield* eventually(
          "frames still flow",
          () => framesFrom(b, a.id).length === 2 && framesFrom(a, b.id).length === 1
        )
        assert.deepStrictEqual(b.states, ["up"])
      }),
    180_000
  )

  it.effect(
    "replays through the server: a receiver with no history, our own id from a previous boot, a forgery of our current one, a notification sealed before LISTEN",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const raw = yield* Pg.rawClient(server.url)
        const captured = yield* raw.listen(channel, isProbe)
        const a = yield* startLane(server.url, channel, "live")
        yield* upAll(a)
        a.lane.offer(frame(40, { enabled: true }))
        yield* eventually("the raw client captured a's notification", () => captured.length === 1)
        const recording = captured[0]!

        // A receiver that starts after the recording and has never heard `a`: no history to compare with,
        // yet the recording comes from the raw client's backend, not a's.
        const fresh = yield* startLane(server.url, channel, "fresh")
        yield* upAll(fresh)
        yield* raw.notify(channel, recording)
        yield* eventually("the fresh receiver refuses the recording", () => fresh.refused.length === 1)
        assert.deepStrictEqual(fresh.refused, ["wrong_backend"])
        assert.deepStrictEqual(framesFrom(fresh, a.id), [])

        // Our own id: from another boot (older and newer), and our current boot forged or recorded.
        const ownId = fresh.id
        const fromRaw = (serverId: string, epoch: string, offset = raw.clockOffset) => {
          const sender = new Envelope.Sender(serverId, epoch, channel, keyring)
          sender.bind(raw.pid, offset)
          return Envelope.seal(sender, [frame(40, { enabled: true })]).payloads[0]!
        }
        const freshEpoch = (yield* fresh.lane.stats).epoch
        const previousBoot = fromRaw(ownId, Envelope.makeEpoch(1_000_000, 0))
        const nextBoot = fromRaw(ownId, Envelope.makeEpoch(Date.now() + 60_000, 0))
        const currentBoot = fromRaw(ownId, freshEpoch)
        const forgedCurrent = currentBoot.replace(/^(qm2\.[^.]+\.)[0-9a-f]{64}/, `$1${"0".repeat(64)}`)
        // An insider with the key, from its own backend, but sealed an hour before `fresh` listened.
        const sealedLongAgo = fromRaw(
          "insider",
          Envelope.makeEpoch(Date.now(), 5),
          raw.clockOffset - 3_600_000
        )
        // The same insider, sealed now: accepted, the control.
        const insiderNow = fromRaw("insider", Envelope.makeEpoch(Date.now(), 6))
        for (const payload of [
          previousBoot,
          nextBoot,
          currentBoot,
          forgedCurrent,
          sealedLongAgo,
          insiderNow
        ]) {
          yield* raw.notify(channel, payload)
        }
        yield* eventually(
          "every replay refused and the control accepted",
          () => fresh.refused.length === 6 && framesFrom(fresh, "insider").length === 1
        )
        assert.deepStrictEqual(fresh.refused, [
          "wrong_backend",
          "own_server_id",
          "own_server_id",
          "replayed",
          "bad_mac",
          "stale"
        ])
        assert.deepStrictEqual(framesFrom(fresh, ownId), [], "nothing of our own id is ever applied")
        const stats = yield* fresh.lane.stats
        assert.strictEqual(stats.refused.own_server_id, 2)
        assert.strictEqual(stats.refused.wrong_backend, 1)
        assert.strictEqual(stats.refused.stale, 1)
        assert.strictEqual(stats.refused.replayed, 1)
        assert.strictEqual(stats.refused.bad_mac, 1)

        // Our own notifications still come back as ours, uncounted as refusals.
        const ownBefore = stats.own
        fresh.lane.offer(frame(41, { enabled: false }))
        yield* eventually(
          "fresh hears its own notification",
          Effect.map(fresh.lane.stats, (s) => s.own > ownBefore)
        )
        assert.strictEqual(fresh.refused.length, 6)
      }),
    30_000
  )

  it.effect.skipIf(external)(
    "a restarted server: down, reconnect, re-LISTEN, up, one catch-up, frames flow again",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const a = yield* startLane(server.url, channel, "restart-a")
        const b = yield* startLane(server.url, channel, "restart-b")
        yield* upAll(a, b)
        a.lane.offer(frame(1, { queue: "before" }))
        yield* eventually("b hears a", () => framesFrom(b, a.id).length === 1)

        yield* server.restart
        yield* eventually(
          "both lanes back up after a catch-up",
          () => [a, b].every((p) => p.catchUps.count === 1 && p.states.at(-1) === "up"),
          "30 seconds"
        )
        for (const p of [a, b]) {
          assert.strictEqual(p.states[0], "up")
          assert.include(p.states, "down")
        }
        a.lane.offer(frame(1, { queue: "after" }))
        b.lane.offer(frame(1, { queue: "back" }))
        yield* eventually(
          "frames flow again, both ways",
          () => framesFrom(b, a.id).length === 2 && framesFrom(a, b.id).length === 1
        )
        assert.deepStrictEqual(framesFrom(b, a.id)[1], { tag: 1, json: { queue: "after" } })
        // A few checks later (three more probes back on each lane), still exactly one catch-up each.
        const probes = yield* Effect.all([a.lane.stats, b.lane.stats])
        yield* eventually(
          "three more checks on each lane",
          Effect.map(Effect.all([a.lane.stats, b.lane.stats]), (now) =>
            now.every((s, i) => s.probesReceived >= probes[i]!.probesReceived + 3)
          )
        )
        const stats = yield* a.lane.stats
        assert.strictEqual(a.catchUps.count, 1)
        assert.strictEqual(b.catchUps.count, 1)
        assert.strictEqual(stats.connects, 2)
        assert.strictEqual(stats.reconnects, 1)
        assert.isString(stats.lastError)
        assert.strictEqual(stats.status, "up")
      }),
    180_000
  )

  it.effect(
    "pg_terminate_backend of the lane's backend is detected and the lane recovers",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const a = yield* startLane(server.url, channel, "victim")
        const b = yield* startLane(server.url, channel, "witness")
        yield* upAll(a, b)
        const killed = yield* server.query(
          "SELECT pg_terminate_backend(pid) AS killed FROM pg_stat_activity WHERE application_name = $1",
          [`queen-mesh lane ${a.id}`]
        )
        assert.deepStrictEqual(killed, [{ killed: true }])
        yield* eventually(
          "the lane back up after a catch-up",
          () => a.catchUps.count === 1 && a.states.at(-1) === "up"
        )
        assert.deepStrictEqual(a.states, ["up", "down", "up"])
        assert.strictEqual(b.catchUps.count, 0)
        a.lane.offer(frame(10, { queue: "q" }))
        b.lane.offer(frame(11, { queue: "q" }))
        yield* eventually(
          "frames flow both ways",
          () => framesFrom(b, a.id).length === 1 && framesFrom(a, b.id).length === 1
        )
        const stats = yield* a.lane.stats
        assert.strictEqual(stats.reconnects, 1)
        assert.include(stats.lastError ?? "", "terminating connection")
      }),
    180_000
  )

  it.effect(
    "a connection that goes deaf without an error is found by the check and replaced",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const proxy = yield* deafProxy(server.url)
        const a = yield* startLane(proxy.url, channel, "deafened")
        const b = yield* startLane(server.url, channel, "speaker")
        yield* upAll(a, b)
        proxy.deafenOpen()
        b.lane.offer(frame(1, { queue: "lost while deaf" }))
        yield* eventually(
          "the lane back up after a catch-up",
          () => a.catchUps.count === 1 && a.states.at(-1) === "up"
        )
        const stats = yield* a.lane.stats
        assert.isAtLeast(stats.checksFailed, 1)
        assert.include(stats.lastError ?? "", "no notification came back")
        b.lane.offer(frame(1, { queue: "heard again" }))
        yield* eventually("a hears b again", () =>
          framesFrom(a, b.id).some((f) => JSON.stringify(f.json).includes("heard again"))
        )
      }),
    180_000
  )

  it.effect.skipIf(external)(
    "the send buffer is bounded while the server is down; what waited is sent after the reconnect",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const channel = freshChannel()
        const byFrames = yield* startLane(server.url, channel, "buffer-frames", { maxBufferedFrames: 50 })
        const byBytes = yield* startLane(server.url, channel, "buffer-bytes", { maxBufferedBytes: 8192 })
        const byAge = yield* startLane(server.url, channel, "buffer-age", { maxBufferedAge: "1 millis" })
        yield* upAll(byFrames, byBytes, byAge)

        yield* Effect.ensuring(
          Effect.gen(function* () {
            yield* server.stop
            yield* eventually("the lanes down", () =>
              [byFrames, byBytes, byAge].every((p) => p.states.at(-1) === "down")
            )
            for (let i = 0; i < 5; i++) byAge.lane.offer(frame(1, { queue: `stale${i}` }))
            let accepted = 0
            for (let i = 0; i < 10_000; i++) {
              if (byFrames.lane.offer(frame(1, { queue: `q${i}` }))) accepted++
              byBytes.lane.offer(frame(2, { items: [{ queue: "x".repeat(500), partition: `${i}` }] }))
            }
            assert.strictEqual(accepted, 50)
            const f = yield* byFrames.lane.stats
            assert.strictEqual(f.bufferedFrames, 50)
            assert.strictEqual(f.dropped.bufferFull, 10_000 - 50)
            const b = yield* byBytes.lane.stats
            // Taken while under 8192 bytes: the frame that crossed the mark is in, none after it.
            const largest = frame(2, { items: [{ queue: "x".repeat(500), partition: "9999" }] }).length
            assert.isAtLeast(b.bufferedBytes, 8192)
            assert.isBelow(b.bufferedBytes, 8192 + largest)
            assert.strictEqual(b.dropped.bufferFull, 10_000 - b.bufferedFrames)
          }),
          Effect.orDie(server.start)
        )
        yield* eventually(
          "both buffers drained into notifications",
          Effect.map(
            Effect.all([byFrames.lane.stats, byBytes.lane.stats]),
            ([f, b]) =>
              f.bufferedFrames === 0 && f.framesSent === 50 && b.bufferedFrames === 0 && b.framesSent > 0
          ),
          "30 seconds"
        )
        const f = yield* byFrames.lane.stats
        assert.strictEqual(f.framesOffered, f.framesSent + f.dropped.bufferFull)
        assert.strictEqual(f.dropped.stale, 0)
        // Older than `maxBufferedAge` at the reconnect: discarded, not sent.
        yield* eventually("the stale lane back up", () => byAge.states.at(-1) === "up")
        const aged = yield* byAge.lane.stats
        assert.strictEqual(aged.dropped.stale, 5)
        assert.strictEqual(aged.framesSent, 0)
        assert.strictEqual(aged.bufferedFrames, 0)
      }),
    180_000
  )

  it.effect(
    "a pooler that swallows notifications: the start-up probe fails and names it",
    () =>
      Effect.gen(function* () {
        const server = yield* Pg.PgServer
        const proxy = yield* deafProxy(server.url)
        proxy.control.deafNew = true
        const lane = yield* startLane(proxy.url, freshChannel(), "pooled", { probeTimeout: "1 second" })
        const error = yield* Effect.flip(lane.lane.started)
        assert.strictEqual(error.reason, "Deaf")
        assert.include(error.message, "no notification came back within 1000 ms")
        assert.include(error.message, "a pooler in transaction mode (e.g. PgBouncer)")
        const state = yield* lane.lane.state
        assert.strictEqual(state.status, "down")
        assert.strictEqual(state.error?.reason, "Deaf")
        assert.isFalse(lane.states.includes("up"))
      }),
    180_000
  )

  it.effect(
    "a read-only server (a standby): the start-up probe reports the read-only cause",
    () =>
      Effect.gen(function* () {
        const standby = yield* Pg.make({ standby: true })
        const rows = yield* standby.query("SELECT pg_is_in_recovery() AS recovery")
        assert.deepStrictEqual(rows, [{ recovery: true }])
        const lane = yield* startLane(standby.url, freshChannel(), "read-only")
        const error = yield* Effect.flip(lane.lane.started)
        assert.strictEqual(error.reason, "ReadOnly")
        assert.include(error.message, "the server is read-only (a standby?): pg_notify is refused")
        yield* eventually(
          "a second attempt, still down",
          Effect.map(lane.lane.stats, (s) => s.failedAttempts >= 2)
        )
        const state = yield* lane.lane.state
        assert.strictEqual(state.status, "down")
        assert.strictEqual(state.error?.reason, "ReadOnly")
      }),
    180_000
  )

  it.effect("invalid options fail make, before any connection", () =>
    Effect.gen(function* () {
      const server = yield* Pg.PgServer
      const handlers = { onFrames: () => {} }
      const base = { url: server.url, channel: "c", serverId: "s", keyring }
      for (const options of [
        { ...base, channel: "x".repeat(64) },
        { ...base, serverId: "" },
        { ...base, keyring: { primary: { id: "a.b", secret: "s" }, accepted: [] } },
        { ...base, payloadLimit: 8000 },
        { ...base, payloadLimit: 300 },
        { ...base, maxBufferedFrames: 0 }
      ]) {
        const error = yield* Effect.flip(PgLane.make(options, handlers))
        assert.strictEqual(error.reason, "InvalidOptions")
      }
    })
  )
})

const itemsOf = (f: Envelope.ReceivedFrame): ReadonlyArray<unknown> => {
  const json = f.json
  if (typeof json !== "object" || json === null || !("items" in json) || !Array.isArray(json.items)) return []
  return json.items
}
