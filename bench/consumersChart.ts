/**
 * The `consumers` section's chart (docs/images/consumers.svg), written as SVG text with no dependency:
 * claims and PostgreSQL CPU per message against consumers per replica, both axes logarithmic, for the TCP
 * mesh with every message pushed on one replica; this run's figures against those measured before grouped
 * pops (`before` in bench/consumers.ts).
 */
import { execFileSync } from "node:child_process"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { before, type Cell } from "./consumers.js"

const here = Path.dirname(fileURLToPath(import.meta.url))
/** The repository: this file runs from `.bench-dist/bench/`. */
const root = Path.resolve(here, "../..")

interface Point {
  readonly x: number
  readonly y: number
}

interface Series {
  readonly label: string
  readonly color: string
  readonly dashed: boolean
  readonly points: ReadonlyArray<Point>
}

const WIDTH = 1000
/** The chart's accessible name: what a reader who cannot see it is told. */
const TITLE =
  "Claims and PostgreSQL CPU per message against consumers per replica, before and after grouped pops"
const HEIGHT = 510
const PANEL = { width: 370, height: 280, top: 112 }
const LEFTS = [80, 590]
const X_DECADES = [0, 3] as const
const FONT = `font-family="Helvetica, Arial, sans-serif"`

const xmlText = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

/** A point's value: three figures or so. */
const label = (value: number) =>
  value >= 100 ? value.toFixed(0) : value >= 10 ? value.toFixed(1) : value.toFixed(2)

/** A decade's tick: 0.1, 1, 10, 1,000. */
const tick = (decade: number) =>
  decade < 0 ? (10 ** decade).toFixed(-decade) : (10 ** decade).toLocaleString("en-US")

/** The decades that hold every value. */
const decades = (values: ReadonlyArray<number>): readonly [number, number] => {
  const positive = values.filter((v) => v > 0 && Number.isFinite(v))
  const low = Math.floor(Math.log10(Math.min(...positive)))
  const high = Math.ceil(Math.log10(Math.max(...positive)))
  return [low, high === low ? high + 1 : high]
}

const panel = (left: number, title: string, series: ReadonlyArray<Series>): string => {
  const { width, height, top } = PANEL
  const [yLow, yHigh] = decades(series.flatMap((s) => s.points.map((p) => p.y)))
  const xOf = (x: number) => left + ((Math.log10(x) - X_DECADES[0]) / (X_DECADES[1] - X_DECADES[0])) * width
  const yOf = (y: number) => top + height - ((Math.log10(y) - yLow) / (yHigh - yLow)) * height
  const parts: Array<string> = []
  parts.push(
    `<text x="${left + width / 2}" y="${top - 14}" text-anchor="middle" font-size="15" font-weight="bold">${xmlText(title)}</text>`
  )
  // Grid: a line at every decade and fainter ones at 2 and 5 of each.
  for (let d = yLow; d <= yHigh; d++) {
    const y = yOf(10 ** d)
    parts.push(`<line x1="${left}" y1="${y}" x2="${left + width}" y2="${y}" stroke="#d0d0d0"/>`)
    parts.push(`<text x="${left - 8}" y="${y + 4}" text-anchor="end" font-size="12">${tick(d)}</text>`)
    if (d === yHigh) continue
    for (const m of [2, 5]) {
      const y2 = yOf(m * 10 ** d)
      parts.push(`<line x1="${left}" y1="${y2}" x2="${left + width}" y2="${y2}" stroke="#efefef"/>`)
    }
  }
  for (const x of [1, 10, 100, 1000]) {
    parts.push(
      `<line x1="${xOf(x)}" y1="${top}" x2="${xOf(x)}" y2="${top + height}" stroke="#d0d0d0"/>`,
      `<text x="${xOf(x)}" y="${top + height + 20}" text-anchor="middle" font-size="12">${x.toLocaleString("en-US")}</text>`
    )
  }
  parts.push(
    `<rect x="${left}" y="${top}" width="${width}" height="${height}" fill="none" stroke="#444"/>`,
    `<text x="${left + width / 2}" y="${top + height + 40}" text-anchor="middle" font-size="13">consumers per replica (3 replicas)</text>`
  )
  for (const s of series) {
    const path = s.points.map((p, i) => `${i === 0 ? "M" : "L"}${xOf(p.x).toFixed(1)},${yOf(p.y).toFixed(1)}`)
    parts.push(
      `<path d="${path.join(" ")}" fill="none" stroke="${s.color}" stroke-width="2.5"${s.dashed ? ` stroke-dasharray="7 5"` : ""}/>`
    )
    for (const p of s.points) {
      const [x, y] = [xOf(p.x), yOf(p.y)]
      // The earlier series (the steep one) labelled up and to the left; this run's under its points (away
      // from the earlier series, which is above it) where the plot has room, else above them.
      const atRight = x >= left + width - 1
      const under = y + 19 <= top + height - 3
      const text = s.dashed
        ? `x="${(x - 8).toFixed(1)}" y="${(y - 8).toFixed(1)}" text-anchor="end"`
        : `x="${(atRight ? x - 6 : x).toFixed(1)}" y="${(under ? y + 19 : y - 10).toFixed(1)}" text-anchor="${atRight ? "end" : "middle"}"`
      parts.push(
        `<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="4.5" fill="${s.dashed ? "#fff" : s.color}" stroke="${s.color}" stroke-width="2"/>`,
        `<text ${text} font-size="12" font-weight="bold" fill="${s.color}">${label(p.y)}</text>`
      )
    }
  }
  return parts.join("\n  ")
}

