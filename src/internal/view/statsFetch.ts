/**
 * The cluster page's one outbound request: `GET <stats path>` at the `http_addr` a peer announced in
 * its HELLO, bounded in time and size, decoded through `MeshStats.StatsBody`. It is written on
 * `node:http` so that nothing in it can be steered: the path is always the stats path (an address
 * carrying a path, a query or credentials is refused, never requested), no header of the browser's
 * is forwarded, a redirect is an answer like any other non-200 (never followed), and the deadline
 * covers resolution, connection and the whole body (a peer trickling bytes is cut off).
 *
 * No part of a body that does not decode is kept or reported: the page shows the reason only, so a
 * peer's address cannot be used to read another service through the node.
 *
 * @internal
 */
import * as Http from "node:http"
import * as Https from "node:https"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import * as Schema from "effect/Schema"
import * as MeshStats from "../../MeshStats.js"
import { VERSION } from "../version.js"

/** Why a peer's stats could not be shown; one literal each, as the page shows them. */
export const FetchFailure = Schema.Literals([
  "bad_address",
  "unreachable",
  "timeout",
  "status",
  "too_large",
  "not_json",
  "not_stats",
  "other_node"
])
export type FetchFailure = typeof FetchFailure.Type

export class StatsFetchError extends Data.TaggedError("StatsFetchError")<{
  readonly reason: FetchFailure
  readonly detail: string
}> {
  override get message(): string {
    return `${this.reason}: ${this.detail}`
  }
}

/** Where a peer's HTTP routes are, from its announced `http_addr`. */
export interface HttpTarget {
  readonly protocol: "http" | "https"
  /** As `node:http` takes it: an IPv6 literal without brackets. */
  readonly host: string
  readonly port: number
}

const MAX_ADDRESS_LENGTH = 300
const HOST =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.?$/
const IPV6 = /^\[[0-9A-Fa-f:.]+\]$/

/**
 * An announced `http_addr` as a target: `http://host:port`, `https://host:port` or `host:port` (a
 * trailing `/` tolerated). Anything else (a path, a query, a fragment, credentials, another scheme,
 * control characters) is refused: the address names a server, and the node chooses the path.
 */
