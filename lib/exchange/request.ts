/** The request as RFC 8693 and spec 5.2 want it; no store is read here. */
import type { KoaContextWithOIDC, ResourceServerInstance } from 'oidc-provider';
import { scopeSet } from '../access-token.js';
import { invalidClient, invalidRequest, invalidScope, invalidTarget } from '../errors.js';
import { resolveRequestedResources, validateClientScope } from '../provider-internals.js';
import { isStorableText, UNSTORABLE_TEXT } from '../storable-text.js';
import { looksLikeSubjectToken } from '../subject-tokens/token.js';
import type { ResolvedDelegationOptions } from './delegation-options.js';

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

/** An impersonation names its subject token (`ist_…`) as an access token, and issues one. */
export const IMPERSONATION_ACCEPTS: Accepted = {
  subjectTokenType: (type) => type === ACCESS_TOKEN_TYPE,
  subjectTokenTypes: `use ${ACCESS_TOKEN_TYPE}`,
  actorTokenTypes: [ACCESS_TOKEN_TYPE],
  requestedTokenTypes: [ACCESS_TOKEN_TYPE],
  audience: false,
};

/** A delegation: an access token or a JWT of this provider, or a type of the deployment's own. */
export function delegationAccepts(options: ResolvedDelegationOptions): Accepted {
  return {
    subjectTokenType: (type) => isDelegationType(type, options),
    subjectTokenTypes: `use ${ACCESS_TOKEN_TYPE} or ${JWT_TOKEN_TYPE}`,
    actorTokenTypes: [ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE],
    requestedTokenTypes: [ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE],
    audience: true,
  };
}

/** Whether the request names a subject token a delegation verifies: not an `ist_…`, which is impersonation's. */
export function isDelegationRequest(ctx: KoaContextWithOIDC, options: ResolvedDelegationOptions): boolean {
  const { subject_token: value, subject_token_type: type } = ctx.oidc.params as Record<string, unknown>;
  if (!isDelegationType(type, options)) return false;
  return !(type === ACCESS_TOKEN_TYPE && typeof value === 'string' && looksLikeSubjectToken(value));
}

function isDelegationType(type: unknown, options: ResolvedDelegationOptions): boolean {
  return (
    type === ACCESS_TOKEN_TYPE ||
    type === JWT_TOKEN_TYPE ||
    (typeof type === 'string' && options.subjectTokenTypes.has(type))
  );
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

export function resolveSingleResource(ctx: KoaContextWithOIDC): Promise<ResourceServerInstance> {
  return resolveRequestedResources(ctx).then((resourceServers) => {
    if (resourceServers.length !== 1) {
      throw invalidTarget('exactly one resource indicator is required for token exchange');
    }
    return resourceServers[0]!;
  });
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

/** A delegation's one resource: every `resource` and mapped `audience` must name the same. */
export async function resolveTarget(
  ctx: KoaContextWithOIDC,
  params: ExchangeParams,
  options: ResolvedDelegationOptions,
): Promise<ResourceServerInstance> {
  const resources = new Set([params.resource ?? []].flat());
  for (const audience of new Set([params.audience ?? []].flat())) {
    if (!options.resolveAudience) {
      throw invalidTarget('the audience parameter is not supported here; name the resource server with resource');
    }
    const resource = await options.resolveAudience(audience, { clientId: ctx.oidc.client!.clientId });
    if (typeof resource !== 'string' || !URL.canParse(resource)) throw invalidTarget('audience is unknown');
    resources.add(resource);
  }
  if (resources.size !== 1) throw invalidTarget('exactly one resource or audience is required for delegation');
  (ctx.oidc.params as Record<string, unknown>)['resource'] = [...resources][0];
  return resolveSingleResource(ctx);
}

/** A delegation's scopes: those asked for, else all the subject token's the resource defines; never wider. */
export function delegatedScopes(
  ctx: KoaContextWithOIDC,
  scope: string | undefined,
  subjectScopes: readonly string[],
  resourceServer: ResourceServerInstance,
): string[] {
  if (scope === undefined) {
    const held = subjectScopes.filter((name) => resourceServer.scopes.has(name) && name !== 'offline_access');
    return grantedScopes(ctx, held.join(' '), resourceServer);
  }
  const requested = grantedScopes(ctx, scope, resourceServer);
  const held = new Set(subjectScopes);
  const wider = requested.filter((name) => !held.has(name));
  if (wider.length) throw invalidScope(`scope wider than the subject token's: ${wider.join(' ')}`, wider.join(' '));
  return requested;
}
