import type Koa from 'koa';
import type { Provider } from 'oidc-provider';
import { AccessTokens } from '../access-token.js';
import { bearerToken, constraintRefusal, invalidToken } from '../http/auth.js';
import type { ManagementAuthResult } from '../core-options.js';

/** The built-in caller check: a `client_credentials` token of this provider for the management resource, with the scope. */
export function createCallerCheck(provider: Provider, managementResource: string) {
  const tokens = new AccessTokens(provider);
  return async function authenticateManagementRequest(
    ctx: Koa.Context,
    required: { scope: string },
  ): Promise<ManagementAuthResult> {
    const value = bearerToken(ctx.get('authorization'));
    if (!value) return invalidToken('a Bearer access token is required');

    const token = await tokens.verify(value, 'ClientCredentials');
    if (!token) return invalidToken('the access token is invalid or expired');
    if (token.sub !== token.clientId) return invalidToken('a client_credentials access token is required');
    if (!token.audience.includes(managementResource))
      return invalidToken('the access token is not for the Management API');
    return constraintRefusal(token, required.scope) ?? { clientId: token.clientId };
  };
}
