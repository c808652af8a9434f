#!/usr/bin/env node
/**
 * The `queen-mesh` command line (docs/cli.md): `node`, `stats` and `demo`.
 *
 * @since 0.1.0
 */
import * as NodeContext from "@effect/platform-node/NodeContext"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import { Effect } from "effect"
import { exitCode, main } from "./cli/main.js"

NodeRuntime.runMain(main(process.argv).pipe(Effect.provide(NodeContext.layer)), {
  // `main` reports its own failures and replaces the logger with one on stderr.
  disableErrorReporting: true,
  disablePrettyLogger: true,
  teardown: (exit, onExit) => onExit(exitCode(exit))
})
