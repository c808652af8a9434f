/**
 * A peer that stops, over loopback TCP: the nodes left hear it dead (its `PeerDown`, its server dead in
 * the stats, the health degraded) however busy the machine is, and a node of another test process
 * that reaches one of ours (a survivor still dialling the port of the peer it lost, now ours) is
 * refused, never heard: with one secret for every test process, a stranger named `b` kept our `b`
 * alive in `c`'s eyes long after our `b` had stopped.
 */
import { type ChildProcess, spawn } from "node:child_process"
import { createRequire } from "node:module"
import { pathToFileURL } from "node:url"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Scope } from "effect"
import { eventually, freePort, hearsFrom, type Node, tcpNode } from "./fixtures/cluster.js"

// tsx's loader in the node process itself: its CLI would run the script in a child of its own, which the
// SIGKILL of the scope's end would leave behind, dialling on for as long as the machine runs.
const tsxLoader = pathToFileURL(createRequire(import.meta.url).resolve("tsx")).href
const foreignScript = new URL("./fixtures/foreignNode.ts", import.meta.url).pathname

/** `tcpNode` in a process of its own (another test file's, as far as ours can tell), killed with the scope. */
const foreignNode = (serverId: string, port: number, peers: ReadonlyArray<number>) =>
  Effect.acquireRelease(
    Effect.callback<ChildProcess, Error>((resume) => {
      const child = spawn(
        process.execPath,
        ["--import", tsxLoader, foreignScript, serverId, String(port), ...peers.map(String)],
        {
          stdio: ["ignore", "pipe", "inherit"]
        }
      )
      let out = ""
      child.stdout.on("data", (chunk: Buffer) => {
        out += chunk.toString("utf8")
        if (out.includes("up\n")) resume(Effect.succeed(child))
      })
      child.once("exit", (code) => resume(Effect.fail(new Error(`foreign node exited (${code})`))))
    }),
    (child) =>
      Effect.callback<void>((resume) => {
        if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
        child.once("exit", () => resume(Effect.void))
        child.kill("SIGKILL")
      })
  )

/** Nodes a, b and c on loopback, each listing all three, each in a scope of its own. */
const three = Effect.gen(function* () {
  const ports = [yield* freePort, yield* freePort, yield* freePort]
  const scopes = [yield* Scope.make(), yield* Scope.make(), yield* Scope.make()]
  yield* Effect.addFinalizer(() => Effect.forEach(scopes, (scope) => Scope.close(scope, Exit.void)))
  const nodes: Array<Node> = []
  for (const [i, serverId] of ["a", "b", "c"].entries())
    nodes.push(yield* tcpNode({ serverId, port: ports[i]!, peers: ports }).pipe(Scope.provide(scopes[i]!)))
  return { nodes, scopes, ports }
})

const hearsDead = (node: Node, serverId: string) =>
  Effect.map(
    node.mesh.stats,
    (stats) => stats.enabled && stats.servers.some((s) => s.server_id === serverId && !s.alive)
  )

describe("a peer that stops, over loopback", () => {
  it.live("is heard dead by the others: PeerDown, dead in the stats, the health degraded", () =>
    Effect.gen(function* () {
      const { nodes, scopes } = yield* three
      const [a, , c] = nodes as [Node, Node, Node]
      const downs: Array<string> = []
      for (const [name, node] of [["a", a] as const, ["c", c] as const])
        yield* node.mesh.observe(
          (event) => {
            if (event._tag === "PeerDown") downs.push(`${name}:${event.serverId}`)
          },
          ["PeerDown"]
        )
      yield* eventually(hearsFrom(a, 2))
      yield* eventually(hearsFrom(c, 2))
      yield* Scope.close(scopes[1]!, Exit.void)
      // Bounded generously: this only takes long when something is wrong.
      for (const node of [a, c]) {
        yield* eventually(hearsDead(node, "b"), "60 seconds")
        yield* eventually(
          Effect.map(node.mesh.health, (health) => health.status === "degraded"),
          "60 seconds"
        )
      }
      yield* eventually(
        Effect.sync(() => downs.includes("a:b") && downs.includes("c:b")),
        "60 seconds"
      )
      assert.deepStrictEqual(
        downs.filter((d) => !d.endsWith(":b")),
        []
      )
    })
  )

  it.live("a node of another test process dialling one of ours is refused, never heard", () =>
    Effect.gen(function* () {
      const [cPort, strayPort, foreignPort] = [yield* freePort, yield* freePort, yield* freePort]
      // c lists a peer that never starts, so its mesh runs; the stranger's peer list names c's port.
      const c = yield* tcpNode({ serverId: "c", port: cPort, peers: [strayPort] })
      yield* foreignNode("b", foreignPort, [cPort])
      // Refused, or (what a shared secret did) heard: whichever comes first.
      yield* eventually(
        Effect.map(
          c.mesh.stats,
          (stats) => stats.enabled && (stats.handshake_failures > 0 || stats.servers.length > 0)
        ),
        "60 seconds"
      )
      const stats = yield* c.mesh.stats
      assert.isTrue(stats.enabled)
      if (!stats.enabled) return
      assert.deepStrictEqual(
        stats.servers.map((server) => server.server_id),
        [],
        "c hears the other process's b"
      )
      assert.isAbove(stats.handshake_failures, 0)
    })
  )
})
