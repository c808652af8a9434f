/**
 * The cluster page over real loopback HTTP: its files, the view of three nodes each serving its routes,
 * the event stream, and the fetch of peers' stats under the hostile cases (a peer whose stats route is
 * slow, down, garbage, huge, a redirect, another node's; an announced address with a path, credentials
 * or another scheme; a browser's query and headers). In every case the view answers, the node keeps
 * running, and nothing but the stats path of an announced address is ever requested.
 */

import { readdirSync, readFileSync, statSync } from "node:fs"
import * as Http from "node:http"
import { assert, describe, it } from "@effect/vitest"
import { Deferred, Duration, Effect, Exit, Fiber, Schema, Scope } from "effect"
import * as HttpEffect from "effect/http/HttpEffect"
import * as ClusterView from "../src/ClusterView.js"
import * as HttpRoutes from "../src/HttpRoutes.js"
import * as PeerBook from "../src/internal/view/peerBook.js"
import * as Mesh from "../src/Mesh.js"
import { upstreamActive } from "./fixtures/cli.js"
import { allConnected, eventually, freePort, hearsFrom, type Node, tcpNode } from "./fixtures/cluster.js"
import { dialUpstream, listenUpstream } from "./fixtures/upstream.js"

const decodeView = Schema.decodeUnknownSync(ClusterView.View)
const statsPath = HttpRoutes.paths.sharedStateStats

// ---------------------------------------------------------------------------------------------
// fixtures
// ---------------------------------------------------------------------------------------------

interface Seen {
  readonly method: string
  readonly url: string
  readonly headers: Http.IncomingHttpHeaders
}

/** An HTTP server on 127.0.0.1 that answers with `handler` and records every request it gets. */
const fakeServer = (handler: (request: Http.IncomingMessage, response: Http.ServerResponse) => void) =>
  Effect.acquireRelease(
    Effect.callback<{ readonly port: number; readonly seen: Array<Seen>; readonly server: Http.Server }>(
      (resume) => {
        const seen: Array<Seen> = []
        const server = Http.createServer((request, response) => {
          seen.push({ method: request.method ?? "", url: request.url ?? "", headers: request.headers })
          handler(request, response)
        })
        server.listen(0, "127.0.0.1", () => {
          const address = server.address()
          resume(
            Effect.succeed({ port: typeof address === "object" && address ? address.port : 0, seen, server })
          )
        })
      }
    ),
    ({ server }) =>
      Effect.callback<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

/** A node on loopback that serves its routes, announcing them in its HELLO. */
const servedNode = (options: {
  readonly serverId: string
  readonly port: number
  readonly httpPort: number
  readonly peers: ReadonlyArray<number>
  readonly cluster?: HttpRoutes.RouterOptions["cluster"]
}) =>
  Effect.gen(function* () {
    const node = yield* tcpNode({
      serverId: options.serverId,
      port: options.port,
      peers: options.peers,
      config: {
        advertiseHost: "127.0.0.1",
        httpPort: options.httpPort,
        heartbeatInterval: Duration.millis(200),
        deadThreshold: Duration.seconds(2)
      }
    })
    yield* HttpRoutes.serve({
      host: "127.0.0.1",
      port: options.httpPort,
      ...(options.cluster === undefined ? {} : { cluster: options.cluster })
    }).pipe(Effect.provideService(Mesh.Mesh, node.mesh))
    return node
  })

const get = (url: string, init: RequestInit = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, { redirect: "manual", ...init })
    return { status: response.status, headers: response.headers, body: await response.text() }
  })

const viewAt = (httpPort: number, query = "", init: RequestInit = {}) =>
  Effect.map(get(`http://127.0.0.1:${httpPort}${ClusterView.paths.view}${query}`, init), (response) => {
    assert.strictEqual(response.status, 200, response.body)
    return decodeView(JSON.parse(response.body))
  })

const nodeOf = (view: ClusterView.View, id: string) => view.nodes.find((node) => node.id === id)

