import type { KoaContextWithOIDC } from 'oidc-provider';
import { verifyAccessToken, type VerifiedAccessToken } from '../access-token.js';
import { invalidRequest } from '../errors.js';
import type { DpopProof } from '../provider-internals.js';
import { accountExists } from './account.js';

/** RFC 8693 4.1: the current actor, with earlier actors nested below. */
export interface ActClaim {
  sub: string;
  act?: Record<string, unknown>;
  [claim: string]: unknown;
}

/** An actor-token lookup under way; never rejects (a store failure is its outcome), so it may go unawaited. */
export type ActorTokenLookup = Promise<{ token: VerifiedAccessToken | undefined } | { failure: unknown }>;

/** Looks the actor token up as oidc-provider's verifyAccessToken would honour it; a JWT until its `exp`. */
export function lookUpActorToken(ctx: KoaContextWithOIDC, value: string): ActorTokenLookup {
  return verifyAccessToken(ctx.oidc.provider, value, 'AccessToken').then(
    (token) => ({ token }),
    (failure: unknown) => ({ failure }),
  );
}

/** What an actor token is checked against besides itself: whose tokens count, and the request's proofs. */
export interface ActorProof {
  /** Clients besides the exchanging one whose users' tokens count as actor tokens. */
  actorClients: ReadonlySet<string>;
  dpop: DpopProof | undefined;
  certificateThumbprint: string | undefined;
}

/** A DPoP- or certificate-bound token presented as a bare string would be a stolen copy turned back into a bearer one. */
export function checkSenderConstraint(name: string, cnf: VerifiedAccessToken['cnf'], proof: ActorProof): void {
  if (cnf?.jkt && cnf.jkt !== proof.dpop?.thumbprint) {
    throw invalidRequest(`${name} is DPoP-bound; the request must carry a DPoP proof of the same key`);
  }
  if (cnf?.['x5t#S256'] && cnf['x5t#S256'] !== proof.certificateThumbprint) {
    throw invalidRequest(`${name} is certificate-bound; the request must use the same client certificate`);
  }
}

/** An impersonation's actor: also whether the session an exchanged actor token belongs to is still active. */
export interface ImpersonationActorRules extends ActorProof {
  sessionActive(sessionId: string): Promise<boolean>;
}

/** An actor token honoured, of a user who exists, with `openid`, issued to this client or `actorClients`. */
export async function validateActorToken(
  ctx: KoaContextWithOIDC,
  lookup: ActorTokenLookup,
  rules: ImpersonationActorRules,
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
  // A stopped impersonation's JWT verifies until its exp: it must not start new impersonations.
  if (token.impersonationSession !== undefined && !(await rules.sessionActive(token.impersonationSession))) {
    throw invalidRequest('actor_token belongs to an impersonation session that was stopped');
  }
  checkSenderConstraint('actor_token', token.cnf, rules);
  if (token.clientId !== ctx.oidc.client!.clientId) {
    if (!rules.actorClients.has(token.clientId)) {
      throw invalidRequest('actor_token was issued to a client whose tokens are not accepted as actor tokens here');
    }
    if (!(await ctx.oidc.provider.Client.find(token.clientId))) {
      throw invalidRequest('actor_token was issued to a client that no longer exists');
    }
  }
  if (!(await accountExists(ctx, token.sub))) {
    throw invalidRequest('actor_token names a user that no longer exists');
  }
  return token;
}

/** `act` for the issued token; an `act` the actor token already has moves one level down. */
export function actFor(actor: VerifiedAccessToken): ActClaim {
  return actor.act ? { sub: actor.sub, act: actor.act } : { sub: actor.sub };
}
