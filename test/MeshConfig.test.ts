/**
 * The mesh's configuration (spec "Enabling it"): defaults, legacy aliases, the tolerant peer list, and
 * a `ConfigError` naming the variable for anything else that is malformed.
 */
import { hostname } from "node:os"
import { assert, describe, it } from "@effect/vitest"
import {
  Cause,
  Config,
  ConfigProvider,
  Duration,
  Effect,
  Exit,
  Layer,
  Logger,
  Option,
  Redacted,
  References,
  Result
} from "effect"
import * as fc from "fast-check"
import * as Mesh from "../src/Mesh.js"
import * as MeshConfig from "../src/MeshConfig.js"
import { assertEqual } from "./fixtures/equality.js"

/** Exactly these variables, an empty one kept as set (as the command line reads the environment). */
const provider = (env: Readonly<Record<string, string>>) =>
  ConfigProvider.fromEnv({ env: { ...env }, preserveEmptyStrings: true })

/** The configuration read from exactly these variables. */
const load = (env: Readonly<Record<string, string>>) => MeshConfig.config.parse(provider(env))

/** `effect` with `env` as its `ConfigProvider`. */
const withEnv =
  (env: Readonly<Record<string, string>>) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>) =>
    Effect.provideService(effect, ConfigProvider.ConfigProvider, provider(env))

/** The configuration, failing the test on a `ConfigError`. */
const loaded = (env: Readonly<Record<string, string>>) =>
  Effect.catch(load(env), (error) => Effect.die(new Error(String(error))))

/** The `ConfigError` for these variables, failing the test if they load. */
const rejected = (env: Readonly<Record<string, string>>) =>
  Effect.gen(function* () {
    const result = yield* Effect.result(load(env))
    if (Result.isSuccess(result)) return assert.fail(`expected a ConfigError for ${JSON.stringify(env)}`)
    assert.instanceOf(result.failure, Config.ConfigError)
    return result.failure
  })

const assertNames = (error: Config.ConfigError, name: string) => {
  assert.include(String(error), name)
}

const millis = (duration: Duration.Duration) => Duration.toMillis(duration)

const peersOf = (env: Readonly<Record<string, string>>) => Effect.map(loaded(env), (config) => config.peers)

