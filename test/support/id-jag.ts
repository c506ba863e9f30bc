/**
 * An agent of the ID-JAG tests (draft-ietf-oauth-identity-assertion-authz-grant) at both of its servers:
 * its credentials, its client metadata at the identity provider that issues its ID-JAGs and at the other
 * application's authorization server that redeems them, its request for an ID-JAG at the token-exchange
 * grant, and the chat application's server redeeming the identity provider's ID-JAGs.
 */
import type { JSONWebKeySet } from 'jose';
import type { ClientMetadata } from 'oidc-provider';
import { JWT_BEARER_GRANT } from '../../lib/exchange/id-jag.js';
import { ID_JAG_TOKEN_TYPE, ID_TOKEN_TYPE } from '../../lib/exchange/id-jag-issuance.js';
import { exchange, type ClientCredentials, type Reply } from './http.js';
import { FIXTURE_CLIENTS, REDIRECT_URI, startProvider, TOKEN_EXCHANGE, type TestProvider } from './provider.js';

/** The other application's authorization server, as its issuer identifier. */
export const CHAT = 'https://chat.example.com';
/** The agent, under one client_id at the identity provider and at the chat application. */
export const AGENT = { client_id: 'chat-agent', client_secret: 'chat-agent-secret' };
/** Another agent of the same users. */
export const OTHER_AGENT = { client_id: 'mail-agent', client_secret: 'mail-agent-secret' };

/**
 * An agent at the identity provider: it signs users in by code and exchanges their tokens for ID-JAGs
 * for `audiences` (space-separated issuer identifiers).
 */
export function agentAtIdp(
  agent: ClientCredentials,
  audiences: string,
  grantTypes: string[] = ['authorization_code', TOKEN_EXCHANGE],
): ClientMetadata {
  return {
    ...agent,
    token_endpoint_auth_method: 'client_secret_basic',
    grant_types: grantTypes,
    response_types: ['code'],
    redirect_uris: [REDIRECT_URI],
    id_jag_audiences: audiences,
  };
}

/** An agent at the server that redeems its ID-JAGs: a confidential client of the jwt-bearer grant only. */
export function agentAtRedeemer(agent: ClientCredentials): ClientMetadata {
  return {
    ...agent,
    token_endpoint_auth_method: 'client_secret_basic',
    grant_types: [JWT_BEARER_GRANT],
    response_types: [],
    redirect_uris: [],
  };
}

/** A token exchange for an ID-JAG: of an ID token, unless `params` names another subject_token_type. */
export function exchangeForIdJag(
  on: TestProvider,
  client: ClientCredentials,
  params: Record<string, string | string[] | undefined>,
  headers: Record<string, string> = {},
): Promise<Reply> {
  return exchange(
    on,
    { requested_token_type: ID_JAG_TOKEN_TYPE, subject_token_type: ID_TOKEN_TYPE, ...params },
    client,
    headers,
  );
}

/** The chat application's server, redeeming the ID-JAGs of `idp` (keys `jwks`) for AGENT: `sub` is its own account. */
export function startChat(idp: TestProvider, jwks: JSONWebKeySet): Promise<TestProvider> {
  return startProvider({
    issuer: CHAT,
    plugin: { idJag: { trustedIssuers: [{ issuer: idp.issuer, jwks, accountOf: ({ sub }) => sub }] } },
    configuration: { clients: [...FIXTURE_CLIENTS, agentAtRedeemer(AGENT)] },
  });
}
