import { exchangeStep } from '../../telemetry/exchange.js';
import type { KoaContextWithOIDC } from 'oidc-provider';
import { publicTokenId, verifyAccessToken } from '../../access-token.js';
import { delegationQuotas, quotaRefusal, type DelegationPrincipals } from '../../capacity.js';
import { invalidRequest, PrincipalQuotaReached } from '../../errors.js';
import {
  certificateThumbprintOf,
  checkDpopReplay,
  releaseDpopProof,
  setTokenLifetime,
} from '../../provider-internals.js';
import { newSessionId, SESSION_CLAIM, type SessionRecord } from '../../sessions/record.js';
import { looksLikeSubjectToken } from '../../subject-tokens/token.js';
import { accountExists } from '../account.js';
import { commit } from '../commit.js';
import type { ExchangeDependencies, ExchangeKind, Exchanged } from '../kind.js';
import { readProof } from '../proof.js';
import { ACCESS_TOKEN_TYPE, exchangeParameters, JWT_TOKEN_TYPE } from '../request.js';
import { verifySubjectToken, type VerifiedSubject } from '../subject/delegation.js';
import { newExchangeToken } from '../token.js';
import { checkSenderConstraint } from '../actor.js';
import { checkMayAct, delegationActor } from './actor.js';
import { nestedAct } from './chain.js';
import { delegationResourcesOf } from './client-metadata.js';
import { accessGrantOf, checkCustomerGrant } from './customer-grant.js';
import { decideDelegation } from './policy.js';
import { assertActive, reissueDelegated } from './reissue.js';
import { DelegationReport, delegationSucceeded, type DelegationProgress } from './report.js';
import { delegatedScopes, delegationAccepts, isDelegationType, resolveTarget } from './request.js';
import { delegationKey, delegationSessionLifetime, LiveDelegations } from './reuse.js';

export interface DelegationExchange extends ExchangeKind<DelegationProgress> {
  /**
   * Whether this request is a delegation: a client allowed it, a subject
   * token type it verifies, and no impersonation subject token (`ist_…`),
   * which stays impersonation's exactly as before.
   */
  handles(ctx: KoaContextWithOIDC): boolean;
}

/**
 * RFC 8693 delegation: the subject token is an access token or a JWT of this
 * provider (or a type of the deployment's own). The steps read as the
 * protocol: the request, the subject token and whose it is, the target and
 * its scopes, the actor and the `act` chain, the deployment's decision, the
 * token and its session, committed as an impersonation's is.
 */
