/**
 * `queen-mesh stats [url] [--json] [--watch]`: fetches a node's stats route and prints it as a table, or
 * with `--json` as the raw body (docs/cli.md, "stats"); with `--watch`, again every interval, with rates.
 *
 * The body is decoded with the CLI's own lenient Schema ({@link StatsBody}), not the library's: it reads
 * both a queen-mesh node and an upstream Queen broker, whose bodies differ (upstream has
 * `signature_failures`, no `servers`; an inactive upstream body is only `enabled`, `reason` and the two
 * flags). Only the fields every body has are required; every other known field is optional, unknown
 * fields are ignored, and the table shows what is there. Every string from the body is printed with its
 * control characters escaped: server ids come from peers.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FetchHttpClient from "effect/http/FetchHttpClient"
import * as HttpClient from "effect/http/HttpClient"
import * as Option from "effect/Option"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import type * as SchemaIssue from "effect/SchemaIssue"
import * as Stream from "effect/Stream"
import * as HttpRoutes from "../HttpRoutes.js"
import type * as Membership from "../Membership.js"
import * as MeshStats from "../MeshStats.js"
import { escapeControl, safeJson } from "./escape.js"
import {
  CliFailure,
  columnsOf,
  EXIT_FAILURE,
  EXIT_USAGE,
  print,
  printLine,
  StatsExtras,
  useColor
} from "./io.js"

/**
 * The URL `stats` reads when none is given: a node's HTTP routes with their defaults.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaultUrl = "http://127.0.0.1:6632"

// ---------------------------------------------------------------------------------------------
// the body
// ---------------------------------------------------------------------------------------------

/** Every field of a struct, optional: upstream's bodies carry a subset of ours. */
const optionalFields = <F extends { readonly [key: string]: Schema.Constraint }>(
  fields: F
): { readonly [K in keyof F]: Schema.optional<F[K]> } => {
  const out: Record<string, Schema.optional<Schema.Constraint>> = {}
  for (const [key, field] of Object.entries(fields)) out[key] = Schema.optional(field)
  return out as { readonly [K in keyof F]: Schema.optional<F[K]> }
}

const text = Schema.optional(Schema.String)

/**
 * A peer as either implementation reports it: the library's `MeshStats.PeerStats`, every field but the
 * address optional.
 *
 * @since 0.1.0
 * @category schemas
 */
export const PeerBody = Schema.Struct({
  ...optionalFields(MeshStats.PeerStats.fields),
  host: Schema.String,
  port: Schema.Number
})

/**
 * A server heard from (queen-mesh only): the library's `MeshStats.ServerStats`, leniently.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ServerBody = Schema.Struct({
  ...optionalFields(MeshStats.ServerStats.fields),
  server_id: Schema.String,
  last_seen_ms_ago: Schema.optional(Schema.NullOr(Schema.Number)),
  heard_on: Schema.optional(Schema.Array(Schema.String))
})

/**
 * A member of the lane: the library's lane member, leniently.
 *
 * @since 0.1.0
 * @category schemas
 */
export const LaneMemberBody = Schema.Struct({
  ...optionalFields(MeshStats.LaneStats.fields.members.value.fields),
  server_id: Schema.String,
  found_by: text
})

/**
 * The lane's part of the body (queen-mesh only): the library's `MeshStats.LaneStats`, leniently.
 *
 * @since 0.1.0
 * @category schemas
 */
export const LaneBody = Schema.Struct({
  ...optionalFields(MeshStats.LaneStats.fields),
  kind: text,
  status: text,
  members: Schema.optional(Schema.Array(LaneMemberBody))
})

/**
 * The node's health (queen-mesh only), the enumerations read as plain strings.
 *
 * @since 0.1.0
 * @category schemas
 */
export const HealthBody = Schema.Struct({
  ...optionalFields(MeshStats.HealthStats.fields),
  status: Schema.String,
  reason: text,
  lane: text
})

/**
 * The stats body of a queen-mesh node or an upstream Queen broker, active or not: the library's
 * `MeshStats.ActiveStats` with only the fields every body has required (`enabled` and the two flags),
 * the enumerations read as plain strings (another version may add values), plus the CLI node's own
 * counter. Unknown fields are ignored.
 *
 * @since 0.1.0
 * @category schemas
 */
