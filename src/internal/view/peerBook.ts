/**
 * What a node keeps of its peers for the cluster page, from the moment it hears them and whether or not
 * the page is ever opened: which peer-list address (`host:port`) names which server. The page needs it
 * to draw a configured peer and the server heard from it as one node; a dialer learns it from a v2
 * challenge, but in legacy auth only the peer itself can say it (its stats body: its mesh port, and
 * the entry of its own list that names it). A peer that is dead by the time the page is first opened
 * cannot be asked, so the node asks each server once as soon as it hears it (once per announced
 * `http_addr` and boot epoch: a restarted peer is asked again), and retries while it stays alive.
 *
 * The question is the cluster page's own request (`statsFetch.ts`: the stats path of the announced
 * address, bounded in time and size, its server id checked), made once per peer incarnation instead
 * of once per second of an open page.
 *
 * @internal
 */
import * as Os from "node:os"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as FiberMap from "effect/FiberMap"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Result from "effect/Result"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import type * as Membership from "../../Membership.js"
import { Mesh, type MeshShape } from "../../Mesh.js"
import { membershipTags } from "../../MeshEvent.js"
import type * as MeshStats from "../../MeshStats.js"
import { historyOf } from "./history.js"
import * as StatsFetch from "./statsFetch.js"

/** `host:port`, an IPv6 literal in brackets: a peer entry's name, as `Membership.Address.name`. */
export const addressName = (host: string, port: number): string =>
  `${host.includes(":") ? `[${host}]` : host}:${port}`

/** The host of an `http_addr`, as it would appear in a peer list. */
export const httpHost = (httpAddr: string): string | undefined =>
  Result.match(StatsFetch.parseHttpAddr(httpAddr), {
    onFailure: () => undefined,
    onSuccess: (target) => target.host
  })

/**
 * The addresses a peer's stats body tells the server id of: the entry of its own list that names it,
 * and its mesh port at the host of the `http_addr` it was fetched from.
 */
export const fromBody = (
  body: MeshStats.MeshStats,
  httpAddr: string | null
): Array<readonly [address: string, serverId: string]> => {
  const out: Array<readonly [string, string]> = []
  if (!body.enabled) return out
  for (const peer of body.peers) if (peer.self) out.push([addressName(peer.host, peer.port), body.server_id])
  const host = httpAddr === null ? undefined : httpHost(httpAddr)
  if (body.port !== null && host !== undefined) out.push([addressName(host, body.port), body.server_id])
  return out
}

/** The addresses a node's own members tell: entries joined to their server by a v2 challenge. */
export const fromMembers = (
  members: ReadonlyArray<Membership.Member>
): Array<readonly [address: string, serverId: string]> => {
  const out: Array<readonly [string, string]> = []
  for (const member of members) {
    if (member.self || Option.isNone(member.address) || Option.isNone(member.serverId)) continue
    out.push([member.address.value.name, member.serverId.value])
  }
  return out
}

/** This machine's names and interface addresses (loopback included). */
export const ownHosts = (): ReadonlyArray<string> => {
  const out = new Set(["localhost", Os.hostname()])
  for (const list of Object.values(Os.networkInterfaces()))
    for (const entry of list ?? []) out.add(entry.address.replace(/%.*$/, ""))
  return [...out]
}

/** Addresses kept at most (a cluster has a handful); past it the book starts again. */
const MAX_ADDRESSES = 1024

/** Servers tracked at most for their questions (the liveness map is bounded at 256 by default). */
const MAX_SERVERS = 1024

/** A failed question is asked again after 1 s, doubling up to this. */
const MAX_RETRY_MILLIS = 30_000

interface Asked {
  /** The announced address and epoch it was asked for. */
  readonly key: string
  /** Answered: nothing more to ask until the key changes. */
  readonly done: boolean
  readonly failures: number
  /** Not asked again before this time (milliseconds since the epoch). */
  readonly notBefore: number
}

/** One server to ask: its id and the address its HELLO announced. */
export interface Question {
  readonly serverId: string
  readonly httpAddr: string
  readonly key: string
}

