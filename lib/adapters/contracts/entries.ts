import type { Adapter, AdapterConstructor, AdapterFactory } from 'oidc-provider';
import type { AdapterSource } from '../../core-options.js';

/**
 * What every adapter shares for oidc-provider's own models, whatever domains
 * of the plugin it stores: how an adapter is opened, which models a revoked
 * grant takes along, and how long an entry lives.
 */

export function instantiateAdapter(source: AdapterSource, name: string): Adapter {
  // Tell the two apart the way oidc-provider does, so both see the same instance kind.
  if (isConstructor(source)) {
    return new source(name);
  }
  return (source as AdapterFactory)(name);
}

function isConstructor(value: AdapterSource): value is AdapterConstructor {
  return typeof value.prototype === 'object' && value.prototype !== null;
}

/**
 * The models whose entries `revokeByGrantId(grantId)` removes: those
 * oidc-provider saves with a `grantId` that a revoked grant must take along,
 * the same six as in its own memory adapter. Never an Interaction, a Session
 * or the Grant itself.
 */
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

/**
 * How long an entry lives, from the `expiresIn` (seconds) oidc-provider passes
 * to `upsert`; every adapter reads it this one way, as oidc-provider does (its
 * own memory adapter keeps an entry until now + expiresIn, and a model counts
 * as expired once `exp <= now`, so a model saved in its last second passes 0):
 *
 * - no `expiresIn` (or not a finite number): the entry never expires: `undefined`;
 * - 0 or less: the entry is already expired: it replaces any earlier version
 *   of itself and is never found, consumed nor revoked: `0`;
 * - more: that many seconds, in whole milliseconds rounded up (so at least 1).
 */
export function entryLifetimeMs(expiresIn: number | undefined): number | undefined {
  if (typeof expiresIn !== 'number' || !Number.isFinite(expiresIn)) return undefined;
  if (expiresIn <= 0) return 0;
  return Math.min(Math.ceil(expiresIn * 1000), LIFETIME_CAP_MS);
}
