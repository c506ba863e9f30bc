import { createLocalJWKSet, decodeProtectedHeader, jwtVerify, type JSONWebKeySet, type JWTPayload } from 'jose';
import type { ClientMetadata } from 'oidc-provider';
import { FIXTURE_CLIENTS } from '../../fixtures/provider.js';
import type { AdapterSource, SsfOptions } from '../../lib/index.js';
import { apiRequest, m2mToken, type Reply } from './http.js';
import { startProvider, type TestProvider } from './provider.js';
import type { AdapterKind } from './adapters.js';
import { scaled } from './time.js';

export const SSF_SCOPE = 'ssf:streams';
export const RECEIVERS = {
  first: { client_id: 'ssf-receiver', client_secret: 'ssf-receiver-secret' },
  second: { client_id: 'ssf-receiver-2', client_secret: 'ssf-receiver-2-secret' },
};
export const STREAMS = '/ssf/streams';
export const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
export const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification';
export const PUSH = 'urn:ietf:rfc:8935';
export const POLL = 'urn:ietf:rfc:8936';

export const SSF_RECEIVER_CLIENTS: readonly ClientMetadata[] = Object.values(RECEIVERS).map((client) => ({
  ...client,
  token_endpoint_auth_method: 'client_secret_basic',
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
  impersonation_management_scope: SSF_SCOPE,
}));

/** The receivers of the tests listen on loopback: the transmitter may push there (`pushAllowList`). */
export const LOOPBACK_RECEIVERS = ['127.0.0.1'];

/** The fixture provider with the SSF transmitter, and two receiver clients that may manage streams. */
export function startSsfProvider(
  kind: AdapterKind,
  ssf: SsfOptions = {},
  more: Record<string, unknown> = {},
  adapter?: AdapterSource,
  moreClients: readonly ClientMetadata[] = [],
) {
  return startProvider(
    {
      plugin: { ssf: { pollInterval: 50, timeout: 2000, pushAllowList: LOOPBACK_RECEIVERS, ...ssf }, ...more },
      configuration: { clients: [...FIXTURE_CLIENTS, ...SSF_RECEIVER_CLIENTS, ...moreClients] },
      ...(adapter ? { adapter } : {}),
    },
    kind,
  );
}

export function receiverToken(tp: TestProvider, receiver = RECEIVERS.first): Promise<string> {
  return m2mToken(tp, receiver, SSF_SCOPE);
}

export function ssfRequest(
  tp: TestProvider,
  method: string,
  path: string,
  token?: string,
  body?: unknown,
): Promise<Reply> {
  return apiRequest(tp, method, path, token, body);
}

/** A SET verified as a receiver would: the issuer's published keys, `typ`, issuer and audience. */
export async function verifySet(
  tp: TestProvider,
  jwt: string,
  audience: string,
): Promise<{ header: Record<string, unknown>; claims: JWTPayload & Record<string, unknown> }> {
  const jwks = (await (await fetch(`${tp.base}/jwks`)).json()) as JSONWebKeySet;
  const { payload } = await jwtVerify(jwt, createLocalJWKSet(jwks), {
    issuer: tp.issuer,
    audience,
    typ: 'secevent+jwt',
  });
  return {
    header: decodeProtectedHeader(jwt) as Record<string, unknown>,
    claims: payload as JWTPayload & Record<string, unknown>,
  };
}

/** Polls (RFC 8936) until a SET comes or `ms` pass; resolves the `sets` map. */
export async function pollUntil(
  tp: TestProvider,
  endpoint: string,
  token: string,
  ms = 1000,
  body: Record<string, unknown> = {},
): Promise<Record<string, string>> {
  const deadline = Date.now() + scaled(ms);
  for (;;) {
    const reply = await fetch(endpoint, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ returnImmediately: true, ...body }),
    });
    const answer = (await reply.json()) as { sets?: Record<string, string> };
    if (reply.status !== 200) throw new Error(`poll answered ${reply.status}: ${JSON.stringify(answer)}`);
    if (Object.keys(answer.sets ?? {}).length || Date.now() > deadline) return answer.sets ?? {};
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
