/**
 * The operator's surface of the built CLI (`dist/cli.js`) as child processes: help and usage errors,
 * `stats` against upstream-shaped bodies and in `--watch`, the logs (format, server id, escaping, the
 * start-up and shutdown lines), the stdin replies, and a stalled stdout reader.
 */
import * as Http from "node:http"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Schema } from "effect"
import {
  ensureBuilt,
  isListening,
  Listening,
  runCli,
  spawnCli,
  upstreamActive,
  upstreamInactive
} from "./fixtures/cli.js"
import { freePort } from "./fixtures/cluster.js"

const decodeJson = Schema.decodeUnknownSync(Schema.fromJsonString(Schema.Unknown))
const decodeListening = Schema.decodeUnknownSync(Listening)
const STARTUP = Duration.seconds(60)
// biome-ignore lint/suspicious/noControlCharactersInRegex: raw control characters are what must not appear
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/

const oneLine = (text: string) => {
  const lines = text.trimEnd().split("\n")
  assert.strictEqual(lines.length, 1, text)
  return lines[0]!
}

describe("help and usage", () => {
  it.live("help is plain text when piped, for the top level and every command, in every spelling", () =>
    Effect.gen(function* () {
      yield* ensureBuilt
      const [top, help, helpNode, nodeHelp, statsHelp, demoHelp] = yield* Effect.all(
        [
          runCli(["--help"]),
          runCli(["help"]),
          runCli(["help", "node"]),
          runCli(["node", "--help"]),
          runCli(["stats", "-h"]),
          runCli(["help", "demo"])
        ],
        { concurrency: 4 }
      )
      for (const result of [top, help, helpNode, nodeHelp, statsHelp, demoHelp]) {
        assert.strictEqual(result.code, 0, result.stderr)
        assert.notInclude(result.stdout, "\x1b")
        assert.strictEqual(result.stderr, "")
        for (const noise of [
          "A true or false value",
          "A user-defined piece of text",
          "--wizard",
          "--completions"
        ]) {
          assert.notInclude(result.stdout, noise)
        }
      }
      assert.strictEqual(top.stdout, help.stdout)
      assert.strictEqual(helpNode.stdout, nodeHelp.stdout)
      for (const command of ["node", "stats", "demo"]) assert.include(top.stdout, command)
      assert.include(nodeHelp.stdout, "queen-mesh node [--quiet] [--ack]")
      assert.notInclude(nodeHelp.stdout, "$ node [")
      for (const name of [
        "QUEEN_MESH_PEERS",
        "QUEEN_UDP_PEERS",
        "QUEEN_SYNC_SECRET",
        "QUEEN_MESH_LOG_FORMAT"
      ]) {
        assert.include(nodeHelp.stdout, name)
      }
      assert.include(statsHelp.stdout, "queen-mesh stats [url|host:port] [--json] [--watch")
      assert.include(demoHelp.stdout, "queen-mesh demo [--duration S] [--plain]")
    })
  )

  it.live("unknown options, malformed URLs and bad values exit 2 with one line", () =>
    Effect.gen(function* () {
      yield* ensureBuilt
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, Record<string, string>, string]> = [
        [["stats", "--json", "--bogus"], {}, "--bogus"],
        [["node", "--bogus"], {}, "--bogus"],
        [["stats", "ht!tp://x"], {}, "ht!tp://x"],
        [["stats", "http://exa mple"], {}, "not a URL"],
        [["stats", "--interval", "1"], {}, "--interval needs --watch"],
        [["stats", "--watch", "--interval", "0"], {}, "--interval"],
        [["demo", "--duration", "soon"], {}, "--duration"],
        [["node", "--log-level", "loud"], {}, "--log-level"],
        [["node"], { QUEEN_MESH_LOG_FORMAT: "xml" }, "QUEEN_MESH_LOG_FORMAT"],
        [["nodes"], {}, "unknown command"],
        [[], {}, "missing command"]
      ]
      const results = yield* Effect.forEach(cases, ([args, env]) => runCli(args, env), {
        concurrency: 4
      })
      results.forEach((result, i) => {
        const [args, , needle] = cases[i]!
        assert.strictEqual(result.code, 2, `${args.join(" ")}: ${result.stderr}`)
        assert.strictEqual(result.stdout, "")
        assert.include(oneLine(result.stderr), needle)
      })
    })
  )
})

