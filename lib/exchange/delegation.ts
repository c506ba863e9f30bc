import { forgetReadAheads, publicTokenId } from '../access-token.js';
import { delegationQuotas, quotaRefusal, type DelegationCharge, type DelegationPrincipals } from '../capacity.js';
import { nowSeconds } from '../clock.js';
import { invalidRequest, PrincipalQuotaReached } from '../errors.js';
import { checkDpopReplay, releaseDpopProof } from '../provider-internals.js';
import { newSessionId, SESSION_CLAIM, type SessionRecord } from '../sessions/record.js';
import { checkMayAct, checkSenderConstraint, delegationActor, nestedAct, type DelegationActor } from './actor.js';
import { accessGrantOf, checkCustomerGrant } from './customer-grant.js';
import { verifySubjectToken, type VerifiedSubject } from './delegated-subject.js';
import { delegationResourcesOf } from './delegation-metadata.js';
import type { ExchangeDependencies, ExchangeKind, Exchanged, Subject } from './kind.js';
import {
  assertActive,
  delegationKey,
  delegationSessionLifetime,
  LiveDelegations,
  reissueDelegated,
} from './live-delegations.js';
import { decide } from './policy.js';
import { RefusalBudget } from './refusals.js';
import { delegationSucceeded, reportDelegationRefusal } from './report.js';
import {
  ACCESS_TOKEN_TYPE,
  delegatedScopes,
  delegationAccepts,
  exchangeParameters,
  isDelegationRequest,
  JWT_TOKEN_TYPE,
  resolveTarget,
} from './request.js';

/** A delegation's subject: the verified token, the session it descends from, and the shares a new session takes. */
interface DelegatedSubject extends VerifiedSubject, Subject {
  /** The impersonation the subject token descends from, if any. */
  rootSessionId: string | undefined;
  accessGrantId: string | undefined;
  quotas: readonly DelegationCharge[];
  /** The share already spent, if one is: only a live delegation may still be reissued. */
  spent: string | undefined;
}

/** Who acts, and the `act` chain the token carries. */
interface Acting extends DelegationActor {
  act: Record<string, unknown>;
  depth: number;
}

