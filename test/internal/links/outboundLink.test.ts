/**
 * OutboundLink alone: one dialer over a scripted transport double, under TestClock. The double plays
 * the listening peer (it refuses or accepts each dial, writes what a listener would write first, closes,
 * resets, or stops taking writes) and records every dial and every frame written, with its clock time.
 * Covered: the dial and reconnect schedule, the challenge wait in each auth mode, the HELLO, the "mesh
 * link up" line, the outbound liveness check and the rate of the failure warnings.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  Clock,
  Deferred,
  Duration,
  Effect,
  Latch,
  Option,
  Queue,
  Redacted,
  References,
  Result,
  Schedule
} from "effect"
import { TestClock } from "effect/testing"
import * as Frame from "../../../src/Frame.js"
import * as Handshake from "../../../src/internal/links/handshake.js"
import * as Heartbeats from "../../../src/internal/links/heartbeats.js"
import {
  describeFailure,
  OutboundLink,
  type OutboundOptions,
  reconnectSchedule
} from "../../../src/internal/links/outboundLink.js"
import { PeerLink } from "../../../src/internal/links/peerLink.js"
import { SelfDials } from "../../../src/internal/links/selfDials.js"
import { FrameDecoder } from "../../../src/internal/wire/frameDecoder.js"
import { LinkDown, TransportError } from "../../../src/MeshError.js"
import * as MeshEvent from "../../../src/MeshEvent.js"
import * as MeshTest from "../../../src/MeshTest.js"
import type { Connection, TransportShape } from "../../../src/Transport.js"
import { captureLogs, type LogLine } from "../../fixtures/logs.js"

const SECRET = "s3cr3t"
const REMOTE = "10.0.0.2"

/** A frame the dialer wrote, decoded, with the clock time of the write. */
interface Written {
  readonly tag: number
  readonly payload: Uint8Array
  readonly at: number
}

/** The listening side of one accepted dial. */
interface PeerEnd {
  /** Frames the dialer wrote on this connection. */
  readonly written: Array<Written>
  /** The dialer's side is still open (its session's scope has not closed). */
  readonly open: () => boolean
  /** Writes bytes to the dialer, as a listener does. */
  readonly send: (bytes: Uint8Array) => Effect.Effect<void>
  /** Closes the listener's side: the dialer's read ends. */
  readonly close: Effect.Effect<void>
  /** Breaks the connection: the dialer's read fails. */
  readonly reset: Effect.Effect<void>
  /** Stops taking writes (a peer that stopped reading, its buffers full), or takes them again. */
  readonly stall: (stalled: boolean) => Effect.Effect<void>
}

/**
 * A transport whose only peer is scripted: `failure` refuses dials with that error; otherwise a dial
 * connects, `greeting` (if any) is written to the dialer first, and `ends` gets the listener's side.
 */
const makePeer = Effect.sync(() => {
  const dials: Array<number> = []
  const ends: Array<PeerEnd> = []
  const script: { failure: TransportError | undefined; greeting: Uint8Array | undefined } = {
    failure: undefined,
    greeting: undefined
  }
  const transport: TransportShape = {
    listen: () => Effect.die(new Error("a dialer never listens")),
    dial: (host, port) =>
      Effect.gen(function* () {
        dials.push(yield* Clock.currentTimeMillis)
        if (script.failure !== undefined) return yield* script.failure
        const address = `${host}:${port}`
        const inbound = yield* Queue.unbounded<Uint8Array>()
        const ended = yield* Deferred.make<void, TransportError>()
        const writes = yield* Latch.make(true)
        const decoder = new FrameDecoder()
        const written: Array<Written> = []
        let open = true
        yield* Effect.addFinalizer(() =>
          Effect.sync(() => {
            open = false
          })
        )
        ends.push({
          written,
          open: () => open,
          send: (bytes) => Queue.offer(inbound, bytes),
          close: Deferred.succeed(ended, undefined),
          reset: Deferred.fail(
            ended,
            new TransportError({ reason: "Read", address, cause: new Error("connection reset") })
          ),
          stall: (stalled) => (stalled ? writes.close : writes.open)
        })
        if (script.greeting !== undefined) yield* Queue.offer(inbound, script.greeting)
        const connection: Connection = {
          remoteAddress: Option.some(REMOTE),
          read: (onChunk) =>
            Effect.gen(function* () {
              while (true) {
                const next = yield* Effect.raceFirst(
                  Effect.map(Queue.take(inbound), Option.some),
                  Effect.as(Deferred.await(ended), Option.none<Uint8Array>())
                )
                if (Option.isNone(next)) return
                const effect = onChunk(next.value)
                if (effect !== undefined) yield* effect
              }
            }),
          write: (bytes) =>
            Effect.gen(function* () {
              if (!open || (yield* Deferred.isDone(ended))) {
                return yield* new TransportError({ reason: "Closed", address })
              }
              yield* writes.await
              const at = yield* Clock.currentTimeMillis
              decoder.push(bytes, (tag, payload) =>
                written.push({ tag, payload: Uint8Array.from(payload), at })
              )
            })
        }
        return connection
      })
  }
  return { transport, dials, ends, script }
})