/** A server answering each path with its body (an object as JSON, a string as is, a number as a status). */
const fakeBroker = (routes: Readonly<Record<string, unknown>>) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly server: Http.Server; readonly base: string }>((resume) => {
      const server = Http.createServer((req, res) => {
        const body = routes[req.url ?? ""]
        if (typeof body === "number") {
          res.writeHead(body).end("nope")
        } else if (typeof body === "string") {
          res.writeHead(200, { "content-type": "text/html" }).end(body)
        } else if (body === undefined) {
          res.writeHead(404).end()
        } else {
          res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body, null, 2))
        }
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(Effect.succeed({ server, base: `http://127.0.0.1:${port}` }))
      })
    }),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

describe("queen-mesh stats against other bodies", () => {
  it.live("reads upstream Queen's active and inactive bodies; refuses others in one line", () =>
    Effect.gen(function* () {
      yield* ensureBuilt
      const { base } = yield* fakeBroker({
        "/active": upstreamActive,
        "/inactive": upstreamInactive,
        "/api/v1/system/shared-state": {
          enabled: false,
          reason: "single_node_segments_broker",
          maintenance_mode: false,
          pop_maintenance_mode: false
        },
        "/html": "<html>hello</html>",
        "/other": { hello: "world" },
        "/fails": 503
      })
      const [active, inactive, json, shared, html, other, fails] = yield* Effect.all(
        [
          runCli(["stats", `${base}/active`]),
          runCli(["stats", `${base}/inactive`]),
          runCli(["stats", "--json", `${base}/active`]),
          runCli(["stats", `${base}/api/v1/system/shared-state`]),
          runCli(["stats", `${base}/html`]),
          runCli(["stats", `${base}/other`]),
          runCli(["stats", `${base}/fails`])
        ],
        { concurrency: 4 }
      )
      assert.strictEqual(active.code, 0, active.stderr)
      for (const text of [
        "queen-1",
        "tcp-mesh",
        "10.0.0.2:6633",
        "queen-3.queen:6633",
        "signature failures",
        "pop maintenance on"
      ]) {
        assert.include(active.stdout, text)
      }
      assert.strictEqual(inactive.code, 0, inactive.stderr)
      assert.include(inactive.stdout, "mesh not running (no_peers)")
      assert.strictEqual(json.code, 0, json.stderr)
      assert.deepStrictEqual(decodeJson(json.stdout), upstreamActive)
      for (const [result, needle] of [
        [shared, "shared-state route"],
        [html, "not JSON"],
        [other, "enabled is missing"],
        [fails, "answered 503"]
      ] as const) {
        assert.strictEqual(result.code, 1, result.stderr)
        assert.strictEqual(result.stdout, "")
        assert.include(oneLine(result.stderr), needle)
      }
    })
  )
})

const EVIL_ID = "solo-\x1b[31m-\x07"

