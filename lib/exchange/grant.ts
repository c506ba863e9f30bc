import { randomBytes } from 'node:crypto';
import type { AccessToken, KoaContextWithOIDC, Provider, ResourceServerInstance } from 'oidc-provider';
import { publicTokenId, scopeSet } from '../access-token.js';
import { emit, EVENTS, type ImpersonationEvent } from '../audit/events.js';
import { record as recordEvent } from '../audit/record.js';
import { invalidClient, invalidRequest, invalidScope, invalidTarget } from '../errors.js';
import {
  refusalReason,
  type CustomJwtClaimsInput,
  type ExchangeDecision,
  type PolicyDecision,
  type ResolvedOptions,
} from '../options.js';
import {
  type DpopProof,
  assignTokenId,
  buildTokenResponse,
  checkDpopReplay,
  checkDpopRequired,
  checkMtlsCert,
  providerConfiguration,
  resolveRequestedResources,
  validateClientScope,
  validateDpop,
} from '../provider-internals.js';
import { newSessionId, SESSION_CLAIM, type SessionRecord } from '../sessions/record.js';
import type { SessionStore } from '../sessions/store.js';
import { isStorableText, storableText, UNSTORABLE_TEXT } from '../storable-text.js';
import { keptUntil, type SubjectTokenRecord, type SubjectTokenStore } from '../subject-tokens/store.js';
import { looksLikeSubjectToken } from '../subject-tokens/token.js';
import type { VerifiedAccessToken } from '../access-token.js';
import {
  actFor,
  confirmActorToken,
  lookUpActorToken,
  validateActorToken,
  type ActClaim,
  type ActorTokenLookup,
} from './actor.js';
import { actClaims, runCustomClaims, type ExchangeClaims } from './claims.js';
import { checkActorAuthentication } from './freshness.js';
import { RefusalBudget } from './refusals.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** Parameters the token endpoint keeps for this grant; `resource` and `audience` may repeat. */
export const EXCHANGE_PARAMETERS = [
  'subject_token',
  'subject_token_type',
  'actor_token',
  'actor_token_type',
  'requested_token_type',
  'scope',
  'resource',
  'audience',
] as const;
export const EXCHANGE_DUPLICATES = ['resource', 'audience'] as const;

interface ExchangeParams {
  subject_token?: string;
  subject_token_type?: string;
  actor_token?: string;
  actor_token_type?: string;
  requested_token_type?: string;
  scope?: string;
  resource?: string | string[];
  audience?: string | string[];
}

export interface GrantDependencies {
  options: ResolvedOptions;
  store: SubjectTokenStore;
  sessions: SessionStore;
  claims: ExchangeClaims;
  /** Runs first: refuses an exchange through a provider mounted in a way the plugin cannot work in. */
  preflight?: (ctx: KoaContextWithOIDC) => void;
}

/**
 * The token-exchange handler. By the time it runs oidc-provider has parsed the
 * form, authenticated the client and checked that its `grant_types` allow this
 * grant. The steps below read as the protocol; the subject token is redeemed
 * last, so a refused exchange never burns it.
 */