const refused = new TransportError({
  reason: "Dial",
  address: "b:6633",
  cause: new Error("connection refused")
})

const defaults = {
  serverId: "a",
  secret: Redacted.make(SECRET),
  heartbeatInterval: Duration.seconds(1),
  authFailureDelay: Duration.seconds(1),
  schedule: reconnectSchedule,
  auth: "legacy",
  challengeWait: Duration.millis(500),
  handshakeTimeout: Duration.seconds(5),
  label: "",
  advert: Handshake.NO_ADVERT,
  startGrace: Duration.seconds(5),
  deadThreshold: Duration.seconds(5),
  peerSilence: () => undefined
} satisfies Omit<OutboundOptions, "selfDials" | "events" | "heartbeats">

/** A dialer of `b:6633` from node `a`, running in the test's scope, its log lines and events kept. */
const start = (
  overrides: Partial<OutboundOptions> = {},
  prepare: (peer: Effect.Success<typeof makePeer>) => void = () => {}
) =>
  Effect.gen(function* () {
    const peer = yield* makePeer
    prepare(peer)
    const events = yield* MeshEvent.make
    const seen: Array<MeshEvent.MeshEvent> = []
    yield* events.observe((event) => seen.push(event))
    const clock = yield* Clock.Clock
    const selfDials = new SelfDials(() => clock.currentTimeMillisUnsafe())
    const link = new PeerLink({ host: "b", port: 6633 }, "b:6633", 1024, 1 << 20)
    const log = yield* captureLogs
    // The node's heartbeat timer, at the interval the dialer is given.
    const heartbeats = yield* Heartbeats.make(overrides.heartbeatInterval ?? defaults.heartbeatInterval)
    const outbound = new OutboundLink(link, peer.transport, {
      ...defaults,
      heartbeats,
      selfDials,
      events,
      ...overrides
    })
    yield* outbound.run.pipe(
      Effect.provide(log.layer),
      Effect.provideService(References.MinimumLogLevel, "Debug"),
      Effect.forkScoped
    )
    yield* MeshTest.settle
    return { ...peer, link, lines: log.lines, linesOf: log.withMessage, seen, selfDials }
  })

/** Moves the clock by `millis`, then lets everything that can run without it run. */
const advance = (millis: number) => Effect.andThen(TestClock.adjust(millis), MeshTest.settle)

const until = (check: () => boolean) => MeshTest.settleUntil(Effect.sync(check))

const decode = (written: Written) => Result.getOrThrow(Frame.decodePayload(written.tag, written.payload))

/** The HELLO written on a connection, judged as listener `b` in `mode` would judge it. */
const judged = (
  written: Written,
  mode: Handshake.HandshakeMode,
  challenge: Option.Option<Frame.Challenge> = Option.none()
) =>
  Handshake.judge(written.tag, written.payload, {
    secret: SECRET,
    mode,
    challenge,
    selfId: "b",
    label: ""
  })

/** Delays between consecutive dials. */
const gaps = (dials: ReadonlyArray<number>) => dials.slice(1).map((at, i) => at - dials[i]!)