const commitOfHead = (): string => {
  try {
    return execFileSync("git", ["rev-parse", "--short", "HEAD"], {
      cwd: root,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"]
    }).trim()
  } catch {
    return "?"
  }
}

/**
 * The chart of `cells` (the TCP mesh, pushes on A) written to `file` (from the repository's root); `null`
 * when those cells did not run.
 */
export const writeChart = (cells: ReadonlyArray<Cell>, file: string, date: string): string | null => {
  const measured = cells
    .filter((c) => c.carrier === "tcp" && c.pushing === "one")
    .sort((a, b) => a.consumers - b.consumers)
  if (measured.length === 0) return null
  const after = `after: grouped pops (this run, commit ${commitOfHead()}, ${date.slice(0, 10)})`
  const was = `before: each woken pop claims (commit ${before.commit}; P = 50 where there is no 1,000)`
  const seriesOf = (pick: (c: Cell) => number, pickBefore: (b: (typeof before.tcpOne)[number]) => number) => [
    {
      label: was,
      color: "#c0392b",
      dashed: true,
      points: before.tcpOne.map((b) => ({ x: b.consumers, y: pickBefore(b) }))
    },
    {
      label: after,
      color: "#1f5fa8",
      dashed: false,
      points: measured.map((c) => ({ x: c.consumers, y: pick(c) }))
    }
  ]
  const claims = seriesOf(
    (c) => c.claimsPerMessage,
    (b) => b.claims
  )
  const cpu = seriesOf(
    (c) => c.postgresCpuMsPerMessage,
    (b) => b.postgresCpuMs
  )
  const legendY = PANEL.top + PANEL.height + 72
  const legend = claims
    .map((s, i) => {
      const y = legendY + i * 20
      return [
        `<line x1="80" y1="${y}" x2="120" y2="${y}" stroke="${s.color}" stroke-width="2.5"${s.dashed ? ` stroke-dasharray="7 5"` : ""}/>`,
        `<circle cx="100" cy="${y}" r="4.5" fill="${s.dashed ? "#fff" : s.color}" stroke="${s.color}" stroke-width="2"/>`,
        `<text x="130" y="${y + 4}" font-size="13">${xmlText(s.label)}</text>`
      ].join("\n  ")
    })
    .join("\n  ")
  const svg = `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${HEIGHT}" viewBox="0 0 ${WIDTH} ${HEIGHT}" ${FONT} fill="#222">
  <title>${TITLE}</title>
  <rect width="${WIDTH}" height="${HEIGHT}" fill="#fff"/>
  <text x="${WIDTH / 2}" y="28" text-anchor="middle" font-size="17" font-weight="bold">Reference broker: what one message costs PostgreSQL as consumers grow</text>
  <text x="${WIDTH / 2}" y="52" text-anchor="middle" font-size="13">3 replicas over one PostgreSQL, TCP mesh; 150 messages pushed one at a time on one replica, 10 ms apart;</text>
  <text x="${WIDTH / 2}" y="70" text-anchor="middle" font-size="13">each consumer long-polls one queue (batch 1, wait 2 s), acks what it got, and polls again</text>
  ${panel(LEFTS[0]!, "Claims per message", claims)}
  ${panel(LEFTS[1]!, "PostgreSQL CPU per message (ms)", cpu)}
  ${legend}
</svg>
`
  const path = Path.resolve(root, file)
  Fs.mkdirSync(Path.dirname(path), { recursive: true })
  Fs.writeFileSync(path, svg)
  return file
}
