import type { KoaContextWithOIDC } from 'oidc-provider';
import { verifyAccessToken, type VerifiedAccessToken } from '../access-token.js';
import { invalidRequest } from '../errors.js';
import { providerConfiguration, type DpopProof } from '../provider-internals.js';

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

/**
 * Looks the actor token up as oidc-provider would still honour it (see
 * verifyAccessToken). A JWT names no grant; it is honoured until its `exp`.
 */
export function lookUpActorToken(ctx: KoaContextWithOIDC, value: string): ActorTokenLookup {
  return verifyAccessToken(ctx.oidc.provider, value, 'AccessToken').then(
    (token) => ({ token }),
    (failure: unknown) => ({ failure }),
  );
}

export interface ActorRules {
  /** Clients besides the exchanging one whose users' tokens count as actor tokens. */
  actorClients: ReadonlySet<string>;
  dpop: DpopProof | undefined;
  certificateThumbprint: string | undefined;
}

/**
 * An actor token must be a token oidc-provider still honours, issued to a
 * user who still exists, with `openid` in its scope set, to the exchanging
 * client or one the deployment names in `actorClients`: a user's token from
 * some other relying party proves nothing about who sits at this one. A
 * sender-constrained actor token counts only with its proof: presenting a
 * DPoP-bound token as a bare string would turn a stolen copy back into a
 * bearer credential.
 */
export async function validateActorToken(
  ctx: KoaContextWithOIDC,
  lookup: ActorTokenLookup,
  rules: ActorRules,
): Promise<VerifiedAccessToken> {
  const outcome = await lookup;
  if ('failure' in outcome) throw outcome.failure;
  const { token } = outcome;
  if (!token) {
    throw invalidRequest('actor_token is invalid, expired, revoked or not issued by this server');
  }
  if (token.sub === token.clientId) {
    throw invalidRequest('actor_token does not represent a user');
  }
  if (!token.scopes.has('openid')) {
    throw invalidRequest('actor_token must carry the openid scope');
  }
  if (token.cnf?.jkt && token.cnf.jkt !== rules.dpop?.thumbprint) {
    throw invalidRequest('actor_token is DPoP-bound; the request must carry a DPoP proof of the same key');
  }
  if (token.cnf?.['x5t#S256'] && token.cnf['x5t#S256'] !== rules.certificateThumbprint) {
    throw invalidRequest('actor_token is certificate-bound; the request must use the same client certificate');
  }
  if (token.clientId !== ctx.oidc.client!.clientId) {
    if (!rules.actorClients.has(token.clientId)) {
      throw invalidRequest('actor_token was issued to a client whose tokens are not accepted as actor tokens here');
    }
    if (!(await ctx.oidc.provider.Client.find(token.clientId))) {
      throw invalidRequest('actor_token was issued to a client that no longer exists');
    }
  }
  const account = await providerConfiguration(ctx.oidc.provider).findAccount(ctx, token.sub);
  if (!account || account.accountId !== token.sub) {
    throw invalidRequest('actor_token names a user that no longer exists');
  }
  return token;
}

/** `act` for the issued token; an `act` the actor token already has moves one level down. */
export function actFor(actor: VerifiedAccessToken): ActClaim {
  return actor.act ? { sub: actor.sub, act: actor.act } : { sub: actor.sub };
}
