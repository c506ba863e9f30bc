import type { ClientMetadata, Configuration } from 'oidc-provider';
import { withClientMetadata } from '../config/client-metadata.js';
import { invalidCall, invalidClientMetadata } from '../errors.js';

/** The client metadata listing the Management API scopes a client may obtain; resource scopes, kept out of the provider's `scopes`. */
export const MANAGEMENT_SCOPE_METADATA = 'impersonation_management_scope';

/** The deployment's `extraClientMetadata` with the management scopes' property added. */
export function withManagementMetadata(
  own: Configuration['extraClientMetadata'],
  managementScopes: ReadonlySet<string>,
): NonNullable<Configuration['extraClientMetadata']> {
  return withClientMetadata(own, MANAGEMENT_SCOPE_METADATA, (metadata) =>
    checkManagementMetadata(metadata, managementScopes),
  );
}

/** Checks and normalises a client's management metadata whenever oidc-provider builds a client. */
function checkManagementMetadata(metadata: ClientMetadata, managementScopes: ReadonlySet<string>): void {
  const inScope = String(metadata.scope ?? '')
    .split(' ')
    .filter((name) => managementScopes.has(name));
  if (inScope.length) {
    throw invalidClientMetadata(
      `scope lists ${inScope.join(' ')}, a scope of the Management API rather than an OpenID Connect scope; ` +
        `list it in ${MANAGEMENT_SCOPE_METADATA} instead`,
    );
  }
  const value = metadata[MANAGEMENT_SCOPE_METADATA];
  if (value === undefined) return;
  const names = typeof value === 'string' ? [...new Set(value.split(' '))] : [];
  if (!names.length || names.some((name) => !managementScopes.has(name))) {
    throw invalidClientMetadata(
      `${MANAGEMENT_SCOPE_METADATA} must be a space-separated list of ${[...managementScopes].join(', ')}`,
    );
  }
  if (!Array.isArray(metadata.grant_types) || !metadata.grant_types.includes('client_credentials'))
    throw invalidClientMetadata(`${MANAGEMENT_SCOPE_METADATA} needs the client_credentials grant type`);
  metadata[MANAGEMENT_SCOPE_METADATA] = names.join(' ');
}

/** The same checks over `configuration.clients`, so a bad static client stops the start, naming it. */
export function checkStaticClients(clients: Configuration['clients'], managementScopes: ReadonlySet<string>): void {
  // Clients that are no array are oidc-provider's to refuse, in its words.
  for (const client of Array.isArray(clients) ? clients : []) {
    const metadata = { grant_types: ['authorization_code'], ...client } as ClientMetadata;
    try {
      checkManagementMetadata(metadata, managementScopes);
    } catch (error) {
      const description = (error as { error_description?: string }).error_description ?? String(error);
      throw invalidCall('impersonation.configure', `client ${String(client.client_id)}: ${description}`, error);
    }
  }
}

/** Read once per client object: `client.metadata()` rebuilds every field on each call. */
const scopesByClient = new WeakMap<object, readonly string[]>();

/** The management scopes a client's metadata lists, in a normalised client. */
export function managementScopesOf(client: { metadata(): ClientMetadata }): readonly string[] {
  let scopes = scopesByClient.get(client);
  if (!scopes) {
    const value = client.metadata()[MANAGEMENT_SCOPE_METADATA];
    scopes = Object.freeze(typeof value === 'string' && value ? value.split(' ') : []);
    scopesByClient.set(client, scopes);
  }
  return scopes;
}
