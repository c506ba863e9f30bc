import type { AccessToken, ClientCredentials, Configuration, KoaContextWithOIDC } from 'oidc-provider';
import { errors, invalidRequest } from '../errors.js';
import type { CustomJwtClaimsFunction, CustomJwtClaimsInput } from '../core-options.js';
import { jsonCopy } from '../json.js';
import { SESSION_CLAIM } from '../sessions/record.js';
import type { ActClaim } from './actor.js';

/** Claims that identify, bind or limit a token: no hook may set them. */
export const RESERVED_CLAIMS: ReadonlySet<string> = new Set([
  'sub',
  'aud',
  'iss',
  'exp',
  'iat',
  'nbf',
  'jti',
  'client_id',
  'scope',
  'act',
  'cnf',
  // oidc-provider's own payload members, which introspection of opaque tokens would let extra shadow
  'authorization_details',
  'token_type',
  'may_act',
  // The impersonation session the token belongs to: what a revocation is checked against.
  SESSION_CLAIM,
  // How and when a user authenticated, and ID-token-only claims: an impersonation
  // token must never claim anything about the customer's own sign-in.
  'acr',
  'amr',
  'auth_time',
  'sid',
  'azp',
  'nonce',
  'typ',
  'at_hash',
  'c_hash',
  's_hash',
  'events',
]);

type ExtraTokenClaims = NonNullable<Configuration['extraTokenClaims']>;

/**
 * Carries the claims an exchange decided from the grant handler to
 * oidc-provider's `extraTokenClaims`, which runs inside `token.save()`. They ride
 * on the token object itself, so nothing leaks between requests (a WeakMap
 * did the same at several times the cost).
 */
export class ExchangeClaims {
  /** A symbol of this instance's own: only an exchange of this plugin can set it, and no payload ever lists it. */
  readonly #key = Symbol('impersonation exchange claims');

  attach(token: AccessToken, claims: Record<string, unknown>): void {
    (token as unknown as Record<symbol, Record<string, unknown>>)[this.#key] = claims;
  }

  /**
   * Wraps the deployment's own `extraTokenClaims`. Ours are added after its
   * claims, minus the reserved ones; `act` is dropped from every token it
   * shapes, so only an exchange can ever put an actor into a token.
   */
  wrap(existing: ExtraTokenClaims | undefined): ExtraTokenClaims {
    const key = this.#key;
    return async function extraTokenClaims(ctx: KoaContextWithOIDC, token: AccessToken | ClientCredentials) {
      const base = existing ? await existing(ctx, token) : undefined;
      const ours = (token as unknown as Record<symbol, Record<string, unknown> | undefined>)[key];
      if (!ours) {
        if (!base || !('act' in base)) return base;
        const { act: _dropped, ...rest } = base;
        return rest;
      }
      const kept = base ? Object.fromEntries(Object.entries(base).filter(([name]) => !RESERVED_CLAIMS.has(name))) : {};
      return { ...kept, ...ours };
    };
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

async function withDeadline(answer: PromiseLike<unknown>, timeoutMs: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(invalidRequest(`getCustomJwtClaims did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
  });
  try {
    return await Promise.race([answer, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

export function actClaims(act: ActClaim | undefined): Record<string, unknown> {
  return act ? { act } : {};
}

/**
 * Runs the integrator's `getCustomJwtClaims` under a deadline and checks what
 * it returns. Any failure is an `invalid_request` naming the cause; it happens
 * before the subject token is redeemed, so the token stays usable.
 */
export async function runCustomClaims(
  hook: CustomJwtClaimsFunction,
  input: CustomJwtClaimsInput,
  timeoutMs: number,
): Promise<Record<string, unknown>> {
  let result: unknown;
  try {
    result = hook(input);
    // A hook that answers at once needs no deadline (nor its timer): only a promise can keep the exchange waiting.
    if (isThenable(result)) result = await withDeadline(result, timeoutMs);
  } catch (error) {
    if (error instanceof errors.InvalidRequest) throw error;
    throw invalidRequest('getCustomJwtClaims failed', error);
  }

  if (typeof result !== 'object' || result === null || Array.isArray(result)) {
    throw invalidRequest('getCustomJwtClaims must return an object');
  }
  const reserved = Object.keys(result).filter((name) => RESERVED_CLAIMS.has(name));
  if (reserved.length) {
    throw invalidRequest(`getCustomJwtClaims may not set reserved claims: ${reserved.join(', ')}`);
  }
  try {
    // Claims must survive a JWT or the adapter; a BigInt or a cycle would fail later, at save.
    return jsonCopy(result) as Record<string, unknown>;
  } catch (error) {
    throw invalidRequest('getCustomJwtClaims returned claims that are not JSON', error);
  }
}
