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
  /** Whether this request is a delegation: the client may, the type is verified, and it names no `ist_…`. */
  handles(ctx: KoaContextWithOIDC): boolean;
}

/** RFC 8693 delegation of this provider's access token or JWT (or a deployment's own type). */
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
    // Read first: the session decides what the trail records of this request.
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
    // A spent share is read before the proof is spent: only a live delegation spends it.
    const spent = await sessions.spentQuota(quotas);
    if (dpop && spent === undefined) await checkDpopReplay(ctx, dpop);

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
    // An API exchanging a token it received cannot prove its caller's key: it is authenticated as itself.
    if (subject.clientId === client.clientId) checkSenderConstraint('subject_token', subject.cnf, proof);

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

    const subjectLeft = subject.exp - nowSeconds();
    const expiresIn = Math.min(delegation.accessTokenTTL, token.expiration, subjectLeft);
    if (expiresIn < 1) throw invalidRequest('subject_token has expired');
    setTokenLifetime(token, expiresIn);
    const issuedTokenType = params.requested_token_type === JWT_TOKEN_TYPE ? JWT_TOKEN_TYPE : ACCESS_TOKEN_TYPE;

    // Invariant 26: a live delegation is reused.
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
    // Invariant 20: a refusal burns nothing.
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
          // Invariant 23: announced and read again.
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

/** The impersonation a session descends from; undefined for a delegation of a user's own token. */
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