export function createExchangeHandler({ options, store, sessions, claims, preflight }: GrantDependencies) {
  const actorClients: ReadonlySet<string> = new Set(options.actorClients);
  const refusals = new RefusalBudget();
  return async function tokenExchangeHandler(ctx: KoaContextWithOIDC): Promise<void> {
    const provider: Provider = ctx.oidc.provider;
    const client = ctx.oidc.client!;
    const params = ctx.oidc.params as ExchangeParams;
    const audit: ImpersonationEvent = { clientId: client.clientId };
    let delivered = false;
    // Set once the subject token is found: only then may a refusal reach the trail.
    let recordedUntil: number | undefined;

    try {
      preflight?.(ctx);
      checkClientAuthentication(ctx);
      checkParameters(params);

      // The actor token is looked up while the subject token is: on Redis the two
      // reads go out together. Its verdict is only read after every check of the
      // subject token, so the order of refusals stays that of the protocol.
      const actorLookup = params.actor_token === undefined ? undefined : lookUpActorToken(ctx, params.actor_token);
      const found = await store.find(params.subject_token!);
      if (found.state === 'unknown') throw invalidRequest('subject_token is unknown');
      const { record, key } = found;
      Object.assign(audit, {
        subjectTokenId: record.id,
        subject: record.subject,
        createdBy: record.createdBy,
        context: record.context,
        ...(record.actor === undefined ? {} : { actor: record.actor }),
      });
      recordedUntil = keptUntil(record);
      // The binding first: a client the token is not for learns nothing of its state.
      if (record.clientId !== undefined && record.clientId !== client.clientId) {
        throw invalidRequest('subject_token was issued for another client');
      }
      if (found.state === 'withdrawn') throw invalidRequest('subject_token was withdrawn');
      if (found.state === 'consumed') throw invalidRequest('subject_token was already used');
      if (found.state === 'expired') throw invalidRequest('subject_token has expired');

      const resourceServer = await resolveSingleResource(ctx);
      audit.resource = resourceServer.identifier();
      let scopes = grantedScopes(ctx, params.scope, resourceServer);
      audit.scope = scopes.join(' ');

      const dpop = await validateDpop(ctx);
      checkDpopRequired(ctx, dpop);
      const token = new provider.AccessToken({
        accountId: record.subject,
        client,
        gty: TOKEN_EXCHANGE_GRANT,
        scope: scopes.join(' ') || undefined,
        resourceServer,
      } as ConstructorParameters<Provider['AccessToken']>[0]);
      bindToSender(ctx, token, dpop);

      const actor = await actorOf(ctx, actorLookup, record, dpop, token, actorClients);
      if (actor && options.actorAuthentication) await checkActorAuthentication(ctx, actor, options.actorAuthentication);
      const act = actor && actFor(actor);
      if (act) audit.actor = act.sub;

      const account = await providerConfiguration(provider).findAccount(ctx, record.subject);
      if (!account) throw invalidRequest('subject_token names a user that no longer exists');

      // The proof is spent before any deployment hook runs, as oidc-provider's own grants
      // spend it before issuing: a replayed proof never reaches the policy or the claims.
      if (dpop) await checkDpopReplay(ctx, dpop);

      if (options.canExchange) {
        const decision = await options.canExchange({
          clientId: client.clientId,
          subject: record.subject,
          ...(act ? { actor: act.sub } : {}),
          resource: resourceServer.identifier(),
          scope: scopes,
          context: record.context,
        });
        scopes = narrowedScopes(decision, scopes);
        token.scope = scopes.join(' ') || undefined;
        audit.scope = scopes.join(' ');
      }

      // The lower of our cap and the resource server's lifetime wins.
      const expiresIn = Math.min(options.accessTokenTTL, token.expiration);
      (token as { expiresIn?: number }).expiresIn = expiresIn;
      const custom = options.getCustomJwtClaims
        ? await runCustomClaims(
            options.getCustomJwtClaims,
            customClaimsInput(token, record, act, options),
            options.customClaimsTimeout,
          )
        : {};
      const session = sessionOf(record, client.clientId, resourceServer.identifier(), scopes, actor, expiresIn);
      audit.sessionId = session.id;
      claims.attach(token, { ...custom, ...actClaims(act), [SESSION_CLAIM]: session.id });

      // The session is recorded before the token exists; an opaque token is
      // backed by a Grant of its own, so introspection, userinfo and revocation
      // treat it as oidc-provider treats any token, and revoking the session
      // revokes the Grant.
      ctx.oidc.entity('AccessToken', token);
      const jti = assignTokenId(token); // sets token.format too: read it only after
      session.accessTokenId = publicTokenId(token.format, jti);
      let accessToken: string;
      try {
        if (token.format === 'opaque') {
          const grant = backingGrant(provider, session, expiresIn);
          session.grantId = grant.jti;
          token.grantId = grant.jti;
          await Promise.all([grant.save(), sessions.save(session)]);
          accessToken = await token.save();
        } else {
          [accessToken] = await Promise.all([token.save(), sessions.save(session)]);
        }
      } catch (error) {
        // Some of it may have been written: none of it may stay listed or live.
        await discard(provider, token, session, sessions);
        throw error;
      }

      audit.accessTokenId = session.accessTokenId;
      audit.expiresAt = session.expiresAt;
      // The record of the issuance is durable before the subject token is
      // redeemed: a trail that cannot be written stops the exchange with
      // nothing burned. A lost race below is recorded as a refusal after it.
      // The actor's sign-in is read again now that the session is listed
      // under it: a sign-out that ended it before this point found nothing to
      // end, one that ends it after finds the session and ends it.
      try {
        await Promise.all([
          actor?.grantId === undefined ? undefined : confirmActorToken(ctx, params.actor_token!),
          options.auditLog?.append(EVENTS.exchangeSucceeded, Object.freeze({ ...audit })),
        ]);
      } catch (error) {
        await discard(provider, token, session, sessions);
        throw error;
      }

      // Single use is decided here, by one atomic operation, after everything else passed.
      let redeemed: boolean;
      try {
        redeemed = await store.redeem(key);
      } catch (error) {
        await discard(provider, token, session, sessions);
        throw error;
      }
      if (!redeemed) {
        await discard(provider, token, session, sessions);
        throw invalidRequest('subject_token was already used');
      }

      ctx.body = buildTokenResponse(ctx, {
        accessToken,
        expiresIn: token.expiration,
        // Spec 2.5 lists scope as a field of every response: empty when nothing was granted.
        scope: token.scope ?? '',
        tokenType: token.tokenType,
        issuedTokenType: ACCESS_TOKEN_TYPE,
      });
      delivered = true;
      emit(provider, EVENTS.exchangeSucceeded, audit, ctx);
    } catch (error) {
      // A listener of the success event threw: the exchange itself was not refused.
      if (delivered) throw error;
      const described = error as { error?: string; error_description?: string; message?: string };
      audit.error = described.error ?? 'server_error';
      // A description may quote the request or a policy: recorded, never in a form the trail's store refuses.
      audit.reason = storableText(described.error_description ?? 'internal error');
      const recorded =
        recordedUntil !== undefined && refusals.take(audit.subjectTokenId!, recordedUntil)
          ? options.auditLog
          : undefined;
      await recordEvent(provider, recorded, EVENTS.exchangeRefused, audit, ctx);
      throw error;
    }
  };
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
  const certificateThumbprint = (token as { 'x5t#S256'?: string })['x5t#S256'];
  const actor = await validateActorToken(ctx, actorLookup, { actorClients, dpop, certificateThumbprint });
  if (record.actor !== undefined && record.actor !== actor.sub) {
    throw invalidRequest('actor_token is not from the actor this subject_token is bound to');
  }
  return actor;
}

