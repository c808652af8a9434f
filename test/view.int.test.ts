/**
 * The cluster page in a real browser (integration tier): three `queen-mesh node` processes on
 * loopback, the page of one of them in headless Chromium. It shows three nodes and six links up; a
 * node stopped with SIGSTOP is shown down once its peers find it silent past the dead threshold, and
 * up again after SIGCONT; the event list shows it; a hostile server id is drawn as text; the page
 * logs no console error. The screenshot it saves is the one in docs/operating.md: run with
 * `UPDATE_DOCS_SCREENSHOT=1` to write docs/images/cluster.png, otherwise it goes to `.tmp/`.
 *
 * Skipped, saying why, where Chromium is not installed (`.ci/run` installs it).
 */
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { fileURLToPath } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Schedule, Schema } from "effect"
import type { Page } from "playwright-core"
import { launch, missing } from "./fixtures/browser.js"
import { type CliProcess, ensureBuilt, isListening, spawnCli } from "./fixtures/cli.js"
import { freePort } from "./fixtures/cluster.js"
import { dialUpstream } from "./fixtures/upstream.js"

const SECRET = "browser-test-secret"
const DEAD_THRESHOLD_MS = 2000
const root = fileURLToPath(new URL("..", import.meta.url))
const screenshot =
  process.env.UPDATE_DOCS_SCREENSHOT === "1"
    ? `${root}docs/images/cluster.png`
    : `${root}.tmp/view/cluster.png`

/** Generous: CI is a busy two-core machine; every wait is for a condition, never a duration. */
const WITHIN = 45_000

const startNode = (
  id: string,
  port: number,
  http: number,
  peers: ReadonlyArray<number>,
  extra: Readonly<Record<string, string>> = {}
) =>
  Effect.gen(function* () {
    const node = yield* spawnCli(["node", "--quiet"], {
      ...extra,
      QUEEN_SERVER_ID: id,
      QUEEN_MESH_PORT: String(port),
      QUEEN_MESH_BIND_ADDR: "127.0.0.1",
      QUEEN_MESH_HTTP_HOST: "127.0.0.1",
      QUEEN_MESH_HTTP_PORT: String(http),
      // The address its peers fetch its stats from: its own routes.
      QUEEN_MESH_ADVERTISE_HOST: "127.0.0.1",
      PORT: String(http),
      QUEEN_MESH_PEERS: peers.map((p) => `127.0.0.1:${p}`).join(","),
      QUEEN_SYNC_SECRET: SECRET,
      QUEEN_SYNC_HEARTBEAT_MS: "250",
      QUEEN_SYNC_DEAD_THRESHOLD_MS: String(DEAD_THRESHOLD_MS)
    })
    // A stopped node must not outlive the test stopped: SIGKILL takes it either way.
    yield* Effect.addFinalizer(() => Effect.sync(() => node.child.kill("SIGCONT")))
    yield* node.waitForLine(isListening, Duration.seconds(30))
    return node
  })

/** What the page shows, as read in the page: from outside, so decoded. */
const Shown = Schema.Struct({
  nodes: Schema.Array(Schema.Struct({ id: Schema.String, state: Schema.String })),
  links: Schema.Array(Schema.Struct({ from: Schema.String, to: Schema.String, state: Schema.String })),
  rows: Schema.Array(Schema.String),
  events: Schema.Array(Schema.Struct({ tag: Schema.String, text: Schema.String })),
  status: Schema.String,
  wakes: Schema.String,
  images: Schema.Number,
  pwned: Schema.Boolean
})
type Shown = typeof Shown.Type

/** Run in the page by the DevTools protocol (the page's CSP forbids eval to the page's own scripts). */
const READ = `({
  nodes: [...document.querySelectorAll("#graph [data-node]")].map((g) => ({ id: g.dataset.node, state: g.dataset.state })),
  links: [...document.querySelectorAll("#graph path.link")].map((p) => ({ from: p.dataset.from, to: p.dataset.to, state: p.dataset.state })),
  rows: [...document.querySelectorAll("#links tbody tr")].map((row) => row.dataset.state ?? ""),
  events: [...document.querySelectorAll("#events li")].map((li) => ({ tag: li.dataset.tag ?? "", text: li.textContent })),
  status: document.getElementById("status").textContent,
  wakes: document.getElementById("wakes").textContent,
  images: document.querySelectorAll("main img").length,
  pwned: "__pwned" in window
})`

const decodeShown = Schema.decodeUnknownSync(Shown)

