/** What a delegation request may name beyond an impersonation's; no store is read here. */
import type { KoaContextWithOIDC, ResourceServerInstance } from 'oidc-provider';
import { invalidScope, invalidTarget } from '../../errors.js';
import {
  ACCESS_TOKEN_TYPE,
  grantedScopes,
  JWT_TOKEN_TYPE,
  resolveSingleResource,
  type Accepted,
  type ExchangeParams,
} from '../request.js';
import type { ResolvedDelegationOptions } from './options.js';

/** What a delegation accepts: an access token or a JWT of this provider, or a type of the deployment's own. */
export function delegationAccepts(options: ResolvedDelegationOptions): Accepted {
  return {
    subjectTokenType: (type) => isDelegationType(type, options),
    subjectTokenTypes: `use ${ACCESS_TOKEN_TYPE} or ${JWT_TOKEN_TYPE}`,
    actorTokenTypes: [ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE],
    requestedTokenTypes: [ACCESS_TOKEN_TYPE, JWT_TOKEN_TYPE],
    audience: true,
  };
}

/** Whether the request names a subject token the delegation verifies (any other type is impersonation's to refuse). */
export function isDelegationType(type: unknown, options: ResolvedDelegationOptions): boolean {
  return (
    type === ACCESS_TOKEN_TYPE ||
    type === JWT_TOKEN_TYPE ||
    (typeof type === 'string' && options.subjectTokenTypes.has(type))
  );
}

/** The one resource: every `resource` and mapped `audience` must name the same. */
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

/** The scopes asked for, else all the subject token's the resource defines: never wider than the subject token. */
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