describe("MeshConfig", () => {
  describe("defaults", () => {
    it.effect("uses the spec's defaults when nothing is set", () =>
      Effect.gen(function* () {
        const config = yield* loaded({})
        assert.strictEqual(config.port, 6633)
        assert.strictEqual(millis(config.heartbeatInterval), 1000)
        assert.strictEqual(millis(config.deadThreshold), 5000)
        assert.strictEqual(millis(config.handshakeTimeout), 5000)
        assert.strictEqual(millis(config.cacheRefreshInterval), 60000)
        assert.strictEqual(millis(config.hotlistFlushWindow), 20)
        assert.strictEqual(config.enabled, true)
        assertEqual(config.peers, [])
        assert.strictEqual(Redacted.value(config.secret), "")
        assert.strictEqual(config.sendQueueCapacity, 1024)
        assert.strictEqual(config.bindHost, "0.0.0.0")
        assert.match(config.serverId, /^queen-[0-9a-f]{8}$/)
        assert.isFalse(MeshConfig.isActive(config))
      })
    )

    it("the defaults value carries the same numbers", () => {
      const d = MeshConfig.defaults
      assert.strictEqual(d.port, 6633)
      assert.strictEqual(millis(d.heartbeatInterval), 1000)
      assert.strictEqual(millis(d.deadThreshold), 5000)
      assert.strictEqual(millis(d.handshakeTimeout), 5000)
      assert.strictEqual(millis(d.cacheRefreshInterval), 60000)
      assert.strictEqual(millis(d.hotlistFlushWindow), 20)
      assert.strictEqual(d.enabled, true)
      assertEqual(d.peers, [])
      assert.strictEqual(Redacted.value(d.secret), "")
      assert.strictEqual(d.sendQueueCapacity, 1024)
    })

    it.effect("reads every variable when set", () =>
      Effect.gen(function* () {
        const config = yield* loaded({
          QUEEN_MESH_PORT: "7000",
          QUEEN_MESH_PEERS: "a,b:7001",
          QUEEN_MESH_BIND_ADDR: "127.0.0.1",
          QUEEN_SYNC_SECRET: "s3cr3t",
          QUEEN_SYNC_ENABLED: "false",
          QUEEN_SYNC_HEARTBEAT_MS: "250",
          QUEEN_SYNC_DEAD_THRESHOLD_MS: "1500",
          QUEEN_MESH_HANDSHAKE_TIMEOUT_MS: "800",
          QUEEN_CACHE_REFRESH_INTERVAL_MS: "30000",
          QUEEN_MESH_HOTLIST_FLUSH_MS: "5",
          QUEEN_MESH_SEND_QUEUE: "64",
          QUEEN_SERVER_ID: "node-1"
        })
        assert.strictEqual(config.port, 7000)
        assertEqual(config.peers, [
          { host: "a", port: 7000 },
          { host: "b", port: 7001 }
        ])
        assert.strictEqual(config.bindHost, "127.0.0.1")
        assert.strictEqual(Redacted.value(config.secret), "s3cr3t")
        assert.strictEqual(config.enabled, false)
        assert.strictEqual(millis(config.heartbeatInterval), 250)
        assert.strictEqual(millis(config.deadThreshold), 1500)
        assert.strictEqual(millis(config.handshakeTimeout), 800)
        assert.strictEqual(millis(config.cacheRefreshInterval), 30000)
        assert.strictEqual(millis(config.hotlistFlushWindow), 5)
        assert.strictEqual(config.sendQueueCapacity, 64)
        assert.strictEqual(config.serverId, "node-1")
      })
    )

    it.effect("keeps the secret redacted", () =>
      Effect.gen(function* () {
        const config = yield* loaded({ QUEEN_SYNC_SECRET: "s3cr3t" })
        assert.notInclude(String(config.secret), "s3cr3t")
        assert.notInclude(JSON.stringify(config), "s3cr3t")
      })
    )

    it.effect("port 0 (ephemeral) is allowed for the listener", () =>
      Effect.map(loaded({ QUEEN_MESH_PORT: "0" }), (config) => assert.strictEqual(config.port, 0))
    )
  })

  describe("legacy aliases", () => {
    it.effect("QUEEN_UDP_PEERS alone works", () =>
      Effect.map(peersOf({ QUEEN_UDP_PEERS: "a,b:7001" }), (peers) =>
        assertEqual(peers, [
          { host: "a", port: 6633 },
          { host: "b", port: 7001 }
        ])
      )
    )

    it.effect("QUEEN_UDP_NOTIFY_PORT alone works", () =>
      Effect.map(loaded({ QUEEN_UDP_NOTIFY_PORT: "7100" }), (config) => assert.strictEqual(config.port, 7100))
    )

    it.effect("QUEEN_MESH_PEERS wins over QUEEN_UDP_PEERS", () =>
      Effect.map(peersOf({ QUEEN_MESH_PEERS: "mesh", QUEEN_UDP_PEERS: "udp" }), (peers) =>
        assertEqual(peers, [{ host: "mesh", port: 6633 }])
      )
    )

    it.effect("QUEEN_MESH_PORT wins over QUEEN_UDP_NOTIFY_PORT", () =>
      Effect.map(loaded({ QUEEN_MESH_PORT: "7000", QUEEN_UDP_NOTIFY_PORT: "7100" }), (config) =>
        assert.strictEqual(config.port, 7000)
      )
    )

    it.effect("the winning primary name hides an invalid alias", () =>
      Effect.map(loaded({ QUEEN_MESH_PORT: "7000", QUEEN_UDP_NOTIFY_PORT: "junk" }), (config) =>
        assert.strictEqual(config.port, 7000)
      )
    )

    it.effect("an invalid alias value names the alias", () =>
      Effect.gen(function* () {
        const port = yield* rejected({ QUEEN_UDP_NOTIFY_PORT: "abc" })
        assertNames(port, "QUEEN_UDP_NOTIFY_PORT")
        assert.notInclude(String(port), "QUEEN_MESH_PORT")
        const peers = yield* rejected({ QUEEN_UDP_PEERS: "h:70000" })
        assertNames(peers, "QUEEN_UDP_PEERS")
        assert.notInclude(String(peers), "QUEEN_MESH_PEERS")
      })
    )

    it.effect("an invalid primary value names the primary even when the alias is valid", () =>
      Effect.gen(function* () {
        const error = yield* rejected({ QUEEN_MESH_PORT: "abc", QUEEN_UDP_NOTIFY_PORT: "7100" })
        assertNames(error, "QUEEN_MESH_PORT")
      })
    )
  })

  describe("QUEEN_SYNC_ENABLED", () => {
    const cases: ReadonlyArray<readonly [string, boolean]> = [
      ["true", true],
      ["false", false],
      ["1", true],
      ["0", false],
      ["yes", true],
      ["no", false],
      ["on", true],
      ["off", false],
      ["YES", true],
      ["Off", false],
      ["TRUE", true],
      ["False", false],
      ["oN", true],
      ["NO", false]
    ]
    for (const [raw, enabled] of cases) {
      it.effect(`"${raw}" is ${enabled}`, () =>
        Effect.map(loaded({ QUEEN_SYNC_ENABLED: raw }), (config) =>
          assert.strictEqual(config.enabled, enabled)
        )
      )
    }

    it("accepts the eight words in any case", () => {
      fc.assert(
        fc.property(
          fc.constantFrom("true", "false", "1", "0", "yes", "no", "on", "off"),
          fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
          (word, upper) => {
            const raw = Array.from(word, (c, i) => (upper[i] ? c.toUpperCase() : c)).join("")
            assertEqual(
              MeshConfig.parseBoolean(raw),
              Result.succeed(["true", "1", "yes", "on"].includes(word))
            )
          }
        )
      )
    })

    for (const raw of ["maybe", "2", "enabled", "y"]) {
      it.effect(`rejects "${raw}" with a ConfigError naming the variable`, () =>
        Effect.map(rejected({ QUEEN_SYNC_ENABLED: raw }), (error) => assertNames(error, "QUEEN_SYNC_ENABLED"))
      )
    }

    it.effect("fails through Exit as a typed failure, not a defect", () =>
      Effect.gen(function* () {
        const exit = yield* Effect.exit(load({ QUEEN_SYNC_ENABLED: "maybe" }))
        assert.isTrue(Exit.isFailure(exit))
        if (Exit.isSuccess(exit)) return
        const failure = Option.getOrUndefined(Cause.findErrorOption(exit.cause))
        assert.isDefined(failure)
        assert.instanceOf(failure, Config.ConfigError)
      })
    )
  })

  describe("server id", () => {
    it.effect("QUEEN_SERVER_ID wins over HOSTNAME", () =>
      Effect.map(loaded({ QUEEN_SERVER_ID: "node-1", HOSTNAME: "host-1" }), (config) =>
        assert.strictEqual(config.serverId, "node-1")
      )
    )

    it.effect("HOSTNAME is used without QUEEN_SERVER_ID", () =>
      Effect.map(loaded({ HOSTNAME: "host-1" }), (config) => assert.strictEqual(config.serverId, "host-1"))
    )

    it.effect("without either, a fresh queen-<8 hex> id", () =>
      Effect.gen(function* () {
        const first = yield* loaded({})
        const second = yield* loaded({})
        assert.match(first.serverId, /^queen-[0-9a-f]{8}$/)
        assert.match(second.serverId, /^queen-[0-9a-f]{8}$/)
        assert.notStrictEqual(first.serverId, second.serverId)
      })
    )

    it.effect("an empty value counts as unset", () =>
      Effect.gen(function* () {
        assert.strictEqual((yield* loaded({ QUEEN_SERVER_ID: "", HOSTNAME: "host-1" })).serverId, "host-1")
        assert.match((yield* loaded({ HOSTNAME: "" })).serverId, /^queen-[0-9a-f]{8}$/)
      })
    )

    it("randomServerId and make follow the same shape", () => {
      assert.match(MeshConfig.randomServerId(), /^queen-[0-9a-f]{8}$/)
      assert.match(MeshConfig.unsafeMake().serverId, /^queen-[0-9a-f]{8}$/)
      assert.strictEqual(MeshConfig.unsafeMake({ serverId: "x" }).serverId, "x")
    })
  })

  describe("peer list", () => {
    it.effect("is comma-separated, trims whitespace and skips empty entries", () =>
      Effect.map(peersOf({ QUEEN_MESH_PEERS: " a , b:7001,, ,\tc\t," }), (peers) =>
        assertEqual(peers, [
          { host: "a", port: 6633 },
          { host: "b", port: 7001 },
          { host: "c", port: 6633 }
        ])
      )
    )

    it.effect("an empty or blank list is no peers", () =>
      Effect.gen(function* () {
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "" }), [])
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: " , ," }), [])
      })
    )

    it.effect("strips http:// and https://", () =>
      Effect.map(
        peersOf({ QUEEN_MESH_PEERS: "http://a:7001,https://b,HTTPS://c:7002/,http://[::1]:7003/path" }),
        (peers) =>
          assertEqual(peers, [
            { host: "a", port: 7001 },
            { host: "b", port: 6633 },
            { host: "c", port: 7002 },
            { host: "::1", port: 7003 }
          ])
      )
    )

    it.effect("a bare host uses the mesh port", () =>
      Effect.gen(function* () {
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "h" }), [{ host: "h", port: 6633 }])
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "h", QUEEN_MESH_PORT: "7000" }), [
          { host: "h", port: 7000 }
        ])
      })
    )

    it.effect("a bare host uses a mesh port set through the alias", () =>
      Effect.gen(function* () {
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "h", QUEEN_UDP_NOTIFY_PORT: "7100" }), [
          { host: "h", port: 7100 }
        ])
        assertEqual(yield* peersOf({ QUEEN_UDP_PEERS: "h", QUEEN_UDP_NOTIFY_PORT: "7100" }), [
          { host: "h", port: 7100 }
        ])
      })
    )

    it.effect("a non-numeric port tail falls back to the mesh port", () =>
      Effect.gen(function* () {
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "h:abc" }), [{ host: "h", port: 6633 }])
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "h:abc", QUEEN_MESH_PORT: "7000" }), [
          { host: "h", port: 7000 }
        ])
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "h:" }), [{ host: "h", port: 6633 }])
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "h:-1" }), [{ host: "h", port: 6633 }])
      })
    )

    it.effect("bracketed IPv6 with a port", () =>
      Effect.gen(function* () {
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "[::1]:7000" }), [{ host: "::1", port: 7000 }])
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "[fe80::1]" }), [{ host: "fe80::1", port: 6633 }])
      })
    )

    it.effect("bare IPv6 literals use the mesh port", () =>
      Effect.gen(function* () {
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "::1" }), [{ host: "::1", port: 6633 }])
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "fe80::1, ::1", QUEEN_MESH_PORT: "7000" }), [
          { host: "fe80::1", port: 7000 },
          { host: "::1", port: 7000 }
        ])
      })
    )

    it.effect("an out-of-range peer port is a ConfigError naming the variable", () =>
      Effect.gen(function* () {
        for (const entry of ["h:70000", "h:0", "ok,h:65536", "[::1]:99999"]) {
          const error = yield* rejected({ QUEEN_MESH_PEERS: entry })
          assertNames(error, "QUEEN_MESH_PEERS")
        }
      })
    )

    it.effect("the highest and lowest valid peer ports are accepted", () =>
      Effect.map(peersOf({ QUEEN_MESH_PEERS: "a:1,b:65535" }), (peers) =>
        assertEqual(peers, [
          { host: "a", port: 1 },
          { host: "b", port: 65535 }
        ])
      )
    )

    const hostname = fc
      .array(fc.stringMatching(/^[a-z]([a-z0-9-]{0,8}[a-z0-9])?$/), { minLength: 1, maxLength: 3 })
      .map((labels) => labels.join("."))
    const entry = fc.record({
      host: hostname,
      port: fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined }),
      scheme: fc.constantFrom("", "http://", "https://", "HTTP://"),
      pad: fc.constantFrom("", " ", "  ", "\t")
    })

    it("parsePeers reads any well-formed list, with empty entries anywhere", () => {
      fc.assert(
        fc.property(
          fc.array(entry, { maxLength: 6 }),
          fc.array(fc.constantFrom("", " "), { maxLength: 3 }),
          fc.integer({ min: 1, max: 65535 }),
          (entries, blanks, meshPort) => {
            const parts = entries.map(
              ({ host, port, scheme, pad }) =>
                `${pad}${scheme}${host}${port === undefined ? "" : `:${port}`}${pad}`
            )
            const raw = [...blanks, ...parts.flatMap((part, i) => (i % 2 === 0 ? [part, ""] : [part]))].join(
              ","
            )
            assertEqual(
              MeshConfig.parsePeers(raw, meshPort),
              Result.succeed(entries.map(({ host, port }) => ({ host, port: port ?? meshPort })))
            )
          }
        )
      )
    })
  })

  describe("invalid values", () => {
    const intervals = [
      "QUEEN_SYNC_HEARTBEAT_MS",
      "QUEEN_SYNC_DEAD_THRESHOLD_MS",
      "QUEEN_CACHE_REFRESH_INTERVAL_MS",
      "QUEEN_MESH_HANDSHAKE_TIMEOUT_MS"
    ]

    for (const name of intervals) {
      it.effect(`${name}: a negative or non-numeric value is a ConfigError naming it`, () =>
        Effect.gen(function* () {
          for (const raw of ["-5", "abc", "1.5", "10ms", "1e3"]) {
            const error = yield* rejected({ [name]: raw })
            assertNames(error, name)
          }
        })
      )

      it.effect(`${name}: zero is rejected, a positive value accepted`, () =>
        Effect.gen(function* () {
          assertNames(yield* rejected({ [name]: "0" }), name)
          const config = yield* loaded({ [name]: " 1234 " })
          const value = {
            QUEEN_SYNC_HEARTBEAT_MS: config.heartbeatInterval,
            QUEEN_SYNC_DEAD_THRESHOLD_MS: config.deadThreshold,
            QUEEN_CACHE_REFRESH_INTERVAL_MS: config.cacheRefreshInterval,
            QUEEN_MESH_HANDSHAKE_TIMEOUT_MS: config.handshakeTimeout
          }[name]
          assert.isDefined(value)
          if (value !== undefined) assert.strictEqual(millis(value), 1234)
        })
      )
    }

    it.effect("QUEEN_MESH_PORT: out of range, negative or non-numeric is a ConfigError naming it", () =>
      Effect.gen(function* () {
        for (const raw of ["70000", "65536", "-5", "abc", "80.5"]) {
          assertNames(yield* rejected({ QUEEN_MESH_PORT: raw }), "QUEEN_MESH_PORT")
        }
      })
    )

    it.effect("QUEEN_MESH_SEND_QUEUE and QUEEN_MESH_HOTLIST_FLUSH_MS must be positive whole numbers", () =>
      Effect.gen(function* () {
        for (const name of ["QUEEN_MESH_SEND_QUEUE", "QUEEN_MESH_HOTLIST_FLUSH_MS"]) {
          for (const raw of ["0", "-1", "abc"]) assertNames(yield* rejected({ [name]: raw }), name)
        }
      })
    )

    it.effect("one bad variable fails the whole configuration", () =>
      Effect.gen(function* () {
        const error = yield* rejected({ QUEEN_MESH_PEERS: "a,b", QUEEN_SYNC_HEARTBEAT_MS: "-5" })
        assertNames(error, "QUEEN_SYNC_HEARTBEAT_MS")
      })
    )
  })

  describe("pure parsers", () => {
    it("parsePort", () => {
      assertEqual(MeshConfig.parsePort("6633"), Result.succeed(6633))
      assertEqual(MeshConfig.parsePort(" 0 "), Result.succeed(0))
      assertEqual(MeshConfig.parsePort("65535"), Result.succeed(65535))
      assert.isTrue(Result.isFailure(MeshConfig.parsePort("0", 1)))
      assert.isTrue(Result.isFailure(MeshConfig.parsePort("65536")))
      assert.isTrue(Result.isFailure(MeshConfig.parsePort("-1")))
      assert.isTrue(Result.isFailure(MeshConfig.parsePort("0x10")))
      assert.isTrue(Result.isFailure(MeshConfig.parsePort("99999999999999999999999")))
    })

    it("parseMillis", () => {
      assertEqual(MeshConfig.parseMillis("0"), Result.succeed(0))
      assertEqual(MeshConfig.parseMillis("1000"), Result.succeed(1000))
      assert.isTrue(Result.isFailure(MeshConfig.parseMillis("0", 1)))
      assert.isTrue(Result.isFailure(MeshConfig.parseMillis("-5")))
      assert.isTrue(Result.isFailure(MeshConfig.parseMillis("abc")))
      assert.isTrue(Result.isFailure(MeshConfig.parseMillis("99999999999999999999")))
    })

    it("parsePeer", () => {
      assertEqual(MeshConfig.parsePeer("h:7000", 1), Result.succeed({ host: "h", port: 7000 }))
      assertEqual(MeshConfig.parsePeer("h:abc", 1), Result.succeed({ host: "h", port: 1 }))
      assertEqual(MeshConfig.parsePeer("[::1]:7000", 1), Result.succeed({ host: "::1", port: 7000 }))
      assertEqual(MeshConfig.parsePeer("::1", 1), Result.succeed({ host: "::1", port: 1 }))
      assertEqual(MeshConfig.parsePeer("fe80::1", 1), Result.succeed({ host: "fe80::1", port: 1 }))
      assert.isTrue(Result.isFailure(MeshConfig.parsePeer("h:0", 1)))
      assert.isTrue(Result.isFailure(MeshConfig.parsePeer("h:70000", 1)))
      assert.isTrue(Result.isFailure(MeshConfig.parsePeer(":7000", 1)))
      assert.isTrue(Result.isFailure(MeshConfig.parsePeer("[::1", 1)))
      assert.isTrue(Result.isFailure(MeshConfig.parsePeer("http://", 1)))
    })

    it("parseBoolean and parsePort never throw", () => {
      fc.assert(
        fc.property(fc.string({ maxLength: 12 }), (raw) => {
          MeshConfig.parseBoolean(raw)
          MeshConfig.parsePort(raw)
          MeshConfig.parseMillis(raw)
          MeshConfig.parsePeers(raw, 6633)
        })
      )
    })
  })

  describe("isActive", () => {
    it("is enabled and at least one peer", () => {
      const peer = { host: "h", port: 6633 }
      assert.isTrue(MeshConfig.isActive(MeshConfig.unsafeMake({ enabled: true, peers: [peer] })))
      assert.isTrue(MeshConfig.isActive(MeshConfig.unsafeMake({ enabled: true, peers: [peer, peer] })))
      assert.isFalse(MeshConfig.isActive(MeshConfig.unsafeMake({ enabled: true, peers: [] })))
      assert.isFalse(MeshConfig.isActive(MeshConfig.unsafeMake({ enabled: false, peers: [peer] })))
      assert.isFalse(MeshConfig.isActive(MeshConfig.unsafeMake({ enabled: false, peers: [] })))
    })

    it.effect("follows the variables", () =>
      Effect.gen(function* () {
        assert.isTrue(MeshConfig.isActive(yield* loaded({ QUEEN_MESH_PEERS: "h" })))
        assert.isFalse(
          MeshConfig.isActive(yield* loaded({ QUEEN_MESH_PEERS: "h", QUEEN_SYNC_ENABLED: "off" }))
        )
        assert.isFalse(MeshConfig.isActive(yield* loaded({ QUEEN_SYNC_ENABLED: "on" })))
      })
    )
  })

  describe("layers", () => {
    it.effect("layerConfig reads the current ConfigProvider", () =>
      Effect.gen(function* () {
        const config = yield* MeshConfig.MeshConfig
        assert.strictEqual(config.port, 7000)
        assert.strictEqual(config.serverId, "node-1")
      }).pipe(
        Effect.provide(MeshConfig.layerConfig),
        withEnv({ QUEEN_MESH_PORT: "7000", QUEEN_SERVER_ID: "node-1" })
      )
    )

    it.effect("layerConfig fails with the ConfigError", () =>
      Effect.gen(function* () {
        const result = yield* Effect.result(
          Layer.build(MeshConfig.layerConfig).pipe(Effect.scoped, withEnv({ QUEEN_MESH_PORT: "abc" }))
        )
        assert.isTrue(Result.isFailure(result))
        if (Result.isFailure(result) && result.failure._tag !== "MeshConfigError") {
          assertNames(result.failure, "QUEEN_MESH_PORT")
        } else assert.fail("expected a ConfigError for text that is no number")
      })
    )

    it.effect("layer overrides the defaults", () =>
      Effect.gen(function* () {
        const config = yield* MeshConfig.MeshConfig
        assert.strictEqual(config.port, 9000)
        assert.strictEqual(millis(config.heartbeatInterval), 1000)
        assert.match(config.serverId, /^queen-[0-9a-f]{8}$/)
      }).pipe(Effect.provide(MeshConfig.layer({ port: 9000 })))
    )
  })
})