export const StatsBody = Schema.Struct({
  ...optionalFields(MeshStats.ActiveStats.fields),
  enabled: Schema.Boolean,
  maintenance_mode: Schema.Boolean,
  pop_maintenance_mode: Schema.Boolean,
  reason: text,
  transport: text,
  auth: text,
  tls: text,
  port: Schema.optional(Schema.NullOr(Schema.Number)),
  peers: Schema.optional(Schema.Array(PeerBody)),
  servers: Schema.optional(Schema.Array(ServerBody)),
  health: Schema.optional(HealthBody),
  lane: Schema.optional(Schema.NullOr(LaneBody)),
  rejections: Schema.optional(Schema.Record(Schema.String, Schema.Unknown)),
  inbound: Schema.optional(Schema.Struct(optionalFields(MeshStats.InboundStats.fields))),
  ...optionalFields(StatsExtras.fields)
})

/**
 * @since 0.1.0
 * @category models
 */
export type StatsBody = typeof StatsBody.Type

/** The largest body read: a stats body is a few kilobytes. */
const MAX_BODY = 8 * 1024 * 1024

/** The reason of `GET /api/v1/system/shared-state`, which is not a mesh view. */
const SHARED_STATE_REASON = "single_node_segments_broker"

const decodeBody = Schema.decodeUnknownResult(StatsBody, { errors: "first" })

/** The first issue of a decode, with its path, and whether it is a missing field. */
const firstIssue = (
  issue: SchemaIssue.Issue,
  path: ReadonlyArray<PropertyKey> = []
): {
  readonly path: ReadonlyArray<PropertyKey>
  readonly missing: boolean
} => {
  switch (issue._tag) {
    case "Pointer":
      return firstIssue(issue.issue, [...path, ...issue.path])
    case "Filter":
    case "Encoding":
      return firstIssue(issue.issue, path)
    case "Composite":
    case "AnyOf": {
      const first = issue.issues[0]
      return first === undefined ? { path, missing: false } : firstIssue(first, path)
    }
    default:
      return { path, missing: issue._tag === "MissingKey" }
  }
}

/**
 * Decodes a response body; the failure is one short line.
 *
 * @since 0.1.0
 * @category decoding
 */
export const decode = (body: string): Result.Result<StatsBody, string> => {
  let json: unknown
  try {
    json = JSON.parse(body)
  } catch {
    return Result.fail("not a stats body: not JSON")
  }
  return Result.flatMap(
    Result.mapError(decodeBody(json), (error) => {
      const issue = firstIssue(error.issue)
      const where = issue.path.length === 0 ? "" : `${issue.path.map(String).join(".")} `
      const what = issue.missing ? "is missing" : "has an unexpected type"
      return `not a stats body: ${where}${what}`
    }),
    (stats) =>
      !stats.enabled && stats.reason === SHARED_STATE_REASON
        ? Result.fail(
            `this is the shared-state route ("${SHARED_STATE_REASON}"), not the mesh stats; try ${HttpRoutes.paths.sharedStateStats}`
          )
        : Result.succeed(stats)
  )
}

// ---------------------------------------------------------------------------------------------
// the URL
// ---------------------------------------------------------------------------------------------

