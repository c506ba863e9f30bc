import type { AccessToken, KoaContextWithOIDC, Provider } from 'oidc-provider';
import type { ApprovalStore } from '../approvals/store.js';
import { invalidRequest } from '../errors.js';
import type { ExchangeClaims } from '../exchange/claims.js';
import { checkClientAuthentication, TOKEN_EXCHANGE_GRANT } from '../exchange/request.js';
import type { ResolvedOptions } from '../options.js';
import {
  buildTokenResponse,
  certificateThumbprintOf,
  checkDpopReplay,
  checkDpopRequired,
  checkMtlsCert,
  providerConfiguration,
  setTokenLifetime,
  validateDpop,
} from '../provider-internals.js';
import { newSessionId, SESSION_CLAIM, type SessionRecord } from '../sessions/record.js';
import type { SessionStore } from '../sessions/store.js';
import { looksLikeSubjectToken } from '../subject-tokens/token.js';
import { checkMayAct, checkSenderConstraint, delegationActor } from './actor.js';
import { nestedAct } from './chain.js';
import { delegationResourcesOf } from './client-metadata.js';
import { accessGrantOf, checkCustomerGrant } from './customer-grant.js';
import { confirmActive, issueDelegated } from './issue.js';
import { decideDelegation } from './policy.js';
import { DelegationReport, delegationSucceeded, type DelegationProgress, type DelegationSucceeded } from './report.js';
import {
  ACCESS_TOKEN_TYPE,
  delegatedScopes,
  delegationParameters,
  isDelegationType,
  JWT_TOKEN_TYPE,
  resolveTarget,
} from './request.js';
import { verifySubjectToken, type VerifiedSubject } from './subject.js';

export interface DelegationDependencies {
  options: ResolvedOptions;
  sessions: SessionStore;
  /** Where the customers' access grants are: a delegation from an impersonation under one stays within it. */
  approvals: ApprovalStore;
  claims: ExchangeClaims;
  preflight?: (ctx: KoaContextWithOIDC) => void;
}

export interface DelegationHandler {
  /**
   * Whether this request is a delegation: a client allowed it, a subject
   * token type it verifies, and no impersonation subject token (`ist_…`),
   * which stays impersonation's exactly as before.
   */
  handles(ctx: KoaContextWithOIDC): boolean;
  handle(ctx: KoaContextWithOIDC): Promise<void>;
}

/**
 * RFC 8693 delegation on the plugin's token-exchange grant. The steps read
 * as the protocol: the request, the subject token and whose it is, the
 * target and its scopes, the actor and the `act` chain, the deployment's
 * decision, the token and its session.
 */