describe("MeshConfig: configuration that cannot mislead", () => {
  it.effect(
    "whitespace around a host is trimmed; an empty primary falls back to the alias; empty means default",
    () =>
      Effect.gen(function* () {
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: " a : 8 " }), [{ host: "a", port: 8 }])
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "", QUEEN_UDP_PEERS: "legacy:7001" }), [
          { host: "legacy", port: 7001 }
        ])
        assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "  ", QUEEN_UDP_PEERS: "legacy" }), [
          { host: "legacy", port: 6633 }
        ])
        const config = yield* loaded({
          QUEEN_SYNC_ENABLED: "",
          QUEEN_MESH_PORT: " ",
          QUEEN_SYNC_HEARTBEAT_MS: ""
        })
        assert.strictEqual(config.enabled, true)
        assert.strictEqual(config.port, 6633)
        assert.strictEqual(millis(config.heartbeatInterval), 1000)
      })
  )

  it.effect("hosts must be hostnames or IP literals", () =>
    Effect.gen(function* () {
      for (const entry of ["::::", "bad\u0007host", "a b", "host\u0000x", "-leading", "a..b", "1.2.3"]) {
        assertNames(yield* rejected({ QUEEN_MESH_PEERS: entry }), "QUEEN_MESH_PEERS")
      }
      assertEqual(yield* peersOf({ QUEEN_MESH_PEERS: "node_1.local,10.0.0.1:7000,[::1]:7001" }), [
        { host: "node_1.local", port: 6633 },
        { host: "10.0.0.1", port: 7000 },
        { host: "::1", port: 7001 }
      ])
    })
  )

  it.effect("a peer without a port while QUEEN_MESH_PORT=0 is an error naming the variable", () =>
    Effect.gen(function* () {
      const error = yield* rejected({ QUEEN_MESH_PORT: "0", QUEEN_MESH_PEERS: "peer" })
      assertNames(error, "QUEEN_MESH_PEERS")
      assert.include(String(error), "mesh port is 0")
      assertEqual(yield* peersOf({ QUEEN_MESH_PORT: "0", QUEEN_MESH_PEERS: "peer:7000" }), [
        { host: "peer", port: 7000 }
      ])
    })
  )

  it.effect("intervals have upper bounds", () =>
    Effect.gen(function* () {
      assertNames(yield* rejected({ QUEEN_SYNC_HEARTBEAT_MS: "1000000000000" }), "QUEEN_SYNC_HEARTBEAT_MS")
      assertNames(
        yield* rejected({ QUEEN_SYNC_DEAD_THRESHOLD_MS: "1000000000000" }),
        "QUEEN_SYNC_DEAD_THRESHOLD_MS"
      )
      assertNames(yield* rejected({ QUEEN_MESH_SEND_QUEUE: "1000000000" }), "QUEEN_MESH_SEND_QUEUE")
    })
  )

  it.effect("a heartbeat not below the dead threshold is an error naming both variables", () =>
    Effect.gen(function* () {
      const error = yield* rejected({ QUEEN_SYNC_HEARTBEAT_MS: "3000", QUEEN_SYNC_DEAD_THRESHOLD_MS: "1000" })
      assertNames(error, "QUEEN_SYNC_HEARTBEAT_MS")
      assertNames(error, "QUEEN_SYNC_DEAD_THRESHOLD_MS")
      assertNames(yield* rejected({ QUEEN_SYNC_HEARTBEAT_MS: "5000" }), "QUEEN_SYNC_DEAD_THRESHOLD_MS")
    })
  )

  it.effect("the listener defences and the security modes have defaults and variables", () =>
    Effect.gen(function* () {
      const config = yield* loaded({})
      assert.strictEqual(config.maxInbound, 64)
      assert.strictEqual(config.maxUnauthenticatedPerAddress, 8)
      assert.strictEqual(config.helloMaxBytes, 4096)
      assert.strictEqual(millis(config.authFailureDelay), 1000)
      assert.strictEqual(millis(config.idleTimeout), 5000)
      assert.strictEqual(config.auth, "legacy")
      assert.strictEqual(config.tls, "off")
      const set = yield* loaded({
        QUEEN_MESH_MAX_INBOUND: "10",
        QUEEN_MESH_MAX_UNAUTHENTICATED_PER_IP: "2",
        QUEEN_MESH_HELLO_MAX_BYTES: "1024",
        QUEEN_MESH_AUTH_FAILURE_DELAY_MS: "0",
        QUEEN_MESH_IDLE_TIMEOUT_MS: "9000",
        QUEEN_MESH_AUTH: "Permissive",
        QUEEN_MESH_CLUSTER_LABEL: "blue",
        QUEEN_MESH_TLS: "psk",
        QUEEN_SYNC_SECRET: "s"
      })
      assert.include(set, {
        maxInbound: 10,
        maxUnauthenticatedPerAddress: 2,
        helloMaxBytes: 1024,
        auth: "permissive"
      })
      assert.strictEqual(millis(set.idleTimeout), 9000)
      assert.strictEqual(set.clusterLabel, "blue")
      assert.strictEqual(set.tls, "psk")
      assertNames(yield* rejected({ QUEEN_MESH_AUTH: "strict" }), "QUEEN_MESH_AUTH")
      assertNames(yield* rejected({ QUEEN_MESH_HELLO_MAX_BYTES: "100" }), "QUEEN_MESH_HELLO_MAX_BYTES")
      assertNames(yield* rejected({ QUEEN_MESH_AUTH: "required" }), "QUEEN_SYNC_SECRET")
      assertNames(yield* rejected({ QUEEN_MESH_TLS: "psk" }), "QUEEN_SYNC_SECRET")
      assertNames(yield* rejected({ QUEEN_MESH_IDLE_TIMEOUT_MS: "10" }), "QUEEN_MESH_IDLE_TIMEOUT_MS")
    })
  )

  it("duplicate peers are found for merging", () => {
    const { peers, duplicates } = MeshConfig.dedupePeers([
      { host: "a", port: 1 },
      { host: "A", port: 1 },
      { host: "b", port: 1 }
    ])
    assertEqual(peers, [
      { host: "a", port: 1 },
      { host: "b", port: 1 }
    ])
    assertEqual(duplicates, [{ host: "A", port: 1 }])
  })
})

