/**
 * ListenerState alone: admission (the inbound cap, the per-address cap on unauthenticated
 * connections), refusals counted by reason with their events and throttled warnings, and the counts it
 * reports. Driven through its methods as the listener and its inbound links drive it, under TestClock.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Stream } from "effect"
import { TestClock } from "effect/testing"
import * as fc from "fast-check"
import { ListenerState, refusal } from "../../../src/internal/links/listenerState.js"
import { handshakeReasonList } from "../../../src/MeshError.js"
import * as MeshEvent from "../../../src/MeshEvent.js"
import { numRuns } from "../../fixtures/budget.js"
import { captureLogs } from "../../fixtures/logs.js"

type Mode = "legacy" | "permissive" | "required"

/** A state with its own event hub, recording every event; `tls` is what the transport refused. */
const setup = (
  options: {
    maxInbound?: number
    maxUnauthenticatedPerAddress?: number
    mode?: Mode
    tls?: () => number
  } = {}
) =>
  Effect.gen(function* () {
    const events = yield* MeshEvent.make
    const seen: Array<MeshEvent.MeshEvent> = []
    yield* events.observe((event) => seen.push(event))
    const state = new ListenerState(
      "node",
      {
        maxInbound: options.maxInbound ?? 64,
        maxUnauthenticatedPerAddress: options.maxUnauthenticatedPerAddress ?? 8
      },
      events,
      options.tls ?? (() => 0),
      options.mode ?? "legacy"
    )
    const log = yield* captureLogs
    return { state, seen, log, logged: log.logged }
  })

/** An event hub nobody listens to, for the synchronous tests. */
const nowhere: MeshEvent.MeshEventsShape = {
  listening: () => false,
  emit: () => {},
  events: Stream.empty,
  subscribe: Effect.die(new Error("nobody subscribes here")),
  observe: () => Effect.void
}

/** A fresh state for a synchronous test. */
const bare = (limits: { maxInbound: number; maxUnauthenticatedPerAddress: number }, mode: Mode = "legacy") =>
  new ListenerState("node", limits, nowhere, () => 0, mode)