/** RFC 8693 delegation of this provider's access token or JWT (or a deployment's own type). */
export function delegationExchange(dependencies: ExchangeDependencies): ExchangeKind<DelegatedSubject, Acting> {
  const { options, sessions, customerGrants, claims, tokens } = dependencies;
  const delegation = options.delegation;
  const accepts = delegationAccepts(delegation);
  const actorClients: ReadonlySet<string> = new Set(options.actorClients);
  const refusals = new RefusalBudget();
  const liveDelegations = new LiveDelegations(sessions);

  return {
    // The client may delegate, the type is one it verifies, and it names no `ist_…`.
    handles: (ctx) =>
      ctx.oidc.client !== undefined &&
      delegationResourcesOf(ctx.oidc.client) !== undefined &&
      isDelegationRequest(ctx, delegation),

    parameters(ctx, progress) {
      const params = exchangeParameters(ctx, accepts);
      progress.subjectTokenType = params.subject_token_type;
      return params;
    },

    async subject(ctx, params, progress) {
      const client = ctx.oidc.client!;
      // The subject token, and whether this client may use it: issued to it, or for an API it runs.
      const subject = await verifySubjectToken(ctx, tokens, params, delegation);
      progress.subjectTokenId = subject.id;
      progress.subject = subject.sub;
      // Read first: the session decides what the trail records of this request.
      const parent = subject.sessionId === undefined ? undefined : await sessions.find(subject.sessionId);
      if (subject.sessionId !== undefined) progress.parentSessionId = subject.sessionId;
      // The impersonation the subject descends from; none for a delegation of a user's own token.
      const rootSessionId = parent?.type === 'delegation' ? parent.rootSessionId : parent?.id;
      if (rootSessionId !== undefined) progress.underImpersonation = { parentExpiresAt: parent!.expiresAt };
      if (subject.exp <= nowSeconds()) throw invalidRequest('subject_token has expired');
      const served = delegationResourcesOf(client)!;
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
      return { ...subject, rootSessionId, accessGrantId, quotas, spent, spendsProof: spent === undefined };
    },

    target: (ctx, params) => resolveTarget(ctx, params, delegation),

    scopes(ctx, params, subject, resourceServer) {
      if (params.requested_token_type === JWT_TOKEN_TYPE && resourceServer.accessTokenFormat !== 'jwt') {
        throw invalidRequest('requested_token_type jwt: this resource server is issued opaque access tokens');
      }
      return delegatedScopes(ctx, params.scope, subject.scope, resourceServer);
    },

    async actor(ctx, params, subject, given, progress) {
      const proof = { ...given, actorClients };
      // An API exchanging a token it received cannot prove its caller's key: it is authenticated as itself.
      if (subject.clientId === ctx.oidc.client!.clientId) checkSenderConstraint('subject_token', subject.cnf, proof);
      const actor = await delegationActor(ctx, tokens, params, proof);
      progress.actor = actor.sub;
      checkMayAct(ctx, subject, actor);
      const { act, depth } = nestedAct(actor.claim, subject.act, delegation.maxChainDepth);
      progress.depth = depth;
      return { ...actor, act, depth };
    },

    // The customer's access grant the impersonation was started under: its ceiling holds here too.
    async ceiling(subject, _actor, target) {
      if (subject.accessGrantId !== undefined) {
        await checkCustomerGrant(customerGrants, subject.accessGrantId, { subject: subject.sub, ...target });
      }
      return { scope: target.scope, secondsLeft: Infinity };
    },

    decide: (ctx, subject, actor, target, params) =>
      decide(
        delegation.canDelegate,
        Object.freeze({
          clientId: ctx.oidc.client!.clientId,
          subject: subject.sub,
          actor: actor.sub,
          actorType: actor.type,
          act: structuredClone(actor.act),
          resource: target.resource,
          scope: [...target.scope],
          subjectTokenType: params.subject_token_type,
          ...(subject.sessionId === undefined ? {} : { parentSessionId: subject.sessionId }),
          ...(subject.accessGrantId === undefined ? {} : { accessGrantId: subject.accessGrantId }),
        }),
        { policy: 'the delegation policy', refused: 'this delegation' },
      ),

    lifetime(subject, _actor, bound) {
      const expiresIn = Math.min(delegation.accessTokenTTL, bound, subject.exp - nowSeconds());
      if (expiresIn < 1) throw invalidRequest('subject_token has expired');
      return expiresIn;
    },

    async prepare(ctx, { params, dpop, token, subject, actor, resource, scope, expiresIn, startedAt }) {
      const clientId = ctx.oidc.client!.clientId;
      const issuedTokenType = params.requested_token_type === JWT_TOKEN_TYPE ? JWT_TOKEN_TYPE : ACCESS_TOKEN_TYPE;
      // The subject's may_act rides on: exchanging the issued token again cannot make another actor.
      const chain = { act: actor.act, ...(subject.mayAct === undefined ? {} : { may_act: subject.mayAct }) };
      // Invariant 26: a live delegation is reused.
      const key = delegationKey({
        subjectTokenId: subject.id,
        clientId,
        resource,
        format: token.resourceServer?.accessTokenFormat ?? 'opaque',
        scope,
        act: actor.act,
      });
      const reissue = async (live: SessionRecord): Promise<Exchanged> => {
        claims.attach(token, { ...chain, [SESSION_CLAIM]: live.id });
        return { value: await reissueDelegated(ctx, sessions, token, live), token, issuedTokenType };
      };
      const until = nowSeconds() + expiresIn;
      const live = await liveDelegations.find(key, until);
      if (live) {
        if (dpop && subject.spent !== undefined) await checkDpopReplay(ctx, dpop);
        return { issued: await reissue(live) };
      }
      // Invariant 20: a refusal burns nothing.
      if (subject.spent !== undefined) throw quotaRefusal(subject.quotas, subject.spent);

      // A new one: its session charged to its principals, and on the trail only under an impersonation.
      const createdAt = nowSeconds();
      const session: SessionRecord = {
        id: newSessionId(),
        type: 'delegation',
        subject: subject.sub,
        actor: actor.sub,
        clientId,
        resource,
        scope,
        context: {},
        subjectTokenId: subject.id,
        accessTokenId: '',
        ...(subject.sessionId === undefined ? {} : { parentSessionId: subject.sessionId }),
        ...(subject.rootSessionId === undefined ? {} : { rootSessionId: subject.rootSessionId }),
        ...(subject.accessGrantId === undefined ? {} : { underAccessGrantId: subject.accessGrantId }),
        delegationKey: key,
        createdAt,
        expiresAt: createdAt + delegationSessionLifetime(expiresIn, subject.exp - createdAt),
      };
      claims.attach(token, { ...chain, [SESSION_CLAIM]: session.id });
      return {
        issuedTokenType,
        commit: {
          token,
          session,
          quotas: subject.quotas,
          startedAt,
          event: () => delegationSucceeded(session, params.subject_token_type, actor.depth),
          record: subject.rootSessionId !== undefined,
          delegation: true,
          // Invariant 23: announced and read again.
          confirm:
            subject.id === publicTokenId('opaque', params.subject_token)
              ? async () => {
                  await sessions.announce(session);
                  forgetReadAheads(ctx.oidc.provider);
                  if (!(await tokens.verify(params.subject_token, 'AccessToken'))) {
                    throw invalidRequest('subject_token was revoked during the exchange');
                  }
                }
              : undefined,
        },
        async recover(error) {
          if (!(error instanceof PrincipalQuotaReached)) return undefined;
          // Concurrent first requests for one delegation: those past the share take the session one of them listed.
          const raced = await sessions.liveDelegation(key, until);
          if (raced) return reissue(raced);
          // Past the share at the commit: refused as before the proof was spent.
          if (dpop) await releaseDpopProof(ctx, dpop);
          return undefined;
        },
      };
    },

    refused: (ctx, progress, error) => reportDelegationRefusal(ctx, dependencies.bus, refusals, progress, error),
  };
}