export function delegationExchange(dependencies: ExchangeDependencies): DelegationExchange {
  const { options, sessions, customerGrants, claims } = dependencies;
  const delegation = options.delegation;
  const accepts = delegationAccepts(delegation);
  const actorClients: ReadonlySet<string> = new Set(options.actorClients);
  const report = new DelegationReport();
  const liveDelegations = new LiveDelegations(sessions);

  async function exchange(ctx: KoaContextWithOIDC, progress: DelegationProgress): Promise<Exchanged> {
    const client = ctx.oidc.client!;
    const startedAt = Date.now();

    // The request.
    const served = delegationResourcesOf(client)!;
    const params = exchangeParameters(ctx, accepts);
    progress.subjectTokenType = params.subject_token_type;
    const dpop = await readProof(ctx);

    // The subject token, and whether this client may use it: issued to it, or for an API it runs.
    const subject = await exchangeStep(ctx, 'subject', () =>
      verifySubjectToken(ctx, params.subject_token, params.subject_token_type, delegation),
    );
    progress.subjectTokenId = subject.id;
    progress.subjectExpiresAt = subject.exp;
    progress.subject = subject.sub;
    // Whose session the token belongs to, read first: it decides what the trail records of this request.
    const parent = subject.sessionId === undefined ? undefined : await sessions.find(subject.sessionId);
    if (subject.sessionId !== undefined) progress.parentSessionId = subject.sessionId;
    const rootSessionId = rootSessionOf(parent);
    if (rootSessionId !== undefined) progress.underImpersonation = { parentExpiresAt: parent!.expiresAt };
    if (subject.exp <= nowSeconds()) throw invalidRequest('subject_token has expired');
    if (subject.clientId !== client.clientId && !(subject.audience ?? []).some((aud) => served.has(aud))) {
      throw invalidRequest('subject_token was issued neither to this client nor for a resource it may delegate from');
    }
    const accessGrantId = subject.sessionId === undefined ? undefined : accessGrantOf(assertActive(parent));
    const principals: DelegationPrincipals =
      rootSessionId === undefined
        ? { subjectTokenId: subject.id, user: subject.sub, clientId: client.clientId }
        : { impersonationSessionId: rootSessionId };
    const quotas = delegationQuotas(delegation.limits, principals);
    // A share already spent is read before the proof is spent: then only a live delegation spends it (below).
    const spent = await sessions.spentQuota(quotas);
    if (dpop && spent === undefined) await checkDpopReplay(ctx, dpop);

    // The target: one resource, scopes within the subject token's and the resource's.
    const resourceServer = await resolveTarget(ctx, params, delegation);
    progress.resource = resourceServer.identifier();
    if (params.requested_token_type === JWT_TOKEN_TYPE && resourceServer.accessTokenFormat !== 'jwt') {
      throw invalidRequest('requested_token_type jwt: this resource server is issued opaque access tokens');
    }
    const requested = delegatedScopes(ctx, params.scope, subject.scope, resourceServer);
    progress.scope = requested;
    // The customer's access grant the impersonation was started under: its ceiling holds here too.
    if (accessGrantId !== undefined) {
      await checkCustomerGrant(customerGrants, accessGrantId, {
        subject: subject.sub,
        resource: resourceServer.identifier(),
        scope: requested,
      });
    }
    const token = newExchangeToken(ctx, { subject: subject.sub, scope: requested, resourceServer, dpop });
    const proof = { actorClients, dpop, certificateThumbprint: certificateThumbprintOf(token) };
    // A client exchanging a sender-constrained token of its own proves its key, as for any use of it.
    // An API exchanging a token it received cannot (the key is its caller's): it is authenticated
    // as itself, and the token is one sent to it, for a resource its metadata lists.
    if (subject.clientId === client.clientId) checkSenderConstraint('subject_token', subject.cnf, proof);

    // Who acts, whether the subject token lets them, and the chain that names them all.
    const actor = await delegationActor(ctx, params.actor_token, params.actor_token_type, proof);
    progress.actor = actor.sub;
    checkMayAct(ctx, subject, actor);
    const { act, depth } = nestedAct(actor.claim, subject.act, delegation.maxChainDepth);
    progress.depth = depth;
    // The subject's may_act rides on: exchanging the issued token again cannot make another actor.
    const chain = { act, ...(subject.mayAct === undefined ? {} : { may_act: subject.mayAct }) };
    if (!(await accountExists(ctx, subject.sub))) {
      throw invalidRequest('subject_token names a user that no longer exists');
    }

    // The deployment's decision.
    const scopes = await exchangeStep(ctx, 'policy', () =>
      decideDelegation(delegation, {
        clientId: client.clientId,
        subject: subject.sub,
        actor: actor.sub,
        actorType: actor.type,
        act: structuredClone(act),
        resource: resourceServer.identifier(),
        scope: requested,
        subjectTokenType: params.subject_token_type,
        ...(subject.sessionId === undefined ? {} : { parentSessionId: subject.sessionId }),
        ...(accessGrantId === undefined ? {} : { accessGrantId }),
      }),
    );
    progress.scope = scopes;
    token.scope = scopes.join(' ') || undefined;

    // The token: no longer than our cap, the resource's lifetime, or what the subject token has left.
    const subjectLeft = subject.exp - nowSeconds();
    const expiresIn = Math.min(delegation.accessTokenTTL, token.expiration, subjectLeft);
    if (expiresIn < 1) throw invalidRequest('subject_token has expired');
    setTokenLifetime(token, expiresIn);
    const issuedTokenType = params.requested_token_type === JWT_TOKEN_TYPE ? JWT_TOKEN_TYPE : ACCESS_TOKEN_TYPE;

    // The same delegation while it lasts: one more token under its session, nothing else written.
    const key = delegationKey({
      subjectTokenId: subject.id,
      clientId: client.clientId,
      resource: resourceServer.identifier(),
      format: resourceServer.accessTokenFormat ?? 'opaque',
      scope: scopes,
      act,
    });
    const reissue = async (live: SessionRecord): Promise<Exchanged> => {
      claims.attach(token, { ...chain, [SESSION_CLAIM]: live.id });
      return { value: await reissueDelegated(ctx, sessions, token, live), token, issuedTokenType };
    };
    const live = await liveDelegations.find(key, nowSeconds() + expiresIn);
    if (live) {
      if (dpop && spent !== undefined) await checkDpopReplay(ctx, dpop);
      return reissue(live);
    }
    // Past a share, refused before anything is written: no proof spent, no session, no row.
    if (spent !== undefined) throw quotaRefusal(quotas, spent);

    // A new one: its session charged to its principals, and on the trail only under an impersonation.
    const session = sessionOf(subject, client.clientId, resourceServer.identifier(), scopes, actor.sub, {
      lifetime: delegationSessionLifetime(expiresIn, subjectLeft),
      delegationKey: key,
      rootSessionId,
    });
    if (accessGrantId !== undefined) session.underAccessGrantId = accessGrantId;
    claims.attach(token, { ...chain, [SESSION_CLAIM]: session.id });
    const event = () => delegationSucceeded(session, params.subject_token_type, depth);
    try {
      const value = await exchangeStep(ctx, 'commit', () =>
        commit(ctx, dependencies, {
          token,
          session,
          quotas,
          startedAt,
          event,
          onTrail: rootSessionId !== undefined,
          notify: false,
          // A token of ours, which its user may revoke: announced and read again.
          confirm:
            subject.id === publicTokenId('opaque', params.subject_token)
              ? async () => {
                  await sessions.announce(session);
                  if (!(await verifyAccessToken(ctx.oidc.provider, params.subject_token, 'AccessToken'))) {
                    throw invalidRequest('subject_token was revoked during the exchange');
                  }
                }
              : undefined,
        }),
      );
      return { value, token, event, issuedTokenType };
    } catch (error) {
      // Concurrent first requests for one delegation: those past the share take the session one of them listed.
      const raced =
        error instanceof PrincipalQuotaReached
          ? await sessions.liveDelegation(key, nowSeconds() + expiresIn)
          : undefined;
      if (raced) return reissue(raced);
      // Past the share at the commit: refused as before the proof was spent.
      if (dpop && error instanceof PrincipalQuotaReached) await releaseDpopProof(ctx, dpop);
      throw error;
    }
  }

  return {
    handles(ctx) {
      const client = ctx.oidc.client;
      if (!client || delegationResourcesOf(client) === undefined) return false;
      const { subject_token: value, subject_token_type: type } = ctx.oidc.params as Record<string, unknown>;
      if (!isDelegationType(type, delegation)) return false;
      return !(type === ACCESS_TOKEN_TYPE && typeof value === 'string' && looksLikeSubjectToken(value));
    },
    exchange,
    refused: (ctx, progress, error) => report.refused(ctx, progress, error),
  };
}

/**
 * The impersonation a session descends from: itself when it is one, the one a
 * delegation records when it is a delegation. Undefined for no session, and
 * for a delegation of a user's own token (or one made from such a delegation).
 */
function rootSessionOf(session: SessionRecord | undefined): string | undefined {
  if (session === undefined) return undefined;
  return session.type === 'delegation' ? session.rootSessionId : session.id;
}

function sessionOf(
  subject: VerifiedSubject,
  clientId: string,
  resource: string,
  scope: string[],
  actor: string,
  { lifetime, delegationKey, rootSessionId }: { lifetime: number; delegationKey: string; rootSessionId?: string },
): SessionRecord {
  const createdAt = nowSeconds();
  return {
    id: newSessionId(),
    type: 'delegation',
    subject: subject.sub,
    actor,
    clientId,
    resource,
    scope,
    context: {},
    subjectTokenId: subject.id,
    accessTokenId: '',
    ...(subject.sessionId === undefined ? {} : { parentSessionId: subject.sessionId }),
    ...(rootSessionId === undefined ? {} : { rootSessionId }),
    delegationKey,
    createdAt,
    expiresAt: createdAt + lifetime,
  };
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
