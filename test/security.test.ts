/**
 * The handshake as an attacker on the mesh port sees it (spec "The handshake", "The security
 * reality"): captured HELLOs replayed, redirected, downgraded and rewritten; a rolling upgrade from
 * the legacy HELLO to the v2 challenge-response that loses no wake; and the listener's defences
 * (cluster label, own server id, connection caps, the HELLO size cap). Every test runs on the
 * in-memory transport under `TestClock`.
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Exit, Fiber, Option, Result, Scope, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as Frame from "../src/Frame.js"
import * as Handshake from "../src/internal/links/handshake.js"
import * as Codec from "../src/internal/wire/codec.js"
import { MAX_LABEL_BYTES, MAX_SERVER_ID_BYTES } from "../src/internal/wire/names.js"
import * as MeshConfig from "../src/MeshConfig.js"
import type { ActiveStats } from "../src/MeshStats.js"
import * as MeshTest from "../src/MeshTest.js"
import { header, jsonFrame } from "./fixtures/frames.js"
import { active } from "./fixtures/memory.js"
import {
  helloFrame,
  jsonOf,
  maintenanceOn,
  type RawFrame,
  rawClient,
  rewriteHello,
  stripV2,
  type TapOptions,
  tap,
  v2FieldsOf
} from "./fixtures/raw.js"

type Mode = MeshConfig.AuthMode
const SECRET = "s3cr3t"

const statsOf = (node: MeshTest.Node): Effect.Effect<ActiveStats> => Effect.map(node.mesh.stats, active)

/** Moves the clock in steps, letting fibers run after each (each `adjust` costs real milliseconds). */
const advance = (millis: number, step = 1000) =>
  Effect.gen(function* () {
    for (let moved = 0; moved < millis; moved += step) {
      yield* TestClock.adjust(step)
      yield* MeshTest.settle
    }
  })

/** Moves the clock in 500 ms steps until `check` holds, failing after `within` ms. */
const advanceUntil = <E, R>(check: Effect.Effect<boolean, E, R>, what: string, within = 20_000) =>
  Effect.gen(function* () {
    yield* MeshTest.settle
    for (let moved = 0; moved <= within; moved += 500) {
      if (yield* check) return
      yield* TestClock.adjust(500)
      yield* MeshTest.settle
    }
    return assert.fail(`not reached within ${within} ms of TestClock: ${what}`)
  })

const until = (node: MeshTest.Node, check: (stats: ActiveStats) => boolean, what: string) =>
  Effect.catch(MeshTest.settleUntil(Effect.map(statsOf(node), check)), () =>
    Effect.flatMap(statsOf(node), (stats) =>
      Effect.sync(() =>
        assert.fail(`${node.serverId}: ${what}; rejections ${JSON.stringify(stats.rejections)}`)
      )
    )
  )

let queues = 0

/** Parks a pop on `to`, pushes on `from`: the pop must be woken by the mesh, without moving the clock. */
const wakeFlows = (from: MeshTest.Node, to: MeshTest.Node, step: string) =>
  Effect.gen(function* () {
    const queue = `q${queues++}`
    const before = yield* to.waker.parked
    const pop = yield* Effect.forkChild(
      to.waker.awaitWake({ queue, tenant: Option.none() }, { maxWait: "1 hour" })
    )
    yield* MeshTest.settleUntil(Effect.map(to.waker.parked, (n) => n === before + 1))
    yield* from.mesh.messageAvailable({ queue, partition: "p" })
    const woken = yield* Effect.result(
      MeshTest.settleUntil(Effect.sync(() => pop.pollUnsafe() !== undefined))
    )
    if (woken._tag === "Failure") {
      yield* Fiber.interrupt(pop)
      return assert.fail(`${step}: a wake from ${from.serverId} to ${to.serverId} was lost`)
    }
    assert.strictEqual(yield* Fiber.join(pop), "woken")
  })