/**
 * Node `a` with an honest upstream-style listener as its one configured peer (so its mesh runs), its
 * routes served with a short refresh, and a peer `evil` that dials it announcing `httpAddr`.
 */
const withAnnouncedPeer = (
  httpAddr: string,
  cluster: Omit<NonNullable<Exclude<HttpRoutes.RouterOptions["cluster"], false>>, never> = {}
) =>
  Effect.gen(function* () {
    const upstream = yield* listenUpstream()
    const [port, httpPort] = [yield* freePort, yield* freePort]
    const a = yield* servedNode({
      serverId: "a",
      port,
      httpPort,
      peers: [upstream.port],
      cluster: { refreshInterval: Duration.millis(20), fetchTimeout: Duration.millis(500), ...cluster }
    })
    const evil = yield* dialUpstream({ port, serverId: "evil", hello: { http_addr: httpAddr } })
    yield* evil.startHeartbeats(200)
    yield* eventually(
      Effect.map(a.mesh.members, (members) =>
        members.some((member) => member.serverId._tag === "Some" && member.serverId.value === "evil")
      )
    )
    return { a, httpPort }
  })

/** Waits until the view shows `evil` with a fetch status other than `pending`, and returns it. */
const evilSettles = (httpPort: number, expected: ClusterView.FetchStatus) =>
  Effect.gen(function* () {
    let last: ClusterView.View | undefined
    yield* eventually(
      Effect.map(viewAt(httpPort), (view) => {
        last = view
        return nodeOf(view, "evil")?.fetch.status === expected
      }),
      "15 seconds"
    ).pipe(
      Effect.mapError(
        () => new Error(`evil never showed ${expected}: ${JSON.stringify(last?.nodes, null, 1)}`)
      )
    )
    return last!
  })

/** Nodes a, b and c on loopback, each serving its routes in a scope of its own (close one: a crash). */
const threeServed = Effect.gen(function* () {
  const ports = [yield* freePort, yield* freePort, yield* freePort]
  const httpPorts = [yield* freePort, yield* freePort, yield* freePort]
  const scopes = [yield* Scope.make(), yield* Scope.make(), yield* Scope.make()]
  yield* Effect.addFinalizer(() => Effect.forEach(scopes, (scope) => Scope.close(scope, Exit.void)))
  const nodes: Array<Node> = []
  for (const [i, name] of ["a", "b", "c"].entries()) {
    const node = yield* servedNode({
      serverId: name,
      port: ports[i]!,
      httpPort: httpPorts[i]!,
      peers: ports,
      cluster: { refreshInterval: Duration.millis(200) }
    }).pipe(Scope.provide(scopes[i]!))
    nodes.push(node)
  }
  return { nodes, scopes, ports, httpPorts }
})

/** The node keeps running: its mesh answers and its link to its configured peer is up. */
const stillRunning = (node: Node) =>
  Effect.gen(function* () {
    yield* eventually(allConnected(node))
    const stats = yield* node.mesh.stats
    assert.isTrue(stats.enabled && stats.running)
  })

// ---------------------------------------------------------------------------------------------
// the page
// ---------------------------------------------------------------------------------------------

const viewDir = new URL("../src/view/", import.meta.url)
const viewFiles = readdirSync(viewDir)

