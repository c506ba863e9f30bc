/** The request as RFC 8693 and spec 5.2 want it; no store is read here. */
import type { KoaContextWithOIDC, ResourceServerInstance } from 'oidc-provider';
import { scopeSet } from '../access-token.js';
import { invalidClient, invalidRequest, invalidScope, invalidTarget } from '../errors.js';
import { resolveRequestedResources, validateClientScope } from '../provider-internals.js';
import { isStorableText, UNSTORABLE_TEXT } from '../storable-text.js';

export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';
export const ACCESS_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:access_token';
export const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';

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

export interface ExchangeParams {
  subject_token: string;
  subject_token_type: string;
  actor_token?: string;
  actor_token_type?: string;
  requested_token_type?: string;
  scope?: string;
  resource?: string | string[];
  audience?: string | string[];
}

/** Spec 5.2: a `client_secret_basic` client sending its secret in the body gets 401 `invalid_client`. */
export function checkClientAuthentication(ctx: KoaContextWithOIDC): void {
  if (ctx.oidc.client!.clientAuthMethod !== 'client_secret_basic') return;
  if (!/^basic /i.test(ctx.get('authorization'))) {
    throw invalidClient('this client must authenticate with HTTP Basic (client_secret_basic)');
  }
}

/** What one kind of exchange accepts of the token types and targets RFC 8693 2.1 lets a request name. */
export interface Accepted {
  subjectTokenType(type: string): boolean;
  /** What to say of a subject_token_type it does not accept. */
  subjectTokenTypes: string;
  actorTokenTypes: readonly string[];
  requestedTokenTypes: readonly string[];
  /** Whether `audience` may name the target (mapped to a resource by the deployment). */
  audience: boolean;
}

/** The parameters, as RFC 8693 2.1 and the kind of exchange (`accepted`) want them. */
export function exchangeParameters(ctx: KoaContextWithOIDC, accepted: Accepted): ExchangeParams {
  const params = ctx.oidc.params as Partial<ExchangeParams>;
  if (!params.subject_token) throw invalidRequest('missing required parameter subject_token');
  if (!params.subject_token_type) throw invalidRequest('missing required parameter subject_token_type');
  if (!accepted.subjectTokenType(params.subject_token_type)) {
    throw invalidRequest(`unsupported subject_token_type; ${accepted.subjectTokenTypes}`);
  }
  if (params.actor_token !== undefined && params.actor_token_type === undefined) {
    throw invalidRequest('actor_token_type is required when actor_token is sent');
  }
  if (params.actor_token === undefined && params.actor_token_type !== undefined) {
    throw invalidRequest('actor_token_type must not be sent without actor_token');
  }
  const { actorTokenTypes, requestedTokenTypes } = accepted;
  if (params.actor_token_type !== undefined && !actorTokenTypes.includes(params.actor_token_type)) {
    throw invalidRequest(`unsupported actor_token_type; use ${actorTokenTypes.join(' or ')}`);
  }
  // RFC 8693 2.2.2: a token type the server cannot issue is an invalid_request.
  if (params.requested_token_type !== undefined && !requestedTokenTypes.includes(params.requested_token_type)) {
    throw invalidRequest(
      requestedTokenTypes.length === 1
        ? `unsupported requested_token_type; only ${requestedTokenTypes[0]} is issued`
        : `unsupported requested_token_type; use ${requestedTokenTypes.join(' or ')}`,
    );
  }
  if (params.audience !== undefined && !accepted.audience) {
    throw invalidTarget('the audience parameter is not supported; name the resource server with resource');
  }
  // A resource a store would refuse may not reach the session and the trail (Invariant 49).
  if ([params.resource ?? [], params.audience ?? []].flat().some((target) => !isStorableText(target))) {
    throw invalidTarget(`${accepted.audience ? 'resource or audience' : 'resource'} holds ${UNSTORABLE_TEXT}`);
  }
  return params as ExchangeParams;
}

/** RFC 8693 2.1: a token is validated as the type its `*_token_type` names. */
export function checkStatedType(name: 'subject_token' | 'actor_token', value: string, type: string | undefined): void {
  if (type === JWT_TOKEN_TYPE && value.split('.').length !== 3) throw invalidRequest(`${name} is not a JWT`);
}

export async function resolveSingleResource(ctx: KoaContextWithOIDC): Promise<ResourceServerInstance> {
  const resourceServers = await resolveRequestedResources(ctx);
  if (resourceServers.length !== 1) {
    throw invalidTarget('exactly one resource indicator is required for token exchange');
  }
  return resourceServers[0]!;
}

/** Each scope must be defined by the resource and allowed to the client: refused, never dropped. */
export function grantedScopes(
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