/** Parks a pop on `to`, pushes on `from`: the wake must not arrive. */
const wakeBlocked = (from: MeshTest.Node, to: MeshTest.Node) =>
  Effect.gen(function* () {
    const queue = `q${queues++}`
    const pop = yield* Effect.forkChild(
      to.waker.awaitWake({ queue, tenant: Option.none() }, { maxWait: "1 hour" })
    )
    yield* MeshTest.settle
    yield* from.mesh.messageAvailable({ queue, partition: "p" })
    for (let i = 0; i < 50; i++) yield* Effect.yieldNow
    assert.isUndefined(pop.pollUnsafe(), `a wake from ${from.serverId} reached ${to.serverId}`)
    yield* Fiber.interrupt(pop)
  })

const serverIds = (stats: ActiveStats) => stats.servers.map((server) => server.server_id)

/**
 * Listeners `b` and `c` in `listenerMode`; a dialer `a` in `dialerMode` whose only peer is a tap
 * relaying to `b`, so the bytes `a` writes are recorded (and rewritten when asked).
 */
const replaySetup = (
  listenerMode: Mode,
  dialerMode: Mode,
  tapOptions: Omit<TapOptions, "host" | "target"> = {}
) =>
  Effect.gen(function* () {
    const network = yield* MeshTest.network
    const b = yield* MeshTest.node(network, {
      serverId: "b",
      peers: ["nowhere"],
      config: { auth: listenerMode }
    })
    const c = yield* MeshTest.node(network, {
      serverId: "c",
      peers: ["nowhere"],
      config: { auth: listenerMode }
    })
    const recorder = yield* tap(network, { host: "tap", target: "b", ...tapOptions })
    const a = yield* MeshTest.node(network, { serverId: "a", peers: ["tap"], config: { auth: dialerMode } })
    return { network, a, b, c, recorder }
  })

/** Captures the first HELLO `a` sends and waits until `b` has authenticated it on the original connection. */
const captured = (listenerMode: Mode, dialerMode: Mode) =>
  Effect.gen(function* () {
    const setup = yield* replaySetup(listenerMode, dialerMode)
    yield* advanceUntil(
      Effect.map(statsOf(setup.b), (s) => s.inbound.authenticated === 1 && serverIds(s).includes("a")),
      "b authenticates a through the tap"
    )
    assert.strictEqual((yield* statsOf(setup.b)).handshake_failures, 0)
    const hello = setup.recorder.hellos[0]!
    const bytes = setup.recorder.helloBytes[0]!
    assert.strictEqual(hello.tag, Frame.Tag.HELLO)
    assert.strictEqual(jsonOf(hello).server_id, "a")
    return { ...setup, hello, bytes }
  })

/** The v2 fields of a captured HELLO, failing the test for a legacy one. */
const v2Of = (hello: RawFrame) => {
  const fields = v2FieldsOf(hello)
  if (Option.isNone(fields)) return assert.fail("the dialer sent a legacy HELLO to a v2 listener")
  return fields.value
}

