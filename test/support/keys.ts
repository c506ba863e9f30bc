import type { Configuration } from 'oidc-provider';
import { QUIET_CONFIGURATION } from '../../fixtures/keys.js';

export { QUIET_CONFIGURATION };

/** A resource server for configure(), which refuses a configuration without any. */
export const RESOURCE_INDICATORS = {
  getResourceServerInfo: () => ({ scope: 'profile:read', accessTokenFormat: 'jwt' }),
} as const satisfies NonNullable<Configuration['features']>['resourceIndicators'];

/** The least configuration a provider built directly with configure() takes: quiet, and one resource server. */
export const MINIMAL_CONFIGURATION = {
  ...QUIET_CONFIGURATION,
  features: { ...QUIET_CONFIGURATION.features, resourceIndicators: RESOURCE_INDICATORS },
} as const satisfies Configuration;
