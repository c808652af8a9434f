/**
 * `queen-mesh demo` (`npm start`) with its cluster page: the demo prints the page's address, the page
 * shows node-c cut off and healed, and `--keep` keeps the cluster and the page up after the summary,
 * cutting node-c off again every cycle, until SIGINT (exit 0).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Schema } from "effect"
import * as ClusterView from "../src/ClusterView.js"
import { ensureBuilt, runCli, spawnCli } from "./fixtures/cli.js"
import { eventually } from "./fixtures/cluster.js"

const decodeView = Schema.decodeUnknownSync(Schema.fromJsonString(ClusterView.View))

const view = (page: string) =>
  Effect.promise(async () => {
    const response = await fetch(`${page}view.json`)
    return decodeView(await response.text())
  })

describe("queen-mesh demo's cluster page", () => {
  it.live(
    "prints the page, which shows node-c cut off and healed; --keep runs on until SIGINT",
    () =>
      Effect.gen(function* () {
        yield* ensureBuilt
        const demo = yield* spawnCli(["demo", "--plain", "--keep", "--duration", "5"])
        const line = yield* demo.waitForLine(
          (l) => l.includes("the cluster page: http://"),
          Duration.seconds(20)
        )
        const page = /(http:\/\/127\.0\.0\.1:\d+\/cluster\/)/.exec(line)?.[1]
        assert.isDefined(page, line)
        const html = yield* Effect.promise(() => fetch(page!).then((r) => r.text()))
        assert.include(html, "queen-mesh cluster")
        const linked = (v: ClusterView.View) =>
          v.nodes.length === 3 && v.links.length === 6 && v.links.every((link) => link.state === "linked")
        yield* eventually(Effect.map(view(page!), linked), "20 seconds")
        // The cut: some direction to or from node-c is not linked, on node-a's page.
        yield* eventually(
          Effect.map(view(page!), (v) =>
            v.links.some(
              (link) => (link.from === "node-c" || link.to === "node-c") && link.state !== "linked"
            )
          ),
          "20 seconds"
        )
        yield* eventually(Effect.map(view(page!), linked), "20 seconds")
        // The summary, then the cluster carries on: a second cut.
        yield* demo.waitForLine((l) => l.startsWith("still running until Ctrl-C"), Duration.seconds(30))
        const after = demo.lines.findIndex((l) => l.startsWith("still running until Ctrl-C"))
        yield* demo.waitForLine(
          (l) => l.includes("cut node-c's mesh link") && demo.lines.indexOf(l) > after,
          Duration.seconds(30)
        )
        assert.include(demo.stdout(), "summary after")
        demo.child.kill("SIGINT")
        const exit = yield* demo.waitForExit(Duration.seconds(20))
        assert.strictEqual(exit.code, 0, demo.stderr())
      }),
    120_000
  )

  it.live("--keep is in the demo's help", () =>
    Effect.gen(function* () {
      yield* ensureBuilt
      const help = yield* runCli(["demo", "--help"])
      assert.strictEqual(help.code, 0)
      assert.include(help.stdout, "--keep")
      assert.include(help.stdout, "cluster page")
    })
  )
})