/** The addresses known to name a server, and which servers were asked. */
export class PeerBook {
  /** Peer-list addresses (`host:port`) known to name a server id. */
  readonly addresses = new Map<string, string>()
  private readonly asked = new Map<string, Asked>()
  private readonly inFlight = new Set<string>()

  remember(learned: ReadonlyArray<readonly [string, string]>): void {
    for (const [address, serverId] of learned) {
      if (!this.addresses.has(address) && this.addresses.size >= MAX_ADDRESSES) this.addresses.clear()
      this.addresses.set(address, serverId)
    }
  }

  /**
   * The servers to ask now: heard alive, announcing an address, not joined to their entry already
   * (a v2 challenge named them), and not asked for this address and epoch yet (or due for a retry).
   */
  due(members: ReadonlyArray<Membership.Member>, selfId: string, now: number): ReadonlyArray<Question> {
    const out: Array<Question> = []
    for (const member of members) {
      if (member.self || Option.isNone(member.serverId) || Option.isNone(member.heard)) continue
      const serverId = member.serverId.value
      const heard = member.heard.value
      if (serverId === selfId || !heard.alive || Option.isNone(heard.httpAddr)) continue
      if (Option.isSome(member.address)) continue
      if (this.inFlight.has(serverId)) continue
      const key = `${heard.httpAddr.value}\u0000${Option.getOrElse(heard.ephEpoch, () => "")}`
      const asked = this.asked.get(serverId)
      if (asked !== undefined && asked.key === key && (asked.done || now < asked.notBefore)) continue
      out.push({ serverId, httpAddr: heard.httpAddr.value, key })
    }
    return out
  }

  /**
   * When the earliest failed question after `now` is due again, if any. One whose time has passed
   * without its server being due waits for the next pass (a membership change) rather than waking one.
   */
  nextRetry(now: number): number | undefined {
    let next: number | undefined
    for (const asked of this.asked.values())
      if (!asked.done && asked.notBefore > now && (next === undefined || asked.notBefore < next))
        next = asked.notBefore
    return next
  }

  asking(question: Question): void {
    this.inFlight.add(question.serverId)
  }

  answered(question: Question, body: MeshStats.MeshStats): void {
    this.inFlight.delete(question.serverId)
    this.remember(fromBody(body, question.httpAddr))
    this.record(question.serverId, { key: question.key, done: true, failures: 0, notBefore: 0 })
  }

  /** A failure that asking again cannot mend (not our body, not this server's) is not retried. */
  unanswered(question: Question, reason: StatsFetch.FetchFailure, now: number): void {
    this.inFlight.delete(question.serverId)
    if (reason !== "unreachable" && reason !== "timeout") {
      this.record(question.serverId, { key: question.key, done: true, failures: 0, notBefore: 0 })
      return
    }
    const before = this.asked.get(question.serverId)
    const failures = before !== undefined && before.key === question.key ? before.failures + 1 : 1
    const wait = Math.min(MAX_RETRY_MILLIS, 1000 * 2 ** (failures - 1))
    this.record(question.serverId, { key: question.key, done: false, failures, notBefore: now + wait })
  }

  private record(serverId: string, asked: Asked): void {
    if (!this.asked.has(serverId) && this.asked.size >= MAX_SERVERS) this.asked.clear()
    this.asked.set(serverId, asked)
  }
}

/** One book per mesh, shared by the learner and the page's routes (a router value serves every mesh). */
const books = new WeakMap<MeshShape, PeerBook>()

export const bookOf = (mesh: MeshShape): PeerBook => {
  let book = books.get(mesh)
  if (book === undefined) {
    book = new PeerBook()
    books.set(mesh, book)
  }
  return book
}

/** How a server's stats are asked for: `StatsFetch.fetchStats` with the page's bounds, or a test's. */
export type Ask = (
  serverId: string,
  httpAddr: string
) => Effect.Effect<MeshStats.MeshStats, StatsFetch.StatsFetchError>

