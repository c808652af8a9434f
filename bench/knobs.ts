/**
 * The bench's command-line knobs (`--only=writeload --writeload-ks=32,64 ...`): each section reads its
 * own, and a value it cannot run with, or a flag no one reads (a typo would otherwise run the whole
 * section for minutes as if it were not there), is refused in one line with exit 2 before anything
 * starts. `knobsOf` is the pure part, over an argument list, and throws `BadKnob`; `knobs` reads
 * `process.argv` and refuses.
 */

/** A knob's value the bench cannot run with, or a flag it does not know. */
export class BadKnob extends Error {
  readonly _tag = "BadKnob"
}

export interface Knobs {
  /** `--name=value`'s value, if given. */
  readonly value: (name: string) => string | undefined
  /** `--name` given alone. */
  readonly flag: (name: string) => boolean
  /** `--name=a,b`: a non-empty list, each member one of `allowed`. */
  readonly list: <A extends string>(name: string, allowed: ReadonlyArray<A>) => ReadonlyArray<A> | undefined
  /** `--name=1,10`: a non-empty list of whole numbers, each at least `min`. */
  readonly counts: (name: string, min: number) => ReadonlyArray<number> | undefined
  /** `--name=5`: a number at least `min` (a whole one with `whole`), in `unit`. */
  readonly number: (
    name: string,
    options: { readonly min: number; readonly whole?: boolean; readonly unit: string }
  ) => number | undefined
  /** The arguments no reader asked for, and none of the driver's own names. */
  readonly unread: () => ReadonlyArray<string>
}

/** The driver's own flags (bench/run.ts). */
const DRIVER = ["quick", "only", "cpu-prof", "upstream"]

export const knobsOf = (args: ReadonlyArray<string>): Knobs => {
  const asked = new Set<string>(DRIVER)
  const value = (name: string): string | undefined => {
    asked.add(name)
    const prefix = `--${name}=`
    return args.find((a) => a.startsWith(prefix))?.slice(prefix.length)
  }
  const members = (name: string): ReadonlyArray<string> | undefined => {
    const raw = value(name)
    if (raw === undefined) return undefined
    const parts = raw.split(",").filter((s) => s !== "")
    if (parts.length === 0) throw new BadKnob(`--${name}=${raw}: a comma-separated list, not empty`)
    return parts
  }
  return {
    value,
    flag: (name) => {
      asked.add(name)
      return args.includes(`--${name}`)
    },
    list: <A extends string>(name: string, allowed: ReadonlyArray<A>) => {
      const parts = members(name)
      if (parts === undefined) return undefined
      const known = (s: string): s is A => (allowed as ReadonlyArray<string>).includes(s)
      const bad = parts.filter((s) => !known(s))
      if (bad.length > 0) throw new BadKnob(`--${name}=${bad.join(",")}: not one of ${allowed.join(", ")}`)
      return parts.filter(known)
    },
    counts: (name, min) => {
      const parts = members(name)
      if (parts === undefined) return undefined
      const bad = parts.filter(
        (s) => !(/^\d+$/.test(s) && Number.isSafeInteger(Number(s)) && Number(s) >= min)
      )
      if (bad.length > 0) throw new BadKnob(`--${name}=${bad.join(",")}: whole numbers, each at least ${min}`)
      return parts.map(Number)
    },
    number: (name, { min, whole = false, unit }) => {
      const raw = value(name)
      if (raw === undefined) return undefined
      const n = raw.trim() === "" ? Number.NaN : Number(raw)
      if (!(Number.isFinite(n) && n >= min && (!whole || Number.isSafeInteger(n)))) {
        throw new BadKnob(
          `--${name}=${raw}: ${whole ? "a whole number" : "a number"} of ${unit}, at least ${min}`
        )
      }
      return n
    },
    unread: () =>
      args.filter((a) => {
        if (!a.startsWith("--")) return true
        const name = a.slice(2).split("=")[0]!
        return !asked.has(name)
      })
  }
}

/** A knob's value the bench cannot run with: said in one line, and the bench exits 2 before it starts. */
export const refuse = (message: string): never => {
  process.stderr.write(`bench: ${message}\n`)
  process.exit(2)
}

const orRefuse = <A>(read: () => A): A => {
  try {
    return read()
  } catch (error) {
    if (error instanceof BadKnob) return refuse(error.message)
    throw error
  }
}

const own = knobsOf(process.argv.slice(2))

/** The bench's knobs, from `process.argv`: a bad value is refused (exit 2). */
export const knobs: Knobs = {
  value: own.value,
  flag: own.flag,
  list: (name, allowed) => orRefuse(() => own.list(name, allowed)),
  counts: (name, min) => orRefuse(() => own.counts(name, min)),
  number: (name, options) => orRefuse(() => own.number(name, options)),
  unread: own.unread
}