describe("security: replaying captured HELLOs", () => {
  for (const mode of ["permissive", "required"] as const) {
    describe(`listeners and dialer in ${mode} mode`, () => {
      it.effect(
        "a captured v2 HELLO replayed on a new connection is refused: the challenge differs (bad_challenge_answer)",
        () =>
          Effect.gen(function* () {
            const { network, b, hello, bytes } = yield* captured(mode, mode)
            // The dialer's real answer to the original connection's challenge, which b accepted there.
            const fields = v2Of(hello)
            assert.strictEqual(fields.receiver, "b")
            assert.strictEqual(fields.label, "")
            assert.match(fields.mac, /^[0-9a-f]{64}$/)

            const replay = yield* rawClient(network, "b")
            const challenge = yield* replay.challenge
            assert.notStrictEqual(challenge.nonce, fields.challenge)
            yield* replay.write(Buffer.concat([bytes, maintenanceOn]))
            yield* until(b, (s) => s.rejections.bad_challenge_answer === 1, "the replay was not refused")
            const stats = yield* statsOf(b)
            assert.strictEqual(stats.handshake_failures, 1)
            assert.strictEqual(stats.inbound.authenticated, 1)
            assert.strictEqual(stats.maintenance_mode, false)
            assert.strictEqual(stats.messages_received, 0)
            // Held for the auth-failure delay, then closed.
            yield* TestClock.adjust("1 second")
            yield* MeshTest.settleUntil(Effect.sync(replay.closed))
          })
      )

      it.effect(
        mode === "required"
          ? "replayed to another node it is refused (wrong_receiver); stripped of its v2 fields, refused (legacy_refused)"
          : "replayed to another node it is refused (wrong_receiver); stripped of its v2 fields it is accepted as legacy (documented)",
        () =>
          Effect.gen(function* () {
            const { network, b, c, hello, bytes } = yield* captured(mode, mode)
            const redirected = yield* rawClient(network, "c")
            yield* redirected.challenge
            yield* redirected.write(Buffer.concat([bytes, maintenanceOn]))
            yield* until(c, (s) => s.rejections.wrong_receiver === 1, "the redirected replay was not refused")
            const atC = yield* statsOf(c)
            assert.strictEqual(atC.handshake_failures, 1)
            assert.strictEqual(atC.inbound.authenticated, 0)
            assert.strictEqual(atC.maintenance_mode, false)

            // The legacy fields of a v2 HELLO are a complete legacy HELLO.
            const downgraded = yield* rawClient(network, "b")
            yield* downgraded.challenge
            yield* downgraded.write(Buffer.concat([rewriteHello(hello, stripV2), maintenanceOn]))
            if (mode === "required") {
              yield* until(
                b,
                (s) => s.rejections.legacy_refused === 1,
                "the downgraded replay was not refused"
              )
              assert.strictEqual((yield* statsOf(b)).maintenance_mode, false)
            } else {
              yield* until(b, (s) => s.maintenance_mode, "the downgraded replay was not accepted")
              const atB = yield* statsOf(b)
              assert.strictEqual(atB.inbound.legacy_accepted, 1)
              assert.strictEqual(atB.handshake_failures, 0)
            }
          })
      )

      it.effect(
        "a v2 HELLO rewritten in flight to announce another server_id is refused (the v2 MAC binds the sender)",
        () =>
          Effect.gen(function* () {
            const { b, recorder } = yield* replaySetup(mode, mode, {
              rewrite: (hello) => rewriteHello(hello, { server_id: "c" })
            })
            yield* advanceUntil(
              Effect.map(statsOf(b), (s) => s.rejections.bad_challenge_answer >= 1),
              "the rewritten HELLO is refused"
            )
            v2Of(recorder.hellos[0]!)
            const stats = yield* statsOf(b)
            assert.strictEqual(stats.inbound.authenticated, 0)
            assert.strictEqual(stats.rejections.bad_mac, 0, "the legacy MAC does not bind server_id")
            assert.notInclude(serverIds(stats), "c")
            assert.notInclude(serverIds(stats), "a")
          })
      )
    })
  }

  describe("legacy mode (documented: the spec's HELLO is replayable)", () => {
    it.effect(
      "a captured legacy HELLO replayed on a new connection, to the same or another node, is accepted and what follows is trusted",
      () =>
        Effect.gen(function* () {
          const { network, b, c, hello, bytes } = yield* captured("legacy", "legacy")
          assert.isTrue(Option.isNone(v2FieldsOf(hello)))
          for (const [name, node] of [
            ["b", b],
            ["c", c]
          ] as const) {
            const replay = yield* rawClient(network, name)
            yield* replay.write(Buffer.concat([bytes, maintenanceOn]))
            yield* until(node, (s) => s.maintenance_mode, `the legacy replay to ${name} was not accepted`)
            const stats = yield* statsOf(node)
            assert.include(serverIds(stats), "a")
            assert.strictEqual(stats.handshake_failures, 0)
            assert.strictEqual(replay.frames.length, 0, "a legacy listener writes nothing on an inbound link")
          }
        })
    )

    it.effect(
      "a legacy HELLO rewritten to announce another server_id is accepted: the MAC covers only the nonce",
      () =>
        Effect.gen(function* () {
          const { b } = yield* replaySetup("legacy", "legacy", {
            rewrite: (hello) => rewriteHello(hello, { server_id: "c" })
          })
          yield* advanceUntil(
            Effect.map(statsOf(b), (s) => serverIds(s).includes("c")),
            "the rewritten legacy HELLO is accepted as c"
          )
          assert.strictEqual((yield* statsOf(b)).handshake_failures, 0)
        })
    )
  })
})