describe("queen-mesh node: logs, replies, watch, shutdown", () => {
  it.live(
    "json logs carry the (escaped) server id; --ack and refusals; stats --watch; the shutdown line on SIGTERM",
    () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        const node = yield* spawnCli(["node", "--ack", "--log-format=json"], {
          QUEEN_SERVER_ID: EVIL_ID,
          QUEEN_MESH_PORT: "0",
          QUEEN_MESH_HTTP_PORT: "0",
          QUEEN_SYNC_SECRET: "do-not-print-me"
        })
        const listening = decodeListening(yield* node.waitForLine(isListening, STARTUP))
        assert.strictEqual(listening.server_id, EVIL_ID)
        yield* node.waitForStderr((text) => text.includes("node ready"))

        yield* node.send(JSON.stringify({ op: "maintenance", enabled: true }))
        yield* node.waitForLine((line) => line === '{"event":"sent","op":"maintenance"}')
        yield* node.send(JSON.stringify({ op: "message_available", queue: "", partition: "p" }))
        const refused = yield* node.waitForLine((line) => line.includes('"refused"'))
        assert.deepStrictEqual(decodeJson(refused), {
          event: "refused",
          op: "message_available",
          reason: "message_available: queue must be a non-empty string"
        })
        yield* node.send(JSON.stringify({ op: "x" }))
        yield* node.waitForLine((line) => line.includes("unknown op"))
        yield* node.send("not json")
        yield* node.waitForLine((line) => line.includes("not JSON"))
        // A line over 1 MiB is refused once, not buffered.
        yield* node.send(
          JSON.stringify({ op: "maintenance", pad: "x".repeat(1024 * 1024 + 10), enabled: true })
        )
        yield* node.waitForLine((line) => line.includes("line longer than"))
        yield* node.send(JSON.stringify({ op: "pop_maintenance", enabled: true }))
        yield* node.waitForLine((line) => line === '{"event":"sent","op":"pop_maintenance"}')

        // stats --watch off a terminal: one plain line per sample.
        const url = `127.0.0.1:${listening.http_port}`
        const watched = yield* runCli(["stats", url, "--watch", "--interval", "0.2", "--count", "2"])
        assert.strictEqual(watched.code, 0, watched.stderr)
        const samples = watched.stdout.trimEnd().split("\n")
        assert.strictEqual(samples.length, 2, watched.stdout)
        for (const sample of samples) assert.include(sample, "mesh not running (no_peers)")
        assert.notInclude(watched.stdout, "\x1b")
        // Ctrl-C ends a watch with exit 0.
        const watcher = yield* spawnCli(["stats", url, "--watch", "--interval", "0.2"])
        yield* watcher.waitForLine((line) => line.includes("mesh not running"), STARTUP)
        watcher.child.kill("SIGINT")
        assert.deepStrictEqual(yield* watcher.waitForExit(), { code: 0, signal: null })

        node.child.kill("SIGTERM")
        assert.deepStrictEqual(yield* node.waitForExit(), { code: 0, signal: null })

        const stderr = node.stderr()
        assert.notMatch(stderr, RAW_CONTROL)
        assert.notInclude(stderr, "do-not-print-me")
        assert.notInclude(node.stdout(), "\x1b")
        const logs = stderr
          .trimEnd()
          .split("\n")
          .map((line) => decodeJson(line))
        const messages: Array<unknown> = []
        for (const log of logs) {
          assert.isObject(log)
          if (typeof log === "object" && log !== null) {
            assert.propertyVal(log, "server_id", EVIL_ID)
            messages.push("message" in log ? log.message : undefined)
          }
        }
        const starting = logs.find(
          (log) =>
            typeof log === "object" && log !== null && "message" in log && log.message === "node starting"
        )
        assert.deepInclude(starting, { secret: "<redacted>", active: false, peers: "(none)" })
        assert.property(starting, "version")
        assert.includeMembers(messages, [
          "node starting",
          "node ready",
          "ignored a bad stdin command",
          "node stopping"
        ])
        const stopping = logs.find(
          (log) =>
            typeof log === "object" && log !== null && "message" in log && log.message === "node stopping"
        )
        assert.deepInclude(stopping, { signal: "SIGTERM" })
      }),
    180_000
  )

  it.live("logfmt and pretty escape control characters too; QUEEN_MESH_LOG_LEVEL applies", () =>
    Effect.gen(function* () {
      yield* ensureBuilt
      const run = (format: string, env: Record<string, string> = {}) =>
        Effect.gen(function* () {
          const node = yield* spawnCli(["node", `--log-format=${format}`], {
            QUEEN_SERVER_ID: EVIL_ID,
            QUEEN_MESH_PORT: "0",
            QUEEN_MESH_HTTP_PORT: "0",
            ...env
          })
          yield* node.waitForLine(isListening, STARTUP)
          node.child.kill("SIGTERM")
          yield* node.waitForExit()
          return node.stderr()
        })
      const [logfmt, pretty, quiet] = yield* Effect.all(
        [run("logfmt"), run("pretty"), run("logfmt", { QUEEN_MESH_LOG_LEVEL: "warning" })],
        { concurrency: 4 }
      )
      for (const text of [logfmt, pretty]) {
        assert.notMatch(text, RAW_CONTROL)
        assert.include(text, "solo-\\x1b[31m-\\x07")
        assert.include(text, "node stopping")
      }
      assert.include(logfmt, 'message="node starting"')
      assert.strictEqual(quiet, "")
    })
  )
})