/**
 * `canExchange` allows (`true`), refuses (`false`, `{ reason }`) or narrows
 * (`{ scope: [...] }`, a subset of what was asked). A policy that names a
 * scope not asked for is refused rather than obeyed: it can never widen.
 */
function narrowedScopes(decision: ExchangeDecision, requested: string[]): string[] {
  if (typeof decision === 'object' && decision !== null && 'scope' in decision && Array.isArray(decision.scope)) {
    const asked = new Set(requested);
    const narrowed = [...new Set(decision.scope)];
    const wider = narrowed.filter((name) => typeof name !== 'string' || !asked.has(name));
    if (wider.length) throw invalidRequest('the exchange policy may narrow the requested scope, never widen it');
    return requested.filter((name) => narrowed.includes(name));
  }
  const refused = refusalReason(decision as PolicyDecision, 'the exchange policy refused this impersonation');
  if (refused) throw invalidRequest(refused);
  return requested;
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
    createdAt,
    expiresAt: createdAt + expiresIn,
  };
}

function backingGrant(provider: Provider, session: SessionRecord, expiresIn: number): InstanceType<Provider['Grant']> {
  // Its id is chosen here so that the session record can name it before either is written.
  const grant = new provider.Grant({
    jti: randomBytes(32).toString('base64url'),
    accountId: session.subject,
    clientId: session.clientId,
  } as never);
  if (session.scope.length) grant.addResourceScope(session.resource, session.scope.join(' '));
  (grant as { expiresIn?: number }).expiresIn = expiresIn;
  return grant;
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

/**
 * oidc-provider lets a `client_secret_basic` client send its secret in the
 * body as well. Spec 5.2 does not: such a client that does not use the Basic
 * header is answered 401 `invalid_client`.
 */
function checkClientAuthentication(ctx: KoaContextWithOIDC): void {
  if (ctx.oidc.client!.clientAuthMethod !== 'client_secret_basic') return;
  if (!/^basic /i.test(ctx.get('authorization'))) {
    throw invalidClient('this client must authenticate with HTTP Basic (client_secret_basic)');
  }
}

function checkParameters(params: ExchangeParams): void {
  if (!params.subject_token) throw invalidRequest('missing required parameter subject_token');
  if (!params.subject_token_type) throw invalidRequest('missing required parameter subject_token_type');
  if (params.subject_token_type !== ACCESS_TOKEN_TYPE) {
    throw invalidRequest(`unsupported subject_token_type; use ${ACCESS_TOKEN_TYPE}`);
  }
  if (params.actor_token !== undefined && params.actor_token_type === undefined) {
    throw invalidRequest('actor_token_type is required when actor_token is sent');
  }
  if (params.actor_token === undefined && params.actor_token_type !== undefined) {
    throw invalidRequest('actor_token_type must not be sent without actor_token');
  }
  if (params.actor_token_type !== undefined && params.actor_token_type !== ACCESS_TOKEN_TYPE) {
    throw invalidRequest(`unsupported actor_token_type; use ${ACCESS_TOKEN_TYPE}`);
  }
  if (params.requested_token_type !== undefined && params.requested_token_type !== ACCESS_TOKEN_TYPE) {
    throw invalidRequest(`unsupported requested_token_type; only ${ACCESS_TOKEN_TYPE} is issued`);
  }
  if (params.audience !== undefined) {
    throw invalidTarget('the audience parameter is not supported; name the resource server with resource');
  }
  // A deployment's getResourceServerInfo may accept a family of indicators; none
  // that a store refuses may reach the session and the trail. (oidc-provider
  // already refuses such a scope.)
  if ([params.resource ?? []].flat().some((resource) => !isStorableText(resource))) {
    throw invalidTarget(`resource holds ${UNSTORABLE_TEXT}`);
  }
  if (!looksLikeSubjectToken(params.subject_token)) throw invalidRequest('subject_token is unknown');
}

async function resolveSingleResource(ctx: KoaContextWithOIDC): Promise<ResourceServerInstance> {
  const resourceServers = await resolveRequestedResources(ctx);
  if (resourceServers.length !== 1) {
    throw invalidTarget('exactly one resource indicator is required for token exchange');
  }
  return resourceServers[0]!;
}

/**
 * Every requested scope must be one the resource server defines and the client
 * may ask for; anything else is refused rather than dropped, so a token is
 * never wider, or silently narrower, than the request. `offline_access` never
 * applies: impersonation has no refresh token.
 */
function grantedScopes(
  ctx: KoaContextWithOIDC,
  scope: string | undefined,
  resourceServer: ResourceServerInstance,
): string[] {
  const requested = [...scopeSet(scope)];
  if (requested.includes('offline_access')) {
    throw invalidScope('offline_access is never granted by token exchange', 'offline_access');
  }
  const unknown = requested.filter((name) => !resourceServer.scopes.has(name));
  if (unknown.length) {
    throw invalidScope(`scope not defined by the resource server: ${unknown.join(' ')}`, unknown.join(' '));
  }
  validateClientScope(ctx, requested);
  return requested;
}

/**
 * What an exchange that lost the race (or whose redemption failed) wrote must
 * not stay live or listed: its opaque token, the token's Grant, its session.
 */
async function discard(
  provider: Provider,
  token: AccessToken,
  session: SessionRecord,
  sessions: SessionStore,
): Promise<void> {
  await Promise.all([
    token.format === 'opaque' ? token.destroy() : undefined,
    session.grantId === undefined ? undefined : provider.Grant.adapter.destroy(session.grantId),
    sessions.discard(session),
  ]).catch(() => {
    // The store is failing; all of it expires on its own and nobody ever received the token.
  });
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
