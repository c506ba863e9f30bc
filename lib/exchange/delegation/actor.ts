import type { KoaContextWithOIDC } from 'oidc-provider';
import { verifyAccessToken, type VerifiedAccessToken } from '../../access-token.js';
import { invalidRequest } from '../../errors.js';
import { accountExists } from '../account.js';
import { checkSenderConstraint, type ActorProof } from '../actor.js';
import { checkStatedType } from '../request.js';
import type { VerifiedSubject } from '../subject/delegation.js';

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
  actorToken: string | undefined,
  actorTokenType: string | undefined,
  proof: ActorProof,
): Promise<DelegationActor> {
  const clientId = ctx.oidc.client!.clientId;
  if (actorToken === undefined) return { sub: clientId, type: 'client', claim: { sub: clientId, client_id: clientId } };
  checkStatedType('actor_token', actorToken, actorTokenType);
  const provider = ctx.oidc.provider;
  const token =
    (await verifyAccessToken(provider, actorToken, 'AccessToken')) ??
    (await verifyAccessToken(provider, actorToken, 'ClientCredentials'));
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
export function checkMayAct(ctx: KoaContextWithOIDC, subject: VerifiedSubject, actor: DelegationActor): void {
  const mayAct = subject.mayAct;
  if (mayAct === undefined) return;
  if (typeof mayAct !== 'object' || mayAct === null || Array.isArray(mayAct)) {
    throw invalidRequest('subject_token has a may_act claim that is not a JSON object');
  }
  const { sub, client_id: clientId, iss } = mayAct as Record<string, unknown>;
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