describe("a stalled stdout reader", () => {
  it.live(
    "costs dropped event lines and a warning, never the node or unbounded memory",
    () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        const [portA, portB] = [yield* freePort, yield* freePort]
        const env = (id: string, port: number, peer: number) => ({
          QUEEN_SERVER_ID: id,
          QUEEN_MESH_PORT: String(port),
          QUEEN_MESH_HTTP_PORT: "0",
          QUEEN_MESH_BIND_ADDR: "127.0.0.1",
          QUEEN_MESH_PEERS: `127.0.0.1:${peer}`,
          QUEEN_SYNC_SECRET: "stall",
          QUEEN_SYNC_HEARTBEAT_MS: "60000",
          QUEEN_SYNC_DEAD_THRESHOLD_MS: "120000"
        })
        const a = yield* spawnCli(["node", "--ack"], env("a", portA, portB))
        const b = yield* spawnCli(["node"], { ...env("b", portB, portA), QUEEN_MESH_STDOUT_BUFFER: "4096" })
        const listening = decodeListening(yield* b.waitForLine(isListening, STARTUP))
        yield* b.waitForLine((line) => line === '{"event":"peer_up","server_id":"a"}', STARTUP)
        yield* a.waitForLine((line) => line === '{"event":"peer_up","server_id":"b"}', STARTUP)

        // b's reader stalls; a floods it with wakes: 40 batches of 250 items, about 1 MB of event lines.
        b.pauseStdout()
        for (let batch = 0; batch < 40; batch++) {
          const items = Array.from({ length: 250 }, (_, i) => ({
            queue: "flood",
            partition: `p${batch}-${i}`
          }))
          yield* a.send(JSON.stringify({ op: "message_available_batch", items }))
        }
        yield* a.waitForLine(
          () =>
            a.lines.filter((line) => line === '{"event":"sent","op":"message_available_batch"}').length === 40
        )
        yield* b.waitForStderr((text) => /dropped \d+ stdout events: the reader is slow/.test(text))
        assert.strictEqual(b.child.exitCode, null)

        // Still serving while stalled.
        const stats = yield* Effect.promise(() =>
          fetch(`http://127.0.0.1:${listening.http_port}/internal/api/shared-state/stats`).then(
            (r) => r.status
          )
        )
        assert.strictEqual(stats, 200)

        // The reader comes back: lines flow again, whole.
        // (A line arriving while the backlog drains may still be dropped: retry, a bounded number of times.)
        b.resumeStdout()
        yield* a
          .send(JSON.stringify({ op: "maintenance", enabled: true }))
          .pipe(
            Effect.andThen(
              b.waitForLine(
                (line) => line === '{"event":"maintenance","from":"a","enabled":true}',
                Duration.seconds(2)
              )
            ),
            Effect.retry({ times: 30 })
          )
        for (const line of b.lines) decodeJson(line)
        // Far fewer than the 10,000 wakes made it: the rest were dropped, not queued.
        assert.isBelow(b.lines.filter((line) => line.includes('"wake"')).length, 10_000)

        b.child.kill("SIGTERM")
        a.child.kill("SIGTERM")
        assert.deepStrictEqual(yield* b.waitForExit(), { code: 0, signal: null })
        assert.deepStrictEqual(yield* a.waitForExit(), { code: 0, signal: null })
      }),
    180_000
  )
})
