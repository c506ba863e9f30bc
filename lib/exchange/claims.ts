import type { AccessToken, ClientCredentials, Configuration, KoaContextWithOIDC } from 'oidc-provider';
import { errors, invalidRequest } from '../errors.js';
import type { CustomJwtClaimsFunction, CustomJwtClaimsInput } from '../core-options.js';
import { jsonCopy } from '../json.js';
import { SESSION_CLAIM } from '../sessions/record.js';

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
  // oidc-provider's own payload members, which extra would shadow in introspection.
  'authorization_details',
  'token_type',
  'may_act',
  // The impersonation session the token belongs to: what a revocation is checked against.
  SESSION_CLAIM,
  // An impersonation token claims nothing about the customer's own sign-in.
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

/** Carries an exchange's claims to `extraTokenClaims` on the token object itself: nothing leaks between requests. */
export class ExchangeClaims {
  readonly #key = Symbol('impersonation exchange claims');

  attach(token: AccessToken, claims: Record<string, unknown>): void {
    (token as unknown as Record<symbol, Record<string, unknown>>)[this.#key] = claims;
  }

  /** Wraps the deployment's `extraTokenClaims`: reserved claims and `act` dropped, so only an exchange sets an actor. */
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

export function isThenable(value: unknown): value is PromiseLike<unknown> {
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

/** Runs `getCustomJwtClaims` under a deadline; any failure is an `invalid_request`, before anything is burned. */
export function runCustomClaims(
  hook: CustomJwtClaimsFunction,
  input: CustomJwtClaimsInput,
  timeoutMs: number,
): Record<string, unknown> | Promise<Record<string, unknown>> {
  const refusal = (error: unknown) =>
    error instanceof errors.InvalidRequest ? error : invalidRequest('getCustomJwtClaims failed', error);
  try {
    const result = hook(input);
    // A hook that answers at once is not waited for.
    if (!isThenable(result)) return checkedClaims(result);
    return withDeadline(result, timeoutMs).then(checkedClaims, (error: unknown) => Promise.reject(refusal(error)));
  } catch (error) {
    // Never a synchronous throw: the step timing the hook ends either way.
    return Promise.reject(refusal(error));
  }
}

function checkedClaims(result: unknown): Record<string, unknown> {
  if (typeof result !== 'object' || result === null || Array.isArray(result)) {
    throw invalidRequest('getCustomJwtClaims must return an object');
  }
  const reserved = Object.keys(result).filter((name) => RESERVED_CLAIMS.has(name));
  if (reserved.length) throw invalidRequest(`getCustomJwtClaims may not set reserved claims: ${reserved.join(', ')}`);
  try {
    // Claims must survive a JWT or the adapter; a BigInt or a cycle would fail later, at save.
    return jsonCopy(result) as Record<string, unknown>;
  } catch (error) {
    throw invalidRequest('getCustomJwtClaims returned claims that are not JSON', error);
  }
}
