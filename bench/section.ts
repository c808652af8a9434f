/**
 * A section of the bench (`--only=<name>`): its counts, how it runs, and its part of the report (its
 * keys in bench/results.json, its rows of the table, its targets and notes). Each lives in
 * `bench/sections/`; `bench/run.ts` lists them in the order they run and are reported, so adding one
 * is one entry in that list.
 */
import type { Driver } from "./driver.js"
import type { Row, Target } from "./report.js"

export interface Section<P extends object, A> {
  /** The names `--only=` selects it by; it runs when any of them is selected. */
  readonly names: ReadonlyArray<string>
  /** Its counts, full and `--quick`, under keys of their own in results.json's `meta.plan`. */
  readonly plan: { readonly full: P; readonly quick: P }
  readonly run: (driver: Driver, plan: P) => Promise<A>
  /** Its keys in results.json, when it ran (a key whose value is undefined is left out). */
  readonly results: (result: A, plan: P) => Record<string, unknown>
  /** Its rows of the table, when it ran. */
  readonly rows?: (result: A, plan: P) => ReadonlyArray<Row>
  /** Its targets, listed whether it ran or not (a target not measured is `met: null`). */
  readonly targets?: (result: A | undefined, plan: P) => ReadonlyArray<Target>
  /** Its notes: what it measures and how (listed whether it ran or not), and what it found. */
  readonly notes?: (result: A | undefined, plan: P) => ReadonlyArray<string>
  /** Stops what it may have left running; called when the driver exits. */
  readonly cleanup?: () => void
}

/** A section's part of the report. */
export interface Outcome {
  readonly results: Record<string, unknown>
  readonly rows: ReadonlyArray<Row>
  readonly targets: ReadonlyArray<Target>
  readonly notes: ReadonlyArray<string>
}

/** A section as the driver sees it, whatever its plan and result. */
export interface Registered {
  readonly names: ReadonlyArray<string>
  readonly plan: (quick: boolean) => object
  /** Runs it and reports. */
  readonly run: (driver: Driver) => Promise<Outcome>
  /** Its report when it did not run. */
  readonly skip: (quick: boolean) => Outcome
  readonly cleanup: () => void
}

/** Registers a section: its plan and result types stay inside. */
export const section = <P extends object, A>(definition: Section<P, A>): Registered => {
  const planOf = (quick: boolean): P => (quick ? definition.plan.quick : definition.plan.full)
  const outcome = (result: A | undefined, plan: P): Outcome => ({
    results: result === undefined ? {} : definition.results(result, plan),
    rows: result === undefined ? [] : (definition.rows?.(result, plan) ?? []),
    targets: definition.targets?.(result, plan) ?? [],
    notes: definition.notes?.(result, plan) ?? []
  })
  return {
    names: definition.names,
    plan: planOf,
    run: async (driver) => {
      const plan = planOf(driver.quick)
      return outcome(await definition.run(driver, plan), plan)
    },
    skip: (quick) => outcome(undefined, planOf(quick)),
    cleanup: () => definition.cleanup?.()
  }
}
