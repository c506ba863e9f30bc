import type { Configuration } from 'oidc-provider';

type ResourceIndicators = NonNullable<NonNullable<Configuration['features']>['resourceIndicators']>;
type DefaultResource = NonNullable<ResourceIndicators['defaultResource']>;

/** oidc-provider's own default: the one resource of an authorization request, else none. */
const providerDefault: DefaultResource = (_ctx, _client, oneOf) => oneOf;

/** SSF scopes asked for without `resource` get the stream API (CAEP Interop Profile receivers send none); else the deployment's default. */
export function ssfDefaultResource(
  managementResource: string,
  ssfScopes: readonly string[],
  /** The management scopes a client may obtain (its `impersonation_management_scope`). */
  scopesOf: (client: Parameters<DefaultResource>[1]) => readonly string[],
  existing: DefaultResource = providerDefault,
): DefaultResource {
  return function defaultResource(ctx, client, oneOf) {
    const params = ctx.oidc.params;
    if (params?.['grant_type'] === 'client_credentials') {
      const asked = typeof params['scope'] === 'string' ? params['scope'].split(' ') : [];
      const allowed = scopesOf(client);
      if (asked.some((scope) => ssfScopes.includes(scope) && allowed.includes(scope))) return managementResource;
    }
    return existing(ctx, client, oneOf);
  };
}