describe("security: what the v2 handshake does not stop (documented)", () => {
  it.effect(
    "a relay the dialer connects to authenticates as it and injects frames: v2 binds no channel",
    () =>
      Effect.gen(function* () {
        const { b, recorder } = yield* replaySetup("required", "required", { inject: maintenanceOn })
        yield* advanceUntil(
          Effect.map(statsOf(b), (s) => s.maintenance_mode),
          "the injected frame is applied"
        )
        v2Of(recorder.hellos[0]!)
        const stats = yield* statsOf(b)
        assert.strictEqual(stats.handshake_failures, 0)
        assert.include(serverIds(stats), "a")
      })
  )

  it.effect(
    "a relay that swallows the challenge: a required dialer never sends a HELLO; a permissive one falls back to legacy",
    () =>
      Effect.gen(function* () {
        const required = yield* replaySetup("required", "required", { dropChallenge: true })
        yield* advance(12_000)
        assert.isAbove(required.recorder.connections(), 0)
        assert.strictEqual(
          required.recorder.hellos.length,
          0,
          "a required dialer wrote a HELLO without a challenge"
        )
        const peer = (yield* statsOf(required.a)).peers[0]!
        assert.strictEqual(peer.last_error, "no challenge")
        assert.strictEqual((yield* statsOf(required.b)).inbound.authenticated, 0)

        // Permissive: after its challenge wait the dialer sends the legacy HELLO, which a required
        // listener refuses and a permissive one accepts (and anyone who saw it can replay).
        const permissive = yield* replaySetup("required", "permissive", { dropChallenge: true })
        yield* advanceUntil(
          Effect.map(statsOf(permissive.b), (s) => s.rejections.legacy_refused >= 1),
          "the fallback legacy HELLO is refused by a required listener"
        )
        const fallback = permissive.recorder.hellos[0]!
        assert.isTrue(Option.isNone(v2FieldsOf(fallback)))
        const open = yield* MeshTest.node(permissive.network, {
          serverId: "p",
          peers: ["nowhere"],
          config: { auth: "permissive" }
        })
        const replay = yield* rawClient(permissive.network, "p")
        yield* replay.challenge
        yield* replay.write(Buffer.concat([permissive.recorder.helloBytes[0]!, maintenanceOn]))
        yield* until(open, (s) => s.maintenance_mode, "the fallback HELLO replayed to a permissive listener")
        assert.strictEqual((yield* statsOf(open)).inbound.legacy_accepted, 1)
      })
  )
})

