import type { ClientMetadata, Configuration } from 'oidc-provider';
import { withClientMetadata } from '../config/client-metadata.js';
import { invalidClientMetadata } from '../errors.js';
import { TOKEN_EXCHANGE_GRANT } from '../token-claims.js';

/** Client metadata: the resource indicators whose access tokens the client may exchange as a delegate. */
export const DELEGATION_METADATA = 'token_exchange_delegation';

/** The deployment's `extraClientMetadata` with the delegation property added (after the management one). */
export function withDelegationMetadata(
  own: Configuration['extraClientMetadata'],
): NonNullable<Configuration['extraClientMetadata']> {
  return withClientMetadata(own, DELEGATION_METADATA, checkDelegationMetadata);
}

function checkDelegationMetadata(metadata: ClientMetadata): void {
  const value = metadata[DELEGATION_METADATA];
  if (value === undefined) return;
  const names = typeof value === 'string' ? value.split(' ').filter(Boolean) : undefined;
  if (names === undefined || names.some((name) => !URL.canParse(name))) {
    throw invalidClientMetadata(`${DELEGATION_METADATA} must be a space-separated list of resource indicators`);
  }
  if (!Array.isArray(metadata.grant_types) || !metadata.grant_types.includes(TOKEN_EXCHANGE_GRANT)) {
    throw invalidClientMetadata(`${DELEGATION_METADATA} needs the ${TOKEN_EXCHANGE_GRANT} grant type`);
  }
  // A delegated token says which client acts: a client that cannot prove it is that client may not get one.
  if (metadata.token_endpoint_auth_method === 'none') {
    throw invalidClientMetadata(`${DELEGATION_METADATA} needs a client that authenticates at the token endpoint`);
  }
  metadata[DELEGATION_METADATA] = [...new Set(names)].join(' ');
}

/** The resources whose tokens a client may exchange as a delegate; `undefined` when it may not delegate. */
export function delegationResourcesOf(client: { metadata(): ClientMetadata }): ReadonlySet<string> | undefined {
  // Cached per client object: `metadata()` rebuilds every field, and oidc-provider replaces the object on change.
  let resources = resourcesByClient.get(client);
  if (resources === undefined) {
    const value = client.metadata()[DELEGATION_METADATA];
    resources = typeof value === 'string' ? new Set(value.split(' ').filter(Boolean)) : null;
    resourcesByClient.set(client, resources);
  }
  return resources ?? undefined;
}

const resourcesByClient = new WeakMap<object, ReadonlySet<string> | null>();
