/**
 * The demo's cluster page (`ClusterView`): every demo node serves its HTTP routes on 127.0.0.1, on a
 * port chosen before the node starts so that its HELLO announces it (`http_addr`) and the others
 * fetch its stats from there, as separate brokers would. The demo prints node-a's page.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as ClusterView from "../ClusterView.js"
import * as HttpRoutes from "../HttpRoutes.js"
import * as Ports from "../internal/ports.js"
import * as Mesh from "../Mesh.js"
import type * as MeshConfig from "../MeshConfig.js"
import { CliFailure, EXIT_FAILURE } from "./io.js"

/**
 * Where each demo node serves its routes.
 *
 * @since 0.1.0
 * @category models
 */
export interface Pages {
  readonly ports: ReadonlyMap<string, number>
  /** The page of the first node. */
  readonly url: string
}

const failed = (what: string) => (cause: unknown) =>
  new CliFailure({
    code: EXIT_FAILURE,
    message: `queen-mesh demo: ${what}: ${cause instanceof Error ? cause.message : String(cause)}`
  })

/** A port to name before its server binds it (`src/internal/ports.ts`). */
const freePort = Effect.tryPromise({
  try: Ports.freePort,
  catch: failed("no free port for the cluster page")
})

/**
 * A port for each node's routes.
 *
 * @since 0.1.0
 * @category constructors
 */
export const allocate = (names: ReadonlyArray<string>): Effect.Effect<Pages, CliFailure> =>
  Effect.gen(function* () {
    const ports = new Map<string, number>()
    for (const name of names) ports.set(name, yield* freePort)
    const first = ports.get(names[0] ?? "") ?? 0
    return { ports, url: `http://127.0.0.1:${first}${ClusterView.paths.page}` }
  })

/**
 * What a node announces in its HELLO: its routes on 127.0.0.1.
 *
 * @since 0.1.0
 * @category constructors
 */
export const advertise = (pages: Pages, name: string): Partial<MeshConfig.MeshConfigShape> => ({
  advertiseHost: "127.0.0.1",
  httpPort: pages.ports.get(name) ?? 0
})

/**
 * Serves `mesh`'s routes (the page among them) on its port for the life of the scope.
 *
 * @since 0.1.0
 * @category running
 */
export const serve = (
  pages: Pages,
  name: string,
  mesh: Mesh.MeshShape
): Effect.Effect<void, CliFailure, Scope.Scope> =>
  HttpRoutes.serve({
    host: "127.0.0.1",
    port: pages.ports.get(name) ?? 0,
    // The demo's dead threshold is 1 s: a peer that does not answer within half of it is shown so.
    cluster: { fetchTimeout: Duration.millis(500) }
  }).pipe(
    Effect.provideService(Mesh.Mesh, mesh),
    Effect.mapError((error) => failed(`${name} cannot serve its cluster page`)(error.cause)),
    Effect.asVoid
  )
