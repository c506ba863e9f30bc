import type { AccessToken, KoaContextWithOIDC, Provider, ResourceServerInstance } from 'oidc-provider';
import { publicTokenId, scopeSet } from '../access-token.js';
import { emit, EVENTS, type ImpersonationEvent } from '../audit.js';
import { invalidClient, invalidRequest, invalidScope, invalidTarget } from '../errors.js';
import { refusalReason, type CustomJwtClaimsInput, type ResolvedOptions } from '../options.js';
import {
  type DpopProof, buildTokenResponse, checkDpopReplay, checkDpopRequired, checkMtlsCert, providerConfiguration,
  resolveRequestedResources, validateClientScope, validateDpop,
} from '../provider-internals.js';
import type { SubjectTokenRecord, SubjectTokenStore } from '../subject-tokens/store.js';
import { looksLikeSubjectToken } from '../subject-tokens/token.js';
import { actFor, lookUpActorToken, validateActorToken, type ActClaim, type ActorTokenLookup } from './actor.js';
import { actClaims, runCustomClaims, type ExchangeClaims } from './claims.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';

/** Parameters the token endpoint keeps for this grant; `resource` and `audience` may repeat. */
export const EXCHANGE_PARAMETERS = [
  'subject_token', 'subject_token_type', 'actor_token', 'actor_token_type',
  'requested_token_type', 'scope', 'resource', 'audience',
] as const;
export const EXCHANGE_DUPLICATES = ['resource', 'audience'] as const;

interface ExchangeParams {
  subject_token?: string;
  subject_token_type?: string;
  actor_token?: string;
  actor_token_type?: string;
  requested_token_type?: string;
  scope?: string;
  audience?: string | string[];
}

export interface GrantDependencies {
  options: ResolvedOptions;
  store: SubjectTokenStore;
  claims: ExchangeClaims;
}

/**
 * The token-exchange handler. By the time it runs oidc-provider has parsed the
 * form, authenticated the client and checked that its `grant_types` allow this
 * grant. The steps below read as the protocol; the subject token is redeemed
 * last, so a refused exchange never burns it.
 */
export function createExchangeHandler({ options, store, claims }: GrantDependencies) {
  const actorClients: ReadonlySet<string> = new Set(options.actorClients);
  return async function tokenExchangeHandler(ctx: KoaContextWithOIDC): Promise<void> {
    const provider: Provider = ctx.oidc.provider;
    const client = ctx.oidc.client!;
    const params = ctx.oidc.params as ExchangeParams;
    const audit: ImpersonationEvent = { clientId: client.clientId };

    try {
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
        subjectTokenId: record.id, subject: record.subject, createdBy: record.createdBy, context: record.context,
        ...(record.actor === undefined ? {} : { actor: record.actor }),
      });
      if (found.state === 'consumed') throw invalidRequest('subject_token was already used');
      if (found.state === 'expired') throw invalidRequest('subject_token has expired');
      if (record.clientId !== undefined && record.clientId !== client.clientId) {
        throw invalidRequest('subject_token was issued for another client');
      }

      const resourceServer = await resolveSingleResource(ctx);
      audit.resource = resourceServer.identifier();
      const scopes = grantedScopes(ctx, params.scope, resourceServer);
      audit.scope = scopes.join(' ');

      const dpop = await validateDpop(ctx);
      const token = new provider.AccessToken({
        accountId: record.subject,
        client,
        gty: TOKEN_EXCHANGE_GRANT,
        scope: scopes.join(' ') || undefined,
        resourceServer,
      } as ConstructorParameters<Provider['AccessToken']>[0]);
      bindToSender(ctx, token, dpop);

      const act = await actorOf(ctx, actorLookup, record, dpop, token, actorClients);
      if (act) audit.actor = act.sub;

      const account = await providerConfiguration(provider).findAccount(ctx, record.subject);
      if (!account) throw invalidRequest('subject_token names a user that no longer exists');

      if (options.canExchange) {
        const refused = refusalReason(await options.canExchange({
          clientId: client.clientId,
          subject: record.subject,
          ...(act ? { actor: act.sub } : {}),
          resource: resourceServer.identifier(),
          scope: scopes,
          context: record.context,
        }), 'the exchange policy refused this impersonation');
        if (refused) throw invalidRequest(refused);
      }

      // The lower of our cap and the resource server's lifetime wins.
      (token as { expiresIn?: number }).expiresIn = Math.min(options.accessTokenTTL, token.expiration);
      const custom = options.getCustomJwtClaims
        ? await runCustomClaims(options.getCustomJwtClaims, customClaimsInput(token, record, act, options), options.customClaimsTimeout)
        : {};
      claims.attach(token, { ...custom, ...actClaims(act) });

      checkDpopRequired(ctx, dpop);
      if (dpop) await checkDpopReplay(ctx, dpop);

      ctx.oidc.entity('AccessToken', token);
      const accessToken = await token.save();

      // Single use is decided here, by one atomic operation, after everything else passed.
      let redeemed: boolean;
      try {
        redeemed = await store.redeem(key);
      } catch (error) {
        await discard(token);
        throw error;
      }
      if (!redeemed) {
        await discard(token);
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
      audit.accessTokenId = publicTokenId(token.format, token.jti);
      audit.expiresAt = token.exp ?? nowSeconds() + token.expiration;
      emit(provider, EVENTS.exchangeSucceeded, audit, ctx);
    } catch (error) {
      // A listener of the success event threw: the exchange itself was not refused.
      if (audit.accessTokenId !== undefined) throw error;
      const described = error as { error?: string; error_description?: string; message?: string };
      audit.error = described.error ?? 'server_error';
      audit.reason = described.error_description ?? 'internal error';
      emit(provider, EVENTS.exchangeRefused, audit, ctx);
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
): Promise<ActClaim | undefined> {
  if (actorLookup === undefined) {
    if (record.actor !== undefined) throw invalidRequest('subject_token is bound to an actor; send that actor\'s actor_token');
    return undefined;
  }
  const certificateThumbprint = (token as { 'x5t#S256'?: string })['x5t#S256'];
  const actor = await validateActorToken(ctx, actorLookup, { actorClients, dpop, certificateThumbprint });
  if (record.actor !== undefined && record.actor !== actor.sub) {
    throw invalidRequest('actor_token is not from the actor this subject_token is bound to');
  }
  return actFor(actor);
}

function customClaimsInput(
  token: AccessToken,
  record: SubjectTokenRecord,
  act: ActClaim | undefined,
  options: ResolvedOptions,
): CustomJwtClaimsInput {
  const clientId = token.client!.clientId;
  return {
    token: Object.freeze({ sub: record.subject, aud: token.aud, client_id: clientId, scope: token.scope, ...actClaims(act) }),
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
function grantedScopes(ctx: KoaContextWithOIDC, scope: string | undefined, resourceServer: ResourceServerInstance): string[] {
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

/** An opaque token that lost the race (or whose redemption failed) must not stay live. */
async function discard(token: AccessToken): Promise<void> {
  if (token.format !== 'opaque') return;
  try {
    await token.destroy();
  } catch {
    // The store is failing; the token expires on its own and nobody ever received it.
  }
}

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