/** Polls the page until `predicate` holds of what it shows, bounded; the last reading on failure. */
const until = (page: Page, what: string, predicate: (shown: Shown) => boolean) =>
  Effect.gen(function* () {
    let last: Shown | undefined
    yield* Effect.promise(() => page.evaluate(READ)).pipe(
      Effect.map(decodeShown),
      Effect.tap((shown) =>
        Effect.sync(() => {
          last = shown
        })
      ),
      Effect.repeat({ schedule: Schedule.spaced("100 millis"), until: predicate }),
      Effect.timeoutOrElse({
        duration: Duration.millis(WITHIN),
        orElse: () =>
          Effect.fail(new Error(`the page never showed ${what}; it showed ${JSON.stringify(last, null, 1)}`))
      })
    )
    return last!
  })

const clusterUp = (shown: Shown) =>
  shown.nodes.length === 3 &&
  shown.nodes.every((node) => node.state === "up") &&
  shown.links.length === 6 &&
  shown.links.every((link) => link.state === "linked") &&
  shown.rows.length === 6 &&
  shown.rows.every((state) => state === "linked")

const hasEvent = (tag: string, about: string) => (shown: Shown) =>
  shown.events.some((event) => event.tag === tag && event.text.includes(about))

describe.skipIf(missing !== undefined)("the cluster page in Chromium", () => {
  it.live(
    "three nodes: three nodes and six links up; a stopped node down, then back; events; no console error",
    () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        const ports = [yield* freePort, yield* freePort, yield* freePort]
        const https = [yield* freePort, yield* freePort, yield* freePort]
        const names = ["node-a", "node-b", "node-c"]
        const nodes: Array<CliProcess> = []
        for (const [i, name] of names.entries()) {
          nodes.push(
            yield* startNode(
              name,
              ports[i]!,
              https[i]!,
              ports.filter((_, j) => j !== i)
            )
          )
        }
        const [a, b, c] = nodes as [CliProcess, CliProcess, CliProcess]
        // Pushes on a and b, so the page has wakes to show.
        const push = (node: CliProcess, queue: string) =>
          node.send(JSON.stringify({ op: "message_available", queue, partition: "p0" }))
        yield* Effect.forkScoped(
          Effect.repeat(Effect.andThen(push(a, "orders"), push(b, "emails")), Schedule.spaced("150 millis"))
        )

        const context = yield* launch()
        const page = yield* Effect.promise(() => context.newPage())
        const problems: Array<string> = []
        page.on("console", (message) => {
          if (message.type() === "error" || message.type() === "warning")
            problems.push(`console ${message.type()}: ${message.text()}`)
        })
        page.on("pageerror", (error) => problems.push(`page error: ${error.message}`))
        page.on("requestfailed", (request) => {
          // The event stream is ended by the node when the test closes the page; nothing else may fail.
          if (!request.url().endsWith("/cluster/events"))
            problems.push(`request failed: ${request.url()} ${request.failure()?.errorText}`)
        })
        page.on("request", (request) => {
          if (
            !request.url().startsWith(`http://127.0.0.1:${https[0]}/`) &&
            !request.url().startsWith("data:")
          )
            problems.push(`request to another origin: ${request.url()}`)
        })
        yield* Effect.promise(() => page.goto(`http://127.0.0.1:${https[0]}/cluster`))
        assert.strictEqual(page.url(), `http://127.0.0.1:${https[0]}/cluster/`)

        const up = yield* until(page, "three nodes and six links up", clusterUp)
        assert.strictEqual(up.status, "3 nodes, 6 links up")

        // Stopped: its peers find it silent past the dead threshold, and its stats do not answer.
        const stoppedAt = Date.now()
        c.child.kill("SIGSTOP")
        // First its stats stop answering (no_answer), then its peers find it silent (down).
        yield* until(page, "node-c in trouble", (shown) =>
          shown.nodes.some((node) => node.id === "node-c" && node.state !== "up")
        )
        const shownTroubledAfter = Date.now() - stoppedAt
        yield* until(page, "node-c down", (shown) =>
          shown.nodes.some((node) => node.id === "node-c" && node.state === "down")
        )
        const shownDownAfter = Date.now() - stoppedAt
        yield* until(page, "the links from node-c down", (shown) =>
          shown.links.every((link) => link.from !== "node-c" || link.state === "down")
        )
        yield* until(page, "node-c's PeerDown in the event list", hasEvent("PeerDown", "node-c"))
        const card = yield* Effect.promise(() => page.textContent('#nodes [data-node="node-c"]'))
        assert.include(card ?? "", "dead")

        c.child.kill("SIGCONT")
        yield* until(page, "the cluster whole again", clusterUp)
        yield* until(page, "node-c's PeerUp in the event list", hasEvent("PeerUp", "node-c"))
        yield* until(
          page,
          "wakes received",
          (shown) => /^received \d/.test(shown.wakes) && !/^received 0\.00\//.test(shown.wakes)
        )
        mkdirSync(dirname(screenshot), { recursive: true })
        yield* Effect.promise(() => page.screenshot({ path: screenshot, fullPage: true }))

        // An upstream-style replica dials node-a with a server id made to break out of the page: it is
        // drawn (from node-a's own view: it announces no address), as text.
        const hostile = `<img src=x onerror="window.__pwned=1">`
        const intruder = yield* dialUpstream({
          port: ports[0]!,
          serverId: hostile,
          secret: SECRET,
          advertise: false
        })
        yield* intruder.startHeartbeats(250)
        const after = yield* until(page, "the upstream replica as a fourth node", (shown) =>
          shown.nodes.some((node) => node.id === hostile && node.state === "up")
        )
        assert.deepStrictEqual([after.pwned, after.images], [false, 0])

        assert.deepStrictEqual(problems, [])
        console.log(
          `node-c shown in trouble ${shownTroubledAfter} ms and down ${shownDownAfter} ms after SIGSTOP (dead threshold ${DEAD_THRESHOLD_MS} ms)`
        )
      }),
    120_000
  )
})