describe("security: rolling upgrade legacy → permissive → required (TestClock, in-memory)", () => {
  it.effect(
    "every pair the rules allow keeps its wakes at every step; a legacy dialer is refused at the end",
    () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        const parent = yield* Effect.scope
        const ids = ["a", "b", "c"] as const
        type Id = (typeof ids)[number]
        const running = new Map<Id, { readonly scope: Scope.Closeable; readonly node: MeshTest.Node }>()
        const node = (id: Id) => running.get(id)!.node

        const start = (id: Id, mode: Mode) =>
          Effect.gen(function* () {
            const scope = yield* Scope.fork(parent, "sequential")
            const built = yield* MeshTest.node(network, {
              serverId: id,
              peers: ids.filter((other) => other !== id),
              config: { auth: mode }
            }).pipe(Scope.provide(scope))
            running.set(id, { scope, node: built })
            assert.strictEqual((yield* statsOf(built)).auth, mode)
          })

        const everyPair = (step: string, among: ReadonlyArray<Id> = ids) =>
          Effect.gen(function* () {
            for (const from of among) {
              for (const to of among) if (from !== to) yield* wakeFlows(node(from), node(to), step)
            }
          })

        /** All links up and the restarted node heard by both others, past the auth-failure delay. */
        const converge = (step: string, restarted?: Id) =>
          Effect.gen(function* () {
            yield* advanceUntil(
              Effect.gen(function* () {
                for (const id of ids) if (!(yield* MeshTest.linked(node(id)))) return false
                if (restarted !== undefined && !(yield* MeshTest.hears(node(restarted), 2))) return false
                return true
              }),
              `${step}: every link up`
            )
            // Past the listener's auth-failure delay: a refused HELLO would have closed its link by now.
            yield* advance(1_500, 1_500)
            for (const id of ids) {
              const stats = yield* statsOf(node(id))
              assert.isTrue(yield* MeshTest.linked(node(id)), `${step}: ${id} lost a link`)
              assert.strictEqual(
                stats.handshake_failures,
                0,
                `${step}: ${id} refused a HELLO: ${JSON.stringify(stats.rejections)}`
              )
            }
            yield* everyPair(step)
          })

        /** Stops `id`, checks the two others keep their wakes while it is down, starts it in `mode`. */
        const restart = (id: Id, mode: Mode, step: string) =>
          Effect.gen(function* () {
            yield* Scope.close(running.get(id)!.scope, Exit.void)
            yield* advance(250)
            yield* everyPair(
              `${step} (${id} down)`,
              ids.filter((other) => other !== id)
            )
            yield* start(id, mode)
            yield* converge(step, id)
          })

        const legacyAccepted = (id: Id) => Effect.map(statsOf(node(id)), (s) => s.inbound.legacy_accepted)

        // 0: the spec's cluster, all legacy.
        for (const id of ids) yield* start(id, "legacy")
        yield* converge("all legacy")

        // 1: a permissive; b and c legacy. legacy→permissive (a legacy HELLO, counted) and
        // permissive→legacy (no challenge comes: the dialer falls back after its wait).
        yield* restart("a", "permissive", "a permissive")
        assert.strictEqual(yield* legacyAccepted("a"), 2)

        // 2: a, b permissive; c legacy. a→b is v2 now: of b's inbound links only c's is legacy.
        yield* restart("b", "permissive", "a, b permissive")
        assert.strictEqual(yield* legacyAccepted("b"), 1)

        // 3: all permissive: c's fresh links to a and b (the only way its wakes reached them above)
        // are v2, so neither counts a legacy HELLO more.
        const before = { a: yield* legacyAccepted("a"), b: yield* legacyAccepted("b") }
        yield* restart("c", "permissive", "all permissive")
        assert.strictEqual(yield* legacyAccepted("c"), 0)
        assert.strictEqual(yield* legacyAccepted("a"), before.a)
        assert.strictEqual(yield* legacyAccepted("b"), before.b)

        // 4-6: one by one to required: permissive dialers answer a required listener's challenge, a
        // required dialer gets one from a permissive listener.
        yield* restart("a", "required", "a required")
        yield* restart("b", "required", "a, b required")
        yield* restart("c", "required", "all required")
        for (const id of ids) assert.strictEqual((yield* statsOf(node(id))).auth, "required")

        // Finally a legacy node dialling a: refused, counted, and its wakes go nowhere.
        const d = yield* MeshTest.node(network, { serverId: "d", peers: ["a"], config: { auth: "legacy" } })
        yield* advanceUntil(
          Effect.map(statsOf(node("a")), (s) => s.rejections.legacy_refused >= 1),
          "a refuses the legacy dialer"
        )
        yield* wakeBlocked(d, node("a"))
        assert.notInclude(serverIds(yield* statsOf(node("a"))), "d")

        // And a raw legacy HELLO, with the right secret, on a's port.
        const refusedSoFar = (yield* statsOf(node("a"))).rejections.legacy_refused
        const raw = yield* rawClient(network, "a")
        yield* raw.challenge
        yield* raw.write(
          Buffer.concat([Frame.encode(yield* Handshake.makeHello("e", SECRET)), maintenanceOn])
        )
        yield* until(
          node("a"),
          (s) => s.rejections.legacy_refused === refusedSoFar + 1,
          "the raw legacy HELLO was not refused"
        )
        assert.strictEqual((yield* statsOf(node("a"))).maintenance_mode, false)
        // The cluster itself is untouched.
        yield* everyPair("all required, after the legacy dialers")
      })
  )
})

/** What a dialer in `mode` would send on `client`: a legacy HELLO, or the v2 answer to its challenge. */
const answer = (
  client: { readonly challenge: Effect.Effect<Frame.Challenge, unknown> },
  mode: Mode,
  serverId: string,
  label = ""
) =>
  mode === "legacy"
    ? Effect.map(Handshake.makeHello(serverId, SECRET), (hello) => Frame.encode(hello))
    : Effect.flatMap(client.challenge, (challenge) =>
        Effect.map(Handshake.helloV2(serverId, SECRET, challenge, label), helloFrame)
      )

