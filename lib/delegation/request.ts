/**
 * A delegation request as RFC 8693 2.1 has it: the subject token's type, the
 * token type asked for, the one target (a `resource`, or an `audience` the
 * deployment maps to one) and the scopes. No store is read here.
 */
import type { KoaContextWithOIDC, ResourceServerInstance } from 'oidc-provider';
import { invalidRequest, invalidScope, invalidTarget } from '../errors.js';
import { grantedScopes, resolveSingleResource, ACCESS_TOKEN_TYPE } from '../exchange/request.js';
import { isStorableText, UNSTORABLE_TEXT } from '../storable-text.js';
import type { ResolvedDelegationOptions } from './options.js';

export const JWT_TOKEN_TYPE = 'urn:ietf:params:oauth:token-type:jwt';
export { ACCESS_TOKEN_TYPE };

export interface DelegationParams {
  subject_token: string;
  subject_token_type: string;
  actor_token?: string;
  actor_token_type?: string;
  requested_token_type?: string;
  scope?: string;
  resource?: string | string[];
  audience?: string | string[];
}

/** Whether the request names a subject token the delegation verifies (any other type is impersonation's to refuse). */
export function isDelegationType(type: unknown, options: ResolvedDelegationOptions): boolean {
  return (
    type === ACCESS_TOKEN_TYPE ||
    type === JWT_TOKEN_TYPE ||
    (typeof type === 'string' && options.subjectTokenTypes.has(type))
  );
}

export function delegationParameters(ctx: KoaContextWithOIDC): DelegationParams {
  const params = ctx.oidc.params as Partial<DelegationParams>;
  if (!params.subject_token) throw invalidRequest('missing required parameter subject_token');
  if (!params.subject_token_type) throw invalidRequest('missing required parameter subject_token_type');
  if (params.actor_token !== undefined && params.actor_token_type === undefined) {
    throw invalidRequest('actor_token_type is required when actor_token is sent');
  }
  if (params.actor_token === undefined && params.actor_token_type !== undefined) {
    throw invalidRequest('actor_token_type must not be sent without actor_token');
  }
  if (
    params.actor_token_type !== undefined &&
    params.actor_token_type !== ACCESS_TOKEN_TYPE &&
    params.actor_token_type !== JWT_TOKEN_TYPE
  ) {
    throw invalidRequest(`unsupported actor_token_type; use ${ACCESS_TOKEN_TYPE} or ${JWT_TOKEN_TYPE}`);
  }
  // RFC 8693 2.2.2: a token type the server cannot issue is an invalid_request.
  if (
    params.requested_token_type !== undefined &&
    params.requested_token_type !== ACCESS_TOKEN_TYPE &&
    params.requested_token_type !== JWT_TOKEN_TYPE
  ) {
    throw invalidRequest(`unsupported requested_token_type; use ${ACCESS_TOKEN_TYPE} or ${JWT_TOKEN_TYPE}`);
  }
  const targets = [params.resource ?? [], params.audience ?? []].flat();
  if (targets.some((target) => !isStorableText(target)))
    throw invalidTarget(`resource or audience holds ${UNSTORABLE_TEXT}`);
  return params as DelegationParams;
}

/**
 * The one resource the token is for: `resource` indicators and `audience`
 * names (mapped by the deployment's `resolveAudience`) must all name the same.
 * oidc-provider then resolves it as for its own grants.
 */
export async function resolveTarget(
  ctx: KoaContextWithOIDC,
  params: DelegationParams,
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

/**
 * The scopes: those asked for, or else all the subject token carries that the
 * resource defines. Every one must be in the subject token and defined by the
 * resource: a delegated token is never wider than the one it came from.
 */
export function delegatedScopes(
  ctx: KoaContextWithOIDC,
  scope: string | undefined,
  subjectScopes: readonly string[],
  resourceServer: ResourceServerInstance,
): string[] {
  const held = new Set(subjectScopes);
  if (scope === undefined) {
    return grantedScopes(
      ctx,
      subjectScopes.filter((name) => resourceServer.scopes.has(name) && name !== 'offline_access').join(' '),
      resourceServer,
    );
  }
  const requested = grantedScopes(ctx, scope, resourceServer);
  const wider = requested.filter((name) => !held.has(name));
  if (wider.length) {
    throw invalidScope(`scope wider than the subject token's: ${wider.join(' ')}`, wider.join(' '));
  }
  return requested;
}
