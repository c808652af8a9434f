/**
 * The tenant rule of the shipped waker (spec "The frame set", tags 1 and 2): which tenant a wake or a
 * pop names.
 *
 * An **absent** tenant on a wake comes from a peer that predates tenant scoping and fans out to every
 * tenant with pops parked on that queue name; attributing it to the default tenant would drop the wake
 * for everyone else. With tenancy off no other tenant can exist, so an absent tenant names the default
 * tenant and the lookup is one hash probe. The default tenant is upstream Queen's
 * `00000000-0000-0000-0000-000000000001` unless `defaultTenant` says otherwise, and a UUID tenant is the
 * same tenant in any case (the mesh decoder lowercases it; the host API does too). A name over the
 * wire's limit (255 characters) names no tenant: the caller refuses it.
 *
 * @internal
 */
import * as Option from "effect/Option"
import * as Names from "../wire/names.js"

/** Distinct tenant strings remembered, normalised, before the memory is dropped whole. */
const REMEMBERED = 256

/** The tenant rule for a name already known to be a non-empty string: `undefined` when over-long. */
const normalTenant = (tenant: string): string | undefined => {
  const read = Names.tenant(tenant)
  return read === undefined ? undefined : Option.getOrUndefined(read)
}

/** Which tenant a wake or a pop names, under one waker's tenancy and default tenant. */
export class Tenants {
  /** Whether tenants other than the default exist. */
  readonly tenancy: boolean
  /** The default tenant, normalised. */
  readonly defaultTenant: string
  // Tenants as normalised, by the string given: a wake names one of few tenants, and the rule (a UUID
  // test) costs more than the lookup.
  private readonly normalised = new Map<string, string | undefined>()

  constructor(options: { readonly tenancy?: boolean; readonly defaultTenant?: string }) {
    this.tenancy = options.tenancy ?? true
    this.defaultTenant =
      options.defaultTenant === undefined || options.defaultTenant === ""
        ? Names.DEFAULT_TENANT
        : (normalTenant(options.defaultTenant) ?? options.defaultTenant)
  }

  /** Whether a wake carrying `tenant` goes to every tenant parked on its queue (absent, tenancy on). */
  fansOut(tenant: Option.Option<string>): boolean {
    return this.tenancy && (Option.isNone(tenant) || tenant.value === "")
  }

  /** The tenant a wake carrying `tenant` names (absent: the default tenant); `undefined` when over-long. */
  ofWake(tenant: Option.Option<string>): string | undefined {
    return Option.isSome(tenant) && tenant.value !== "" ? this.known(tenant.value) : this.defaultTenant
  }

  /**
   * The tenant a host call for `queue` and `tenant` names (a string, an `Option` or none: `undefined`,
   * `null` or `""` name the default tenant); `undefined` when either name is refused.
   */
  ofTarget(queue: string, tenant: Option.Option<string> | string | null | undefined): string | undefined {
    if (!Names.fitsName(queue)) return undefined
    const read = Names.tenantInput(tenant)
    if (read === undefined) return undefined
    return Option.isSome(read) ? read.value : this.defaultTenant
  }

  /** A named tenant, normalised; `undefined` when over-long. */
  private known(given: string): string | undefined {
    let normal = this.normalised.get(given)
    if (normal === undefined && !this.normalised.has(given)) {
      normal = normalTenant(given)
      if (this.normalised.size >= REMEMBERED) this.normalised.clear()
      this.normalised.set(given, normal)
    }
    return normal
  }
}