describe("MeshConfig: one validation for every way in", () => {
  /** What `MeshConfig.layer` fails with for these options, failing the test if they build. */
  const refusedInCode = (options: Partial<MeshConfig.MeshConfigShape>) =>
    Effect.gen(function* () {
      const exit = yield* Effect.exit(Layer.build(MeshConfig.layer({ serverId: "queen-a", ...options })))
      // A typed failure, never a defect: a bad value from code is refused like one from the environment.
      if (Exit.isSuccess(exit)) return assert.fail(`accepted ${JSON.stringify(options)}`)
      const failure = Cause.findErrorOption(exit.cause)
      if (Option.isNone(failure))
        return assert.fail(`a defect, not a typed error: ${Cause.pretty(exit.cause)}`)
      assert.strictEqual(failure.value._tag, "MeshConfigError")
      return failure.value
    }).pipe(Effect.scoped)

  const cases: ReadonlyArray<
    readonly [string, Partial<MeshConfig.MeshConfigShape>, ReadonlyArray<string>, Record<string, string>]
  > = [
    ["a negative port", { port: -1 }, ["port"], { QUEEN_MESH_PORT: "-1" }],
    ["a port above 65535", { port: 70_000 }, ["port"], { QUEEN_MESH_PORT: "70000" }],
    [
      "a heartbeat above the dead threshold",
      { heartbeatInterval: Duration.seconds(10), deadThreshold: Duration.seconds(5) },
      ["heartbeatInterval", "deadThreshold"],
      { QUEEN_SYNC_HEARTBEAT_MS: "10000", QUEEN_SYNC_DEAD_THRESHOLD_MS: "5000" }
    ],
    ["an empty server id", { serverId: "" }, ["serverId"], { QUEEN_SERVER_ID: "x".repeat(300) }],
    [
      "required auth without a secret",
      { auth: "required" },
      ["auth", "secret"],
      { QUEEN_MESH_AUTH: "required" }
    ],
    ["an empty send queue", { sendQueueCapacity: 0 }, ["sendQueueCapacity"], { QUEEN_MESH_SEND_QUEUE: "0" }],
    [
      "a peer host that is no host",
      { peers: [{ host: "a:b:c", port: 6633 }] },
      ["peers"],
      { QUEEN_MESH_PEERS: "a_b..c" }
    ],
    [
      "a HELLO cap below 256 bytes",
      { helloMaxBytes: 10 },
      ["helloMaxBytes"],
      { QUEEN_MESH_HELLO_MAX_BYTES: "10" }
    ],
    [
      "an idle timeout below the heartbeat",
      { idleTimeout: Duration.millis(10) },
      ["idleTimeout", "heartbeatInterval"],
      { QUEEN_MESH_IDLE_TIMEOUT_MS: "10" }
    ],
    ["a bind host that is no host", { bindHost: "not a host" }, ["bindHost"], {}]
  ]

  for (const [what, options, fields, env] of cases) {
    it.effect(
      `${what}: a MeshConfigError naming ${fields.join(" and ")}, from code and from the environment`,
      () =>
        Effect.gen(function* () {
          const fromCode = yield* refusedInCode(options)
          assert.deepStrictEqual(fromCode.fields, fields)
          for (const field of fields) assert.include(fromCode.message, field)
          if (Object.keys(env).length === 0) return
          // The environment names the same variables, through the same rule.
          const built = yield* Effect.result(
            Layer.build(MeshConfig.layerConfig).pipe(Effect.scoped, withEnv(env))
          )
          if (Result.isSuccess(built)) return assert.fail(`the environment accepted ${JSON.stringify(env)}`)
          const variables = Object.keys(env)
          if (built.failure._tag === "MeshConfigError") {
            for (const name of built.failure.variables) assert.include(fromCode.variables, name)
          } else {
            // Text that is no value at all is the ConfigError of reading it.
            for (const name of variables) assert.include(String(built.failure), name)
          }
        })
    )
  }

  it.effect("code gets what the environment gets: the same error for the same value", () =>
    Effect.gen(function* () {
      const fromCode = yield* refusedInCode({ port: 70_000 })
      const fromEnv = yield* Effect.flip(
        Layer.build(MeshConfig.layerConfig).pipe(
          Effect.scoped,
          withEnv({ QUEEN_SERVER_ID: "queen-a", QUEEN_MESH_PORT: "70000" })
        )
      )
      assert.strictEqual(fromEnv._tag, "MeshConfigError")
      assert.strictEqual(fromEnv.message, fromCode.message)
    })
  )

  it.effect("make and unsafeMake validate; an idle timeout left out follows the dead threshold", () =>
    Effect.gen(function* () {
      const made = yield* MeshConfig.make({ serverId: "a", deadThreshold: Duration.seconds(9) })
      assert.strictEqual(Duration.toMillis(made.idleTimeout), 9000)
      assert.throws(() => MeshConfig.unsafeMake({ port: -1 }), /QUEEN_MESH_PORT/)
    })
  )

  it.effect("Mesh.layerConfig reads the host's ConfigProvider, as a layer or around the effect", () =>
    Effect.gen(function* () {
      const env = { QUEEN_SERVER_ID: "from-provider", QUEEN_MESH_PEERS: "127.0.0.1:1", QUEEN_MESH_PORT: "0" }
      const viaLayer = yield* Effect.flatMap(Mesh.Mesh, (mesh) => Effect.succeed(mesh.serverId)).pipe(
        Effect.provide(Mesh.layerConfig().pipe(Layer.provide(ConfigProvider.layer(provider(env))))),
        Effect.scoped
      )
      assert.strictEqual(viaLayer, "from-provider")
      const viaEffect = yield* Effect.flatMap(Mesh.Mesh, (mesh) =>
        Effect.succeed({ id: mesh.serverId, active: mesh.active })
      ).pipe(Effect.provide(Mesh.layerConfig()), Effect.scoped, withEnv(env))
      assert.deepStrictEqual(viaEffect, { id: "from-provider", active: true })
    })
  )
})

