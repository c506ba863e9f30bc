import type { KoaContextWithOIDC } from 'oidc-provider';
import { verifyAccessToken, type VerifiedAccessToken } from '../access-token.js';
import { invalidRequest } from '../errors.js';
import type { DpopProof } from '../provider-internals.js';

/** RFC 8693 4.1: the current actor, with earlier actors nested below. */
export interface ActClaim {
  sub: string;
  act?: Record<string, unknown>;
  [claim: string]: unknown;
}

/**
 * An actor-token lookup under way. It never rejects (a store failure is its
 * outcome), so it may be left unawaited when the exchange is refused first.
 */
export type ActorTokenLookup = Promise<{ token: VerifiedAccessToken | undefined } | { failure: unknown }>;

export function lookUpActorToken(ctx: KoaContextWithOIDC, value: string): ActorTokenLookup {
  return verifyAccessToken(ctx.oidc.provider, value, 'AccessToken').then((token) => ({ token }), (failure: unknown) => ({ failure }));
}

/**
 * An actor token must be a valid, unexpired access token of this provider,
 * issued to a user, with `openid` in its scope set. A sender-constrained actor
 * token counts only with its proof: presenting a DPoP-bound token as a bare
 * string would turn a stolen copy back into a bearer credential.
 */
export async function validateActorToken(
  lookup: ActorTokenLookup,
  dpop: DpopProof | undefined,
  certificateThumbprint: string | undefined,
): Promise<VerifiedAccessToken> {
  const outcome = await lookup;
  if ('failure' in outcome) throw outcome.failure;
  const { token } = outcome;
  if (!token) {
    throw invalidRequest('actor_token is invalid, expired or not issued by this server');
  }
  if (token.sub === token.clientId) {
    throw invalidRequest('actor_token does not represent a user');
  }
  if (!token.scopes.has('openid')) {
    throw invalidRequest('actor_token must carry the openid scope');
  }
  if (token.cnf?.jkt && token.cnf.jkt !== dpop?.thumbprint) {
    throw invalidRequest('actor_token is DPoP-bound; the request must carry a DPoP proof of the same key');
  }
  if (token.cnf?.['x5t#S256'] && token.cnf['x5t#S256'] !== certificateThumbprint) {
    throw invalidRequest('actor_token is certificate-bound; the request must use the same client certificate');
  }
  return token;
}

/** `act` for the issued token; an `act` the actor token already has moves one level down. */
export function actFor(actor: VerifiedAccessToken): ActClaim {
  return actor.act ? { sub: actor.sub, act: actor.act } : { sub: actor.sub };
}
