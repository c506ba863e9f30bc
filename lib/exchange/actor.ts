import type { KoaContextWithOIDC } from 'oidc-provider';
import { isObject, type AccessTokens, type VerifiedAccessToken } from '../access-token.js';
import { invalidRequest } from '../errors.js';
import type { DpopProof } from '../provider-internals.js';
import { accountExists } from './account.js';
import type { VerifiedSubject } from './delegated-subject.js';
import { checkStatedType, type ExchangeParams } from './request.js';

/** RFC 8693 4.1: the current actor, with earlier actors nested below. */
export interface ActClaim {
  sub: string;
  act?: Record<string, unknown>;
  [claim: string]: unknown;
}

/** An actor-token lookup under way; never rejects (a store failure is its outcome), so it may go unawaited. */
export type ActorTokenLookup = Promise<{ token: VerifiedAccessToken | undefined } | { failure: unknown }>;

/** Looks the actor token up as oidc-provider's verifyAccessToken would honour it; a JWT until its `exp`. */
export function lookUpActorToken(tokens: AccessTokens, value: string): ActorTokenLookup {
  return tokens.verify(value, 'AccessToken').then(
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
  if (!token) throw invalidRequest('actor_token is invalid, expired, revoked or not issued by this server');
  if (token.sub === token.clientId) throw invalidRequest('actor_token does not represent a user');
  if (!token.scopes.has('openid')) throw invalidRequest('actor_token must carry the openid scope');
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
  const exists = accountExists(ctx, token.sub);
  if (!(exists instanceof Promise ? await exists : exists)) {
    throw invalidRequest('actor_token names a user that no longer exists');
  }
  return token;
}

/** `act` for the issued token; an `act` the actor token already has moves one level down. */
export function actFor(actor: VerifiedAccessToken): ActClaim {
  return actor.act ? { sub: actor.sub, act: actor.act } : { sub: actor.sub };
}

/** Who acts: the claim that goes on top of the `act` chain, and its name for the session and the policy. */
export interface DelegationActor {
  sub: string;
  /** A client acting as itself (no actor token, or a client-credentials one), or a user. */
  type: 'client' | 'user';
  claim: Record<string, unknown>;
}

/** The actor: the client, or the party an actor token of this provider names (its own, never an exchange's). */
export async function delegationActor(
  ctx: KoaContextWithOIDC,
  tokens: AccessTokens,
  { actor_token: actorToken, actor_token_type: actorTokenType }: ExchangeParams,
  proof: ActorProof,
): Promise<DelegationActor> {
  const clientId = ctx.oidc.client!.clientId;
  if (actorToken === undefined) return { sub: clientId, type: 'client', claim: { sub: clientId, client_id: clientId } };
  checkStatedType('actor_token', actorToken, actorTokenType);
  const token =
    (await tokens.verify(actorToken, 'AccessToken')) ?? (await tokens.verify(actorToken, 'ClientCredentials'));
  if (!token) throw invalidRequest('actor_token is invalid, expired, revoked or not issued by this server');
  refuseExchangedToken(token);
  if (token.clientId !== clientId && !proof.actorClients.has(token.clientId)) {
    throw invalidRequest('actor_token was issued to a client whose tokens are not accepted as actor tokens here');
  }
  checkSenderConstraint('actor_token', token.cnf, proof);
  // A client-credentials token's `sub` is its client's id.
  const type = token.sub === token.clientId ? 'client' : 'user';
  // A user acts only while the deployment knows them: a JWT names no Grant, and would outlive their removal.
  if (type === 'user' && !(await accountExists(ctx, token.sub))) {
    throw invalidRequest('actor_token names a user that no longer exists');
  }
  return { sub: token.sub, type, claim: { sub: token.sub, client_id: clientId } };
}

/** RFC 8693 4.4: a `may_act` refuses anyone it does not name; one that is not an object names no one. */
export function checkMayAct(
  ctx: KoaContextWithOIDC,
  subject: Pick<VerifiedSubject, 'mayAct'>,
  actor: Pick<DelegationActor, 'sub'>,
): void {
  const mayAct = subject.mayAct;
  if (mayAct === undefined) return;
  if (!isObject(mayAct)) throw invalidRequest('subject_token has a may_act claim that is not a JSON object');
  const { sub, client_id: clientId, iss } = mayAct;
  if (sub === undefined && clientId === undefined) {
    throw invalidRequest('subject_token has a may_act claim that names no actor');
  }
  if (
    (sub !== undefined && sub !== actor.sub) ||
    (clientId !== undefined && clientId !== ctx.oidc.client!.clientId) ||
    (iss !== undefined && iss !== ctx.oidc.provider.issuer)
  ) {
    throw invalidRequest('the subject_token may_act claim does not allow this actor');
  }
}

/** RFC 8693 4.1: a token an exchange issued acts for its subject, so it is no actor token. */
export function refuseExchangedToken(token: VerifiedAccessToken): void {
  if (token.act !== undefined || token.impersonationSession !== undefined) {
    throw invalidRequest(
      'actor_token was issued by a token exchange (it carries act or an impersonation session); the actor must present a token of its own',
    );
  }
}

/** RFC 8693 4.1: the new actor on top of the subject token's chain, copied whole so no actor is dropped. */
export function nestedAct(
  actor: Record<string, unknown>,
  earlier: Record<string, unknown> | undefined,
  maxDepth: number,
): { act: Record<string, unknown>; depth: number } {
  const depth = 1 + chainDepth(earlier);
  if (depth > maxDepth) {
    throw invalidRequest(`the act chain would name ${depth} actors; this server allows at most ${maxDepth}`);
  }
  return { act: earlier === undefined ? { ...actor } : { ...actor, act: earlier }, depth };
}

/** Actors an `act` claim names; a chain deeper than any limit stops the count (and so is refused). */
function chainDepth(act: Record<string, unknown> | undefined): number {
  let depth = 0;
  for (let level: unknown = act; isObject(level); level = level['act']) {
    depth += 1;
    if (depth > 64) break;
  }
  return depth;
}