const SCHEME = /^([^:/?#]*):\/\//
const LABEL = "[a-z0-9_](?:[a-z0-9_-]*[a-z0-9_])?"
const HOSTNAME = new RegExp(`^(?:\\[[0-9a-f:.]+\\]|${LABEL}(?:\\.${LABEL})*\\.?)$`, "i")

/**
 * Accepts `host:port`, a base URL or a full stats URL; a URL without a path gets the stats route. The
 * failure is one line, for exit 2.
 *
 * @since 0.1.0
 * @category parsing
 */
export const statsUrl = (raw: string): Result.Result<URL, string> => {
  const input = raw.trim()
  const bad = (why: string) => Result.fail(`${safeJson(raw)} is not a URL: ${why}`)
  if (input === "") return bad("it is empty")
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting them is the point
  if (/[\s\u0000-\u001f\u007f-\u009f]/.test(input)) return bad("it contains spaces or control characters")
  const scheme = SCHEME.exec(input)
  if (scheme !== null) {
    const name = (scheme[1] ?? "").toLowerCase()
    if (name !== "http" && name !== "https")
      return bad(`expected http:// or https://, got ${safeJson(`${name}://`)}`)
  }
  let url: URL
  try {
    url = new URL(scheme === null ? `http://${input}` : input)
  } catch {
    return bad("it does not parse")
  }
  if (!HOSTNAME.test(url.hostname)) return bad(`${safeJson(url.hostname)} is not a host name or address`)
  if (url.username !== "" || url.password !== "") return bad("credentials are not supported")
  if (url.pathname === "/" || url.pathname === "") url.pathname = HttpRoutes.paths.sharedStateStats
  return Result.succeed(url)
}

// ---------------------------------------------------------------------------------------------
// rendering
// ---------------------------------------------------------------------------------------------

const onOff = (value: boolean) => (value ? "on" : "off")
const yesNo = (value: boolean | undefined, no = "no") => (value === undefined ? "-" : value ? "yes" : no)
const num = (value: number | undefined) => (value === undefined ? "-" : String(value))

/** Left-aligned columns, two spaces apart, indented by two. */
const table = (rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths: Array<number> = []
  for (const row of rows) {
    for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length)
  }
  return rows.map(
    (row) =>
      `  ${row
        .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
        .join("  ")
        .trimEnd()}`
  )
}

type Peer = typeof PeerBody.Type

/** A counter's column heading: its one name, as the stats body has it, in capitals. */
const columnOf = (counter: keyof Membership.LinkCounters): string => counter.replace(/_/g, " ").toUpperCase()

/**
 * Optional per-peer columns, one per link counter (`Membership.LinkCounters`): shown when any peer has
 * the field.
 *
 * @since 0.1.0
 * @category rendering
 */
export const PEER_COLUMNS: ReadonlyArray<readonly [string, (peer: Peer) => number | undefined]> = (
  ["queued", "handed", "written", "dropped_full", "dropped_down", "discarded", "reconnects"] as const
).map((counter) => [columnOf(counter), (peer: Peer) => peer[counter]] as const)

/**
 * The counters in rows of related ones, by label; absent ones are left out.
 *
 * @since 0.1.0
 * @category rendering
 */
export const COUNTERS: ReadonlyArray<
  ReadonlyArray<readonly [string, (stats: StatsBody) => number | undefined]>
> = [
  [
    ["servers alive", (s) => s.servers_alive],
    ["servers dead", (s) => s.servers_dead],
    ["stdout dropped", (s) => s.stdout_events_dropped]
  ],
  [
    ["frames sent", (s) => s.messages_sent],
    ["frames received", (s) => s.messages_received],
    ["frames dropped", (s) => s.messages_dropped]
  ],
  [
    ["dropped, link down", (s) => s.messages_dropped_down],
    ["discarded", (s) => s.messages_discarded],
    ["eph members", (s) => s.eph_members]
  ],
  [
    ["handshake failures", (s) => s.handshake_failures],
    ["signature failures", (s) => s.signature_failures],
    ["sequence rejections", (s) => s.sequence_rejections]
  ],
  [
    ["frames dispatched", (s) => s.frames_dispatched],
    ["frames invalid", (s) => s.frames_invalid],
    ["frames unknown", (s) => s.frames_unknown]
  ],
  [
    ["frames oversized", (s) => s.frames_oversized],
    ["items invalid", (s) => s.items_invalid],
    ["closed silent", (s) => s.inbound?.closed_silent]
  ]
]

const duration = (ms: number): string => {
  const s = Math.floor(ms / 1000)
  if (s < 60) return `${s}s`
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`
}

/** `key value, key value` of the numeric (or boolean) entries of an open record. */
const entries = (record: Readonly<Record<string, unknown>>): string =>
  Object.entries(record)
    .flatMap(([key, value]) =>
      typeof value === "number" || typeof value === "boolean"
        ? [`${escapeControl(key)} ${String(value)}`]
        : []
    )
    .join(", ")

const ago = (ms: number | null | undefined) => (ms === undefined || ms === null ? "-" : `${ms} ms ago`)

type Lane = typeof LaneBody.Type

/**
 * The lane's lines: its state and channel, its traffic, its refusals by reason, its members.
 *
 * @since 0.1.0
 * @category rendering
 */
export const renderLane = (lane: Lane): Array<string> => {
  const head = [`lane ${escapeControl(lane.kind ?? "?")} ${escapeControl(lane.status ?? "?")}`]
  if (lane.channel !== undefined) head.push(`channel ${escapeControl(lane.channel)}`)
  if (lane.epoch !== undefined) head.push(`epoch ${escapeControl(lane.epoch)}`)
  if (typeof lane.last_error === "string") head.push(`last error: ${escapeControl(lane.last_error)}`)
  const lines = [`  ${head.join("  ")}`]
  const traffic = table([
    [
      ...(lane.notifications_sent === undefined
        ? []
        : ["notifications sent", String(lane.notifications_sent)]),
      ...(lane.notifications_received === undefined ? [] : ["received", String(lane.notifications_received)]),
      ...(lane.dropped === undefined ? [] : ["dropped", String(lane.dropped)]),
      ...(lane.buffered === undefined ? [] : ["buffered", String(lane.buffered)]),
      ...(lane.reconnects === undefined ? [] : ["reconnects", String(lane.reconnects)]),
      ...(lane.queue_usage === undefined || lane.queue_usage === null
        ? []
        : ["queue usage", lane.queue_usage.toFixed(4)])
    ]
  ])
  if (traffic[0]?.trim() !== "") lines.push(...traffic)
  if (lane.refused !== undefined) {
    const refused = entries(Object.fromEntries(Object.entries(lane.refused).filter(([, n]) => n !== 0)))
    lines.push(`  lane refused: ${refused || "none"}`)
  }
  const members = lane.members ?? []
  if (members.length === 0) lines.push("  (no other node heard on the lane yet)")
  else
    lines.push(
      ...table([
        ["LANE MEMBER", "ALIVE", "LAST HEARD", "FOUND BY", "EPOCH"],
        ...members.map((member) => [
          escapeControl(member.server_id),
          yesNo(member.alive, "DEAD"),
          ago(member.last_seen_ms_ago),
          escapeControl(member.found_by ?? "-"),
          escapeControl(member.epoch ?? "-")
        ])
      ])
    )
  return lines
}

/**
 * The first line: who, what, and whether the mesh runs.
 *
 * @since 0.1.0
 * @category rendering
 */
export const headline = (stats: StatsBody): string => {
  const parts = [escapeControl(stats.server_id ?? "(no server id)")]
  if (stats.transport !== undefined) parts.push(escapeControl(stats.transport))
  if (!stats.enabled) {
    parts.push(`mesh not running (${escapeControl(stats.reason ?? "disabled")})`)
  } else {
    if (stats.port !== undefined && stats.port !== null) parts.push(`port ${stats.port}`)
    parts.push(`${stats.peer_count ?? stats.peers?.length ?? 0} peer(s)`)
    if (stats.running === false) parts.push("NOT RUNNING")
  }
  if (stats.health !== undefined) {
    const reason = stats.health.reason
    parts.push(
      `health ${escapeControl(stats.health.status)}${reason === undefined ? "" : ` (${escapeControl(reason)})`}`
    )
  }
  if (stats.auth !== undefined) parts.push(`auth ${escapeControl(stats.auth)}`)
  if (stats.tls !== undefined) parts.push(`tls ${escapeControl(stats.tls)}`)
  if (stats.version !== undefined) parts.push(`version ${escapeControl(stats.version)}`)
  if (stats.uptime_ms !== undefined) parts.push(`up ${duration(stats.uptime_ms)}`)
  return parts.join("  ")
}

/**
 * The stats body as a readable table: the node, its peers, the servers heard from, the counters and the
 * flags. Only what the body has.
 *
 * @since 0.1.0
 * @category rendering
 */
export const render = (stats: StatsBody): string => {
  const flags = `  maintenance ${onOff(stats.maintenance_mode)}, pop maintenance ${onOff(stats.pop_maintenance_mode)}`
  if (!stats.enabled) return [headline(stats), "", flags].join("\n")
  const lines = [headline(stats), ""]

  const peers = stats.peers ?? []
  const lane = stats.lane ?? undefined
  if (peers.length === 0)
    lines.push(lane === undefined ? "  (no peers)" : "  (no TCP peers: this node runs on the lane)")
  else {
    const extra = PEER_COLUMNS.filter(([, get]) => peers.some((peer) => get(peer) !== undefined))
    const errors = peers.some((peer) => typeof peer.last_error === "string")
    lines.push(
      ...table([
        [
          "PEER",
          "CONNECTED",
          "RESOLVED IP",
          ...extra.map(([label]) => label),
          ...(errors ? ["LAST ERROR"] : [])
        ],
        ...peers.map((peer) => [
          escapeControl(`${peer.host}:${peer.port}`),
          peer.self === true ? "self" : yesNo(peer.connected),
          escapeControl(peer.resolved_ip ?? peer.last_resolved_ip ?? "-"),
          ...extra.map(([, get]) => num(get(peer))),
          ...(errors ? [escapeControl(peer.last_error ?? "-")] : [])
        ])
      ])
    )
  }

  if (stats.servers !== undefined) {
    lines.push("")
    const servers = stats.servers
    if (servers.length === 0) lines.push("  (no peer heard from yet)")
    else {
      const via = servers.some((server) => server.heard_on !== undefined)
      lines.push(
        ...table([
          ["SERVER", "ALIVE", "LAST FRAME", ...(via ? ["HEARD ON"] : [])],
          ...servers.map((server) => [
            escapeControl(server.server_id),
            yesNo(server.alive, "DEAD"),
            ago(server.last_seen_ms_ago),
            ...(via ? [escapeControl((server.heard_on ?? []).join("+") || "-")] : [])
          ])
        ])
      )
    }
  }

  if (lane !== undefined) lines.push("", ...renderLane(lane))

  const rows = COUNTERS.map((group) =>
    group.flatMap(([label, get]) => {
      const value = get(stats)
      return value === undefined ? [] : [label, String(value)]
    })
  ).filter((row) => row.length > 0)
  if (rows.length > 0) lines.push("", ...table(rows))
  // Only the reasons that happened: the list of possible ones is long.
  const rejections =
    stats.rejections === undefined
      ? ""
      : entries(Object.fromEntries(Object.entries(stats.rejections).filter(([, n]) => n !== 0))) || "none"
  const inbound = stats.inbound === undefined ? "" : entries(stats.inbound)
  if (rejections !== "" || inbound !== "") lines.push("")
  if (rejections !== "") lines.push(`  rejections: ${rejections}`)
  if (inbound !== "") lines.push(`  inbound: ${inbound}`)
  lines.push("", flags)
  return lines.join("\n")
}

// ---------------------------------------------------------------------------------------------
// fetching
// ---------------------------------------------------------------------------------------------

const causeMessage = (cause: unknown): string => {
  if (cause instanceof Error) {
    // fetch wraps the socket error ("fetch failed"); the inner one says what happened.
    const inner: unknown = cause.cause
    return inner instanceof Error ? inner.message : cause.message
  }
  return String(cause)
}

const snippet = (body: string) => {
  const line = body.trim().split("\n")[0] ?? ""
  return escapeControl(line.length > 120 ? `${line.slice(0, 120)}…` : line)
}

/**
 * A fetched and decoded body, with its raw text for `--json`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Sample {
  readonly raw: string
  readonly stats: StatsBody
  /** When the answer came, in milliseconds (`Date.now`). */
  readonly at: number
}

/**
 * Fetches and decodes the stats at `url`. Every failure is one line (exit 1).
 *
 * @since 0.1.0
 * @category fetching
 */
export const fetchSample = (url: URL): Effect.Effect<Sample, CliFailure> => {
  const failed = (why: string) =>
    new CliFailure({ code: EXIT_FAILURE, message: `queen-mesh stats: ${url.href}: ${why}` })
  return Effect.gen(function* () {
    const response = yield* HttpClient.get(url).pipe(
      Effect.catchTag("HttpClientError", (error) => {
        const reason = error.reason
        // A request that never got an answer says why (the socket's error); an answer, what was wrong.
        return Effect.fail(
          failed(
            escapeControl(
              reason._tag === "TransportError" ||
                reason._tag === "EncodeError" ||
                reason._tag === "InvalidUrlError"
                ? causeMessage(reason.cause ?? reason.message)
                : reason.message
            )
          )
        )
      })
    )
    // Read at most MAX_BODY bytes: whatever answers on that port is not trusted to stop.
    const parts: Array<Uint8Array> = []
    let size = 0
    yield* response.stream.pipe(
      Stream.mapError((error) => failed(escapeControl(error.message))),
      Stream.runForEach((chunk) => {
        size += chunk.length
        if (size > MAX_BODY) return Effect.fail(failed(`answered more than ${MAX_BODY} bytes`))
        parts.push(chunk)
        return Effect.void
      })
    )
    const raw = Buffer.concat(parts).toString("utf8")
    if (response.status !== 200) return yield* failed(`answered ${response.status}: ${snippet(raw)}`)
    const stats = yield* Result.match(decode(raw), {
      onFailure: (why) => Effect.fail(failed(why)),
      onSuccess: Effect.succeed
    })
    return { raw, stats, at: Date.now() }
  }).pipe(
    Effect.timeoutOrElse({
      duration: Duration.seconds(5),
      orElse: () => Effect.fail(failed("no complete answer in 5 s"))
    }),
    Effect.scoped,
    Effect.provide(FetchHttpClient.layer)
  )
}

// ---------------------------------------------------------------------------------------------
// watching
// ---------------------------------------------------------------------------------------------

/**
 * Where `--watch` draws: the process's stdout, or a test double.
 *
 * @since 0.1.0
 * @category models
 */
export interface Screen {
  /** Redraw in place (a terminal) or print one line per sample. */
  readonly isTTY: boolean
  readonly columns: number | undefined
  readonly color: boolean
  readonly write: (text: string) => void
  /** A line for stderr (plain mode's failures). */
  readonly error: (line: string) => void
}

/**
 * The process's stdout and stderr.
 *
 * @since 0.1.0
 * @category models
 */
export const processScreen = (): Screen => ({
  isTTY: process.stdout.isTTY === true,
  columns: process.stdout.columns,
  color: useColor(process.stdout),
  write: (text) => Effect.runSync(print(text)),
  error: (line) => {
    process.stderr.write(`${line}\n`)
  }
})

/**
 * Frames per second between two samples.
 *
 * @since 0.1.0
 * @category models
 */
export interface Rates {
  readonly sent: number | undefined
  readonly received: number | undefined
  readonly dropped: number | undefined
}

const rate = (now: number | undefined, before: number | undefined, seconds: number) =>
  now === undefined || before === undefined || seconds <= 0 ? undefined : Math.max(0, now - before) / seconds

/**
 * @since 0.1.0
 * @category watching
 */
export const rates = (now: Sample, before: Sample | undefined): Rates => {
  if (before === undefined) return { sent: undefined, received: undefined, dropped: undefined }
  const seconds = (now.at - before.at) / 1000
  return {
    sent: rate(now.stats.messages_sent, before.stats.messages_sent, seconds),
    received: rate(now.stats.messages_received, before.stats.messages_received, seconds),
    dropped: rate(now.stats.messages_dropped, before.stats.messages_dropped, seconds)
  }
}

const perSecond = (value: number | undefined) => (value === undefined ? "-/s" : `${value.toFixed(1)}/s`)

const ratesText = (r: Rates) =>
  `sent ${perSecond(r.sent)}  received ${perSecond(r.received)}  dropped ${perSecond(r.dropped)}`

/**
 * One plain line per sample: time, node, rates, peers.
 *
 * @since 0.1.0
 * @category watching
 */
export const plainLine = (sample: Sample, r: Rates): string => {
  const stats = sample.stats
  const time = new Date(sample.at).toISOString().slice(11, 19)
  const who = escapeControl(stats.server_id ?? "?")
  if (!stats.enabled) return `${time} ${who} mesh not running (${escapeControl(stats.reason ?? "disabled")})`
  const peers = (stats.peers ?? []).map(
    (peer) =>
      `${escapeControl(`${peer.host}:${peer.port}`)}=${peer.self === true ? "self" : peer.connected === undefined ? "?" : peer.connected ? "up" : "down"}${
        peer.queued === undefined ? "" : `/q${peer.queued}`
      }`
  )
  const servers =
    stats.servers_alive === undefined ? "" : `  alive ${stats.servers_alive} dead ${stats.servers_dead ?? 0}`
  const health = stats.health === undefined ? "" : `  ${escapeControl(stats.health.status)}`
  const lane =
    stats.lane === undefined || stats.lane === null
      ? ""
      : `  lane ${escapeControl(stats.lane.status ?? "?")}/${stats.lane.members_alive ?? "?"}`
  return `${time} ${who}${health}  ${ratesText(r)}${servers}${lane}  peers ${peers.length === 0 ? "(none)" : peers.join(" ")}`
}

/** Truncates to `width` visible columns; the text here carries no escape sequences but ours. */
const fitWidth = (line: string, width: number) =>
  line.length > width ? `${line.slice(0, Math.max(0, width - 1))}…` : line

/**
 * The redrawn view: a title, the rates, the table.
 *
 * @since 0.1.0
 * @category watching
 */
export const view = (url: URL, interval: number, sample: Sample, r: Rates): Array<string> => [
  `queen-mesh stats  ${escapeControl(url.href)}  every ${interval}s  ${new Date(sample.at).toISOString().slice(11, 19)}  (Ctrl-C to stop)`,
  `  rates: ${ratesText(r)}`,
  "",
  ...render(sample.stats).split("\n")
]

/**
 * @since 0.1.0
 * @category models
 */
export interface WatchOptions {
  /** Seconds between samples. */
  readonly interval: number
  /** Stop after this many samples; none: until interrupted. */
  readonly count: Option.Option<number>
  readonly json: boolean
}

/**
 * Samples `url` every interval until interrupted (or `count` samples). A failed sample is shown and the
 * watch carries on: a node restarting is what one watches for.
 *
 * @since 0.1.0
 * @category watching
 */
export const watch = (url: URL, options: WatchOptions, screen: Screen): Effect.Effect<void> =>
  Effect.suspend(() => {
    let previous: Sample | undefined
    let drawn = 0
    let taken = 0
    const width = () => columnsOf(screen)
    const draw = (lines: ReadonlyArray<string>) => {
      const up = drawn > 0 ? `\x1b[${drawn}F\x1b[J` : ""
      drawn = lines.length
      screen.write(`${up}${lines.map((line) => fitWidth(line, width() - 1)).join("\n")}\n`)
    }
    const once = fetchSample(url).pipe(
      Effect.match({
        onFailure: (failure) => {
          if (screen.isTTY && !options.json) {
            draw([
              `queen-mesh stats  ${escapeControl(url.href)}  every ${options.interval}s  ${new Date().toISOString().slice(11, 19)}`,
              "",
              `  ${failure.message}`
            ])
          } else screen.error(failure.message)
        },
        onSuccess: (sample) => {
          const r = rates(sample, previous)
          previous = sample
          if (options.json) screen.write(`${safeJson(JSON.parse(sample.raw))}\n`)
          else if (screen.isTTY) draw(view(url, options.interval, sample, r))
          else screen.write(`${plainLine(sample, r)}\n`)
        }
      }),
      Effect.tap(() =>
        Effect.sync(() => {
          taken++
        })
      )
    )
    const more = () => Option.match(options.count, { onNone: () => true, onSome: (n) => taken < n })
    return Effect.gen(function* () {
      yield* once
      while (more()) {
        yield* Effect.sleep(Duration.millis(options.interval * 1000))
        yield* once
      }
    })
  })

// ---------------------------------------------------------------------------------------------
// the command
// ---------------------------------------------------------------------------------------------

/**
 * @since 0.1.0
 * @category models
 */
export interface StatsOptions {
  readonly url: string
  readonly json: boolean
  /** `--watch`: seconds between samples. */
  readonly watch: Option.Option<WatchOptions>
}

/**
 * Fetches and prints the stats of the node at `options.url`, once or (`--watch`) until interrupted.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (options: StatsOptions): Effect.Effect<void, CliFailure> =>
  Effect.gen(function* () {
    const url = yield* Result.match(statsUrl(options.url), {
      onFailure: (why) =>
        Effect.fail(new CliFailure({ code: EXIT_USAGE, message: `queen-mesh stats: ${why}` })),
      onSuccess: Effect.succeed
    })
    if (Option.isSome(options.watch)) return yield* watch(url, options.watch.value, processScreen())
    const sample = yield* fetchSample(url)
    yield* printLine(options.json ? sample.raw.trimEnd() : render(sample.stats))
  })
