/**
 * `queen-mesh node`: one mesh node configured from the environment (spec "Enabling it"), with the
 * shipped in-memory host services, the HTTP routes, JSON lines on stdout for what the mesh does, and
 * JSON commands on stdin (docs/cli.md, "node", is the contract).
 *
 * @since 0.1.0
 */
import * as NodeStream from "@effect/platform-node/NodeStream"
import { Config, ConfigError, ConfigProvider, Effect, Either, Layer, Option, Stream } from "effect"
import * as HttpRoutes from "../HttpRoutes.js"
import * as Mesh from "../Mesh.js"
import * as MeshConfig from "../MeshConfig.js"
import * as Commands from "./commands.js"
import * as Events from "./events.js"
import { CliFailure, configFailure, EXIT_FAILURE, printLine } from "./io.js"

/**
 * Where the HTTP routes listen.
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpConfig {
  readonly host: string
  readonly port: number
}

/**
 * @since 0.1.0
 * @category defaults
 */
export const httpDefaults: HttpConfig = { host: "127.0.0.1", port: 6632 }

/**
 * `QUEEN_MESH_HTTP_HOST` and `QUEEN_MESH_HTTP_PORT`, read like the mesh's own variables: a malformed
 * value fails with a `ConfigError` naming the variable.
 *
 * @since 0.1.0
 * @category config
 */
export const httpConfig: Config.Config<HttpConfig> = Config.all({
  host: Config.string("QUEEN_MESH_HTTP_HOST").pipe(
    Config.withDefault(httpDefaults.host),
    Config.withDescription("address the HTTP routes bind")
  ),
  port: Config.option(Config.string("QUEEN_MESH_HTTP_PORT")).pipe(
    Config.mapOrFail(
      Option.match({
        onNone: () => Either.right(httpDefaults.port),
        onSome: (raw) =>
          Either.mapLeft(MeshConfig.parsePort(raw), (why) =>
            ConfigError.InvalidData(["QUEEN_MESH_HTTP_PORT"], `QUEEN_MESH_HTTP_PORT: ${why}`)
          )
      })
    ),
    Config.withDescription("port of the HTTP routes; 0 = ephemeral")
  )
})

/**
 * Everything `node` reads from the environment.
 *
 * @since 0.1.0
 * @category config
 */
export const config = Config.all({ mesh: MeshConfig.config, http: httpConfig })

/**
 * @since 0.1.0
 * @category models
 */
export interface NodeOptions {
  /** Print only `listening`, `peer_up` and `peer_down`. */
  readonly quiet: boolean
}

/**
 * Reads stdin line by line and runs each command. EOF ends the reading, not the node; a read error is
 * logged and likewise leaves the node running.
 *
 * @since 0.1.0
 * @category running
 */
export const readCommands = (mesh: Mesh.MeshShape): Effect.Effect<void> =>
  NodeStream.fromReadable<Error, Uint8Array>(
    () => process.stdin,
    (cause) => new Error(`stdin: ${String(cause)}`),
    { closeOnDone: false }
  ).pipe(
    Stream.decodeText(),
    Stream.splitLines,
    Stream.runForEach((line) => Commands.handleLine(mesh, line)),
    Effect.zipRight(Effect.logDebug("stdin closed; the node keeps running")),
    Effect.catchAll((error) => Effect.logWarning("stopped reading stdin", error))
  )

/**
 * Runs the node until interrupted (SIGINT/SIGTERM close the scope).
 *
 * @since 0.1.0
 * @category running
 */
export const run = (options: NodeOptions): Effect.Effect<never, CliFailure> =>
  Effect.gen(function* () {
    const { mesh: meshConfig, http } = yield* Effect.withConfigProvider(
      config,
      ConfigProvider.fromEnv()
    ).pipe(Effect.mapError(configFailure))
    return yield* serve(meshConfig, http, options).pipe(
      Effect.annotateLogs({ server_id: meshConfig.serverId })
    )
  })

const serve = (meshConfig: MeshConfig.MeshConfigShape, http: HttpConfig, options: NodeOptions) =>
  Effect.gen(function* () {
    const context = yield* Layer.build(
      Mesh.layerLocal().pipe(Layer.provide(Layer.succeed(MeshConfig.MeshConfig, meshConfig)))
    ).pipe(
      Effect.mapError(
        (error) => new CliFailure({ code: EXIT_FAILURE, message: `queen-mesh: mesh ${error.message}` })
      )
    )
    const mesh = yield* Effect.provide(Mesh.Mesh, context)

    // Subscribe now, print once `listening` is out: no event is lost and none comes first.
    const ready = yield* Effect.makeLatch(false)
    yield* mesh.events.pipe(
      Stream.filterMap((event) => Events.toLine(event, options)),
      Stream.runForEach((line) => Effect.zipRight(ready.await, printLine(line))),
      Effect.forkScoped
    )
    yield* Effect.yieldNow()

    const httpPort = yield* HttpRoutes.serve(http).pipe(
      Effect.provide(context),
      Effect.mapError(
        (error) =>
          new CliFailure({
            code: EXIT_FAILURE,
            message: `queen-mesh: cannot serve HTTP on ${http.host}:${http.port}: ${describeCause(error.cause)}`
          })
      )
    )

    yield* printLine(Events.listening({ serverId: mesh.serverId, port: mesh.port, httpPort }))
    yield* ready.open
    yield* Effect.logInfo("node ready").pipe(
      Effect.annotateLogs({
        port: Option.getOrElse(mesh.port, () => "inactive"),
        http: `${http.host}:${httpPort}`
      })
    )
    yield* Effect.forkScoped(readCommands(mesh))
    return yield* Effect.never
  }).pipe(Effect.scoped, Effect.annotateLogs({ module: "cli/node" }))

const describeCause = (cause: unknown): string => (cause instanceof Error ? cause.message : String(cause))
