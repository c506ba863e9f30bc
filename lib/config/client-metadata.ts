import type { ClientMetadata, Configuration, KoaContextWithOIDC } from 'oidc-provider';
import { invalidClientMetadata, invalidOption } from '../errors.js';
import { TOKEN_EXCHANGE_GRANT } from '../token-claims.js';

/** oidc-provider's routes where a client writes its own metadata. */
const SELF_SERVICE_ROUTES: ReadonlySet<string> = new Set(['registration', 'client_update']);

/** The deployment's `extraClientMetadata` plus the plugin's property `name`, checked by `check`; its own keep its validator. */
export function withClientMetadata(
  own: Configuration['extraClientMetadata'],
  name: string,
  check: (metadata: ClientMetadata) => void,
): NonNullable<Configuration['extraClientMetadata']> {
  const properties = own?.properties ?? [];
  if (properties.includes(name)) {
    throw invalidOption(
      'impersonation.configure',
      'extraClientMetadata.properties',
      `must not list ${name}: the plugin declares it`,
    );
  }
  const ownValidator = own?.validator;
  return {
    ...own,
    properties: [...properties, name],
    validator(ctx: KoaContextWithOIDC | undefined, key: string, value: unknown, metadata: ClientMetadata) {
      if (key !== name) return ownValidator?.(ctx, key, value, metadata);
      // Only the deployment's own clients carry it, never one registered or updated over HTTP (RFC 7591, 7592).
      if (value !== undefined && SELF_SERVICE_ROUTES.has(String(ctx?.oidc?.route)))
        throw invalidClientMetadata(`${name} cannot be set through client registration`);
      check(metadata);
      return undefined;
    },
  };
}

export function withExchangeListMetadata(
  own: Configuration['extraClientMetadata'],
  name: string,
  what: string,
  valid: (names: string[]) => boolean,
): NonNullable<Configuration['extraClientMetadata']> {
  return withClientMetadata(own, name, (metadata) => {
    const value = metadata[name];
    if (value === undefined) return;
    const names = typeof value === 'string' ? value.split(' ').filter(Boolean) : undefined;
    if (!names || !valid(names)) throw invalidClientMetadata(`${name} must be a space-separated list of ${what}`);
    if (!Array.isArray(metadata.grant_types) || !metadata.grant_types.includes(TOKEN_EXCHANGE_GRANT))
      throw invalidClientMetadata(`${name} needs the ${TOKEN_EXCHANGE_GRANT} grant type`);
    // What it grants names the acting client: a client that cannot prove it is that client may not have it.
    if (metadata.token_endpoint_auth_method === 'none')
      throw invalidClientMetadata(`${name} needs a client that authenticates at the token endpoint`);
    metadata[name] = [...new Set(names)].join(' ');
  });
}
