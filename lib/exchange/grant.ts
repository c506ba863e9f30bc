import type { AccessToken, KoaContextWithOIDC, Provider } from 'oidc-provider';
import type { VerifiedAccessToken } from '../access-token.js';
import type { ApprovalStore } from '../approvals/store.js';
import type { EVENTS, ImpersonationEvent } from '../audit/events.js';
import { invalidRequest } from '../errors.js';
import type { CustomJwtClaimsInput, ResolvedOptions } from '../options.js';
import {
  type DpopProof,
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
import type { FoundSubjectToken, SubjectTokenRecord, SubjectTokenStore } from '../subject-tokens/store.js';
import { actFor, lookUpActorToken, validateActorToken, type ActClaim, type ActorTokenLookup } from './actor.js';
import { actClaims, runCustomClaims, type ExchangeClaims } from './claims.js';
import { commit } from './commit.js';
import { customerGrantBounds, readCustomerGrant } from './customer-grant.js';
import { checkActorAuthentication } from './freshness.js';
import { decide } from './policy.js';
import { ExchangeReport, exchangeSucceeded, type ExchangeProgress } from './report.js';
import {
  ACCESS_TOKEN_TYPE,
  checkClientAuthentication,
  exchangeParameters,
  grantedScopes,
  resolveSingleResource,
  TOKEN_EXCHANGE_GRANT,
} from './request.js';

export { ACCESS_TOKEN_TYPE, EXCHANGE_DUPLICATES, EXCHANGE_PARAMETERS, TOKEN_EXCHANGE_GRANT } from './request.js';

export interface GrantDependencies {
  options: ResolvedOptions;
  store: SubjectTokenStore;
  sessions: SessionStore;
  /** The customer's access grants, which subject tokens issued under one are checked against. */
  approvals: ApprovalStore;
  claims: ExchangeClaims;
  /** Runs first: refuses an exchange through a provider mounted in a way the plugin cannot work in. */
  preflight?: (ctx: KoaContextWithOIDC) => void;
  /** RFC 8693 delegation (lib/delegation), which takes the requests it handles before impersonation sees them. */
  delegation?: { handles(ctx: KoaContextWithOIDC): boolean; handle(ctx: KoaContextWithOIDC): Promise<void> };
}

/**
 * The token-exchange handler. By the time it runs oidc-provider has parsed the
 * form, authenticated the client and checked that its `grant_types` allow this
 * grant. The steps read as the protocol: the request, the subject token, the
 * proof, the actor, the deployment's decision, the token, and the commit that
 * redeems the subject token last, so that a refused exchange never burns it.
 */
export function createExchangeHandler(dependencies: GrantDependencies) {
  const { options, store, approvals, claims, preflight } = dependencies;
  const actorClients: ReadonlySet<string> = new Set(options.actorClients);
  const report = new ExchangeReport(options);

  async function exchange(ctx: KoaContextWithOIDC, progress: ExchangeProgress): Promise<Issued> {
    const provider: Provider = ctx.oidc.provider;
    const client = ctx.oidc.client!;
    const startedAt = Date.now();

    // The request.
    preflight?.(ctx);
    checkClientAuthentication(ctx);
    const params = exchangeParameters(ctx);
    // The proof of possession, as oidc-provider's own grants check it first. It writes nothing.
    const dpop = await validateDpop(ctx);
    checkDpopRequired(ctx, dpop);

    // The subject token. The actor token is looked up while it is (on Redis the two
    // reads go out together); its verdict is read only after every check of the
    // subject token, so the order of refusals stays that of the protocol.
    const actorLookup = params.actor_token === undefined ? undefined : lookUpActorToken(ctx, params.actor_token);
    const { record, key } = usableSubjectToken(await store.find(params.subject_token), client.clientId, progress);
    // The customer's grant is read beside the actor token's Grant and sign-in: one wait for both.
    const customerGrantRead = readCustomerGrant(approvals, record);
    // The proof is spent before any of the deployment's code runs (its resource servers,
    // accounts, policy, claims), and only for a subject token that can be redeemed: a
    // request that names none writes no replay entry.
    if (dpop) await checkDpopReplay(ctx, dpop);

    // What is asked for: one resource, scopes it defines.
    const resourceServer = await resolveSingleResource(ctx);
    progress.resource = resourceServer.identifier();
    const requested = grantedScopes(ctx, params.scope, resourceServer);
    progress.scope = requested;

    const token = new provider.AccessToken({
      accountId: record.subject,
      client,
      gty: TOKEN_EXCHANGE_GRANT,
      scope: requested.join(' ') || undefined,
      resourceServer,
    } as ConstructorParameters<Provider['AccessToken']>[0]);
    bindToSender(ctx, token, dpop);

    // The actor, and the subject as a user that still exists.
    const actor = await actorOf(ctx, actorLookup, record, dpop, token, actorClients);
    if (actor && options.actorAuthentication) await checkActorAuthentication(ctx, actor, options.actorAuthentication);
    const act = actor && actFor(actor);
    if (act) progress.actor = act.sub;
    const account = await providerConfiguration(provider).findAccount(ctx, record.subject);
    if (!account || account.accountId !== record.subject) {
      throw invalidRequest('subject_token names a user that no longer exists');
    }

    // The customer's access grant, when the subject token was issued under one: still in force, and its ceiling.
    const customerGrant = await customerGrantBounds(customerGrantRead, record, {
      actor: act?.sub,
      resource: resourceServer.identifier(),
      scope: requested,
    });
    const allowed = customerGrant?.scope ?? requested;
    progress.scope = allowed;

    // The deployment's decision, within what the customer allowed.
    const scopes = await decide(options, {
      clientId: client.clientId,
      subject: record.subject,
      ...(act ? { actor: act.sub } : {}),
      resource: resourceServer.identifier(),
      scope: allowed,
      context: record.context,
    });
    progress.scope = scopes;
    token.scope = scopes.join(' ') || undefined;

    // The token: the lowest of our cap, the resource server's lifetime and the customer's grant wins.
    const expiresIn = Math.min(options.accessTokenTTL, token.expiration, customerGrant?.secondsLeft ?? Infinity);
    setTokenLifetime(token, expiresIn);
    const custom = options.getCustomJwtClaims
      ? await runCustomClaims(
          options.getCustomJwtClaims,
          customClaimsInput(token, record, act, options),
          options.customClaimsTimeout,
        )
      : {};
    const session = sessionOf(record, client.clientId, resourceServer.identifier(), scopes, actor, expiresIn);
    progress.session = session;
    claims.attach(token, { ...custom, ...actClaims(act), [SESSION_CLAIM]: session.id });
    const succeeded = () => exchangeSucceeded(client.clientId, record, session);

    const value = await commit(ctx, dependencies, {
      token,
      session,
      subjectTokenKey: key,
      startedAt,
      event: succeeded,
      onTrail: true,
      notify: true,
      successRecorded: () => {
        progress.successRecorded = true;
      },
    });
    return { value, token, succeeded };
  }

  return async function tokenExchangeHandler(ctx: KoaContextWithOIDC): Promise<void> {
    if (dependencies.delegation?.handles(ctx)) return dependencies.delegation.handle(ctx);
    const progress: ExchangeProgress = {};
    let issued: Issued;
    try {
      issued = await exchange(ctx, progress);
    } catch (error) {
      await report.refused(ctx, progress, error);
      throw error;
    }
    const { value, token, succeeded } = issued;
    ctx.body = buildTokenResponse(ctx, {
      accessToken: value,
      expiresIn: token.expiration,
      // Spec 2.5 lists scope as a field of every response: empty when nothing was granted.
      scope: token.scope ?? '',
      tokenType: token.tokenType,
      issuedTokenType: ACCESS_TOKEN_TYPE,
    });
    // A listener that throws fails the request after its token was issued; it is never reported as a refusal.
    report.succeeded(ctx, succeeded());
  };
}

interface Issued {
  value: string;
  token: AccessToken;
  /** The success event, built again for listeners after the response. */
  succeeded: () => ImpersonationEvent<typeof EVENTS.exchangeSucceeded>;
}

/**
 * The subject token as found: its client binding first, so that a client the
 * token is not for learns nothing of its state; then whether it can still be
 * redeemed. From here on a refusal names it, and may reach the trail.
 */
function usableSubjectToken(
  found: FoundSubjectToken,
  clientId: string,
  progress: ExchangeProgress,
): { record: SubjectTokenRecord; key: string } {
  if (found.state === 'unknown') throw invalidRequest('subject_token is unknown');
  const { record, key } = found;
  progress.subjectToken = record;
  if (record.clientId !== undefined && record.clientId !== clientId) {
    throw invalidRequest('subject_token was issued for another client');
  }
  if (found.state === 'withdrawn') throw invalidRequest('subject_token was withdrawn');
  if (found.state === 'consumed') throw invalidRequest('subject_token was already used');
  if (found.state === 'expired') throw invalidRequest('subject_token has expired');
  return { record, key };
}

/** DPoP and mTLS bind the issued token exactly as oidc-provider's own grants do. */
function bindToSender(ctx: KoaContextWithOIDC, token: AccessToken, dpop: DpopProof | undefined): void {
  const certificate = checkMtlsCert(ctx);
  if (certificate) token.setThumbprint('x5t', certificate);
  if (dpop) token.setThumbprint('jkt', dpop.thumbprint);
}

/** The `act` claim, from the actor token; a subject token bound to an actor requires that actor's. */
async function actorOf(
  ctx: KoaContextWithOIDC,
  actorLookup: ActorTokenLookup | undefined,
  record: SubjectTokenRecord,
  dpop: DpopProof | undefined,
  token: AccessToken,
  actorClients: ReadonlySet<string>,
): Promise<VerifiedAccessToken | undefined> {
  if (actorLookup === undefined) {
    if (record.actor !== undefined)
      throw invalidRequest("subject_token is bound to an actor; send that actor's actor_token");
    return undefined;
  }
  const certificateThumbprint = certificateThumbprintOf(token);
  const actor = await validateActorToken(ctx, actorLookup, { actorClients, dpop, certificateThumbprint });
  if (record.actor !== undefined && record.actor !== actor.sub) {
    throw invalidRequest('actor_token is not from the actor this subject_token is bound to');
  }
  return actor;
}

function sessionOf(
  record: SubjectTokenRecord,
  clientId: string,
  resource: string,
  scope: string[],
  actor: VerifiedAccessToken | undefined,
  expiresIn: number,
): SessionRecord {
  const createdAt = nowSeconds();
  return {
    id: newSessionId(),
    subject: record.subject,
    ...(actor ? { actor: actor.sub } : {}),
    clientId,
    resource,
    scope,
    context: record.context,
    subjectTokenId: record.id,
    accessTokenId: '',
    ...(actor?.grantId === undefined ? {} : { actorGrantId: actor.grantId }),
    ...(actor?.sessionUid === undefined ? {} : { actorSessionUid: actor.sessionUid }),
    ...(record.accessGrantId === undefined ? {} : { accessGrantId: record.accessGrantId }),
    ...(record.breakGlass === undefined ? {} : { breakGlass: { reason: record.breakGlass.reason } }),
    createdAt,
    expiresAt: createdAt + expiresIn,
  };
}

function customClaimsInput(
  token: AccessToken,
  record: SubjectTokenRecord,
  act: ActClaim | undefined,
  options: ResolvedOptions,
): CustomJwtClaimsInput {
  const clientId = token.client!.clientId;
  return {
    token: Object.freeze({
      sub: record.subject,
      aud: token.aud,
      client_id: clientId,
      scope: token.scope,
      ...actClaims(act),
    }),
    context: {
      grant: { type: TOKEN_EXCHANGE_GRANT, subjectTokenContext: structuredClone(record.context) },
      client: { id: clientId },
      user: { id: record.subject },
      ...(act ? { actor: { id: act.sub } } : {}),
    },
    environmentVariables: options.environmentVariables,
  };
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
