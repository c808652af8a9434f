/**
 * `queen-mesh stats [url]`: fetches a node's stats route and prints it as a table, or with `--json` as
 * the raw body (docs/cli.md, "stats"). The body is decoded with `HttpRoutes.StatsBody`, never trusted.
 *
 * @since 0.1.0
 */
import { FetchHttpClient, HttpClient } from "@effect/platform"
import { Duration, Effect, Either, ParseResult, Schema } from "effect"
import * as HttpRoutes from "../HttpRoutes.js"
import { CliFailure, EXIT_FAILURE, EXIT_USAGE, printLine } from "./io.js"

/**
 * The URL `stats` reads when none is given: a node's HTTP routes with their defaults.
 *
 * @since 0.1.0
 * @category defaults
 */
export const defaultUrl = "http://127.0.0.1:6632"

/**
 * Accepts `host:port`, a base URL or a full stats URL; a URL without a path gets the stats route.
 *
 * @since 0.1.0
 * @category parsing
 */
export const statsUrl = (raw: string): Either.Either<URL, string> => {
  const text = raw.trim()
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`
  try {
    const url = new URL(withScheme)
    if (url.protocol !== "http:" && url.protocol !== "https:") {
      return Either.left(`${JSON.stringify(raw)} is not an http(s) URL`)
    }
    if (url.pathname === "/" || url.pathname === "") url.pathname = HttpRoutes.paths.sharedStateStats
    return Either.right(url)
  } catch {
    return Either.left(`${JSON.stringify(raw)} is not a URL`)
  }
}

const onOff = (flag: boolean) => (flag ? "on" : "off")

/** Left-aligned columns, two spaces apart. */
const table = (rows: ReadonlyArray<ReadonlyArray<string>>): Array<string> => {
  const widths: Array<number> = []
  for (const row of rows) {
    for (const [i, cell] of row.entries()) widths[i] = Math.max(widths[i] ?? 0, cell.length)
  }
  return rows.map((row) =>
    row
      .map((cell, i) => (i === row.length - 1 ? cell : cell.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd()
  )
}

/**
 * The stats body as a readable table: the node, its peers, the liveness counts, the counters and the
 * flags.
 *
 * @since 0.1.0
 * @category rendering
 */
export const render = (stats: HttpRoutes.StatsBody): string => {
  const flags = `maintenance ${onOff(stats.maintenance_mode)}, pop maintenance ${onOff(stats.pop_maintenance_mode)}`
  if (!stats.enabled) {
    return [`${stats.server_id}  ${stats.transport}  mesh not running (${stats.reason})`, flags].join("\n")
  }
  const peers =
    stats.peers.length === 0
      ? ["  (no peers)"]
      : table([
          ["PEER", "CONNECTED", "QUEUED", "RESOLVED IP"],
          ...stats.peers.map((peer) => [
            `${peer.host}:${peer.port}`,
            peer.connected ? "yes" : "no",
            String(peer.queued),
            peer.resolved_ip ?? "-"
          ])
        ]).map((line) => `  ${line}`)
  const servers =
    stats.servers.length === 0
      ? ["  (no peer heard from yet)"]
      : table([
          ["SERVER", "ALIVE", "LAST FRAME"],
          ...stats.servers.map((server) => [
            server.server_id,
            server.alive ? "yes" : "DEAD",
            `${server.last_seen_ms_ago} ms ago`
          ])
        ]).map((line) => `  ${line}`)
  const counters = table([
    ["servers alive", String(stats.servers_alive), "servers dead", String(stats.servers_dead)],
    [
      "frames sent",
      String(stats.messages_sent),
      "frames received",
      String(stats.messages_received),
      "frames dropped",
      String(stats.messages_dropped)
    ],
    [
      "handshake failures",
      String(stats.handshake_failures),
      "frames invalid",
      String(stats.frames_invalid),
      "frames unknown",
      String(stats.frames_unknown)
    ]
  ]).map((line) => `  ${line}`)
  return [
    `${stats.server_id}  ${stats.transport}  port ${stats.port}  ${stats.peer_count} peer(s)`,
    "",
    ...peers,
    "",
    ...servers,
    "",
    ...counters,
    "",
    `  ${flags}`
  ].join("\n")
}

const decodeStats = Schema.decodeUnknownEither(Schema.parseJson(HttpRoutes.StatsBody))

/**
 * Fetches and prints the stats of the node at `rawUrl`.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (options: {
  readonly url: string
  readonly json: boolean
}): Effect.Effect<void, CliFailure> =>
  Effect.gen(function* () {
    const url = yield* Either.match(statsUrl(options.url), {
      onLeft: (why) => Effect.fail(new CliFailure({ code: EXIT_USAGE, message: `queen-mesh stats: ${why}` })),
      onRight: Effect.succeed
    })
    const unreachable = (why: string) =>
      new CliFailure({ code: EXIT_FAILURE, message: `queen-mesh stats: ${url.href}: ${why}` })
    const response = yield* HttpClient.get(url).pipe(
      Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => unreachable("no answer in 5 s") }),
      Effect.catchTag("RequestError", (error) => Effect.fail(unreachable(causeMessage(error.cause)))),
      Effect.catchTag("ResponseError", (error) => Effect.fail(unreachable(error.message)))
    )
    const body = yield* response.text.pipe(Effect.mapError((error) => unreachable(error.message)))
    if (response.status !== 200) return yield* unreachable(`answered ${response.status}: ${body.trim()}`)
    if (options.json) return yield* printLine(body)
    const stats = yield* Either.match(decodeStats(body), {
      onLeft: (error) =>
        Effect.fail(unreachable(`not a stats body: ${ParseResult.TreeFormatter.formatErrorSync(error)}`)),
      onRight: Effect.succeed
    })
    yield* printLine(render(stats))
  }).pipe(Effect.provide(FetchHttpClient.layer))

const causeMessage = (cause: unknown): string => {
  if (cause instanceof Error) {
    // fetch wraps the socket error ("fetch failed"); the inner one says what happened.
    const inner: unknown = cause.cause
    return inner instanceof Error ? inner.message : cause.message
  }
  return String(cause)
}