describe("the cluster page's files", () => {
  it("are plain HTML, CSS and script, under 60 KB together", () => {
    assert.deepStrictEqual(viewFiles.sort(), ["cluster.css", "cluster.html", "cluster.js"])
    const bytes = viewFiles.reduce((sum, file) => sum + statSync(new URL(file, viewDir)).size, 0)
    assert.isBelow(bytes, 60 * 1024, `the page weighs ${bytes} bytes`)
  })

  it("name nothing on another origin: every reference is relative", () => {
    for (const file of viewFiles) {
      const text = readFileSync(new URL(file, viewDir), "utf8")
      // The one absolute URL is SVG's namespace, an identifier never fetched.
      const urls = [...text.matchAll(/(?:https?:)?\/\/[a-z0-9.-]+\.[a-z]{2,}[^\s"'`)]*/gi)].map((m) => m[0])
      assert.deepStrictEqual(
        urls.filter((url) => url !== "http://www.w3.org/2000/svg"),
        [],
        file
      )
      assert.notMatch(text, /@import|url\(\s*["']?(?!#)/, file)
    }
    const html = readFileSync(new URL("cluster.html", viewDir), "utf8")
    const refs = [...html.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1])
    assert.deepStrictEqual(refs, ["data:,", "cluster.css", "cluster.js"])
  })
})

describe("ClusterView routes", () => {
  it.live("serve the page and its files from this origin only, and redirect /cluster to it", () =>
    Effect.gen(function* () {
      const [port, httpPort] = [yield* freePort, yield* freePort]
      yield* servedNode({ serverId: "solo-page", port, httpPort, peers: [] })
      const base = `http://127.0.0.1:${httpPort}`
      const bare = yield* get(`${base}/cluster`)
      assert.strictEqual(bare.status, 308)
      assert.strictEqual(bare.headers.get("location"), "cluster/")
      const page = yield* get(`${base}/cluster/`)
      assert.strictEqual(page.status, 200)
      assert.strictEqual(page.headers.get("content-type"), "text/html; charset=utf-8")
      assert.include(page.headers.get("content-security-policy") ?? "", "default-src 'none'")
      assert.include(page.headers.get("content-security-policy") ?? "", "connect-src 'self'")
      assert.strictEqual(page.headers.get("x-content-type-options"), "nosniff")
      assert.include(page.body, "queen-mesh cluster")
      for (const [path, type] of [
        [ClusterView.paths.script, "text/javascript; charset=utf-8"],
        [ClusterView.paths.style, "text/css; charset=utf-8"]
      ] as const) {
        const asset = yield* get(`${base}${path}`)
        assert.strictEqual(asset.status, 200, path)
        assert.strictEqual(asset.headers.get("content-type"), type)
      }
      // An inactive mesh still has a page: one node, no links.
      const view = yield* viewAt(httpPort)
      assert.deepStrictEqual(
        view.nodes.map((node) => [node.id, node.state, node.stats?.enabled]),
        [["solo-page", "up", false]]
      )
      assert.deepStrictEqual(view.links, [])
    })
  )

  it.live("are off where the routes are off, and with `cluster: false`", () =>
    Effect.gen(function* () {
      const [port, httpPort] = [yield* freePort, yield* freePort]
      const node = yield* servedNode({ serverId: "no-page", port, httpPort, peers: [], cluster: false })
      for (const path of Object.values(ClusterView.paths)) {
        const response = yield* get(`http://127.0.0.1:${httpPort}${path}`)
        assert.strictEqual(response.status, 404, path)
      }
      // A host that mounts only its own routes has no page either.
      const handler = HttpEffect.toWebHandler(
        HttpRoutes.makeApp({ cluster: false }).pipe(Effect.provideService(Mesh.Mesh, node.mesh))
      )
      const response = yield* Effect.promise(() => handler(new Request("http://x/cluster/view.json")))
      assert.strictEqual(response.status, 404)
    })
  )

  it.live("three nodes, each serving its routes: the view on any one shows three nodes and six links", () =>
    Effect.gen(function* () {
      const ports = [yield* freePort, yield* freePort, yield* freePort]
      const httpPorts = [yield* freePort, yield* freePort, yield* freePort]
      const names = ["a", "b", "c"]
      for (const [i, name] of names.entries()) {
        yield* servedNode({
          serverId: name,
          port: ports[i]!,
          httpPort: httpPorts[i]!,
          peers: ports.filter((_, j) => j !== i),
          cluster: { refreshInterval: Duration.millis(50) }
        })
      }
      for (const httpPort of httpPorts) {
        let last: ClusterView.View | undefined
        yield* eventually(
          Effect.map(viewAt(httpPort), (view) => {
            last = view
            return (
              view.nodes.length === 3 &&
              view.nodes.every((node) => node.state === "up") &&
              view.links.length === 6 &&
              view.links.every((link) => link.state === "linked" && link.seen_by === "both")
            )
          }),
          "20 seconds"
        ).pipe(Effect.mapError(() => new Error(JSON.stringify(last, null, 1))))
        assert.deepStrictEqual(last!.nodes.map((node) => node.id).sort(), ["a", "b", "c"])
        assert.isTrue(last!.nodes.every((node) => node.fetch.status === "self" || node.fetch.status === "ok"))
      }
    })
  )

  it.live(
    "a peer killed before the page is ever opened: the first views show three nodes, the dead one down by its name",
    () =>
      Effect.gen(function* () {
        // Peers listed by loopback port, legacy auth: only a peer's own stats say which address it is.
        const { nodes, scopes, ports, httpPorts } = yield* threeServed
        const c = nodes[2]!
        yield* eventually(hearsFrom(c, 2))
        // c asks each server it hears at once; b answers while it is up.
        const book = PeerBook.bookOf(c.mesh)
        yield* eventually(Effect.sync(() => [...book.addresses.values()].includes("b")))
        yield* Scope.close(scopes[1]!, Exit.void)
        // The first view of c's page, and the next ones: three nodes, b among them, until it shows down.
        const seen: Array<ReadonlyArray<string>> = []
        let last: ClusterView.View | undefined
        yield* eventually(
          Effect.map(viewAt(httpPorts[2]!), (view) => {
            last = view
            seen.push(view.nodes.map((node) => node.id))
            return nodeOf(view, "b")?.state === "down"
          }),
          "20 seconds"
        ).pipe(Effect.mapError(() => new Error(`b never shown down: ${JSON.stringify(last, null, 1)}`)))
        for (const ids of seen) assert.deepStrictEqual(ids, ["c", "a", "b"])
        const b = nodeOf(last!, "b")!
        assert.strictEqual(b.address, `127.0.0.1:${ports[1]}`)
        assert.strictEqual(b.fetch.status, "unreachable")
        for (const link of last!.links.filter((link) => link.from === "b" || link.to === "b"))
          assert.notStrictEqual(link.state, "linked", `${link.from}->${link.to}`)
      })
  )

  it.live("an event stream opened after a peer died begins with what happened before", () =>
    Effect.gen(function* () {
      const { nodes, scopes, httpPorts } = yield* threeServed
      const c = nodes[2]!
      yield* eventually(hearsFrom(c, 2))
      yield* Scope.close(scopes[1]!, Exit.void)
      yield* eventually(
        Effect.map(c.mesh.stats, (stats) =>
          stats.enabled ? stats.servers.some((s) => s.server_id === "b" && !s.alive) : false
        )
      )
      // Nobody listened while b died: the first stream opened since still lists it, oldest first.
      const controller = new AbortController()
      yield* Effect.addFinalizer(() => Effect.sync(() => controller.abort()))
      const response = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${httpPorts[2]}${ClusterView.paths.events}`, { signal: controller.signal })
      )
      const reader = response.body!.getReader()
      let text = ""
      yield* Effect.promise(() => reader.read()).pipe(
        Effect.map((chunk) => {
          text += new TextDecoder().decode(chunk.value ?? new Uint8Array())
          return chunk.done
        }),
        Effect.repeat({ until: (done) => done || text.includes('"PeerDown"') }),
        Effect.timeoutOrElse({
          duration: "20 seconds",
          orElse: () => Effect.fail(new Error(`no PeerDown in\n${text}`))
        })
      )
      const events = text
        .split("\n\n")
        .filter((message) => message.startsWith("data: "))
        .flatMap(
          (message) =>
            Schema.decodeUnknownSync(Schema.fromJsonString(ClusterView.EventBatch))(message.slice(6)).events
        )
      const down = events.findIndex((event) => event.tag === "PeerDown" && event.subject === "b")
      const up = events.findIndex((event) => event.tag === "PeerUp" && event.subject === "b")
      assert.isAtLeast(down, 0)
      assert.isTrue(up >= 0 && up < down, "b's PeerUp, then its PeerDown")
    })
  )

  it.live("the event stream lists a peer going down, as server-sent events", () =>
    Effect.gen(function* () {
      const [pa, pb, ha, hb] = [yield* freePort, yield* freePort, yield* freePort, yield* freePort]
      yield* servedNode({ serverId: "a", port: pa, httpPort: ha, peers: [pb] })
      const bScope = yield* Scope.make()
      const b = yield* servedNode({ serverId: "b", port: pb, httpPort: hb, peers: [pa] }).pipe(
        Scope.provide(bScope)
      )
      yield* eventually(allConnected(b))
      const controller = new AbortController()
      yield* Effect.addFinalizer(() => Effect.sync(() => controller.abort()))
      const response = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${ha}${ClusterView.paths.events}`, { signal: controller.signal })
      )
      assert.strictEqual(response.status, 200)
      assert.strictEqual(response.headers.get("content-type"), "text/event-stream")
      const reader = response.body!.getReader()
      let text = ""
      const read = Effect.promise(() => reader.read()).pipe(
        Effect.map((chunk) => {
          text += new TextDecoder().decode(chunk.value ?? new Uint8Array())
          return chunk.done
        })
      )
      yield* read
      yield* Scope.close(bScope, Exit.void)
      yield* read.pipe(
        Effect.repeat({ until: () => text.includes('"PeerDown"') }),
        Effect.timeoutOrElse({
          duration: "20 seconds",
          orElse: () => Effect.fail(new Error(`no PeerDown in\n${text}`))
        })
      )
      const batches = text
        .split("\n\n")
        .filter((message) => message.startsWith("data: "))
        .map((message) =>
          Schema.decodeUnknownSync(Schema.fromJsonString(ClusterView.EventBatch))(message.slice(6))
        )
      const events = batches.flatMap((batch) => batch.events)
      assert.isTrue(
        events.some((event) => event.tag === "PeerDown" && event.subject === "b" && event.tone === "bad")
      )
    })
  )

  it.live(
    "event streams are capped; one over the cap is a 503, the routes still answer, one ends in time",
    () =>
      Effect.gen(function* () {
        const [port, httpPort] = [yield* freePort, yield* freePort]
        yield* servedNode({
          serverId: "capped",
          port,
          httpPort,
          peers: [],
          cluster: { maxStreams: 2, streamLifetime: Duration.seconds(2) }
        })
        const url = `http://127.0.0.1:${httpPort}${ClusterView.paths.events}`
        const controller = new AbortController()
        yield* Effect.addFinalizer(() => Effect.sync(() => controller.abort()))
        const open = () => Effect.promise(() => fetch(url, { signal: controller.signal }))
        const first = yield* open()
        const second = yield* open()
        assert.deepStrictEqual([first.status, second.status], [200, 200])
        const third = yield* get(url)
        assert.strictEqual(third.status, 503)
        assert.strictEqual((yield* get(`http://127.0.0.1:${httpPort}/healthz`)).status, 200)
        // A stream ends after its lifetime (the page reconnects), and its place is free again.
        const reader = first.body!.getReader()
        yield* Effect.promise(() => reader.read()).pipe(
          Effect.repeat({ until: (chunk) => chunk.done }),
          Effect.timeout("20 seconds")
        )
        yield* eventually(
          Effect.map(
            Effect.promise(() => fetch(url, { signal: controller.signal })),
            (r) => r.status === 200
          )
        )
      })
  )

  it.live("a node with an event stream open still stops at once when its scope closes", () =>
    Effect.gen(function* () {
      const [port, httpPort] = [yield* freePort, yield* freePort]
      const scope = yield* Scope.make()
      yield* servedNode({ serverId: "stopping", port, httpPort, peers: [] }).pipe(Scope.provide(scope))
      const response = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${httpPort}${ClusterView.paths.events}`)
      )
      assert.strictEqual(response.status, 200)
      const reader = response.body!.getReader()
      yield* Effect.promise(() => reader.read())
      // Before, the server's close waited for the stream, and the stream for the mesh that the scope
      // would close next: the node never stopped.
      yield* Scope.close(scope, Exit.void).pipe(Effect.timeout("10 seconds"))
      const ended = yield* Effect.promise(() =>
        reader.read().then(
          (c) => c.done,
          () => true
        )
      )
      assert.isTrue(ended)
    })
  )
})

// ---------------------------------------------------------------------------------------------
// the fetch, and hostile peers
// ---------------------------------------------------------------------------------------------

describe("ClusterView's fetch of peers' stats", () => {
  it.live("a peer whose stats route never answers: no_answer, within the fetch timeout", () =>
    Effect.gen(function* () {
      const hang = yield* fakeServer(() => {})
      const { a, httpPort } = yield* withAnnouncedPeer(`http://127.0.0.1:${hang.port}`)
      const view = yield* evilSettles(httpPort, "timeout")
      assert.strictEqual(nodeOf(view, "evil")?.state, "no_answer")
      assert.deepStrictEqual(
        hang.seen.map((s) => s.url),
        hang.seen.map(() => statsPath)
      )
      yield* stillRunning(a)
    })
  )

  it.live("a peer that trickles its answer is cut off at the deadline", () =>
    Effect.gen(function* () {
      const timers = new Set<ReturnType<typeof setInterval>>()
      yield* Effect.addFinalizer(() => Effect.sync(() => timers.forEach(clearInterval)))
      const trickle = yield* fakeServer((_, response) => {
        response.writeHead(200, { "content-type": "application/json" })
        response.write("{")
        const timer = setInterval(() => response.write(" "), 50)
        timers.add(timer)
        response.on("close", () => clearInterval(timer))
      })
      const { a, httpPort } = yield* withAnnouncedPeer(`127.0.0.1:${trickle.port}`)
      yield* evilSettles(httpPort, "timeout")
      yield* stillRunning(a)
    })
  )

  it.live("a peer whose stats route is down: unreachable", () =>
    Effect.gen(function* () {
      const closed = yield* freePort
      const { a, httpPort } = yield* withAnnouncedPeer(`http://127.0.0.1:${closed}`)
      const view = yield* evilSettles(httpPort, "unreachable")
      assert.strictEqual(nodeOf(view, "evil")?.fetch.detail, "ECONNREFUSED")
      yield* stillRunning(a)
    })
  )

  it.live("garbage: not JSON, JSON that is not a stats body, upstream's body; nothing of it is shown", () =>
    Effect.gen(function* () {
      for (const [body, expected] of [
        ["<html>secret admin page</html>", "not_json"],
        ['{"enabled":"yes","secret":"s3"}', "not_stats"],
        [JSON.stringify(upstreamActive), "not_stats"],
        ["\xff\xfe garbage", "not_json"]
      ] as const) {
        const scope = yield* Scope.make()
        const garbage = yield* fakeServer((_, response) => {
          response.writeHead(200, { "content-type": "application/json" })
          response.end(body)
        }).pipe(Scope.provide(scope))
        const { a, httpPort } = yield* withAnnouncedPeer(`http://127.0.0.1:${garbage.port}`).pipe(
          Scope.provide(scope)
        )
        const view = yield* evilSettles(httpPort, expected).pipe(Scope.provide(scope))
        const text = JSON.stringify(view)
        assert.notInclude(text, "secret", "nothing of a body that does not decode reaches the page")
        // A peer with nothing of ours to read is shown from this node's own view.
        assert.strictEqual(nodeOf(view, "evil")?.state, expected === "not_stats" ? "up" : "no_answer")
        yield* stillRunning(a)
        yield* Scope.close(scope, Exit.void)
      }
    })
  )

  it.live("a huge answer is cut off at the size bound, declared or not", () =>
    Effect.gen(function* () {
      const chunk = Buffer.alloc(64 * 1024, 0x20)
      const huge = yield* fakeServer((request, response) => {
        if (request.url?.includes("declared") === true) {
          response.writeHead(200, { "content-length": String(10 * 1024 * 1024 * 1024) })
          return response.write("{")
        }
        response.writeHead(200)
        let sent = 0
        const more = () => {
          while (sent < 1000 && response.write(chunk)) sent++
          if (sent < 1000) response.once("drain", more)
          else response.end()
        }
        more()
      })
      const { a, httpPort } = yield* withAnnouncedPeer(`http://127.0.0.1:${huge.port}`, {
        maxBodyBytes: 256 * 1024
      })
      const view = yield* evilSettles(httpPort, "too_large")
      assert.include(nodeOf(view, "evil")?.fetch.detail ?? "", "262144")
      yield* stillRunning(a)
    })
  )

  it.live("a redirect is not followed: the place it points at is never asked", () =>
    Effect.gen(function* () {
      const target = yield* fakeServer((_, response) => response.end("{}"))
      const redirect = yield* fakeServer((_, response) => {
        response.writeHead(302, { location: `http://127.0.0.1:${target.port}${statsPath}` })
        response.end()
      })
      const { a, httpPort } = yield* withAnnouncedPeer(`http://127.0.0.1:${redirect.port}`)
      const view = yield* evilSettles(httpPort, "status")
      assert.strictEqual(nodeOf(view, "evil")?.fetch.detail, "answered 302")
      assert.isAbove(redirect.seen.length, 0)
      assert.deepStrictEqual(target.seen, [])
      yield* stillRunning(a)
    })
  )

  it.live("an address that serves another node's stats is not taken for the peer's", () =>
    Effect.gen(function* () {
      const [port, httpPort] = [yield* freePort, yield* freePort]
      // A real node `other`, whose routes the evil peer announces as its own.
      const upstream = yield* listenUpstream()
      yield* servedNode({ serverId: "other", port, httpPort, peers: [upstream.port] })
      const { a, httpPort: viewPort } = yield* withAnnouncedPeer(`http://127.0.0.1:${httpPort}`)
      const view = yield* evilSettles(viewPort, "other_node")
      assert.isNull(nodeOf(view, "evil")?.stats)
      assert.isUndefined(nodeOf(view, "other"), "the other node's body is not shown as anyone's")
      yield* stillRunning(a)
    })
  )

  it.live("an announced address with a path, a query, credentials or another scheme is never requested", () =>
    Effect.gen(function* () {
      const trap = yield* fakeServer((_, response) => response.end("{}"))
      for (const address of [
        `http://127.0.0.1:${trap.port}/admin`,
        `http://127.0.0.1:${trap.port}/?next=/admin`,
        `http://127.0.0.1:${trap.port}#x`,
        `http://user:pw@127.0.0.1:${trap.port}`,
        `ftp://127.0.0.1:${trap.port}`,
        `file:///etc/passwd`,
        `127.0.0.1:${trap.port}\r\nHost: evil`
      ]) {
        const scope = yield* Scope.make()
        const { httpPort } = yield* withAnnouncedPeer(address).pipe(Scope.provide(scope))
        yield* evilSettles(httpPort, "bad_address").pipe(Scope.provide(scope))
        yield* Scope.close(scope, Exit.void)
      }
      assert.deepStrictEqual(trap.seen, [])
    })
  )

  it.live(
    "a browser's query and headers reach no request: only the stats path, with the node's own headers",
    () =>
      Effect.gen(function* () {
        const trap = yield* fakeServer((_, response) => response.end("{}"))
        const peer = yield* fakeServer((_, response) => response.end("{}"))
        const { httpPort } = yield* withAnnouncedPeer(`http://127.0.0.1:${peer.port}`)
        const elsewhere = `http://127.0.0.1:${trap.port}/`
        yield* viewAt(
          httpPort,
          `?url=${encodeURIComponent(elsewhere)}&peer=${encodeURIComponent(elsewhere)}&http_addr=${encodeURIComponent(elsewhere)}`,
          {
            headers: {
              cookie: "session=browser",
              authorization: "Bearer browser",
              "x-forwarded-host": `127.0.0.1:${trap.port}`,
              "x-forwarded-for": "127.0.0.1"
            }
          }
        )
        yield* evilSettles(httpPort, "not_stats")
        assert.deepStrictEqual(trap.seen, [])
        assert.isAbove(peer.seen.length, 0)
        for (const request of peer.seen) {
          assert.strictEqual(request.method, "GET")
          assert.strictEqual(request.url, statsPath)
          assert.deepStrictEqual(Object.keys(request.headers).sort(), [
            "accept",
            "connection",
            "host",
            "user-agent"
          ])
          assert.match(request.headers["user-agent"] ?? "", /^queen-mesh\/\S+ cluster-view$/)
        }
      })
  )

  it.live("however many pages poll, a peer is asked at most once per refresh interval", () =>
    Effect.gen(function* () {
      const release = yield* Deferred.make<void>()
      const peer = yield* fakeServer((_, response) => {
        Effect.runFork(
          Effect.andThen(
            Deferred.await(release),
            Effect.sync(() => response.end("{}"))
          )
        )
      })
      const { httpPort } = yield* withAnnouncedPeer(`http://127.0.0.1:${peer.port}`, {
        refreshInterval: Duration.hours(1),
        fetchTimeout: Duration.seconds(20)
      })
      const polls = yield* Effect.forkScoped(
        Effect.forEach(Array.from({ length: 20 }), () => viewAt(httpPort), { concurrency: "unbounded" })
      )
      yield* eventually(Effect.sync(() => peer.seen.length > 0))
      yield* Deferred.succeed(release, undefined)
      const views = yield* Fiber.join(polls)
      yield* Effect.forEach(Array.from({ length: 10 }), () => viewAt(httpPort))
      assert.strictEqual(views.length, 20)
      // Thirty views, one request for them; and the one question the node asked on hearing the peer
      // (`learnPeers`: its "{}" is no stats body, which asking again would not mend, so never again).
      yield* eventually(Effect.sync(() => peer.seen.length >= 2))
      yield* Effect.forEach(Array.from({ length: 10 }), () => viewAt(httpPort))
      assert.strictEqual(peer.seen.length, 2)
    })
  )

  it.live("peers running upstream's mesh are shown from this node's own view, without errors", () =>
    Effect.gen(function* () {
      const upstreamBroker = yield* fakeServer((_, response) => {
        response.writeHead(200, { "content-type": "application/json" })
        response.end(JSON.stringify(upstreamActive))
      })
      const listener = yield* listenUpstream({ serverId: "queen-1" })
      const [port, httpPort] = [yield* freePort, yield* freePort]
      yield* servedNode({
        serverId: "ours",
        port,
        httpPort,
        peers: [listener.port],
        cluster: { refreshInterval: Duration.millis(20) }
      })
      // Two upstream replicas dial in: one of the revision before HELLO v2 (no http_addr), one that
      // announces its broker's routes, which answer upstream's body.
      const old = yield* dialUpstream({ port, serverId: "queen-2", advertise: false })
      const v2 = yield* dialUpstream({
        port,
        serverId: "queen-3",
        hello: { http_addr: `http://127.0.0.1:${upstreamBroker.port}` }
      })
      yield* old.startHeartbeats(200)
      yield* v2.startHeartbeats(200)
      let last: ClusterView.View | undefined
      yield* eventually(
        Effect.map(viewAt(httpPort), (view) => {
          last = view
          return (
            nodeOf(view, "queen-2")?.fetch.status === "no_address" &&
            nodeOf(view, "queen-3")?.fetch.status === "not_stats"
          )
        }),
        "15 seconds"
      ).pipe(Effect.mapError(() => new Error(JSON.stringify(last, null, 1))))
      const view = last!
      assert.deepStrictEqual(
        view.nodes.map((node) => [node.id, node.state]),
        [
          ["ours", "up"],
          ["queen-2", "up"],
          ["queen-3", "up"],
          [`127.0.0.1:${listener.port}`, "up"]
        ]
      )
      assert.deepStrictEqual(
        view.links.map((link) => [link.from, link.to, link.state, link.seen_by]),
        [
          ["ours", `127.0.0.1:${listener.port}`, "linked", "dialer"],
          ["queen-2", "ours", "linked", "receiver"],
          ["queen-3", "ours", "linked", "receiver"]
        ]
      )
    })
  )
})