export const parseHttpAddr = (raw: string): Result.Result<HttpTarget, string> => {
  if (raw.length === 0 || raw.length > MAX_ADDRESS_LENGTH) return Result.fail("empty or too long")
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (/[\s\u0000-\u001f\u007f]/.test(raw)) return Result.fail("whitespace or control characters")
  const schemed = /^[a-z][a-z0-9+.-]*:\/\//i.test(raw) ? raw : `http://${raw}`
  let url: URL
  try {
    url = new URL(schemed)
  } catch {
    return Result.fail("not an address")
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") return Result.fail(`scheme ${url.protocol}`)
  if (url.username !== "" || url.password !== "") return Result.fail("credentials")
  if (url.pathname !== "/" || url.search !== "" || url.hash !== "" || /[?#]/.test(raw))
    return Result.fail("a path or query")
  if (
    schemed
      .replace(/\/$/, "")
      .slice(url.protocol.length + 2)
      .includes("/")
  )
    return Result.fail("a path or query")
  const protocol = url.protocol === "https:" ? "https" : "http"
  const port = url.port === "" ? (protocol === "https" ? 443 : 80) : Number(url.port)
  const host = url.hostname
  if (IPV6.test(host)) return Result.succeed({ protocol, host: host.slice(1, -1), port })
  if (!HOST.test(host)) return Result.fail("not a host name")
  return Result.succeed({ protocol, host, port })
}

/** The fetch's bounds unless the page's options say otherwise (`ClusterView.defaults`). */
export const defaults = {
  timeout: Duration.seconds(1),
  maxBytes: 1024 * 1024
} as const

export interface FetchOptions {
  /** The path requested: always the stats path. */
  readonly path: string
  /** For resolution, connection, headers and body together. */
  readonly timeout: Duration.Duration
  /** Bodies longer than this are cut off and refused. */
  readonly maxBytes: number
}

const decodeStats = Schema.decodeUnknownResult(MeshStats.StatsBody)

/** The raw answer: status and body, within the bounds. */
const get = (target: HttpTarget, options: FetchOptions): Effect.Effect<Buffer, StatsFetchError> =>
  Effect.callback<Buffer, StatsFetchError>((resume) => {
    let done = false
    const finish = (result: Effect.Effect<Buffer, StatsFetchError>) => {
      if (done) return
      done = true
      clearTimeout(timer)
      request.destroy()
      resume(result)
    }
    const fail = (reason: FetchFailure, detail: string) =>
      finish(Effect.fail(new StatsFetchError({ reason, detail })))
    const request = (target.protocol === "https" ? Https : Http).request({
      host: target.host,
      port: target.port,
      path: options.path,
      method: "GET",
      // A connection of its own, closed with the answer: nothing pooled, nothing reused.
      agent: false,
      headers: { accept: "application/json", "user-agent": `queen-mesh/${VERSION} cluster-view` },
      maxHeaderSize: 16 * 1024
    })
    const timer = setTimeout(
      () => fail("timeout", `no complete answer within ${Duration.toMillis(options.timeout)} ms`),
      Duration.toMillis(options.timeout)
    )
    request.on("error", (error: NodeJS.ErrnoException) =>
      fail("unreachable", typeof error.code === "string" ? error.code : "connection failed")
    )
    request.on("response", (response) => {
      const status = response.statusCode ?? 0
      if (status !== 200) {
        response.resume()
        return fail("status", `answered ${status}`)
      }
      const declared = Number(response.headers["content-length"])
      if (Number.isFinite(declared) && declared > options.maxBytes)
        return fail("too_large", `more than ${options.maxBytes} bytes`)
      const chunks: Array<Buffer> = []
      let size = 0
      response.on("data", (chunk: Buffer) => {
        size += chunk.length
        if (size > options.maxBytes) return fail("too_large", `more than ${options.maxBytes} bytes`)
        chunks.push(chunk)
      })
      response.on("end", () => finish(Effect.succeed(Buffer.concat(chunks, size))))
      response.on("error", () => fail("unreachable", "the answer broke off"))
      response.on("aborted", () => fail("unreachable", "the answer broke off"))
    })
    request.end()
    return Effect.sync(() => {
      done = true
      clearTimeout(timer)
      request.destroy()
    })
  })

/**
 * The stats body of the peer `serverId` at `httpAddr`, decoded; a typed failure otherwise (a body of
 * another server id is one: an address that names another node's routes is not this peer's). Never
 * fails with anything but a `StatsFetchError` and never takes longer than `options.timeout` (plus a
 * turn).
 */
export const fetchStats = (
  serverId: string,
  httpAddr: string,
  options: FetchOptions
): Effect.Effect<MeshStats.MeshStats, StatsFetchError> =>
  Result.match(parseHttpAddr(httpAddr), {
    onFailure: (why) => Effect.fail(new StatsFetchError({ reason: "bad_address", detail: why })),
    onSuccess: (target) =>
      Effect.flatMap(get(target, options), (body) => {
        let json: unknown
        try {
          json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body))
        } catch {
          return Effect.fail(new StatsFetchError({ reason: "not_json", detail: "the answer is not JSON" }))
        }
        return Result.match(decodeStats(json), {
          onFailure: () =>
            Effect.fail(new StatsFetchError({ reason: "not_stats", detail: "not a queen-mesh stats body" })),
          onSuccess: (stats) =>
            stats.server_id === serverId
              ? Effect.succeed(stats)
              : Effect.fail(
                  new StatsFetchError({ reason: "other_node", detail: "the stats there are another node's" })
                )
        })
      })
  })