describe("security: the listener's defences", () => {
  for (const mode of ["permissive", "required"] as const) {
    it.effect(
      `${mode}: a node with another cluster label is refused (wrong_label); one with ours is not`,
      () =>
        Effect.gen(function* () {
          const network = yield* MeshTest.network
          const b = yield* MeshTest.node(network, {
            serverId: "b",
            peers: ["nowhere"],
            config: { auth: mode, clusterLabel: "blue" }
          })
          const green = yield* MeshTest.node(network, {
            serverId: "green",
            peers: ["b"],
            config: { auth: mode, clusterLabel: "green" }
          })
          const blue = yield* MeshTest.node(network, {
            serverId: "blue",
            peers: ["b"],
            config: { auth: mode, clusterLabel: "blue" }
          })
          yield* advanceUntil(
            Effect.map(statsOf(b), (s) => s.rejections.wrong_label >= 1 && serverIds(s).includes("blue")),
            "b refuses green and accepts blue"
          )
          yield* advance(2_000)
          const stats = yield* statsOf(b)
          assert.notInclude(serverIds(stats), "green")
          assert.strictEqual(stats.handshake_failures, stats.rejections.wrong_label)
          yield* wakeFlows(blue, b, "same label")
          yield* wakeBlocked(green, b)
        })
    )
  }

  for (const mode of ["legacy", "permissive", "required"] as const) {
    it.effect(`${mode}: a HELLO carrying the node's own server id from anyone but itself is refused`, () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        // The peer list names the node itself: its own dial is recognised by its nonce, not refused.
        const a = yield* MeshTest.node(network, { serverId: "a", peers: ["a"], config: { auth: mode } })
        yield* advanceUntil(
          Effect.map(statsOf(a), (s) => s.inbound.self_dials === 1),
          "a recognises its own dial"
        )
        assert.strictEqual((yield* statsOf(a)).rejections.own_server_id, 0)
        // A raw client that knows the secret and announces a's id is not a's dialer: refused.
        const raw = yield* rawClient(network, "a")
        yield* raw.write(Buffer.concat([yield* answer(raw, mode, "a"), maintenanceOn]))
        yield* until(a, (s) => s.rejections.own_server_id === 1, "the raw HELLO with a's id was not refused")
        const stats = yield* statsOf(a)
        assert.strictEqual(stats.handshake_failures, stats.rejections.own_server_id)
        assert.strictEqual(stats.inbound.authenticated, 0)
        assert.strictEqual(stats.inbound.self_dials, 1)
        assert.strictEqual(stats.maintenance_mode, false)
      })
    )
  }

  it.effect("too many unauthenticated connections from one address are refused (too_many_connections)", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const b = yield* MeshTest.node(network, {
        serverId: "b",
        peers: ["nowhere"],
        config: { auth: "required" }
      })
      // The default allows 8 per address before their HELLO; every memory client is 127.0.0.1.
      const pending = []
      for (let i = 0; i < 8; i++) pending.push(yield* rawClient(network, "b"))
      for (const client of pending) yield* client.challenge
      const ninth = yield* rawClient(network, "b")
      yield* until(b, (s) => s.rejections.too_many_connections === 1, "the ninth connection was not refused")
      yield* MeshTest.settleUntil(Effect.sync(ninth.closed))
      assert.strictEqual(ninth.frames.length, 0, "a refused connection got a challenge")
      assert.strictEqual(yield* network.network.openConnections("b"), 8)
      // One authenticates: its slot is free for the next.
      yield* pending[0]!.write(yield* answer(pending[0]!, "required", "peer"))
      yield* until(b, (s) => s.inbound.authenticated === 1, "the valid HELLO was not accepted")
      const tenth = yield* rawClient(network, "b")
      yield* tenth.challenge
      assert.isFalse(tenth.closed())
      assert.strictEqual((yield* statsOf(b)).rejections.too_many_connections, 1)
      // The silent ones time out.
      yield* advance(5_000)
      yield* until(b, (s) => s.rejections.timeout === 8, "the silent connections did not time out")
    })
  )

  it.effect(
    "every refusal counted in handshake_failures is also a HandshakeFailed event, too_many_connections included",
    () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        const b = yield* MeshTest.node(network, { serverId: "b", peers: ["nowhere"] })
        const reasons: Array<string> = []
        yield* Effect.forkScoped(
          Stream.runForEach(b.mesh.events, (event) =>
            Effect.sync(() => {
              if (event._tag === "HandshakeFailed") reasons.push(event.reason)
            })
          )
        )
        yield* MeshTest.settle
        for (let i = 0; i < 9; i++) yield* rawClient(network, "b")
        yield* until(
          b,
          (s) => s.rejections.too_many_connections === 1,
          "the ninth connection was not refused"
        )
        yield* advance(6_000)
        const stats = yield* statsOf(b)
        assert.strictEqual(stats.rejections.timeout, 8)
        assert.strictEqual(stats.handshake_failures, 9)
        assert.strictEqual(
          reasons.length,
          stats.handshake_failures,
          `HandshakeFailed events: ${JSON.stringify(reasons)}`
        )
      })
  )

  it.effect("connections past maxInbound are refused (too_many_connections)", () =>
    Effect.gen(function* () {
      const network = yield* MeshTest.network
      const b = yield* MeshTest.node(network, {
        serverId: "b",
        peers: ["nowhere"],
        config: { maxInbound: 3 }
      })
      const clients = []
      for (let i = 0; i < 3; i++) {
        const client = yield* rawClient(network, "b")
        yield* client.write(yield* answer(client, "legacy", `peer${i}`))
        clients.push(client)
      }
      yield* until(b, (s) => s.inbound.authenticated === 3, "three HELLOs accepted")
      const fourth = yield* rawClient(network, "b")
      yield* until(b, (s) => s.rejections.too_many_connections === 1, "the fourth connection was not refused")
      yield* MeshTest.settleUntil(Effect.sync(fourth.closed))
    })
  )

  /** A v2 answer padded (with an ignored field) so that its length prefix is exactly `length`. */
  const paddedAnswer = (challenge: Frame.Challenge, length: number) =>
    Effect.map(Handshake.helloV2("peer", SECRET, challenge), (hello) => {
      const payload = { ...Codec.payloadOf(hello), pad: "" }
      const base = Buffer.byteLength(JSON.stringify(payload))
      const frame = jsonFrame(Frame.Tag.HELLO, { ...payload, pad: "x".repeat(length - 1 - base) })
      assert.strictEqual(Buffer.from(frame).readUInt32BE(0), length)
      return frame
    })

  it.effect(
    "a first frame over the HELLO cap is refused as oversized_hello; one at the cap is accepted",
    () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        const b = yield* MeshTest.node(network, {
          serverId: "b",
          peers: ["nowhere"],
          config: { auth: "required" }
        })
        const cap = 4096
        assert.strictEqual((yield* statsOf(b)).rejections.oversized_hello, 0)

        const over = yield* rawClient(network, "b")
        yield* over.write(yield* paddedAnswer(yield* over.challenge, cap + 1))
        yield* until(b, (s) => s.rejections.oversized_hello === 1, "the oversized HELLO was not refused")

        // Refused from the length prefix alone, before the body is sent.
        const prefixOnly = yield* rawClient(network, "b")
        yield* prefixOnly.challenge
        yield* prefixOnly.write(header(cap + 1, Frame.Tag.HELLO))
        yield* until(b, (s) => s.rejections.oversized_hello === 2, "the length prefix was not refused")

        const atCap = yield* rawClient(network, "b")
        yield* atCap.write(yield* paddedAnswer(yield* atCap.challenge, cap))
        yield* until(b, (s) => s.inbound.authenticated === 1, "the HELLO at the cap was not accepted")
        const stats = yield* statsOf(b)
        assert.strictEqual(stats.handshake_failures, 2)
        assert.include(serverIds(stats), "peer")
      })
  )
})

