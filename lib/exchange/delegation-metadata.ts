import type { ClientMetadata, Configuration } from 'oidc-provider';
import { withExchangeListMetadata } from '../config/client-metadata.js';

/** Client metadata: the resource indicators whose access tokens the client may exchange as a delegate. */
export const DELEGATION_METADATA = 'token_exchange_delegation';

/** The deployment's `extraClientMetadata` with the delegation property added (after the management one). */
export function withDelegationMetadata(own: Configuration['extraClientMetadata']) {
  const valid = (names: string[]) => names.every((name) => URL.canParse(name));
  return withExchangeListMetadata(own, DELEGATION_METADATA, 'resource indicators', valid);
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
