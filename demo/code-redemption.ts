/**
 * A server-side client's end of the authorization-code flow with PKCE: its
 * code for tokens (authenticated with its secret), then who signed in, from
 * userinfo. Both confidential clients of the backend sign people in this way.
 */
import { basic, HttpError, jsonOf } from './http.js';

export interface CodeRedemption {
  call(target: string, init: RequestInit): Promise<Response>;
  endpoints: { token: string; userinfo: string };
  clientId: string;
  clientSecret: string;
  redirectUri: string;
}

export interface SignedIn {
  accessToken: string;
  expiresIn: number;
  /** When the sign-in asked for one (`offline_access`). */
  refreshToken?: string;
  /** What userinfo said of the user; `sub` is always a string. */
  claims: Record<string, unknown> & { sub: string };
}

export async function redeemCode(client: CodeRedemption, code: string, verifier: string): Promise<SignedIn> {
  const response = await client.call(client.endpoints.token, {
    method: 'POST',
    headers: {
      authorization: basic(client.clientId, client.clientSecret),
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      redirect_uri: client.redirectUri,
      code_verifier: verifier,
    }),
  });
  const tokens = await jsonOf(response);
  if (!response.ok || typeof tokens?.['access_token'] !== 'string') {
    throw new HttpError(
      502,
      String(tokens?.['error'] ?? 'bad_gateway'),
      String(tokens?.['error_description'] ?? `the token endpoint answered ${response.status}`),
    );
  }
  const accessToken = tokens['access_token'];
  const claims = await jsonOf(
    await client.call(client.endpoints.userinfo, { headers: { authorization: `Bearer ${accessToken}` } }),
  );
  if (typeof claims?.['sub'] !== 'string')
    throw new HttpError(502, 'bad_gateway', 'the identity service did not say who signed in');
  return {
    accessToken,
    expiresIn: Number(tokens['expires_in']),
    ...(typeof tokens['refresh_token'] === 'string' ? { refreshToken: tokens['refresh_token'] } : {}),
    claims: claims as SignedIn['claims'],
  };
}
