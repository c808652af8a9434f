/**
 * Long fuzzing of the wire code: runs the properties of `test/fixtures/fuzzProperties.ts` in a loop for
 * a wall-clock budget.
 *
 *   npm run fuzz -- [--minutes 1] [--seed N] [--property NAME] [--path P]
 *
 * Each round runs one batch of every property under its own seed, derived from the base seed (random
 * unless given), so a whole session replays from `--seed`. A failure prints the property, the seed and
 * the counterexample path, and exits 1; `--property NAME --seed S --path P` replays just that case.
 */
import * as Fuzz from "../test/fixtures/fuzzProperties.js"

interface Options {
  readonly minutes: number
  readonly seed: number | undefined
  readonly property: string | undefined
  readonly path: string | undefined
}

const usage = "usage: npm run fuzz -- [--minutes 1] [--seed N] [--property NAME] [--path P]"

const fail = (message: string): never => {
  console.error(message)
  console.error(usage)
  process.exit(2)
}

const parse = (argv: ReadonlyArray<string>): Options => {
  let minutes = 1
  let seed: number | undefined
  let property: string | undefined
  let path: string | undefined
  for (let i = 0; i < argv.length; i++) {
    const flag = argv[i]
    const value = argv[i + 1]
    const need = (): string => value ?? fail(`${flag} needs a value`)
    switch (flag) {
      case "--minutes": {
        minutes = Number(need())
        if (!Number.isFinite(minutes) || minutes <= 0) fail("--minutes must be a positive number")
        i++
        break
      }
      case "--seed": {
        seed = Number(need())
        if (!Number.isSafeInteger(seed)) fail("--seed must be an integer")
        i++
        break
      }
      case "--property": {
        property = need()
        i++
        break
      }
      case "--path": {
        path = need()
        i++
        break
      }
      case "--help":
        console.log(usage)
        process.exit(0)
        break
      default:
        fail(`unknown argument ${flag}`)
    }
  }
  if (path !== undefined && (seed === undefined || property === undefined)) {
    fail("--path replays one case: give --property and --seed with it")
  }
  return { minutes, seed, property, path }
}

/** The seed of round `round` for property `index`: distinct, and fixed by the base seed. */
const seedOf = (base: number, round: number, index: number): number =>
  (base + round * 7919 + index * 104729) | 0

const reproduce = (name: string, result: Fuzz.FuzzResult): string =>
  `npm run fuzz -- --property ${name} --seed ${result.seed}${result.path === undefined ? "" : ` --path ${result.path}`}`

const report = (name: string, result: Fuzz.FuzzResult): never => {
  console.error(`\nFAILED ${name}: ${result.description}`)
  console.error(`seed ${result.seed}${result.path === undefined ? "" : `, path ${result.path}`}`)
  console.error(`reproduce: ${reproduce(name, result)}`)
  console.error(result.report)
  process.exit(1)
}

const main = (): void => {
  const options = parse(process.argv.slice(2))
  const properties = Fuzz.all.filter((p) => options.property === undefined || p.name === options.property)
  if (properties.length === 0) {
    fail(`no property named ${options.property}; known: ${Fuzz.all.map((p) => p.name).join(", ")}`)
  }

  if (options.path !== undefined && options.seed !== undefined) {
    const property = properties[0]!
    console.log(`replaying ${property.name} with seed ${options.seed}, path ${options.path}`)
    const result = property.run({ numRuns: 1, seed: options.seed, path: options.path })
    if (result.failed) report(property.name, result)
    console.log("passed: the case no longer fails")
    return
  }

  const base = options.seed ?? (Math.random() * 0x7fffffff) | 0
  const started = Date.now()
  const deadline = started + options.minutes * 60_000
  console.log(
    `fuzzing ${properties.length} properties for ${options.minutes} minute(s), seed ${base}` +
      `${options.seed === undefined ? " (random)" : ""}`
  )
  const cases = new Map<string, number>(properties.map((p) => [p.name, 0]))
  let round = 0
  let lastProgress = started
  while (Date.now() < deadline) {
    for (const [index, property] of properties.entries()) {
      if (Date.now() >= deadline) break
      const result = property.run({ numRuns: property.batch, seed: seedOf(base, round, index) })
      cases.set(property.name, (cases.get(property.name) ?? 0) + result.numRuns)
      if (result.failed) {
        console.error(`(round ${round} of base seed ${base})`)
        report(property.name, result)
      }
    }
    round++
    if (Date.now() - lastProgress >= 15_000) {
      lastProgress = Date.now()
      const total = [...cases.values()].reduce((a, b) => a + b, 0)
      console.log(`  ${Math.round((lastProgress - started) / 1000)} s: ${round} rounds, ${total} cases`)
    }
  }
  const seconds = ((Date.now() - started) / 1000).toFixed(1)
  console.log(`\nno failure in ${seconds} s, ${round} rounds from seed ${base}; cases per property:`)
  for (const [name, count] of cases) console.log(`  ${name.padEnd(24)} ${count}`)
}

main()