describe("OutboundLink", () => {
  describe("the dial and reconnect schedule", () => {
    it.effect("a refused peer is dialled at once, then after 250 ms doubling, capped at 5 s", () =>
      Effect.gen(function* () {
        const dialer = yield* start({}, (peer) => {
          peer.script.failure = refused
        })
        assert.deepStrictEqual(dialer.dials, [0])
        for (const delay of [250, 500, 1000, 2000, 4000, 5000, 5000]) {
          const count = dialer.dials.length
          yield* advance(delay - 1)
          assert.strictEqual(dialer.dials.length, count, "dialled before its backoff ran out")
          yield* TestClock.adjust(1)
          yield* until(() => dialer.dials.length === count + 1)
        }
        assert.deepStrictEqual(gaps(dialer.dials), [250, 500, 1000, 2000, 4000, 5000, 5000])
        assert.deepStrictEqual(dialer.link.snapshot().lastError, Option.some("refused"))
        assert.strictEqual(dialer.link.snapshot().counters.dropped_down, 0)
      })
    )

    it.effect(
      "the backoff starts afresh after an established session, never after one closed on our HELLO",
      () =>
        Effect.gen(function* () {
          const dialer = yield* start({}, (peer) => {
            peer.script.failure = refused
          })
          // Refused at 0, 250, 750: the next dial waits 1 s.
          yield* advance(250)
          yield* advance(500)
          assert.strictEqual(dialer.dials.length, 3)
          dialer.script.failure = undefined
          yield* advance(1000)
          yield* until(() => dialer.ends.length === 1 && dialer.ends[0]!.written.length === 1)
          // Up for the heartbeat interval past the listener's failure delay (2 s): established. The
          // peer closes later; the next dial follows after 250 ms.
          yield* advance(2000)
          yield* advance(500)
          yield* dialer.ends[0]!.close
          yield* until(() => dialer.link.snapshot().counters.reconnects === 1)
          yield* advance(249)
          assert.strictEqual(dialer.dials.length, 4)
          yield* advance(1)
          yield* until(() => dialer.ends.length === 2)
          // Closed right after each HELLO (a listener refusing it): 500 ms, then 1 s, then 2 s.
          for (const [i, delay] of [500, 1000, 2000].entries()) {
            // Its HELLO written (a heartbeat may follow at once: the node's timer ticks on its own phase).
            yield* until(() => dialer.ends[i + 1]!.written.length >= 1)
            yield* dialer.ends[i + 1]!.close
            yield* advance(delay - 1)
            assert.strictEqual(dialer.ends.length, i + 2, "redialled before its backoff ran out")
            yield* advance(1)
            yield* until(() => dialer.ends.length === i + 3)
          }
          assert.deepStrictEqual(gaps(dialer.dials), [250, 500, 1000, 2750, 500, 1000, 2000])
        })
    )

    it.effect("the schedule given is the one used, and one that ends leaves the peer alone", () =>
      Effect.gen(function* () {
        const dialer = yield* start(
          { schedule: Schedule.max([Schedule.spaced("100 millis"), Schedule.recurs(2)]) },
          (peer) => {
            peer.script.failure = refused
          }
        )
        yield* advance(100)
        yield* advance(100)
        yield* until(() => dialer.linesOf("mesh peer given up: the reconnect schedule ended").length === 1)
        yield* advance(60_000)
        assert.deepStrictEqual(dialer.dials, [0, 100, 200])
      })
    )
  })

  describe("the challenge wait and the HELLO", () => {
    it.effect(
      "legacy: writes a legacy HELLO at once, reads no challenge, then the queue and heartbeats",
      () =>
        Effect.gen(function* () {
          const advert: Handshake.Advert = {
            http_addr: Option.some("http://10.0.0.1:6632"),
            eph_epoch: Option.some("1f")
          }
          const challenge = yield* Handshake.makeChallenge("b", "")
          const dialer = yield* start({ advert }, (peer) => {
            // A v2 listener's challenge: a legacy dialer never reads it.
            peer.script.greeting = Frame.encode(challenge)
          })
          yield* until(() => dialer.ends[0]?.written.length === 1)
          const end = dialer.ends[0]!
          const hello = end.written[0]!
          assert.strictEqual(hello.tag, Frame.Tag.HELLO)
          assert.strictEqual(hello.at, 0)
          const frame = decode(hello)
          assert.strictEqual(frame._tag, "Hello")
          if (frame._tag !== "Hello") return
          assert.strictEqual(frame.server_id, "a")
          assert.strictEqual(frame.mac, Handshake.mac(SECRET, frame.nonce))
          assert.isTrue(Option.isNone(frame.v2))
          assert.deepStrictEqual([frame.http_addr, frame.eph_epoch], [advert.http_addr, advert.eph_epoch])
          const verdict = judged(hello, "legacy")
          assert.isTrue(Result.isSuccess(verdict))
          assert.include(Result.getOrThrow(verdict), { serverId: "a", version: 1 })
          assert.isTrue(Option.isNone(dialer.link.snapshot().learnedId))
          // The link is up: frames handed to it are written after the HELLO.
          assert.isTrue(dialer.link.isConnected)
          assert.deepStrictEqual(dialer.link.snapshot().resolvedIp, Option.some(REMOTE))
          const wake = Frame.encode({
            _tag: "MessageAvailable",
            ...Frame.queueItem({ queue: "q", partition: "p" })
          })
          assert.isTrue(dialer.link.offer(wake))
          yield* until(() => end.written.length === 2)
          assert.strictEqual(end.written[1]!.tag, Frame.Tag.MESSAGE_AVAILABLE)
          // A heartbeat carrying our server id every interval, busy or not.
          yield* advance(1000)
          yield* until(() => end.written.length === 3)
          yield* advance(1000)
          yield* until(() => end.written.length === 4)
          for (const written of end.written.slice(2)) {
            assert.deepStrictEqual(decode(written), Frame.heartbeat("a"))
          }
          assert.deepStrictEqual(
            end.written.map((w) => w.at),
            [0, 0, 1000, 2000]
          )
          assert.include(dialer.link.snapshot().counters, { handed: 3, written: 3 })
          // Send-only: whatever the listener writes now is not read, and breaks nothing.
          yield* end.send(Buffer.from("\u0000\u0000\u0000\u0000 not a frame"))
          yield* advance(1000)
          yield* until(() => end.written.length === 5)
          assert.isTrue(dialer.link.isConnected)
          assert.deepStrictEqual(dialer.dials, [0])
        })
    )

    it.effect("permissive: answers a challenge with a v2 HELLO at once, and learns the peer's id", () =>
      Effect.gen(function* () {
        const challenge = yield* Handshake.makeChallenge("queen-b", "blue")
        const dialer = yield* start({ auth: "permissive", label: "blue" }, (peer) => {
          peer.script.greeting = Frame.encode(challenge)
        })
        yield* until(() => dialer.ends[0]?.written.length === 1)
        const hello = dialer.ends[0]!.written[0]!
        assert.strictEqual(hello.at, 0)
        const verdict = Handshake.judge(hello.tag, hello.payload, {
          secret: SECRET,
          mode: "required",
          challenge: Option.some(challenge),
          selfId: "queen-b",
          label: "blue"
        })
        assert.isTrue(Result.isSuccess(verdict), JSON.stringify(verdict))
        assert.include(Result.getOrThrow(verdict), { serverId: "a", version: 2 })
        assert.deepStrictEqual(dialer.link.snapshot().learnedId, Option.some("queen-b"))
      })
    )

    it.effect("permissive: without a challenge, waits the challenge wait, then writes a legacy HELLO", () =>
      Effect.gen(function* () {
        const dialer = yield* start({ auth: "permissive", challengeWait: Duration.millis(500) })
        yield* advance(499)
        assert.strictEqual(dialer.ends.length, 1)
        assert.strictEqual(dialer.ends[0]!.written.length, 0)
        assert.isFalse(dialer.link.isConnected)
        yield* TestClock.adjust(1)
        yield* until(() => dialer.ends[0]!.written.length === 1)
        const hello = dialer.ends[0]!.written[0]!
        assert.strictEqual(hello.at, 500)
        assert.include(Result.getOrThrow(judged(hello, "permissive")), { serverId: "a", version: 1 })
        assert.isTrue(dialer.link.isConnected)
      })
    )

    it.effect("permissive: a first frame that is no challenge means a legacy HELLO at once", () =>
      Effect.gen(function* () {
        const dialer = yield* start({ auth: "permissive" }, (peer) => {
          peer.script.greeting = Frame.encode(Frame.heartbeat("b"))
        })
        yield* until(() => dialer.ends[0]?.written.length === 1)
        const hello = dialer.ends[0]!.written[0]!
        assert.strictEqual(hello.at, 0)
        assert.include(Result.getOrThrow(judged(hello, "permissive")), { version: 1 })
        assert.isTrue(Option.isNone(dialer.link.snapshot().learnedId))
      })
    )

    it.effect("required: answers a challenge with a v2 HELLO", () =>
      Effect.gen(function* () {
        const challenge = yield* Handshake.makeChallenge("b", "")
        const dialer = yield* start({ auth: "required" }, (peer) => {
          peer.script.greeting = Frame.encode(challenge)
        })
        yield* until(() => dialer.ends[0]?.written.length === 1)
        const hello = dialer.ends[0]!.written[0]!
        assert.include(Result.getOrThrow(judged(hello, "required", Option.some(challenge))), { version: 2 })
      })
    )

    it.effect("required: no challenge within the handshake timeout writes nothing and closes", () =>
      Effect.gen(function* () {
        const dialer = yield* start({ auth: "required", handshakeTimeout: Duration.seconds(5) })
        yield* advance(4999)
        assert.isTrue(dialer.ends[0]!.open())
        assert.strictEqual(dialer.ends[0]!.written.length, 0)
        yield* TestClock.adjust(1)
        yield* until(() => !dialer.ends[0]!.open())
        assert.strictEqual(dialer.ends[0]!.written.length, 0)
        assert.deepStrictEqual(dialer.link.snapshot().lastError, Option.some("no challenge"))
        assert.strictEqual(dialer.link.snapshot().counters.reconnects, 0)
        // And it dials again on its backoff.
        yield* advance(250)
        yield* until(() => dialer.dials.length === 2)
      })
    )

    it.effect("required: a first frame that is no challenge is a failure, never a legacy HELLO", () =>
      Effect.gen(function* () {
        const dialer = yield* start({ auth: "required" }, (peer) => {
          peer.script.greeting = Frame.encode(Frame.heartbeat("b"))
        })
        yield* until(() => dialer.ends[0] !== undefined && !dialer.ends[0].open())
        assert.strictEqual(dialer.ends[0]!.written.length, 0)
        assert.deepStrictEqual(
          dialer.link.snapshot().lastError,
          Option.some("invalid challenge (not a challenge)")
        )
      })
    )
  })

  describe('"mesh link up"', () => {
    it.effect("is said once the link is established, once, with the address it reached", () =>
      Effect.gen(function* () {
        const dialer = yield* start()
        yield* until(() => dialer.link.isConnected)
        assert.deepStrictEqual(
          dialer.seen.filter((e) => e._tag === "LinkUp"),
          [{ _tag: "LinkUp", peer: "b:6633", remote: REMOTE }]
        )
        // Established: up for a heartbeat interval past the listener's failure delay.
        yield* advance(1999)
        assert.deepStrictEqual(dialer.linesOf("mesh link up"), [])
        yield* TestClock.adjust(1)
        yield* until(() => dialer.linesOf("mesh link up").length === 1)
        yield* advance(60_000)
        const up = dialer.linesOf("mesh link up")
        assert.strictEqual(up.length, 1)
        assert.include(up[0]!, { level: "INFO", at: 2000 })
        assert.include(up[0]!.annotations, { resolved_ip: REMOTE, peer: "b:6633", module: "Peers" })
      })
    )

    it.effect("is not said for a session closed before it was established", () =>
      Effect.gen(function* () {
        const dialer = yield* start()
        yield* until(() => dialer.link.isConnected)
        yield* advance(1000)
        yield* dialer.ends[0]!.close
        yield* until(() => !dialer.link.isConnected)
        yield* advance(1500)
        assert.deepStrictEqual(dialer.linesOf("mesh link up"), [])
      })
    )

    it.effect(
      "is never said for an entry naming this node: recognised by our listener, it is not dialled again",
      () =>
        Effect.gen(function* () {
          const dialer = yield* start()
          yield* until(() => dialer.ends[0]?.written.length === 1)
          const hello = decode(dialer.ends[0]!.written[0]!)
          if (hello._tag !== "Hello") return assert.fail("no HELLO")
          // Our own listener judges the HELLO: it carries one of our nonces.
          assert.isTrue(dialer.selfDials.isOwnHello(hello.nonce))
          assert.isTrue(dialer.link.isSelf)
          assert.deepStrictEqual(
            dialer.seen.filter((e) => e._tag === "SelfRecognized"),
            [{ _tag: "SelfRecognized", peer: "b:6633" }]
          )
          // Past the moment the link would count as established, still open: no "mesh link up".
          yield* advance(2500)
          assert.deepStrictEqual(dialer.linesOf("mesh link up"), [])
          // Our listener closes its own dial; the dialer stops for good, quietly.
          yield* dialer.ends[0]!.close
          yield* until(
            () => dialer.linesOf("the peer list names this node itself: not dialling it").length === 1
          )
          yield* advance(120_000)
          assert.deepStrictEqual(dialer.dials, [0])
          assert.deepStrictEqual(dialer.linesOf("mesh link up"), [])
          assert.deepStrictEqual(
            dialer.lines.filter((line) => line.level === "WARN" || line.level === "ERROR"),
            []
          )
          const state = dialer.link.snapshot()
          assert.include(state, { self: true, connected: false })
          assert.include(state.counters, { reconnects: 0 })
          assert.isTrue(Option.isNone(state.lastError))
          assert.deepStrictEqual(
            dialer.seen.filter((e) => e._tag === "LinkDown"),
            []
          )
        })
    )
  })

  describe("the liveness check", () => {
    it.effect(
      "closes a link whose peer has been silent for the dead threshold, and dials again at once",
      () =>
        Effect.gen(function* () {
          let silence: number | undefined
          const asked: Array<PeerLink> = []
          const dialer = yield* start({
            deadThreshold: Duration.seconds(5),
            peerSilence: (link) => {
              asked.push(link)
              return silence
            }
          })
          yield* until(() => dialer.link.isConnected)
          // Never heard from (no inbound link yet): nothing to judge by.
          yield* advance(1000)
          yield* advance(1000)
          yield* advance(1000)
          yield* advance(1000)
          yield* advance(1000)
          yield* advance(1000)
          assert.strictEqual(dialer.dials.length, 1)
          // Heard from just within the threshold: alive.
          silence = 4999
          yield* advance(1000)
          assert.strictEqual(dialer.dials.length, 1)
          assert.isTrue(asked.length > 0 && asked.every((link) => link === dialer.link))
          // Silent for the threshold: closed on this tick, dialled again on the same instant.
          silence = 5000
          yield* TestClock.adjust(1000)
          yield* until(() => dialer.dials.length === 2)
          assert.deepStrictEqual(dialer.dials, [0, 8000])
          assert.isFalse(dialer.ends[0]!.open())
          assert.strictEqual(dialer.link.snapshot().counters.silent_closes, 1)
          const closed = dialer.linesOf("mesh link closed by its liveness check; dialling again")
          assert.strictEqual(closed.length, 1)
          assert.include(closed[0]!, { level: "WARN", at: 8000 })
          assert.include(closed[0]!.annotations, { reason: "peer silent", dead_threshold_ms: 5000 })
          assert.deepStrictEqual(dialer.link.snapshot().lastError, Option.some("peer silent"))
        })
    )

    it.effect("after a liveness close the backoff starts afresh", () =>
      Effect.gen(function* () {
        let silence: number | undefined
        const dialer = yield* start({ peerSilence: () => silence }, (peer) => {
          peer.script.failure = refused
        })
        // Refused at 0, 250, 750 and 1750: the backoff has grown to 2 s.
        yield* advance(250)
        yield* advance(500)
        yield* advance(1000)
        dialer.script.failure = undefined
        yield* advance(2000)
        yield* until(() => dialer.link.isConnected)
        silence = 60_000
        yield* advance(4000)
        // Closed by the check at 8.75 s and dialled at once; that dial is refused, and the next one
        // follows the backoff's first delay, not the 4 s it had grown to.
        dialer.script.failure = refused
        yield* TestClock.adjust(1000)
        yield* until(() => dialer.dials.length === 6)
        yield* advance(249)
        assert.strictEqual(dialer.dials.length, 6)
        yield* TestClock.adjust(1)
        yield* until(() => dialer.dials.length === 7)
        assert.deepStrictEqual(gaps(dialer.dials), [250, 500, 1000, 2000, 5000, 250])
      })
    )

    it.effect("judges silence only once the link itself has been up for the dead threshold", () =>
      Effect.gen(function* () {
        // A peer silent for ages before this link came up gets the threshold to speak on it.
        const dialer = yield* start({ deadThreshold: Duration.seconds(5), peerSilence: () => 60_000 })
        yield* until(() => dialer.link.isConnected)
        yield* advance(4000)
        assert.strictEqual(dialer.dials.length, 1)
        yield* TestClock.adjust(1000)
        yield* until(() => dialer.dials.length === 2)
        assert.deepStrictEqual(dialer.dials, [0, 5000])
      })
    )

    it.effect("closes a link whose writes have not drained for the dead threshold", () =>
      Effect.gen(function* () {
        const dialer = yield* start({ deadThreshold: Duration.seconds(5) })
        yield* until(() => dialer.ends[0]?.written.length === 1)
        yield* dialer.ends[0]!.stall(true)
        // The first heartbeat (at 1 s) is taken and never drains.
        yield* advance(1000)
        assert.strictEqual(dialer.link.writeStartedAt, 1000)
        yield* advance(4000)
        assert.strictEqual(dialer.dials.length, 1)
        yield* TestClock.adjust(1000)
        yield* until(() => dialer.dials.length === 2)
        assert.deepStrictEqual(dialer.dials, [0, 6000])
        const state = dialer.link.snapshot()
        assert.include(state.counters, { stalled_closes: 1, silent_closes: 0 })
        // Six heartbeats were handed to it (1 s to 6 s), none written: discarded with the link.
        assert.include(state.counters, { written: 0, discarded: 6, queued: 0 })
        const closed = dialer.linesOf("mesh link closed by its liveness check; dialling again")
        assert.include(closed[0]!.annotations, { reason: "write stalled" })
      })
    )

    it.effect("leaves a link alone whose writes drain and whose peer speaks", () =>
      Effect.gen(function* () {
        const dialer = yield* start({ deadThreshold: Duration.seconds(5), peerSilence: () => 1000 })
        yield* until(() => dialer.link.isConnected)
        for (let i = 0; i < 30; i++) yield* advance(1000)
        assert.deepStrictEqual(dialer.dials, [0])
        assert.include(dialer.link.snapshot().counters, {
          silent_closes: 0,
          stalled_closes: 0,
          reconnects: 0
        })
        yield* until(() => dialer.ends[0]!.written.length === 31)
      })
    )
  })

  describe("heartbeats on a busy link", () => {
    const wake = Frame.encode({
      _tag: "MessageAvailable",
      ...Frame.queueItem({ queue: "q", partition: "p" })
    })
    /** The tag and clock time of every frame written after the HELLO. */
    const afterHello = (end: PeerEnd) => end.written.slice(1).map((w) => [w.tag, w.at] as const)
    const { HEARTBEAT, MESSAGE_AVAILABLE } = Frame.Tag

    it.effect("a link that carried a frame within the interval sends no heartbeat that tick", () =>
      Effect.gen(function* () {
        const dialer = yield* start({ skipBusyHeartbeats: true })
        yield* until(() => dialer.ends[0]?.written.length === 1)
        const end = dialer.ends[0]!
        yield* advance(500)
        assert.isTrue(dialer.link.offer(wake))
        yield* until(() => end.written.length === 2)
        // The tick at 1 s finds the wake of 0.5 s: no heartbeat. The one at 2 s finds nothing since.
        yield* advance(500)
        yield* advance(1000)
        assert.deepStrictEqual(afterHello(end), [
          [MESSAGE_AVAILABLE, 500],
          [HEARTBEAT, 2000]
        ])
        // A frame on every interval: no heartbeat at all, and never two intervals without a frame.
        for (let i = 0; i < 5; i++) {
          yield* advance(500)
          assert.isTrue(dialer.link.offer(wake))
          yield* advance(500)
        }
        const frames = afterHello(end)
        assert.deepStrictEqual(frames.slice(2), [
          [MESSAGE_AVAILABLE, 2500],
          [MESSAGE_AVAILABLE, 3500],
          [MESSAGE_AVAILABLE, 4500],
          [MESSAGE_AVAILABLE, 5500],
          [MESSAGE_AVAILABLE, 6500]
        ])
        // Quiet again: the heartbeat comes back on the first tick that finds nothing since the last.
        yield* advance(1000)
        yield* advance(1000)
        assert.deepStrictEqual(afterHello(end).slice(7), [
          [HEARTBEAT, 8000],
          [HEARTBEAT, 9000]
        ])
        const times = [0, ...afterHello(end).map(([, at]) => at)]
        assert.isTrue(times.slice(1).every((at, i) => at - times[i]! < 2000))
        // Skipped heartbeats are never handed to the link: nothing dropped, nothing queued.
        assert.include(dialer.link.snapshot().counters, { handed: 9, written: 9, dropped_full: 0 })
      })
    )

    it.effect("a quiet link still beats every interval", () =>
      Effect.gen(function* () {
        const dialer = yield* start({ skipBusyHeartbeats: true })
        yield* until(() => dialer.ends[0]?.written.length === 1)
        for (let i = 0; i < 4; i++) yield* advance(1000)
        assert.deepStrictEqual(afterHello(dialer.ends[0]!), [
          [HEARTBEAT, 1000],
          [HEARTBEAT, 2000],
          [HEARTBEAT, 3000],
          [HEARTBEAT, 4000]
        ])
      })
    )

    it.effect("without skipBusyHeartbeats, a busy link beats every interval too", () =>
      Effect.gen(function* () {
        const dialer = yield* start()
        yield* until(() => dialer.ends[0]?.written.length === 1)
        yield* advance(500)
        assert.isTrue(dialer.link.offer(wake))
        yield* advance(500)
        assert.deepStrictEqual(afterHello(dialer.ends[0]!), [
          [MESSAGE_AVAILABLE, 500],
          [HEARTBEAT, 1000]
        ])
      })
    )
  })

  describe("the failure log", () => {
    const warnings = (lines: ReadonlyArray<LogLine>) =>
      lines
        .filter((line) => line.level === "WARN")
        .map((line) => [line.at, line.message, line.annotations.reason])

    it.effect(
      "a peer never reached is only info in the start grace, then warned about on the first failure, each change of reason, and once a minute",
      () =>
        Effect.gen(function* () {
          const dialer = yield* start(
            { schedule: Schedule.spaced("5 seconds"), startGrace: Duration.seconds(7) },
            (peer) => {
              peer.script.failure = refused
            }
          )
          const step = (failure: TransportError) =>
            Effect.gen(function* () {
              dialer.script.failure = failure
              const count = dialer.dials.length
              yield* TestClock.adjust(5000)
              yield* until(() => dialer.dials.length === count + 1)
              yield* MeshTest.settle
            })
          // 0 and 5 s: within the grace. 10 s: the first warning. Then nothing until a minute passed.
          for (let i = 0; i < 14; i++) yield* step(refused)
          const notResolved = new TransportError({ reason: "Resolve", address: "b:6633" })
          yield* step(notResolved)
          yield* step(notResolved)
          yield* step(refused)
          assert.deepStrictEqual(warnings(dialer.lines), [
            [10_000, "mesh peer unreachable", "refused"],
            [70_000, "mesh peer unreachable", "refused"],
            [75_000, "mesh peer unreachable", "not resolved"],
            [85_000, "mesh peer unreachable", "refused"]
          ])
          const grace = dialer.lines.filter((line) => line.at < 10_000)
          assert.deepStrictEqual(
            grace.map((line) => [line.level, line.message]),
            [
              ["INFO", "mesh peer not reachable yet; retrying"],
              ["INFO", "mesh peer not reachable yet; retrying"]
            ]
          )
          // Each warning says how many failures it stands for.
          const counts = dialer.lines
            .filter((line) => line.level === "WARN")
            .map((l) => l.annotations.failures)
          assert.deepStrictEqual(counts, [3, 12, 1, 2])
        })
    )

    it.effect(
      "a peer that closes on our HELLO is warned about at once, grace or not, then once a minute",
      () =>
        Effect.gen(function* () {
          const dialer = yield* start({
            schedule: Schedule.spaced("5 seconds"),
            startGrace: Duration.minutes(5)
          })
          for (let i = 0; i < 15; i++) {
            yield* until(() => dialer.ends[i]?.written.length === 1)
            yield* dialer.ends[i]!.close
            yield* until(() => !dialer.ends[i]!.open())
            yield* TestClock.adjust(5000)
            yield* until(() => dialer.dials.length === i + 2)
          }
          const message =
            "mesh link closed right after the handshake: the peer refused our HELLO (does it share the secret?) or went away"
          assert.deepStrictEqual(warnings(dialer.lines), [
            [0, message, "closed by peer"],
            [60_000, message, "closed by peer"]
          ])
          assert.deepStrictEqual(dialer.linesOf("mesh peer not reachable yet; retrying"), [])
        })
    )

    it.effect(
      "a peer silent on every link is warned about on the first close, then at most once a minute",
      () =>
        Effect.gen(function* () {
          // Reachable, but never heard from inbound (say its own dials to us are blocked): each link is
          // closed by the liveness check a dead threshold after it came up, and dialled again at once.
          const dialer = yield* start({ deadThreshold: Duration.seconds(5), peerSilence: () => 60_000 })
          for (let t = 0; t < 130_000; t += 1000) yield* advance(1000)
          yield* until(() => dialer.link.snapshot().counters.silent_closes === 26)
          const message = "mesh link closed by its liveness check; dialling again"
          assert.deepStrictEqual(warnings(dialer.lines), [
            [5000, message, "peer silent"],
            [65_000, message, "peer silent"],
            [125_000, message, "peer silent"]
          ])
          const first = dialer.lines.find((line) => line.level === "WARN")!
          assert.include(first.annotations, { dead_threshold_ms: 5000, failures: 1 })
        })
    )

    it.effect(
      "an established link that breaks is warned about, and the next failure warned about afresh",
      () =>
        Effect.gen(function* () {
          const dialer = yield* start({ schedule: Schedule.spaced("5 seconds") })
          yield* until(() => dialer.link.isConnected)
          yield* advance(3000)
          yield* dialer.ends[0]!.reset
          yield* until(() => !dialer.link.isConnected)
          dialer.script.failure = refused
          yield* TestClock.adjust(5000)
          yield* until(() => dialer.dials.length === 2)
          yield* MeshTest.settle
          assert.deepStrictEqual(warnings(dialer.lines), [
            [3000, "mesh link down", "read failed on b:6633: connection reset"],
            [8000, "mesh peer unreachable", "refused"]
          ])
          assert.deepStrictEqual(
            dialer.seen.filter((e) => e._tag === "LinkDown"),
            [{ _tag: "LinkDown", peer: "b:6633", reason: "session ended" }]
          )
          assert.strictEqual(dialer.link.snapshot().counters.reconnects, 1)
        })
    )
  })

  describe("describeFailure", () => {
    it("names what an operator can act on", () => {
      const error = (code: string) => Object.assign(new Error("boom"), { code })
      const of = (reason: TransportError["reason"], cause?: unknown) =>
        describeFailure(new TransportError({ reason, address: "b:6633", cause }))
      assert.strictEqual(describeFailure("closed by peer"), "closed by peer")
      assert.strictEqual(of("Resolve"), "not resolved")
      assert.strictEqual(of("Timeout"), "timed out")
      assert.strictEqual(of("Closed"), "closed")
      assert.strictEqual(of("Dial", error("ECONNREFUSED")), "refused")
      assert.strictEqual(of("Dial", new Error("connection refused")), "refused")
      assert.strictEqual(of("Read", error("ECONNRESET")), "reset")
      assert.strictEqual(of("Dial", error("ENOTFOUND")), "not resolved")
      assert.strictEqual(of("Dial", error("EAI_AGAIN")), "not resolved")
      assert.strictEqual(of("Dial", error("ETIMEDOUT")), "timed out")
      assert.strictEqual(of("Write"), "write failed on b:6633")
      assert.strictEqual(
        describeFailure(new LinkDown({ connected: false, established: false, cause: "no challenge" }).cause),
        "no challenge"
      )
    })
  })
})
