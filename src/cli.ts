#!/usr/bin/env node
/**
 * The `queen-mesh` command line (docs/cli.md): `node`, `stats`, `demo` and `help`.
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Effect from "effect/Effect"
import * as RuntimeFlags from "effect/RuntimeFlags"
import { exitCode, main } from "./cli/main.js"

// Effect's own per-fiber runtime metrics cost on every fiber and are not the mesh's: off.
NodeRuntime.runMain(main(process.argv).pipe(Effect.provide(RuntimeFlags.disableRuntimeMetrics)), {
  // `main` reports its own failures and installs its own logger on stderr.
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => onExit(exitCode(exit))
})