export interface LearnOptions {
  readonly ask: Ask
  /**
   * The longest the members go unread with nothing happening: for what no event tells, a peer that
   * restarted within the dead threshold announcing a new address. Default 30 s.
   */
  readonly interval?: Duration.Input
}

/**
 * Keeps `mesh`'s book from now on: a pass at once, on every membership change (a server alive or dead,
 * a link up or down, an entry joining or leaving), when a failed question is due again, when a question
 * ends, and at least every `interval`; each pass records what the members say and asks the servers that
 * are due, in fibers of their own (a peer taking its whole timeout delays no other). Runs until the
 * scope closes. An idle node reads nothing: a pass every second was half of what a node with only
 * heartbeats to send spent.
 */
export const learn = (mesh: MeshShape, options: LearnOptions): Effect.Effect<void, never, Scope.Scope> =>
  Effect.gen(function* () {
    const book = bookOf(mesh)
    const asks = yield* FiberMap.make<string>()
    const wake = yield* Queue.sliding<void>(1)
    const poke = () => Queue.offerUnsafe(wake, undefined)
    yield* mesh.observe(poke, membershipTags)
    const interval = Duration.toMillis(options.interval ?? Duration.seconds(30))
    const clock = yield* Clock.Clock
    const ask = (question: Question) =>
      Effect.gen(function* () {
        const result = yield* Effect.result(options.ask(question.serverId, question.httpAddr))
        const now = yield* Clock.currentTimeMillis
        if (Result.isFailure(result)) return book.unanswered(question, result.failure.reason, now)
        book.answered(question, result.success)
        const addresses = fromBody(result.success, question.httpAddr).map(([address]) => address)
        yield* Effect.logDebug("cluster page: peer's addresses learnt").pipe(
          Effect.annotateLogs({ peer: question.serverId, addresses: addresses.join(",") })
        )
      }).pipe(Effect.ensuring(Effect.sync(poke)))
    // Until something happens, the next retry falls due, or `interval` passes.
    const wait = Effect.suspend(() => {
      const now = clock.currentTimeMillisUnsafe()
      const retry = book.nextRetry(now)
      const ms = retry === undefined ? interval : Math.min(interval, retry - now)
      return Effect.ignore(Effect.timeout(Queue.take(wake), Duration.millis(ms)))
    })
    const pass = Effect.gen(function* () {
      const members = yield* mesh.members
      book.remember(fromMembers(members))
      const now = yield* Clock.currentTimeMillis
      for (const question of book.due(members, mesh.serverId, now)) {
        book.asking(question)
        yield* FiberMap.run(asks, question.serverId, ask(question))
      }
    })
    yield* pass.pipe(
      Effect.andThen(wait),
      Effect.catchCause((cause) => Effect.logWarning("cluster page: learning peers failed", cause)),
      Effect.repeat(Schedule.forever),
      Effect.annotateLogs({ module: "ClusterView" }),
      Effect.forkScoped
    )
  })

/**
 * `learn` for the mesh in context, asking with the page's request (`StatsFetch.fetchStats`) at
 * `statsPath`, within the page's bounds. What `ClusterView.learnPeers` and `HttpRoutes.serve` run.
 */
export const learnPeers = (options: {
  readonly statsPath: string
  readonly fetchTimeout?: Duration.Input | undefined
  readonly maxBodyBytes?: number | undefined
}): Effect.Effect<void, never, Mesh | Scope.Scope> =>
  Effect.gen(function* () {
    const mesh = yield* Mesh
    const fetchOptions: StatsFetch.FetchOptions = {
      path: options.statsPath,
      timeout: Duration.fromInputUnsafe(options.fetchTimeout ?? StatsFetch.defaults.timeout),
      maxBytes: options.maxBodyBytes ?? StatsFetch.defaults.maxBytes
    }
    yield* historyOf(mesh).record(mesh)
    return yield* learn(mesh, {
      ask: (serverId, httpAddr) => StatsFetch.fetchStats(serverId, httpAddr, fetchOptions)
    })
  })
