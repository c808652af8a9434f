#!/usr/bin/env node
/**
 * The `queen-mesh` command line (docs/cli.md): `node`, `stats`, `demo` and `help`.
 *
 * @since 0.1.0
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { exitCode, main } from "./cli/main.js"

// Effect 4 collects no per-fiber runtime metrics unless asked (effect 3 had to be told not to).
NodeRuntime.runMain(main(process.argv), {
  // `main` reports its own failures and installs its own logger on stderr.
  disableErrorReporting: true,
  teardown: (exit, onExit) => onExit(exitCode(exit))
})
