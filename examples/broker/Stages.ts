/**
 * Where a request's time goes, for the bench: with `BROKER_TRACE_STAGES=true` every answered request
 * prints one line, `{"stages":{"route":…,"ids":[…],"at":[["in",ns],…]}}`, the times of its stages on
 * the machine's monotonic clock (`process.hrtime`, the same clock in every process of the machine, so
 * a push's stages on one replica and its pop's on another line up). Off (the default) it is nothing:
 * `mark` is `Effect.void` and the middleware is the identity, so the request path carries no tracer.
 *
 * Stages marked: `in` (the request's fiber starts, the body not read yet), then what the handlers mark
 * (`handler`, `decoded`, `insert`, `committed`, `hinted`; a pop's `woke`, `claim`, `claimed`), and
 * `out` (the answer handed to Node's socket).
 */
import * as Config from "effect/Config"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as HttpMiddleware from "effect/http/HttpMiddleware"
import type * as HttpServerResponse from "effect/http/HttpServerResponse"
import * as Layer from "effect/Layer"

/** One request's marks, gathered on its fiber. */
interface Trail {
  route: string
  ids: ReadonlyArray<string>
  readonly at: Array<[string, string]>
}

/** The current request's trail: a fiber-local reference, set by the middleware for its request. */
const currentTrail = Context.Reference<Trail | undefined>("broker/Stages/currentTrail", {
  defaultValue: () => undefined
})

/** An HTTP app: what the server runs for each request. */
type App<E, R> = Effect.Effect<HttpServerResponse.HttpServerResponse, E, R>

export interface StagesShape {
  readonly enabled: boolean
  /** Records `stage` now, on the current request's trail. */
  readonly mark: (stage: string) => Effect.Effect<void>
  /** Records `stage` at `at` (from {@link StagesShape.now}): for work done in another fiber. */
  readonly markAt: (stage: string, at: string) => Effect.Effect<void>
  /** The tracer's clock, now. */
  readonly now: () => string
  /** Names the request's route and the messages it carried, which is how the bench joins the lines. */
  readonly note: (route: string, ids: ReadonlyArray<string>) => Effect.Effect<void>
  /** Wraps the app: starts a trail at `in`, prints it at `out`. */
  readonly middleware: <E, R>(app: App<E, R>) => App<E, R>
}

export class Stages extends Context.Service<Stages, StagesShape>()("broker/Stages") {}

// The monotonic clock shared by the processes of a machine; Effect's `Clock` is per process.
const now = () => process.hrtime.bigint().toString()

const off: StagesShape = {
  enabled: false,
  mark: () => Effect.void,
  markAt: () => Effect.void,
  now,
  note: () => Effect.void,
  middleware: (app) => app
}

const on: StagesShape = {
  enabled: true,
  mark: (stage) =>
    Effect.flatMap(Effect.service(currentTrail), (trail) =>
      Effect.sync(() => {
        trail?.at.push([stage, now()])
      })
    ),
  markAt: (stage, at) =>
    Effect.flatMap(Effect.service(currentTrail), (trail) =>
      Effect.sync(() => {
        trail?.at.push([stage, at])
      })
    ),
  now,
  note: (route, ids) =>
    Effect.flatMap(Effect.service(currentTrail), (trail) =>
      Effect.sync(() => {
        if (trail === undefined) return
        trail.route = route
        trail.ids = ids
      })
    ),
  middleware: HttpMiddleware.make(<E, R>(app: App<E, R>) =>
    Effect.suspend(() => {
      const trail: Trail = { route: "", ids: [], at: [["in", now()]] }
      return app.pipe(
        Effect.provideService(currentTrail, trail),
        Effect.ensuring(
          Effect.sync(() => {
            trail.at.push(["out", now()])
            if (trail.route !== "") process.stdout.write(`${JSON.stringify({ stages: trail })}\n`)
          })
        )
      )
    })
  )
}

/** Print every request's stage times (for the bench). */
export const config = Config.Boolean("BROKER_TRACE_STAGES").pipe(Config.withDefault(false))

export const layer: Layer.Layer<Stages, Config.ConfigError> = Layer.effect(
  Stages,
  Effect.map(config, (enabled) => (enabled ? on : off))
)
