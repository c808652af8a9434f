/**
 * `broker`: the reference broker end to end (examples/broker, run by bench/broker.ts): the TCP mesh, the
 * PostgreSQL lane, a LISTEN/NOTIFY broker and the mesh off, side by side in one run.
 */
import * as Broker from "../broker.js"
import type { Driver } from "../driver.js"
import type { Row } from "../report.js"
import { section } from "../section.js"

interface BrokerPlan {
  readonly broker: Broker.BrokerPlan
}

export const broker = section<BrokerPlan, Broker.BrokerSection>({
  names: ["broker"],
  plan: { full: { broker: Broker.fullPlan }, quick: { broker: Broker.quickPlan } },
  run: (driver: Driver, plan) => Broker.runBroker(plan.broker, driver.progress, driver.profile),
  results: (result) => ({ broker: result }),
  rows: (result) =>
    Broker.rows(result).map(
      (cells): Row => [cells[0] ?? "", cells[1] ?? "", cells[2] ?? "-", cells[3] ?? "-"]
    ),
  targets: (result) => (result === undefined ? [] : Broker.targets(result)),
  notes: (result, plan) =>
    result === undefined ? [] : [Broker.note(result, plan.broker), Broker.writeLoadNote(result, plan.broker)],
  cleanup: Broker.killBrokerChildren
})