describe("MeshConfig: upstream's configuration names", () => {
  it.effect("QUEEN_MESH_BIND_ADDR, else QUEEN_BIND_ADDR, else 0.0.0.0", () =>
    Effect.gen(function* () {
      assert.strictEqual((yield* loaded({})).bindHost, "0.0.0.0")
      assert.strictEqual((yield* loaded({ QUEEN_BIND_ADDR: "10.0.0.5" })).bindHost, "10.0.0.5")
      assert.strictEqual(
        (yield* loaded({ QUEEN_MESH_BIND_ADDR: "127.0.0.1", QUEEN_BIND_ADDR: "10.0.0.5" })).bindHost,
        "127.0.0.1"
      )
      assert.strictEqual((yield* loaded({ QUEEN_MESH_BIND_ADDR: "::" })).bindHost, "::")
    })
  )

  it.effect("a bind address set but empty, or with a port, is an error naming its variable", () =>
    Effect.gen(function* () {
      for (const name of ["QUEEN_MESH_BIND_ADDR", "QUEEN_BIND_ADDR"]) {
        const empty = yield* rejected({ [name]: "" })
        assertNames(empty, name)
        assert.include(String(empty), "empty")
      }
      for (const value of ["0.0.0.0:6633", "[::1]:6633", "queen-a:80"]) {
        const error = yield* rejected({ QUEEN_MESH_BIND_ADDR: value })
        assertNames(error, "QUEEN_MESH_BIND_ADDR")
        assert.include(String(error), "has a port")
      }
    })
  )

  it.effect("QUEEN_MESH_BIND_HOST still counts, before QUEEN_BIND_ADDR, and is reported deprecated", () =>
    Effect.gen(function* () {
      const env = { QUEEN_MESH_BIND_HOST: "127.0.0.2", QUEEN_BIND_ADDR: "10.0.0.5" }
      assert.strictEqual((yield* loaded(env)).bindHost, "127.0.0.2")
      assert.deepStrictEqual(yield* MeshConfig.deprecated.parse(provider(env)), [
        "QUEEN_MESH_BIND_HOST (use QUEEN_MESH_BIND_ADDR)"
      ])
      assert.deepStrictEqual(yield* MeshConfig.deprecated.parse(provider({ QUEEN_MESH_BIND_ADDR: "::" })), [])
      assert.strictEqual(
        (yield* loaded({ QUEEN_MESH_BIND_ADDR: "127.0.0.1", QUEEN_MESH_BIND_HOST: "127.0.0.2" })).bindHost,
        "127.0.0.1"
      )
      // layerConfig logs the warning itself.
      const logged: Array<string> = []
      const logger = Logger.make(({ message, fiber }) => {
        const variable = fiber.getRef(References.CurrentLogAnnotations).variable
        logged.push(`${String(message)} ${String(variable ?? "")}`)
      })
      yield* Effect.provide(
        MeshConfig.MeshConfig,
        MeshConfig.layerConfig.pipe(Layer.provide(ConfigProvider.layer(provider(env))))
      ).pipe(Effect.provide(Logger.layer([logger])))
      assert.deepStrictEqual(logged, [
        "deprecated configuration variable QUEEN_MESH_BIND_HOST (use QUEEN_MESH_BIND_ADDR)"
      ])
    })
  )

  it.effect("http_addr: QUEEN_MESH_ADVERTISE_HOST and PORT, by default the host name and 6632", () =>
    Effect.gen(function* () {
      const defaults = yield* loaded({})
      assert.strictEqual(defaults.httpPort, 6632)
      assert.strictEqual(defaults.advertiseHost, MeshConfig.defaultAdvertiseHost(undefined))
      assert.isTrue(MeshConfig.isValidHost(defaults.advertiseHost))
      const set = yield* loaded({ QUEEN_MESH_ADVERTISE_HOST: "queen-b.queen", PORT: "8080" })
      assertEqual(MeshConfig.httpAddress(set), Option.some("http://queen-b.queen:8080"))
      assertEqual(
        MeshConfig.httpAddress({ advertiseHost: "fd00::1", httpPort: 6632 }),
        Option.some("http://[fd00::1]:6632")
      )
      assertEqual(MeshConfig.httpAddress({ advertiseHost: "", httpPort: 6632 }), Option.none())
      assertNames(yield* rejected({ PORT: "http" }), "PORT")
      assertNames(yield* rejected({ PORT: "0" }), "PORT")
      const withPort = yield* rejected({ QUEEN_MESH_ADVERTISE_HOST: "queen-b:6632" })
      assertNames(withPort, "QUEEN_MESH_ADVERTISE_HOST")
      assertNames(yield* rejected({ QUEEN_MESH_ADVERTISE_HOST: "not a host" }), "QUEEN_MESH_ADVERTISE_HOST")
    })
  )

  it("the default advertise host is the OS host name, else HOSTNAME, else 127.0.0.1", () => {
    const own = MeshConfig.defaultAdvertiseHost("from-env")
    assert.isTrue(own === hostname() || (!MeshConfig.isValidHost(hostname()) && own === "from-env"))
  })

  it("the boot epoch is a u64 in lowercase hex without padding, one per process", () => {
    assert.match(MeshConfig.processEpoch, /^[0-9a-f]{1,16}$/)
    assert.isFalse(MeshConfig.processEpoch.length > 1 && MeshConfig.processEpoch.startsWith("0"))
    assert.strictEqual(MeshConfig.defaults.ephEpoch, MeshConfig.processEpoch)
    assert.isTrue(
      Result.isFailure(MeshConfig.validate({ ...MeshConfig.defaults, serverId: "a", ephEpoch: "xyz" }))
    )
    assert.isTrue(
      Result.isFailure(
        MeshConfig.validate({ ...MeshConfig.defaults, serverId: "a", ephEpoch: "1".repeat(17) })
      )
    )
  })

  it.effect("QUEEN_MESH_TENANTS: uuid by default, any on request, nothing else", () =>
    Effect.gen(function* () {
      assert.strictEqual((yield* loaded({})).tenants, "uuid")
      assert.strictEqual((yield* loaded({ QUEEN_MESH_TENANTS: "ANY" })).tenants, "any")
      assertNames(yield* rejected({ QUEEN_MESH_TENANTS: "names" }), "QUEEN_MESH_TENANTS")
      const error = MeshConfig.validate({
        ...MeshConfig.defaults,
        serverId: "a",
        tenants: "names" as MeshConfig.TenantRule
      })
      assert.isTrue(Result.isFailure(error) && error.failure.variables.includes("QUEEN_MESH_TENANTS"))
    })
  )
})