describe("security: identities the handshake cannot carry", () => {
  it.effect(
    "a required dialer given an undecodable challenge says so in last_error, not 'no challenge'",
    () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        // A listener whose challenge carries a label over the cap, as one configured with one would send.
        const bad = jsonFrame(Frame.Tag.CHALLENGE, {
          server_id: "fake",
          nonce: "00112233445566778899aabbccddeeff",
          label: "x".repeat(MAX_LABEL_BYTES + 1)
        })
        yield* network.transport.listen({ host: "fake", port: MeshTest.PORT }, (connection) =>
          Effect.andThen(
            connection.write(bad),
            connection.read(() => undefined)
          ).pipe(Effect.ignore)
        )
        const a = yield* MeshTest.node(network, {
          serverId: "a",
          peers: ["fake"],
          config: { auth: "required" }
        })
        yield* advance(6_000)
        const peer = (yield* statsOf(a)).peers[0]!
        assert.isFalse(peer.connected)
        assert.isNotNull(peer.last_error)
        assert.notStrictEqual(peer.last_error, "no challenge", "the challenge came; it was invalid")
        assert.include(peer.last_error ?? "", "challenge")
      })
  )

  const load = (env: Readonly<Record<string, string>>) =>
    Effect.result(
      MeshConfig.config.parse(ConfigProvider.fromEnv({ env: { ...env }, preserveEmptyStrings: true }))
    )
  const base = { QUEEN_SYNC_SECRET: SECRET, QUEEN_MESH_PEERS: "b:6633", QUEEN_SERVER_ID: "a" }

  // MAX_SERVER_ID_BYTES caps a label in the challenge and the v2 HELLO: a longer one makes every
  // challenge undecodable, so permissive dialers fall back to the replayable legacy HELLO without a
  // failure counted anywhere, and required ones never link (the listener sees only silent closes).
  for (const auth of ["permissive", "required"] as const) {
    it.effect(`${auth}: a cluster label over ${MAX_SERVER_ID_BYTES} UTF-8 bytes is a ConfigError`, () =>
      Effect.gen(function* () {
        const label = "é".repeat(MAX_SERVER_ID_BYTES / 2 + 1)
        const result = yield* load({ ...base, QUEEN_MESH_AUTH: auth, QUEEN_MESH_CLUSTER_LABEL: label })
        assert.isTrue(Result.isFailure(result), "a label the handshake cannot carry was accepted")
        if (Result.isFailure(result)) assert.include(String(result.failure), "QUEEN_MESH_CLUSTER_LABEL")
      })
    )
  }

  it.effect(`a server id over ${Frame.MAX_SERVER_ID_BYTES} UTF-8 bytes is a ConfigError`, () =>
    Effect.gen(function* () {
      // Every listener refuses such a HELLO as invalid_hello, in every mode.
      const result = yield* load({ ...base, QUEEN_SERVER_ID: "x".repeat(Frame.MAX_SERVER_ID_BYTES + 1) })
      assert.isTrue(Result.isFailure(result), "a server id the handshake cannot carry was accepted")
      if (Result.isFailure(result)) assert.include(String(result.failure), "QUEEN_SERVER_ID")
    })
  )

  it.effect(
    `a label and server ids of exactly ${MAX_SERVER_ID_BYTES} bytes link over v2 in required mode`,
    () =>
      Effect.gen(function* () {
        const network = yield* MeshTest.network
        const label = "é".repeat(MAX_SERVER_ID_BYTES / 2)
        const idA = `a${"x".repeat(MAX_SERVER_ID_BYTES - 1)}`
        const idB = `b${"x".repeat(MAX_SERVER_ID_BYTES - 1)}`
        const config = { auth: "required", clusterLabel: label } as const
        // Named "a" and "b" on the network: a 256-byte id is no host name.
        const a = yield* MeshTest.node(network, { serverId: idA, host: "a", peers: ["b"], config })
        const b = yield* MeshTest.node(network, { serverId: idB, host: "b", peers: ["a"], config })
        yield* advanceUntil(
          Effect.all([MeshTest.hears(a, 1), MeshTest.hears(b, 1)]).pipe(Effect.map(([x, y]) => x && y)),
          "the two nodes hear each other"
        )
        for (const node of [a, b]) assert.strictEqual((yield* statsOf(node)).handshake_failures, 0)
        yield* wakeFlows(a, b, "256-byte identities")
        yield* wakeFlows(b, a, "256-byte identities")
      })
  )
})
