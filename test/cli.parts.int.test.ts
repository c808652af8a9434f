/**
 * The CLI's parts in-process: the argument parser, the help, escaping, the log formats, the stdin
 * decoding and line limit, the bounded stdout writer, and `stats`' lenient body and `--watch` loop on a
 * fake terminal.
 */
import * as Http from "node:http"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Logger, Option, References, Result } from "effect"
import * as fc from "fast-check"
import * as Args from "../src/cli/args.js"
import * as Commands from "../src/cli/commands.js"
import * as Env from "../src/cli/env.js"
import { escapeControl, safeJson, safeJsonString } from "../src/cli/escape.js"
import * as Events from "../src/cli/events.js"
import * as Help from "../src/cli/help.js"
import { BoundedWriter, columnsOf, useColor } from "../src/cli/io.js"
import { LineSplitter } from "../src/cli/lines.js"
import * as Log from "../src/cli/log.js"
import * as Stats from "../src/cli/stats.js"
import { MAX_NAME_CHARS } from "../src/Frame.js"
import { upstreamActive, upstreamInactive } from "./fixtures/cli.js"

const ANSI = "\x1b["
/** Cursor and colour sequences, to measure what a line shows. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: terminal sequences are what is tested
const SEQUENCES = /\x1b\[\d*[A-Za-z]/g
// biome-ignore lint/suspicious/noControlCharactersInRegex: terminal sequences are what is tested
const CONTROLS = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/
// biome-ignore lint/suspicious/noControlCharactersInRegex: terminal sequences are what is tested
const REDRAW = /^\x1b\[\d+F\x1b\[J/

describe("arguments", () => {
  const parse = (...args: Array<string>) => Args.parse(args)

  it("parses a subcommand, its flags and values in both spellings", () => {
    const parsed = parse(
      "stats",
      "10.0.0.1:6632",
      "--watch",
      "--interval=0.5",
      "--count",
      "3",
      "--log-level",
      "debug"
    )
    assert.deepStrictEqual(
      Result.getOrThrow(
        Result.map(parsed, (p): unknown =>
          p._tag === "Run" ? [p.command, [...p.options], p.positionals] : p._tag
        )
      ),
      [
        "stats",
        [
          ["watch", true],
          ["interval", "0.5"],
          ["count", "3"],
          ["log-level", "debug"]
        ],
        ["10.0.0.1:6632"]
      ]
    )
  })

  it("refuses an unknown option instead of taking it as the URL", () => {
    const parsed = parse("stats", "--json", "--bogus")
    assert.isTrue(Result.isFailure(parsed))
    if (Result.isFailure(parsed)) {
      assert.include(parsed.failure, "unknown option --bogus")
      assert.notInclude(parsed.failure, "\n")
    }
    assert.isTrue(Result.isFailure(parse("node", "-x")))
    assert.isTrue(Result.isFailure(parse("node", "--quiet=yes")))
    assert.isTrue(Result.isFailure(parse("demo", "--duration")))
    assert.isTrue(Result.isFailure(parse("node", "extra")))
    assert.isTrue(Result.isFailure(parse("stats", "a", "b")))
    assert.isTrue(Result.isFailure(parse("nodes")))
    assert.isTrue(Result.isFailure(parse()))
  })

  it("knows every way of asking for help", () => {
    const topic = (...args: Array<string>) =>
      Result.map(parse(...args), (p) => (p._tag === "Help" ? (p.command ?? "top") : p._tag))
    assert.deepStrictEqual(topic("--help"), Result.succeed("top"))
    assert.deepStrictEqual(topic("-h"), Result.succeed("top"))
    assert.deepStrictEqual(topic("help"), Result.succeed("top"))
    assert.deepStrictEqual(topic("help", "node"), Result.succeed("node"))
    assert.deepStrictEqual(topic("node", "--help"), Result.succeed("node"))
    // An unknown option is an error even next to --help.
    assert.isTrue(Result.isFailure(parse("stats", "-h", "--bogus")))
    assert.isTrue(Result.isFailure(parse("help", "nope")))
    assert.deepStrictEqual(topic("--version"), Result.succeed("Version"))
  })
})

describe("help", () => {
  const plain = { color: false, width: 100 }

  it("reads queen-mesh <command>, lists every variable of the command with its default, and has an example", () => {
    const text = Help.render("node", plain)
    assert.include(text, "queen-mesh node [--quiet] [--ack]")
    assert.notInclude(text, "$ node")
    for (const variable of Env.forCommand("node")) {
      assert.include(text, variable.name)
      assert.include(text, `default ${variable.default}`)
      if (variable.alias !== undefined) assert.include(text, variable.alias)
    }
    for (const name of [
      "QUEEN_MESH_PEERS",
      "QUEEN_UDP_PEERS",
      "QUEEN_MESH_PORT",
      "QUEEN_UDP_NOTIFY_PORT",
      "QUEEN_MESH_BIND_ADDR",
      "QUEEN_BIND_ADDR",
      "QUEEN_MESH_ADVERTISE_HOST",
      "PORT",
      "QUEEN_MESH_TENANTS",
      "QUEEN_SYNC_ENABLED",
      "QUEEN_SYNC_SECRET",
      "QUEEN_SYNC_HEARTBEAT_MS",
      "QUEEN_SYNC_DEAD_THRESHOLD_MS",
      "QUEEN_SERVER_ID",
      "QUEEN_MESH_HANDSHAKE_TIMEOUT_MS",
      "QUEEN_MESH_HOTLIST_FLUSH_MS",
      "QUEEN_MESH_SEND_QUEUE",
      "QUEEN_CACHE_REFRESH_INTERVAL_MS",
      "QUEEN_MESH_HTTP_HOST",
      "QUEEN_MESH_HTTP_PORT",
      "QUEEN_MESH_LOG_FORMAT",
      "QUEEN_MESH_LOG_LEVEL"
    ]) {
      assert.include(text, name)
    }
    assert.include(text, "Example")
    for (const noise of [
      "A true or false value",
      "A user-defined piece of text",
      "--wizard",
      "--completions"
    ]) {
      assert.notInclude(text, noise)
    }
    assert.notInclude(text, ANSI)
  })

  it("paints headings only when asked, and keeps to the width", () => {
    assert.include(Help.render(undefined, { color: true, width: 100 }), ANSI)
    for (const command of [undefined, "node", "stats", "demo"] as const) {
      const text = Help.render(command, { color: false, width: 100 })
      assert.notInclude(text, ANSI)
      for (const line of text.split("\n")) {
        if (!line.startsWith("  $ ") && !line.startsWith("  {")) assert.isAtMost(line.length, 100, line)
      }
    }
  })

  it("paints only a terminal, and never with NO_COLOR", () => {
    const before = process.env.NO_COLOR
    try {
      delete process.env.NO_COLOR
      assert.isTrue(useColor({ isTTY: true }))
      assert.isFalse(useColor({ isTTY: false }))
      assert.isFalse(useColor({}))
      process.env.NO_COLOR = "1"
      assert.isFalse(useColor({ isTTY: true }))
    } finally {
      if (before === undefined) delete process.env.NO_COLOR
      else process.env.NO_COLOR = before
    }
  })

  it("falls back to 100 columns when the terminal reports 0 or none", () => {
    assert.strictEqual(columnsOf({ columns: 0 }), 100)
    assert.strictEqual(columnsOf({}), 100)
    assert.strictEqual(columnsOf({ columns: 132 }), 132)
  })
})

describe("escaping", () => {
  it("writes every C0 control, DEL and C1 as an escape", () => {
    assert.strictEqual(
      escapeControl("a\x1b[31mb\x00c\x07d\x08e\x7ff\x9bg\nh\ti"),
      "a\\x1b[31mb\\x00c\\x07d\\x08e\\x7ff\\x9bg\\nh\\ti"
    )
    assert.strictEqual(safeJson({ s: "\x1b\x7f\x9b" }), '{"s":"\\u001b\\u007f\\u009b"}')
    for (const text of [
      "plain",
      "",
      'quo"te',
      "back\\slash",
      "\u{1F600} pair",
      "\ud800 lone",
      "\udc00",
      "é",
      "\x7f\x9f\x1b\n"
    ]) {
      assert.strictEqual(safeJsonString(text), safeJson(text))
    }
    assert.deepStrictEqual(JSON.parse(safeJson({ s: "\x1b\x7f\x9b" })), { s: "\x1b\x7f\x9b" })
  })
})

describe("logs", () => {
  const capture = (format: Log.LogFormat, effect: Effect.Effect<void>) => {
    const lines: Array<string> = []
    const layer = Layer.merge(
      Logger.layer([Log.make(format, (line) => lines.push(line))]),
      Layer.succeed(References.MinimumLogLevel, "Debug")
    )
    Effect.runSync(Effect.provide(effect, layer))
    return lines
  }
  const evil = "node-\x1b[31m\x00\x07\x08\x7f\x9b"
  const entry = Effect.logWarning(`peer ${evil} said hi`).pipe(
    Effect.annotateLogs({ server_id: evil, peer: "node-c", count: 3 })
  )

  for (const format of ["logfmt", "json", "pretty"] as const) {
    it(`${format}: carries the annotations and escapes control characters everywhere`, () => {
      const [line] = capture(format, entry)
      assert.isDefined(line)
      assert.notMatch(line!, CONTROLS)
      assert.include(line!, "node-c")
      assert.include(line!, format === "json" ? "\\u001b[31m" : "\\x1b[31m")
    })
  }

  it("json: one object with the server id, the level and the message", () => {
    const [line] = capture("json", entry)
    const object: unknown = JSON.parse(line!)
    assert.deepInclude(object, {
      level: "WARN",
      server_id: evil,
      peer: "node-c",
      count: 3,
      message: `peer ${evil} said hi`
    })
  })

  it("a cause stays on one line in logfmt and json", () => {
    for (const format of ["logfmt", "json"] as const) {
      const lines = capture(
        format,
        Effect.logError("boom", new Error("multi\nline")).pipe(Effect.annotateLogs({ a: 1 }))
      )
      assert.strictEqual(lines.length, 1)
      assert.notInclude(lines[0]!, "\n")
    }
  })

  it("parses formats and levels, naming the source of a bad one", () => {
    assert.deepStrictEqual(Log.parseFormat("--log-format", "json"), Result.succeed("json"))
    assert.deepStrictEqual(Log.parseLevel("--log-level", "warning"), Result.succeed("Warn"))
    assert.deepStrictEqual(Log.parseLevel("--log-level", "none"), Result.succeed("None"))
    const bad = Log.parseLevel("QUEEN_MESH_LOG_LEVEL", "loud")
    assert.isTrue(Result.isFailure(bad) && bad.failure.startsWith("QUEEN_MESH_LOG_LEVEL:"))
  })
})

describe("stdin commands", () => {
  const reason = (line: string) =>
    Result.match(Commands.decodeLine(line), {
      onFailure: (refusal) => refusal.reason,
      onSuccess: () => "accepted"
    })

  it("names the op and the one field that is wrong", () => {
    assert.strictEqual(
      reason('{"op":"message_available","queue":"","partition":"p"}'),
      "message_available: queue must be a non-empty string"
    )
    assert.strictEqual(
      reason('{"op":"message_available","partition":"p"}'),
      "message_available: queue is missing"
    )
    assert.strictEqual(
      reason('{"op":"message_available","queue":"q","partition":5}'),
      "message_available: partition must be a string"
    )
    assert.strictEqual(
      reason('{"op":"maintenance","enabled":"yes"}'),
      "maintenance: enabled must be true or false"
    )
    assert.strictEqual(
      reason(
        '{"op":"message_available_batch","items":[{"queue":"q","partition":"p"},{"queue":"q","partition":1}]}'
      ),
      "message_available_batch: items[1].partition must be a string"
    )
    assert.strictEqual(
      reason('{"op":"queue_config_set","queue":"q","tenant":7}'),
      "queue_config_set: tenant must be a string or null"
    )
    assert.strictEqual(
      reason(`{"op":"hotlist_dirty","queue":"${"q".repeat(MAX_NAME_CHARS + 1)}","partition":"p"}`),
      `hotlist_dirty: queue is longer than ${MAX_NAME_CHARS} characters`
    )
    assert.strictEqual(
      reason(`{"op":"hotlist_dirty","queue":"q","partition":"${"漢".repeat(MAX_NAME_CHARS)}","group":7}`),
      "hotlist_dirty: group must be a string or null"
    )
    assert.strictEqual(
      reason(
        `{"op":"hotlist_dirty","queue":"q","partition":"p","group":"${"名".repeat(MAX_NAME_CHARS + 1)}"}`
      ),
      `hotlist_dirty: group is longer than ${MAX_NAME_CHARS} characters`
    )
    assert.strictEqual(
      reason(`{"op":"queue_config_set","queue":"q","tenant":"${"t".repeat(MAX_NAME_CHARS + 1)}"}`),
      `queue_config_set: tenant is longer than ${MAX_NAME_CHARS} characters`
    )
    assert.strictEqual(
      reason(
        '{"op":"eph_admin","action":"drop","tenant":"7f9c24e8-3b12-4fef-91e0-66ca3c8b3a4f","queue":"q"}'
      ),
      "eph_admin: action must be reset, delete or config_set"
    )
    assert.strictEqual(
      reason('{"op":"eph_admin","action":"reset","tenant":"acme","queue":"q"}'),
      "eph_admin: tenant must be a UUID"
    )
  })

  it("refuses an unknown op listing the known ones, and a line that is not JSON in a few words", () => {
    assert.strictEqual(reason('{"op":"x"}'), `unknown op "x" (expected one of ${Commands.ops.join(", ")})`)
    assert.strictEqual(reason("this is not json"), "not JSON: expected one JSON object per line")
    assert.strictEqual(reason("[1]"), 'expected a JSON object with an "op" field')
    assert.strictEqual(reason('{"op":1}'), "op must be a string")
    assert.strictEqual(reason('{"op":"maintenance","enabled":true,"extra":1}'), "accepted")
  })

  // Names with the edge cases of the rules: empty, at and over the byte limit, multi-byte, controls.
  const nameLike = fc.oneof(
    fc.string({ maxLength: 6 }),
    fc.constant(""),
    fc.constant("q".repeat(MAX_NAME_CHARS)),
    fc.constant("q".repeat(MAX_NAME_CHARS + 1)),
    fc.constant("é".repeat(MAX_NAME_CHARS)),
    fc.constant("é".repeat(MAX_NAME_CHARS + 1)),
    fc.constant("😀".repeat(MAX_NAME_CHARS)),
    fc.constant("😀".repeat(MAX_NAME_CHARS + 1)),
    fc.constant("\u001b[2J\u007f\u009b"),
    fc.constant(null),
    fc.integer(),
    fc.constant({})
  )
  const commandLike = fc.record(
    {
      op: fc.constantFrom("message_available", "message_available_batch", "hotlist_dirty", 1, null),
      queue: nameLike,
      partition: nameLike,
      tenant: nameLike,
      extra: nameLike
    },
    { requiredKeys: [] }
  )

  // fast-check's default of 100 runs, as @effect/vitest's `it.prop` had.
  it("checks message_available by hand exactly as its Schema does", () => {
    fc.assert(
      fc.property(commandLike, (command) => {
        const json: unknown = JSON.parse(JSON.stringify(command))
        const quick = Commands.quickMessageAvailable(json)
        const decoded = Commands.decodeLine(JSON.stringify(json))
        const bySchema = Result.isSuccess(decoded) && decoded.success.op === "message_available"
        assert.strictEqual(quick !== undefined, bySchema)
        if (quick !== undefined && Result.isSuccess(decoded) && decoded.success.op === "message_available") {
          assert.strictEqual(quick.queue, decoded.success.queue)
          assert.strictEqual(quick.partition, decoded.success.partition)
          assert.strictEqual(quick.tenant ?? null, decoded.success.tenant ?? null)
        }
      })
    )
  })

  // Any UTF-16, controls, DEL, C1 and lone surrogates included.
  const text = fc.string({ unit: "binary", maxLength: 12 })

  it("writes wake and hot-list lines exactly as safeJson would, controls, DEL and C1 escaped", () => {
    fc.assert(
      fc.property(
        text,
        fc.option(text, { nil: undefined }),
        text,
        text,
        fc.boolean(),
        fc.option(text, { nil: undefined }),
        (from, tenant, queue, partition, hot, group) => {
          const item = { queue, partition, tenant: Option.fromNullishOr(tenant) }
          const event = hot ? ("hotlist_dirty" as const) : ("wake" as const)
          const line = Events.lineOf(
            hot
              ? { _tag: "HotlistDirty", from, item: { ...item, group: Option.fromNullishOr(group) } }
              : { _tag: "Wake", from, item },
            false
          )
          const scoped = hot && group !== undefined ? { group } : {}
          assert.strictEqual(
            line,
            safeJson({ event, from, tenant: tenant ?? null, queue, partition, ...scoped })
          )
          assert.strictEqual(safeJsonString(from), safeJson(from))
        }
      )
    )
  })

  it("answers with --ack lines", () => {
    assert.strictEqual(Commands.sentLine("maintenance"), '{"event":"sent","op":"maintenance"}')
    assert.strictEqual(
      Commands.refusedLine({ op: "maintenance", reason: "maintenance: enabled is missing" }),
      '{"event":"refused","op":"maintenance","reason":"maintenance: enabled is missing"}'
    )
  })
})

describe("line splitting", () => {
  const bytes = (s: string) => new TextEncoder().encode(s)
  const texts = (pieces: ReadonlyArray<{ readonly _tag: string; readonly text?: string }>) =>
    pieces.map((piece) => (piece._tag === "Line" ? piece.text : "<too long>"))

  it("reassembles lines split anywhere, even inside a UTF-8 sequence, and drops CR", () => {
    const splitter = new LineSplitter(1024)
    const all = bytes("ab\r\nc€d\n\nlast")
    const out: Array<string | undefined> = []
    for (let i = 0; i < all.length; i++) out.push(...texts(splitter.push(all.subarray(i, i + 1))))
    out.push(...texts(splitter.end()))
    assert.deepStrictEqual(out, ["ab", "c€d", "", "last"])
  })

  it("refuses a line over the limit once and skips to its newline, holding no more than the limit", () => {
    const splitter = new LineSplitter(8)
    const out = [
      ...texts(splitter.push(bytes("ok\n0123456"))),
      ...texts(splitter.push(bytes("789abcdef"))),
      ...texts(splitter.push(bytes("still the long line"))),
      ...texts(splitter.push(bytes("\nnext\n")))
    ]
    assert.deepStrictEqual(out, ["ok", "<too long>", "next"])
  })
})

describe("bounded stdout", () => {
  class FakeStream {
    pending = 0
    written: Array<string> = []
    private onError: ((error: Error) => void) | undefined
    readonly write = (chunk: string): boolean => {
      this.written.push(chunk)
      this.pending += chunk.length
      return true
    }
    get writableLength() {
      return this.pending
    }
    readonly on = (_event: "error", listener: (error: Error) => void) => {
      this.onError = listener
      return this
    }
    fail(error: Error) {
      this.onError?.(error)
    }
  }

  it("drops and counts what would go over the cap, reporting at most once a period", () => {
    const stream = new FakeStream()
    let now = 0
    const reports: Array<[number, number]> = []
    const writer = new BoundedWriter(stream, {
      maxPending: 100,
      reportEvery: 10_000,
      now: () => now,
      onDropped: (dropped, total) => reports.push([dropped, total]),
      onClosed: () => {}
    })
    const line = "x".repeat(29) // 30 bytes with its newline
    assert.deepStrictEqual(
      [1, 2, 3, 4, 5].map(() => writer.writeLine(line)),
      [true, true, true, false, false]
    )
    assert.strictEqual(writer.dropped, 2)
    // Lines of one turn leave in one write.
    writer.flush()
    assert.deepStrictEqual(stream.written, [`${line}\n${line}\n${line}\n`])
    assert.deepStrictEqual(reports, [[1, 1]])
    // The reader catches up: lines flow again.
    stream.pending = 0
    assert.isTrue(writer.writeLine(line))
    now = 10_000
    stream.pending = 100
    writer.writeLine(line)
    assert.deepStrictEqual(reports, [
      [1, 1],
      [2, 3]
    ])
  })

  it("shares the budget between sources: a flooding peer cannot crowd another peer's lines out", () => {
    const stream = new FakeStream()
    const writer = new BoundedWriter(stream, {
      maxPending: 64 * 1024,
      onDropped: () => {},
      onClosed: () => {}
    })
    const flood = `{"event":"wake","from":"flooder","tenant":null,"queue":"q","partition":"${"x".repeat(40)}"}`
    const good = (i: number) =>
      `{"event":"wake","from":"good","tenant":null,"queue":"orders","partition":"p${i}"}`
    let goodWritten = 0
    // The reader drains a little every turn; the flooder writes far more than it can take.
    for (let turn = 0; turn < 2_000; turn++) {
      for (let i = 0; i < 500; i++) writer.writeLine(flood, "flooder")
      if (turn % 29 === 0 && writer.writeLine(good(turn), "good")) goodWritten++
      writer.flush()
      stream.pending = Math.max(0, stream.pending - 8 * 1024)
    }
    const goodLines = stream.written
      .join("")
      .split("\n")
      .filter((line) => line.includes('"from":"good"'))
    assert.strictEqual(goodWritten, 69)
    assert.strictEqual(goodLines.length, 69)
    assert.isAbove(writer.droppedBySource.get("flooder") ?? 0, 500_000)
    assert.strictEqual(writer.droppedBySource.get("good"), undefined)
    // Memory stays bounded whatever the flood: at most twice the budget pending.
    assert.isAtMost(stream.pending, 2 * 64 * 1024)
  })

  it("counts drops per source, at most 64 sources apart", () => {
    const stream = new FakeStream()
    stream.pending = 10_000
    const writer = new BoundedWriter(stream, { maxPending: 100, onDropped: () => {}, onClosed: () => {} })
    for (let i = 0; i < 100; i++) writer.writeLine("x".repeat(200), `peer-${i}`)
    assert.strictEqual(writer.dropped, 100)
    assert.isAtMost(writer.droppedBySource.size, 65)
    assert.isAbove(writer.droppedBySource.get("_other") ?? 0, 0)
  })

  it("stops writing after a stream error (EPIPE) and never throws", () => {
    const stream = new FakeStream()
    const closed: Array<string> = []
    const writer = new BoundedWriter(stream, {
      maxPending: 1000,
      onDropped: () => {},
      onClosed: (error) => closed.push(error.message)
    })
    writer.writeLine("one")
    writer.flush()
    stream.fail(Object.assign(new Error("write EPIPE"), { code: "EPIPE" }))
    stream.fail(new Error("again"))
    assert.isFalse(writer.writeLine("two"))
    assert.deepStrictEqual(stream.written, ["one\n"])
    assert.deepStrictEqual(closed, ["write EPIPE"])
    assert.isTrue(writer.isClosed)
    const throwing = new BoundedWriter(
      {
        write: () => {
          throw new Error("ENOBUFS")
        },
        writableLength: 0,
        on: () => undefined
      },
      { maxPending: 1000, onDropped: () => {}, onClosed: (error) => closed.push(error.message) }
    )
    assert.isTrue(throwing.writeLine("x"))
    throwing.flush()
    assert.strictEqual(closed.at(-1), "ENOBUFS")
    assert.isFalse(throwing.writeLine("y"))
  })
})

describe("stats", () => {
  const ours = {
    enabled: true,
    running: true,
    version: "0.1.0",
    uptime_ms: 192_000,
    server_id: "node-a",
    transport: "tcp-mesh",
    port: 6633,
    peer_count: 1,
    peers: [
      {
        host: "127.0.0.1",
        port: 6643,
        connected: true,
        resolved: true,
        resolved_ip: "127.0.0.1",
        queued: 0,
        last_resolved_ip: "127.0.0.1",
        handed: 10,
        written: 10,
        dropped_full: 0,
        dropped_down: 1,
        discarded: 0,
        reconnects: 2
      }
    ],
    servers: [{ server_id: "node-b\x1b[2J", alive: true, last_seen_ms_ago: 412 }],
    servers_alive: 1,
    servers_dead: 0,
    messages_sent: 8,
    messages_received: 3,
    messages_dropped: 0,
    handshake_failures: 0,
    frames_dispatched: 3,
    frames_invalid: 0,
    frames_unknown: 0,
    frames_oversized: 0,
    items_invalid: 0,
    connections_closed_silent: 0,
    rejections: { bad_mac: 2, unknown_version: 0 },
    inbound: { open: 1, authenticated: 1 },
    something_new: { nested: true },
    maintenance_mode: true,
    pop_maintenance_mode: false
  }

  const decoded = (body: unknown) => Stats.decode(JSON.stringify(body))

  it("reads our body, an upstream active body and an upstream inactive body", () => {
    for (const body of [ours, upstreamActive, upstreamInactive]) {
      const stats = decoded(body)
      assert.isTrue(Result.isSuccess(stats), JSON.stringify(stats))
      if (Result.isSuccess(stats)) {
        const text = Stats.render(stats.success)
        assert.include(text, "maintenance")
        assert.notInclude(text, "\x1b")
      }
    }
    const table = Stats.render(Result.getOrThrow(decoded(ours)))
    for (const text of [
      "node-a",
      "version 0.1.0",
      "up 3m 12s",
      "RECONNECTS",
      "node-b\\x1b[2J",
      "bad_mac 2",
      "inbound: open 1"
    ]) {
      assert.include(table, text)
    }
    const upstream = Stats.render(Result.getOrThrow(decoded(upstreamActive)))
    for (const text of ["queen-1", "signature failures", "10.0.0.2:6633"]) assert.include(upstream, text)
    assert.include(Stats.render(Result.getOrThrow(decoded(upstreamInactive))), "mesh not running (no_peers)")
  })

  it("says in one short line what else a body is", () => {
    const lines = [
      Stats.decode("<html>"),
      decoded({ hello: "world" }),
      decoded({ enabled: "yes", maintenance_mode: true, pop_maintenance_mode: true }),
      decoded({
        enabled: false,
        reason: "single_node_segments_broker",
        maintenance_mode: false,
        pop_maintenance_mode: false
      })
    ]
    for (const line of lines) {
      assert.isTrue(Result.isFailure(line))
      if (Result.isFailure(line)) {
        assert.notInclude(line.failure, "\n")
        assert.isBelow(line.failure.length, 140)
      }
    }
    assert.include(Result.flip(lines[3]!).pipe(Result.getOrElse(() => "")), "shared-state route")
  })

  it("takes host:port, base and full URLs, and refuses malformed ones", () => {
    const href = (raw: string) => Result.map(Stats.statsUrl(raw), (url) => url.href)
    assert.deepStrictEqual(
      href("127.0.0.1:6632"),
      Result.succeed("http://127.0.0.1:6632/internal/api/shared-state/stats")
    )
    assert.deepStrictEqual(
      href("http://node-a:7000/"),
      Result.succeed("http://node-a:7000/internal/api/shared-state/stats")
    )
    assert.deepStrictEqual(
      href("https://node-a/internal/api/inter-instance/stats"),
      Result.succeed("https://node-a/internal/api/inter-instance/stats")
    )
    for (const bad of [
      "ht!tp://x",
      "ftp://x",
      "--bogus",
      "",
      "http://a b",
      "http://exa mple",
      "x:99999",
      "http://\x1b/"
    ]) {
      assert.isTrue(Result.isFailure(Stats.statsUrl(bad)), bad)
    }
  })

  /** A server answering with `bodies` in turn (the last one repeated). */
  const serve = (bodies: ReadonlyArray<unknown>) =>
    Effect.acquireRelease(
      Effect.callback<Http.Server & { readonly url: string }>((resume) => {
        let i = 0
        const server = Http.createServer((_req, res) => {
          const body = bodies[Math.min(i++, bodies.length - 1)]
          res.writeHead(200, { "content-type": "application/json" })
          res.end(JSON.stringify(body))
        })
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          const port = typeof address === "object" && address !== null ? address.port : 0
          resume(Effect.succeed(Object.assign(server, { url: `http://127.0.0.1:${port}` })))
        })
      }),
      (server) =>
        Effect.callback<void>((resume) => {
          server.closeAllConnections()
          server.close(() => resume(Effect.void))
        })
    )

  const screen = (isTTY: boolean) => {
    const out: Array<string> = []
    const errors: Array<string> = []
    const value: Stats.Screen = {
      isTTY,
      columns: 0,
      color: false,
      write: (text) => out.push(text),
      error: (line) => errors.push(line)
    }
    return { value, out, errors }
  }

  const bodies = [0, 1, 2].map((i) => ({
    ...ours,
    messages_sent: 8 + i * 100,
    messages_received: 3 + i * 50
  }))

  it.live("reads at most 8 MiB of a body", () =>
    Effect.gen(function* () {
      const server = yield* serve(["x".repeat(9 * 1024 * 1024)])
      const failure = yield* Effect.flip(Stats.fetchSample(Result.getOrThrow(Stats.statsUrl(server.url))))
      assert.strictEqual(failure.code, 1)
      assert.include(failure.message, "answered more than")
    })
  )

  it.live("--watch on a terminal redraws in place with rates", () =>
    Effect.gen(function* () {
      const server = yield* serve(bodies)
      const fake = screen(true)
      const url = Result.getOrThrow(Stats.statsUrl(server.url))
      yield* Stats.watch(url, { interval: 0.05, count: Option.some(3), json: false }, fake.value)
      assert.strictEqual(fake.out.length, 3)
      assert.notInclude(fake.out[0]!, "\x1b[")
      assert.include(fake.out[0]!, "rates: sent -/s")
      for (const frame of fake.out.slice(1)) {
        assert.match(frame, REDRAW)
        assert.match(frame, /rates: sent \d+\.\d\/s {2}received \d+\.\d\/s {2}dropped 0\.0\/s/)
        assert.include(frame, "127.0.0.1:6643")
        // 0 columns reported: the 100-column fallback.
        for (const line of frame.split("\n")) assert.isAtMost(line.replace(SEQUENCES, "").length, 100)
      }
      assert.deepStrictEqual(fake.errors, [])
    })
  )

  it.live("--watch off a terminal prints one plain line per sample, and keeps going through failures", () =>
    Effect.gen(function* () {
      const server = yield* serve([bodies[0], { not: "stats" }, bodies[2]])
      const fake = screen(false)
      const url = Result.getOrThrow(Stats.statsUrl(server.url))
      yield* Stats.watch(url, { interval: 0.05, count: Option.some(3), json: false }, fake.value)
      assert.strictEqual(fake.out.length, 2)
      for (const line of fake.out) {
        assert.notInclude(line, "\x1b")
        assert.match(line, /node-a {2}sent .*peers 127\.0\.0\.1:6643=up\/q0\n$/)
      }
      assert.strictEqual(fake.errors.length, 1)
      assert.include(fake.errors[0]!, "not a stats body")
    })
  )
})
