/**
 * The broker's entry point: `node main.js`, configured by its environment (`BROKER_*` and the mesh's
 * `QUEEN_*`; see docs/broker.md). SIGINT and SIGTERM interrupt it, and the layers then close in the
 * order `Broker.ts` describes.
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Layer from "effect/Layer"
import * as Broker from "./Broker.js"

Layer.launch(Broker.layer).pipe(NodeRuntime.runMain({ teardown: Broker.teardown }))
