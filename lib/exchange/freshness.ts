import type Koa from 'koa';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
import type { VerifiedAccessToken } from '../access-token.js';
import { insufficientUserAuthentication } from '../errors.js';
import type { ActorAuthentication } from '../options.js';

/** The requirement a refused exchange did not meet, for stepUpDetails to add to the error body. */
const unmet = new WeakMap<object, ActorAuthentication>();

/**
 * Step-up (RFC 9470): the actor's sign-in must be at most `maxAge` seconds old
 * and of an `acr` in `acrValues`. An opaque actor token is judged by its
 * session; a JWT by its `auth_time` and `acr` claims. What cannot be told is
 * not fresh enough. Runs before the subject token is redeemed, so a refusal
 * burns nothing: the console signs the actor in again and retries.
 */
export async function checkActorAuthentication(
  ctx: KoaContextWithOIDC,
  actor: VerifiedAccessToken,
  required: ActorAuthentication,
): Promise<void> {
  const { authTime, acr } =
    actor.format === 'jwt' ? actor : await sessionAuthentication(ctx.oidc.provider, actor.sessionUid);
  const stale =
    required.maxAge !== undefined && (authTime === undefined || Date.now() / 1000 - authTime > required.maxAge);
  const weak = required.acrValues !== undefined && (acr === undefined || !required.acrValues.includes(acr));
  if (!stale && !weak) return;
  unmet.set(ctx, required);
  throw insufficientUserAuthentication(
    stale
      ? `the actor signed in more than ${required.maxAge} seconds ago; sign in again (max_age=${required.maxAge})`
      : `the actor's sign-in is not strong enough; sign in again with acr_values=${required.acrValues!.join(' ')}`,
  );
}

async function sessionAuthentication(
  provider: Provider,
  sessionUid: string | undefined,
): Promise<{ authTime?: number; acr?: string }> {
  if (sessionUid === undefined) return {};
  const session = (await provider.Session.findByUid(sessionUid)) as { loginTs?: number; acr?: string } | undefined;
  return {
    ...(typeof session?.loginTs === 'number' ? { authTime: session.loginTs } : {}),
    ...(typeof session?.acr === 'string' ? { acr: session.acr } : {}),
  };
}

/**
 * Adds `max_age` and `acr_values` to an `insufficient_user_authentication`
 * body, as RFC 9470 names them, so that a client can ask for exactly the
 * sign-in it needs. oidc-provider's error rendering knows no such members.
 */
export function stepUpDetails(): Koa.Middleware {
  return async (ctx, next) => {
    await next();
    const required = unmet.get(ctx);
    const body = ctx.body as { error?: unknown } | undefined;
    if (!required || body?.error !== 'insufficient_user_authentication') return;
    ctx.body = {
      ...body,
      ...(required.maxAge === undefined ? {} : { max_age: required.maxAge }),
      ...(required.acrValues === undefined ? {} : { acr_values: required.acrValues.join(' ') }),
    };
  };
}
