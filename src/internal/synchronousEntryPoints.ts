/**
 * The synchronous twins of the host services' effectful entry points (`Waker.wake`,
 * `HotList.markDirty`), found from the entry point itself. A host service built with `Waker.sync` or
 * `HotList.sync` has one function; the mesh calls it straight from the receive path, saving an effect
 * per frame. The twin is keyed by the effectful function, never carried as a field of its own: a host
 * that wraps a service (`{ ...local, wake: mine }`) replaces the entry point, and with it the twin, so
 * the mesh calls `mine` and the wrapper cannot be bypassed.
 *
 * @internal
 */
const twins = new WeakMap<object, (input: never) => void>()

/** Records `sync` as the twin of `entry`; returns `entry`. */
export const register = <A, F extends (input: A) => unknown>(entry: F, sync: (input: A) => void): F => {
  twins.set(entry, sync as (input: never) => void)
  return entry
}

/** The twin of `entry`, if it was built with one. */
export const twinOf = <A>(entry: (input: A) => unknown): ((input: A) => void) | undefined =>
  twins.get(entry) as ((input: A) => void) | undefined