describe("ListenerState", () => {
  describe("admission", () => {
    it.effect("caps concurrent inbound connections; a close frees a slot", () =>
      Effect.gen(function* () {
        const { state, seen } = yield* setup({ maxInbound: 3, maxUnauthenticatedPerAddress: 100 })
        const admitted = ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5"].map((ip) =>
          state.admit(ip)
        )
        assert.deepStrictEqual(admitted, [true, true, true, false, false])
        assert.strictEqual(state.counts().inbound.open, 3)
        assert.strictEqual(state.counts().rejections.TooManyConnections, 2)
        assert.deepStrictEqual(seen, [
          { _tag: "HandshakeFailed", remote: "10.0.0.4", reason: "TooManyConnections" },
          { _tag: "HandshakeFailed", remote: "10.0.0.5", reason: "TooManyConnections" }
        ])
        // Authenticated connections hold their inbound slot too.
        state.authenticated("10.0.0.1", 1)
        assert.isFalse(state.admit("10.0.0.6"))
        state.closed("10.0.0.1", true)
        assert.isTrue(state.admit("10.0.0.6"))
        assert.strictEqual(state.counts().inbound.open, 3)
      })
    )

    it.effect("caps unauthenticated connections per address; authenticating or closing frees the slot", () =>
      Effect.gen(function* () {
        const { state } = yield* setup({ maxInbound: 100, maxUnauthenticatedPerAddress: 2 })
        assert.isTrue(state.admit("10.0.0.1"))
        assert.isTrue(state.admit("10.0.0.1"))
        assert.isFalse(state.admit("10.0.0.1"))
        // Another address has slots of its own.
        assert.isTrue(state.admit("10.0.0.2"))
        // One of the two authenticates: its address may open one more.
        state.authenticated("10.0.0.1", 2)
        assert.isTrue(state.admit("10.0.0.1"))
        assert.isFalse(state.admit("10.0.0.1"))
        // One closes before its HELLO: again one more.
        state.closed("10.0.0.1", false)
        assert.isTrue(state.admit("10.0.0.1"))
        // Closing the authenticated one frees no unauthenticated slot.
        state.closed("10.0.0.1", true)
        assert.isFalse(state.admit("10.0.0.1"))
        const counts = state.counts()
        assert.strictEqual(counts.rejections.TooManyConnections, 3)
        assert.include(counts.inbound, { open: 3, authenticated: 0, authenticated_total: 1 })
      })
    )

    /** What the listener and its links do: a connection comes, may authenticate, and closes. */
    type Step =
      | { readonly op: "admit"; readonly ip: number }
      | { readonly op: "authenticate" | "close"; readonly pick: number; readonly version: 1 | 2 }
    const step: fc.Arbitrary<Step> = fc.oneof(
      fc.record({ op: fc.constant("admit" as const), ip: fc.nat({ max: 2 }) }),
      fc.record({
        op: fc.constantFrom("authenticate" as const, "close" as const),
        pick: fc.nat(),
        version: fc.constantFrom(1 as const, 2 as const)
      })
    )

    it("admits exactly while both caps allow, and counts open, authenticated and refused ones over any sequence", () => {
      fc.assert(
        fc.property(
          fc.tuple(
            fc.integer({ min: 1, max: 8 }),
            fc.integer({ min: 1, max: 3 }),
            fc.array(step, { maxLength: 100, size: "medium" })
          ),
          ([maxInbound, perAddress, steps]) => {
            const state = bare({ maxInbound, maxUnauthenticatedPerAddress: perAddress })
            // The model: each open connection, its address and whether it authenticated.
            let open: Array<{ readonly ip: string; authenticated: boolean }> = []
            let refused = 0
            let authenticatedTotal = 0
            for (const s of steps) {
              if (s.op === "admit") {
                const ip = `10.0.0.${s.ip}`
                const pending = open.filter((c) => c.ip === ip && !c.authenticated).length
                const allowed = open.length < maxInbound && pending < perAddress
                assert.strictEqual(state.admit(ip), allowed)
                if (allowed) open.push({ ip, authenticated: false })
                else refused++
              } else if (open.length > 0) {
                const connection = open[s.pick % open.length]!
                if (s.op === "authenticate") {
                  if (connection.authenticated) continue
                  state.authenticated(connection.ip, s.version)
                  connection.authenticated = true
                  authenticatedTotal++
                } else {
                  state.closed(connection.ip, connection.authenticated)
                  open = open.filter((c) => c !== connection)
                }
              }
              const counts = state.counts()
              assert.strictEqual(counts.inbound.open, open.length)
              assert.strictEqual(counts.inbound.authenticated, open.filter((c) => c.authenticated).length)
              assert.strictEqual(counts.inbound.authenticated_total, authenticatedTotal)
              assert.strictEqual(counts.rejections.TooManyConnections, refused)
              assert.isAtMost(counts.inbound.open, maxInbound)
            }
            // Once every connection closed, every address has its whole allowance again.
            for (const connection of open) state.closed(connection.ip, connection.authenticated)
            for (let ip = 0; ip <= 2; ip++) {
              const admitted = Array.from({ length: Math.min(perAddress, maxInbound) }, () =>
                state.admit(`10.0.0.${ip}`)
              )
              assert.isTrue(admitted.every(Boolean), "an address lost some of its allowance")
              for (let i = 0; i < admitted.length; i++) state.closed(`10.0.0.${ip}`, false)
            }
            assert.strictEqual(state.counts().inbound.open, 0)
          }
        ),
        { numRuns: numRuns(500) }
      )
    })
  })

  describe("refusals", () => {
    it.effect(
      "are counted by reason and published; every reason is reported, the TLS ones from the transport",
      () =>
        Effect.gen(function* () {
          let tls = 0
          const { state, seen, logged } = yield* setup({ tls: () => tls })
          const zero = state.counts().rejections
          assert.deepStrictEqual(Object.keys(zero).sort(), [...handshakeReasonList].sort())
          assert.isTrue(Object.values(zero).every((n) => n === 0))
          yield* logged(state.refused("10.0.0.1", refusal("BadMac")))
          yield* logged(state.refused("10.0.0.1", refusal("BadMac")))
          yield* logged(state.refused("10.0.0.2", refusal("Timeout")))
          yield* logged(state.refused("10.0.0.3", refusal("InvalidHello", "not JSON")))
          tls = 4
          const { rejections } = state.counts()
          assert.include(rejections, { BadMac: 2, Timeout: 1, InvalidHello: 1, TlsHandshake: 4, NotHello: 0 })
          assert.deepStrictEqual(seen, [
            { _tag: "HandshakeFailed", remote: "10.0.0.1", reason: "BadMac" },
            { _tag: "HandshakeFailed", remote: "10.0.0.1", reason: "BadMac" },
            { _tag: "HandshakeFailed", remote: "10.0.0.2", reason: "Timeout" },
            { _tag: "HandshakeFailed", remote: "10.0.0.3", reason: "InvalidHello" }
          ])
        })
    )

    it.effect(
      "are warned about at most once every 10 s, each one in between at debug, with the count since",
      () =>
        Effect.gen(function* () {
          const { state, log, logged } = yield* setup()
          // Four refusals a second for a minute.
          for (let i = 0; i < 240; i++) {
            yield* logged(state.refused(`10.0.0.${i % 7}`, refusal(i % 2 === 0 ? "BadMac" : "NotHello")))
            yield* TestClock.adjust(250)
          }
          const warnings = log.lines.filter((line) => line.level === "WARN")
          assert.deepStrictEqual(
            warnings.map((line) => line.at),
            [0, 10_000, 20_000, 30_000, 40_000, 50_000]
          )
          assert.deepStrictEqual(
            warnings.map((line) => [
              line.annotations.handshake_failures,
              line.annotations.since_last_warning
            ]),
            [
              [1, 1],
              [41, 40],
              [81, 40],
              [121, 40],
              [161, 40],
              [201, 40]
            ]
          )
          assert.include(warnings[0]!.annotations, {
            remote: "10.0.0.0",
            reason: "the HELLO MAC does not match the shared secret"
          })
          assert.strictEqual(log.lines.filter((line) => line.level === "DEBUG").length, 234)
          assert.isTrue(log.lines.every((line) => line.message === "mesh handshake refused"))
        })
    )

    it.effect(
      "another node announcing our server id is warned about at most once a minute, apart from the rest",
      () =>
        Effect.gen(function* () {
          const { state, log, logged } = yield* setup()
          const own =
            "another node announces this node's server id: refusing it (do two nodes share QUEEN_SERVER_ID?)"
          yield* logged(state.refused("10.0.0.9", refusal("OwnServerId")))
          // It takes nothing from the handshake warnings' allowance.
          yield* logged(state.refused("10.0.0.1", refusal("BadMac")))
          for (let t = 0; t < 120; t++) {
            yield* TestClock.adjust(1000)
            yield* logged(state.refused("10.0.0.9", refusal("OwnServerId")))
          }
          const warned = log.lines.filter((line) => line.level === "WARN")
          assert.deepStrictEqual(
            warned.map((line) => [line.at, line.message]),
            [
              [0, own],
              [0, "mesh handshake refused"],
              [60_000, own],
              [120_000, own]
            ]
          )
          assert.include(warned[0]!.annotations, { remote: "10.0.0.9" })
          // Counted every time all the same.
          assert.strictEqual(state.counts().rejections.OwnServerId, 121)
        })
    )

    it.effect("our own dial is no refusal: counted apart, published nowhere, logged at debug", () =>
      Effect.gen(function* () {
        const { state, seen, log, logged } = yield* setup()
        yield* logged(state.ownDial("10.0.0.1"))
        const counts = state.counts()
        assert.strictEqual(counts.inbound.self_dials, 1)
        assert.isTrue(Object.values(counts.rejections).every((n) => n === 0))
        assert.deepStrictEqual(seen, [])
        assert.deepStrictEqual(
          log.lines.map((line) => [line.level, line.message]),
          [["DEBUG", "closed our own dial: the peer list names this node"]]
        )
      })
    )
  })

  describe("counts", () => {
    it("every counter it reports, each moved by its own method", () => {
      const state = bare({ maxInbound: 8, maxUnauthenticatedPerAddress: 8 }, "permissive")
      state.frameRead()
      state.frameRead()
      state.frameRead()
      state.frameInvalid()
      state.frameUnknown()
      state.frameOversized()
      state.frameDispatched(2)
      state.frameDispatched(0)
      state.itemsInvalid(5)
      state.closedSilent()
      state.closedIdle()
      state.closedIdle()
      state.admit("10.0.0.1")
      state.admit("10.0.0.2")
      state.authenticated("10.0.0.1", 1)
      state.authenticated("10.0.0.2", 2)
      const counts = state.counts()
      assert.deepStrictEqual(
        { ...counts, rejections: undefined, readByPeer: undefined },
        {
          framesRead: 3,
          framesDispatched: 2,
          framesInvalid: 1,
          framesUnknown: 1,
          framesOversized: 1,
          itemsInvalid: 7,
          rejections: undefined,
          inbound: {
            open: 2,
            authenticated: 2,
            authenticated_total: 2,
            closed_silent: 1,
            closed_idle: 2,
            legacy_accepted: 1,
            self_dials: 0
          },
          readByPeer: undefined
        }
      )
      // A copy: what happens later does not change it.
      state.frameRead()
      state.closed("10.0.0.1", true)
      assert.strictEqual(counts.framesRead, 3)
      assert.strictEqual(counts.inbound.open, 2)
    })

    it("legacy HELLOs are counted as accepted in permissive mode only", () => {
      for (const [mode, expected] of [
        ["legacy", 0],
        ["permissive", 1],
        ["required", 0]
      ] as const) {
        const state = bare({ maxInbound: 8, maxUnauthenticatedPerAddress: 8 }, mode)
        state.admit("10.0.0.1")
        state.authenticated("10.0.0.1", 1)
        state.admit("10.0.0.2")
        state.authenticated("10.0.0.2", 2)
        assert.strictEqual(state.counts().inbound.legacy_accepted, expected, mode)
      }
    })

    it("frames read are counted per sender and tag, the senders past 64 in one row", () => {
      const state = bare({ maxInbound: 8, maxUnauthenticatedPerAddress: 8 })
      const first = state.readCounter("queen-b")
      first(1)
      first(1)
      first(3)
      // A second link of the same sender adds to its row.
      state.readCounter("queen-b")(3)
      for (let i = 0; i < 70; i++) state.readCounter(`flood-${i}`)(2)
      // A sender counted apart keeps its row.
      state.readCounter("queen-b")(40)
      const rows = new Map(state.counts().readByPeer)
      assert.deepStrictEqual(rows.get("queen-b"), [
        [1, 2],
        [3, 2],
        [40, 1]
      ])
      assert.strictEqual(rows.size, 65)
      assert.isTrue(rows.has("flood-62"))
      assert.isFalse(rows.has("flood-63"))
      assert.deepStrictEqual(rows.get("_other"), [[2, 7]])
    })
  })
})
