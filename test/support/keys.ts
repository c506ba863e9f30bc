import { exportJWK, generateKeyPair } from 'jose';
import type { JWK } from 'jose';

const VARIABLE = 'TEST_PROVIDER_JWKS';

/**
 * The test providers' signing keys, made once per run. A provider without
 * `jwks` signs with oidc-provider's development keys and warns about it at
 * every construction. The keys travel to child processes in the environment,
 * so that several processes acting as one provider verify each other's tokens.
 */
async function signingKeys(): Promise<{ keys: JWK[] }> {
  const inherited = process.env[VARIABLE];
  if (inherited) return JSON.parse(inherited) as { keys: JWK[] };
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwks = { keys: [{ ...(await exportJWK(privateKey)), kid: 'test-rs256', alg: 'RS256', use: 'sig' }] };
  process.env[VARIABLE] = JSON.stringify(jwks);
  return jwks;
}

export const TEST_JWKS = await signingKeys();

/** What a provider built directly in a test needs so that oidc-provider prints no development warnings. */
export const QUIET_CONFIGURATION = { jwks: TEST_JWKS, features: { devInteractions: { enabled: false } } };
