import type { Adapter, AdapterConstructor, AdapterFactory } from 'oidc-provider';
import type { AdapterSource } from '../../core-options.js';

/** What every adapter shares for oidc-provider's own models: opening, grant revocation, lifetimes. */

export function instantiateAdapter(source: AdapterSource, name: string): Adapter {
  // Tell the two apart the way oidc-provider does, so both see the same instance kind.
  const isClass = typeof source.prototype === 'object' && source.prototype !== null;
  return isClass ? new (source as AdapterConstructor)(name) : (source as AdapterFactory)(name);
}

/** The models `revokeByGrantId` removes: the six oidc-provider's memory adapter does; never Interaction, Session or Grant. */
export const GRANTABLE_MODELS: ReadonlySet<string> = new Set([
  'AccessToken',
  'AuthorizationCode',
  'RefreshToken',
  'DeviceCode',
  'BackchannelAuthenticationRequest',
  'PreAuthorizedCode',
]);

/** Whole milliseconds up to which a lifetime is kept; a longer one (about 285,000 years) is cut to it. */
const LIFETIME_CAP_MS = Number.MAX_SAFE_INTEGER;

/** An entry's lifetime in ms from `expiresIn` (s), as oidc-provider reads it: undefined never expires, 0 already expired. */
export function entryLifetimeMs(expiresIn: number | undefined): number | undefined {
  if (typeof expiresIn !== 'number' || !Number.isFinite(expiresIn)) return undefined;
  if (expiresIn <= 0) return 0;
  return Math.min(Math.ceil(expiresIn * 1000), LIFETIME_CAP_MS);
}