describe.skipIf(missing !== undefined)("the cluster page in Chromium, first opened after a death", () => {
  it.live(
    "node-b SIGKILLed before anyone opened node-c's page: three nodes, node-b by its name, down",
    () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        const ports = [yield* freePort, yield* freePort, yield* freePort]
        const https = [yield* freePort, yield* freePort, yield* freePort]
        const names = ["node-a", "node-b", "node-c"]
        const nodes: Array<CliProcess> = []
        // Every node lists all three (itself included), by loopback port, in the default (legacy)
        // auth: only a peer's own stats say which of those addresses it is.
        for (const [i, name] of names.entries())
          nodes.push(yield* startNode(name, ports[i]!, https[i]!, ports, { QUEEN_MESH_LOG_LEVEL: "debug" }))
        const [, b, c] = nodes as [CliProcess, CliProcess, CliProcess]
        // node-c has heard node-a and node-b and asked each which address is its own; nobody has opened
        // a page yet. (Waiting for node-b's alone left node-a shown by its address on a loaded machine.)
        for (const peer of ["node-a", "node-b"])
          yield* c.waitForStderr(
            (stderr) => new RegExp(`cluster page: peer's addresses learnt.*peer=${peer}\\b`).test(stderr),
            Duration.millis(WITHIN)
          )
        b.child.kill("SIGKILL")

        const context = yield* launch()
        const page = yield* Effect.promise(() => context.newPage())
        yield* Effect.promise(() => page.goto(`http://127.0.0.1:${https[2]}/cluster/`))
        // Waited for whole: on a loaded machine node-c's poll of node-a's stats can go unanswered a while,
        // and node-a is shown `no_answer` (in trouble) beside node-b until it answers again.
        const shown = yield* until(
          page,
          "node-b down among three nodes, the only one in trouble, its links down",
          (shown) =>
            shown.nodes.some((node) => node.id === "node-b" && node.state === "down") &&
            /^1 node\(s\) in trouble/.test(shown.status) &&
            shown.links
              .filter((link) => link.from === "node-b" || link.to === "node-b")
              .every((link) => link.state === "down")
        )
        assert.deepStrictEqual(
          shown.nodes.map((node) => node.id),
          ["node-c", "node-a", "node-b"]
        )
        const card = yield* Effect.promise(() => page.textContent('#nodes [data-node="node-b"]'))
        assert.notInclude(card ?? "", "no stats address announced")
        assert.include(card ?? "", "unreachable")
        // What happened before the page was opened is listed too: node-b heard, then dead.
        yield* until(page, "node-b's PeerDown in the event list", hasEvent("PeerDown", "node-b"))
        yield* until(page, "node-b's PeerUp in the event list", hasEvent("PeerUp", "node-b"))
      }),
    120_000
  )
})

if (missing !== undefined) {
  console.warn(`test/view.int.test.ts is skipped: ${missing}`)
  describe("the cluster page in Chromium", () => {
    it.skip(`skipped: ${missing}`, () => {})
  })
}
