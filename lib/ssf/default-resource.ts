import type { Configuration, KoaContextWithOIDC } from 'oidc-provider';

type ResourceIndicators = NonNullable<NonNullable<Configuration['features']>['resourceIndicators']>;
type DefaultResource = NonNullable<ResourceIndicators['defaultResource']>;
type Client = NonNullable<KoaContextWithOIDC['oidc']['client']>;
/** The management scopes a client may obtain (its `impersonation_management_scope`). */
type ScopesOf = (client: Client) => readonly string[];

/** oidc-provider's own default: the one resource of an authorization request, else none. */
const providerDefault: DefaultResource = (_ctx, _client, oneOf) => oneOf;

/**
 * A receiver that asks `client_credentials` for an SSF scope without naming a
 * resource gets a token for the stream API. The CAEP Interoperability Profile
 * names scopes only (`ssf.manage`, `ssf.read`), so receivers built to it send no
 * `resource`; without this default they would get a token that the stream API
 * refuses (401) although the token endpoint answered 200. Only a client whose
 * `impersonation_management_scope` lists an SSF scope it asked for is defaulted;
 * every other request goes to the deployment's `defaultResource`.
 */
export function ssfDefaultResource(
  managementResource: string,
  ssfScopes: readonly string[],
  scopesOf: ScopesOf,
  existing: DefaultResource = providerDefault,
): DefaultResource {
  return function defaultResource(ctx, client, oneOf) {
    if (asksForSsfScope(ctx, client, ssfScopes, scopesOf)) return managementResource;
    return existing(ctx, client, oneOf);
  };
}

function asksForSsfScope(
  ctx: KoaContextWithOIDC,
  client: Client,
  ssfScopes: readonly string[],
  scopesOf: ScopesOf,
): boolean {
  const params = ctx.oidc.params;
  if (params?.['grant_type'] !== 'client_credentials') return false;
  const asked = typeof params['scope'] === 'string' ? params['scope'].split(' ') : [];
  const allowed = scopesOf(client);
  return asked.some((scope) => ssfScopes.includes(scope) && allowed.includes(scope));
}
