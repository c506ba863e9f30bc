import type { EventEmitter } from 'node:events';
import type { KoaContextWithOIDC, Provider } from 'oidc-provider';
import type { VerifiedAccessToken } from '../access-token.js';
import { InsufficientUserAuthentication, insufficientUserAuthentication } from '../errors.js';
import type { ActorAuthentication } from '../core-options.js';
import { definedMembers } from '../json.js';

/** Step-up (RFC 9470): the actor's sign-in at most `maxAge` old, of an `acr` in `acrValues`; unknown is not fresh. */
export async function checkActorAuthentication(
  ctx: KoaContextWithOIDC,
  actor: VerifiedAccessToken,
  required: ActorAuthentication,
): Promise<void> {
  const read = actor.format === 'jwt' || actor.authTime !== undefined ? actor : undefined;
  const { authTime, acr } = read ?? (await sessionAuthentication(ctx.oidc.provider, actor.sessionUid));
  const stale =
    required.maxAge !== undefined && (authTime === undefined || Date.now() / 1000 - authTime > required.maxAge);
  const weak = required.acrValues !== undefined && (acr === undefined || !required.acrValues.includes(acr));
  if (!stale && !weak) return;
  throw insufficientUserAuthentication(
    stale
      ? `the actor signed in more than ${required.maxAge} seconds ago; sign in again (max_age=${required.maxAge})`
      : `the actor's sign-in is not strong enough; sign in again with acr_values=${required.acrValues!.join(' ')}`,
    required,
  );
}

async function sessionAuthentication(provider: Provider, sessionUid: string | undefined) {
  const { loginTs, acr } = (sessionUid === undefined ? undefined : await provider.Session.findByUid(sessionUid)) ?? {};
  return {
    authTime: typeof loginTs === 'number' ? loginTs : undefined,
    acr: typeof acr === 'string' ? acr : undefined,
  };
}

/** Adds RFC 9470's `max_age` and `acr_values` to the error body; a `grant.error` listener works however the provider is mounted. */
export function addStepUpDetails(provider: Provider): void {
  (provider as unknown as EventEmitter).on('grant.error', (ctx: KoaContextWithOIDC, error: unknown) => {
    if (!(error instanceof InsufficientUserAuthentication)) return;
    const body = ctx.body as { error?: unknown } | undefined;
    // An HTML error page (a client that asked for text/html) is the deployment's renderError's.
    if (typeof body !== 'object' || body === null || body.error !== 'insufficient_user_authentication') return;
    const { maxAge, acrValues } = error.stepUp;
    ctx.body = { ...body, ...definedMembers({ max_age: maxAge, acr_values: acrValues?.join(' ') }) };
  });
}