export function createDelegationHandler(dependencies: DelegationDependencies): DelegationHandler {
  const { options, sessions, approvals, claims, preflight } = dependencies;
  const delegation = options.delegation;
  const actorClients: ReadonlySet<string> = new Set(options.actorClients);
  const report = new DelegationReport(options.auditLog);

  async function delegate(ctx: KoaContextWithOIDC, progress: DelegationProgress): Promise<Issued> {
    const provider: Provider = ctx.oidc.provider;
    const client = ctx.oidc.client!;

    // The request.
    preflight?.(ctx);
    checkClientAuthentication(ctx);
    const served = delegationResourcesOf(client)!;
    const params = delegationParameters(ctx);
    progress.subjectTokenType = params.subject_token_type;
    const dpop = await validateDpop(ctx);
    checkDpopRequired(ctx, dpop);

    // The subject token, and whether this client may use it: issued to it, or for an API it runs.
    const subject = await verifySubjectToken(ctx, params.subject_token, params.subject_token_type, delegation);
    progress.subjectTokenId = subject.id;
    progress.subjectExpiresAt = subject.exp;
    progress.subject = subject.sub;
    if (subject.exp <= nowSeconds()) throw invalidRequest('subject_token has expired');
    if (subject.clientId !== client.clientId && !(subject.audience ?? []).some((aud) => served.has(aud))) {
      throw invalidRequest('subject_token was issued neither to this client nor for a resource it may delegate from');
    }
    let accessGrantId: string | undefined;
    if (subject.sessionId !== undefined) {
      progress.parentSessionId = subject.sessionId;
      accessGrantId = accessGrantOf(await confirmActive(sessions, subject.sessionId));
    }
    if (dpop) await checkDpopReplay(ctx, dpop);

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
      await checkCustomerGrant(approvals, accessGrantId, {
        subject: subject.sub,
        resource: resourceServer.identifier(),
        scope: requested,
      });
    }
    const token = new provider.AccessToken({
      accountId: subject.sub,
      client,
      gty: TOKEN_EXCHANGE_GRANT,
      scope: requested.join(' ') || undefined,
      resourceServer,
    } as ConstructorParameters<Provider['AccessToken']>[0]);
    const certificate = checkMtlsCert(ctx);
    if (certificate) token.setThumbprint('x5t', certificate);
    if (dpop) token.setThumbprint('jkt', dpop.thumbprint);
    const proof = { actorClients, dpop, certificateThumbprint: certificateThumbprintOf(token) };
    // A client exchanging a sender-constrained token of its own proves its key, as for any use of it.
    // An API exchanging a token it received cannot (the key is its caller's): it is authenticated
    // as itself, and the token is one sent to it, for a resource its metadata lists.
    if (subject.clientId === client.clientId) checkSenderConstraint('subject_token', subject.cnf, proof);

    // Who acts, whether the subject token lets them, and the chain that names them all.
    const actor = await delegationActor(ctx, params.actor_token, proof);
    progress.actor = actor.sub;
    checkMayAct(ctx, subject, actor);
    const { act, depth } = nestedAct(actor.claim, subject.act, delegation.maxChainDepth);
    progress.depth = depth;
    const account = await providerConfiguration(provider).findAccount(ctx, subject.sub);
    if (!account || account.accountId !== subject.sub) {
      throw invalidRequest('subject_token names a user that no longer exists');
    }

    // The deployment's decision.
    const scopes = await decideDelegation(delegation, {
      clientId: client.clientId,
      subject: subject.sub,
      actor: actor.sub,
      act: structuredClone(act),
      resource: resourceServer.identifier(),
      scope: requested,
      subjectTokenType: params.subject_token_type,
      ...(subject.sessionId === undefined ? {} : { parentSessionId: subject.sessionId }),
      ...(accessGrantId === undefined ? {} : { accessGrantId }),
    });
    progress.scope = scopes;
    token.scope = scopes.join(' ') || undefined;

    // The token: no longer than our cap, the resource's lifetime, or what the subject token has left.
    const expiresIn = Math.min(delegation.accessTokenTTL, token.expiration, subject.exp - nowSeconds());
    if (expiresIn < 1) throw invalidRequest('subject_token has expired');
    setTokenLifetime(token, expiresIn);
    const session = sessionOf(subject, client.clientId, resourceServer.identifier(), scopes, actor.sub, expiresIn);
    if (accessGrantId !== undefined) session.underAccessGrantId = accessGrantId;
    claims.attach(token, { act, [SESSION_CLAIM]: session.id });
    const event = () => delegationSucceeded(session, params.subject_token_type, depth);
    const value = await issueDelegated(ctx, sessions, options.auditLog, { token, session, event });
    return {
      value,
      token,
      event,
      issuedTokenType: params.requested_token_type === JWT_TOKEN_TYPE ? JWT_TOKEN_TYPE : ACCESS_TOKEN_TYPE,
    };
  }

  return {
    handles(ctx) {
      const client = ctx.oidc.client;
      if (!client || delegationResourcesOf(client) === undefined) return false;
      const { subject_token: value, subject_token_type: type } = ctx.oidc.params as Record<string, unknown>;
      if (!isDelegationType(type, delegation)) return false;
      return !(type === ACCESS_TOKEN_TYPE && typeof value === 'string' && looksLikeSubjectToken(value));
    },

    async handle(ctx) {
      const progress: DelegationProgress = {};
      let issued: Issued;
      try {
        issued = await delegate(ctx, progress);
      } catch (error) {
        await report.refused(ctx, progress, error);
        throw error;
      }
      const { value, token, event, issuedTokenType } = issued;
      // No refresh token: a delegated token lives no longer than the one it came from.
      ctx.body = buildTokenResponse(ctx, {
        accessToken: value,
        expiresIn: token.expiration,
        scope: token.scope ?? '',
        tokenType: token.tokenType,
        issuedTokenType,
      });
      report.succeeded(ctx, event());
    },
  };
}

interface Issued {
  value: string;
  token: AccessToken;
  event: () => DelegationSucceeded;
  issuedTokenType: string;
}

function sessionOf(
  subject: VerifiedSubject,
  clientId: string,
  resource: string,
  scope: string[],
  actor: string,
  expiresIn: number,
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
    createdAt,
    expiresAt: createdAt + expiresIn,
  };
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
