import {
  startProvider as startFixtureProvider,
  type FixtureProvider,
  type FixtureProviderOptions,
} from '../../fixtures/provider.js';
import type { MemoryAdapterClass } from '../../lib/index.js';
import { testAdapter } from './adapters.js';

export {
  ACCESS_TOKEN,
  ACTOR_API,
  API,
  CLIENT_CERT_HEADER,
  CLIENTS,
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

/** The shared provider (fixtures/provider.ts), on the adapter TEST_ADAPTER names unless the test gives one. */
export async function startProvider(options: TestProviderOptions = {}): Promise<TestProvider> {
  return startFixtureProvider({ ...options, adapter: options.adapter ?? (await testAdapter()) });
}

export type { MemoryAdapterClass };
