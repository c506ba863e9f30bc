import {
  startProvider as startFixtureProvider,
  type FixtureProvider,
  type FixtureProviderOptions,
} from '../../fixtures/provider.js';
import type { MemoryAdapterClass } from '../../lib/index.js';
import { suiteAdapterKind, type AdapterKind } from './adapters.js';

export {
  ACCESS_TOKEN,
  ACTOR_API,
  API,
  CLIENT_CERT_HEADER,
  CLIENTS,
  CUSTOMER_API,
  CUSTOMER_SCOPE,
  DOWNSTREAM_API,
  FIXTURE_CLIENTS,
  MANAGEMENT,
  MANAGEMENT_SCOPE,
  OPAQUE_API,
  READ_SCOPE,
  REDIRECT_URI,
  REVOKE_SCOPE,
  SHORT_API,
  TENANT_API,
  TOKEN_EXCHANGE,
  USERS,
  pkcePair,
} from '../../fixtures/provider.js';
export type TestProvider = FixtureProvider;
export type TestProviderOptions = FixtureProviderOptions;

/**
 * The shared provider (fixtures/provider.ts) on `options.adapter`, or else on
 * a new deployment of `kind`: the suite's adapter (TEST_ADAPTER) unless the
 * caller names another.
 */
export async function startProvider(
  options: TestProviderOptions = {},
  kind: AdapterKind = suiteAdapterKind(),
): Promise<TestProvider> {
  return startFixtureProvider({ ...options, adapter: options.adapter ?? (await kind.open()) });
}

export type { MemoryAdapterClass };
