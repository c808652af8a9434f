/**
 * The cluster page's files: plain HTML, CSS and script in the package's `src/view/`, served as they
 * are (no build step). The directory is found from this module's own place, which is `src/internal/`
 * when run from the sources and `dist/internal/` when run from the build: both are two levels under
 * the package's root. Each file is read once, on its first request.
 *
 * @internal
 */
import * as Fs from "node:fs"

export const directory = new URL("../../../src/view/", import.meta.url)

export const files = {
  page: ["cluster.html", "text/html; charset=utf-8"],
  style: ["cluster.css", "text/css; charset=utf-8"],
  script: ["cluster.js", "text/javascript; charset=utf-8"]
} as const

export type Name = keyof typeof files

export interface Asset {
  readonly file: string
  readonly body: Uint8Array
  readonly contentType: string
}

const read = new Map<Name, Asset | null>()

/** The file's bytes and type; `null` when it is missing from the package. */
export const assetOf = (name: Name): Asset | null => {
  const known = read.get(name)
  if (known !== undefined) return known
  const [file, contentType] = files[name]
  let asset: Asset | null
  try {
    asset = { file, body: Fs.readFileSync(new URL(file, directory)), contentType }
  } catch {
    asset = null
  }
  read.set(name, asset)
  return asset
}
