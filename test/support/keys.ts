import { exportJWK, generateKeyPair } from 'jose';
import type { JWK } from 'jose';

/**
 * The test providers' signing keys, made once per process. A provider without
 * `jwks` signs with oidc-provider's development keys and warns about it at
 * every construction.
 */
async function signingKeys(): Promise<{ keys: JWK[] }> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { keys: [{ ...(await exportJWK(privateKey)), kid: 'test-rs256', alg: 'RS256', use: 'sig' }] };
}

export const TEST_JWKS = await signingKeys();
