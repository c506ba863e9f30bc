/**
 * ID-JAG issuance from a refresh token (draft-ietf-oauth-identity-assertion-authz-grant, Token Exchange:
 * `subject_token_type=…:refresh_token`), over HTTP at a real provider on TEST_ADAPTER's store: a refresh token
 * of a real sign-in with offline_access, exchanged without being rotated or consumed; each refusal with its code.
 */
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import type { JSONWebKeySet } from 'jose';
import { createMemoryAuditLog, EVENTS, onImpersonationEvent, type ImpersonationEvent } from '../../lib/index.js';
import { JWT_BEARER_GRANT } from '../../lib/exchange/id-jag.js';
import { ID_JAG_TOKEN_TYPE, ID_TOKEN_TYPE, REFRESH_TOKEN_TYPE } from '../../lib/exchange/id-jag-issuance.js';
import { API, FIXTURE_CLIENTS, startProvider, TOKEN_EXCHANGE, type TestProvider } from '../support/provider.js';
import {
  basic,
  decodeJwt,
  expectError,
  tokenRequest,
  userAccessToken,
  userSignIn,
  type ClientCredentials,
  type Reply,
} from '../support/http.js';
import { DpopKey } from '../support/dpop.js';
import { AGENT, agentAtIdp, CHAT, exchangeForIdJag, OTHER_AGENT, startChat } from '../support/id-jag.js';

/** Its ID tokens name a pairwise `sub`; this provider's account ids are never told to it. */
const PAIRWISE_AGENT = { client_id: 'pairwise-agent', client_secret: 'pairwise-agent-secret' };
/** Holds refresh tokens (the deployment's `issueRefreshToken` gives them) without the refresh_token grant. */
const NO_REFRESH_AGENT = { client_id: 'no-refresh-agent', client_secret: 'no-refresh-agent-secret' };

const AGENT_AT_IDP = agentAtIdp(AGENT, CHAT, ['authorization_code', 'refresh_token', TOKEN_EXCHANGE]);

const SCOPE = 'openid offline_access profile:read';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('ID-JAG issuance from a refresh token: the draft, over HTTP', function () {
  this.timeout(60_000);
  let idp: TestProvider;
  let chat: TestProvider;
  /** Seconds the next sign-in's refresh token lives. */
  let refreshTokenTtl = 3600;
  const issued: Array<ImpersonationEvent<typeof EVENTS.idJagIssued>> = [];

  before(async () => {
    idp = await startProvider({
      plugin: { auditLog: createMemoryAuditLog(), idJagIssuance: {} },
      configuration: {
        clients: [
          ...FIXTURE_CLIENTS,
          AGENT_AT_IDP,
          { ...AGENT_AT_IDP, ...OTHER_AGENT },
          { ...AGENT_AT_IDP, ...PAIRWISE_AGENT, subject_type: 'pairwise' },
          { ...AGENT_AT_IDP, ...NO_REFRESH_AGENT, grant_types: ['authorization_code', TOKEN_EXCHANGE] },
        ],
        subjectTypes: ['public', 'pairwise'],
        pairwiseIdentifier: (_ctx, accountId, client) =>
          createHash('sha256')
            .update(`${client.sectorIdentifier ?? ''} ${accountId}`)
            .digest('base64url'),
        // As a deployment's policy may: a refresh token to a client without the refresh_token grant.
        issueRefreshToken: (_ctx, client, code) =>
          code.scopes.has('offline_access') || client.clientId === NO_REFRESH_AGENT.client_id,
        // Every refresh_token grant rotates: a refresh token once used there is consumed.
        rotateRefreshToken: true,
        ttl: {
          AccessToken: (_ctx, token) => token.resourceServer?.accessTokenTTL ?? 3600,
          ClientCredentials: 600,
          Grant: 3600,
          RefreshToken: () => refreshTokenTtl,
          Interaction: 600,
          Session: 3600,
          AuthorizationCode: 60,
          IdToken: 3600,
        },
      },
    });
    onImpersonationEvent(idp.provider, EVENTS.idJagIssued, (event) => issued.push(event));
    const jwks = (await (await fetch(`${idp.base}/jwks`)).json()) as JSONWebKeySet;
    chat = await startChat(idp, jwks);
  });
  afterEach(() => {
    refreshTokenTtl = 3600;
  });
  after(async () => {
    await idp?.close();
    await chat?.close();
  });

  /** A refresh token of alice's sign-in at `client`, with offline_access (which needs consent). */
  async function refreshTokenOf(client: ClientCredentials = AGENT, user = 'alice'): Promise<string> {
    const { refreshToken } = await userSignIn(idp, user, { client, scope: SCOPE, resource: API, prompt: 'consent' });
    expect(refreshToken, 'a refresh token').to.be.a('string');
    return refreshToken!;
  }

  function requestIdJag(
    refreshToken: string,
    params: Record<string, string | undefined> = {},
    headers: Record<string, string> = {},
    client: ClientCredentials = AGENT,
  ): Promise<Reply> {
    return exchangeForIdJag(
      idp,
      client,
      { subject_token: refreshToken, subject_token_type: REFRESH_TOKEN_TYPE, audience: CHAT, ...params },
      headers,
    );
  }

  /** A refusal with its code that issues nothing and names the refresh token nowhere. */
  async function refused(refreshToken: string, error: string, description: RegExp, params = {}): Promise<void> {
    const before = issued.length;
    const reply = await requestIdJag(refreshToken, params);
    expectError(reply, 400, error, description);
    expect(JSON.stringify(reply.body)).not.to.include(refreshToken);
    expect(issued.length, 'no ID-JAG issued').to.equal(before);
  }

  function refreshGrant(refreshToken: string, client: ClientCredentials = AGENT): Promise<Reply> {
    return tokenRequest(idp, { grant_type: 'refresh_token', refresh_token: refreshToken, resource: API }, client);
  }

  describe('what is issued', () => {
    it('an ID-JAG for the refresh token’s user, with the scope asked, redeemed at the second provider', async () => {
      const refreshToken = await refreshTokenOf();
      const reply = await requestIdJag(refreshToken, { resource: API, scope: 'profile:read' });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body).to.include({ issued_token_type: ID_JAG_TOKEN_TYPE, token_type: 'N_A', expires_in: 300 });
      expect(reply.body).not.to.have.property('refresh_token');
      const assertion = reply.body['access_token'] as string;
      expect(decodeJwt(assertion)).to.include({
        iss: idp.issuer,
        sub: 'alice',
        aud: CHAT,
        client_id: AGENT.client_id,
        resource: API,
        scope: 'profile:read',
      });
      // The sign-in the refresh token records.
      const { authTime } = (await idp.provider.RefreshToken.find(refreshToken))!;
      expect(authTime).to.be.a('number');
      expect(decodeJwt(assertion)['auth_time']).to.equal(authTime);
      const event = issued.at(-1)!;
      expect(event).to.include({ subject: 'alice', clientId: AGENT.client_id, resource: CHAT, scope: 'profile:read' });
      expect(event.subjectTokenId).to.match(/^sha256\./);
      expect(JSON.stringify(event)).not.to.include(refreshToken);
      const redeemed = await tokenRequest(chat, { grant_type: JWT_BEARER_GRANT, assertion }, AGENT);
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
      expect(decodeJwt(redeemed.body['access_token'] as string)).to.include({ sub: 'alice', aud: API, iss: CHAT });
    });

    it('neither rotates nor consumes the refresh token: it is exchanged again, then still refreshes', async () => {
      const refreshToken = await refreshTokenOf();
      expect((await requestIdJag(refreshToken)).status).to.equal(200);
      const again = await requestIdJag(refreshToken);
      expect(again.status, JSON.stringify(again.body)).to.equal(200);
      expect(decodeJwt(again.body['access_token'] as string)).not.to.have.property('scope');
      const refreshed = await refreshGrant(refreshToken);
      expect(refreshed.status, JSON.stringify(refreshed.body)).to.equal(200);
    });

    it('never outlives the refresh token it attests', async () => {
      refreshTokenTtl = 30;
      const reply = await requestIdJag(await refreshTokenOf());
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(reply.body['expires_in']).to.be.at.most(30).and.at.least(20);
    });

    it('a DPoP-bound refresh token: only with a proof of its key', async () => {
      const refreshToken = await refreshTokenOf();
      const key = await DpopKey.generate();
      // As oidc-provider binds a public client's refresh token to the key its first token request proved.
      const stored = (await idp.provider.RefreshToken.find(refreshToken))!;
      stored.jkt = key.thumbprint;
      await stored.save();
      const bound = /bound to a DPoP key/;
      await refused(refreshToken, 'invalid_request', bound);
      const other = await DpopKey.generate();
      const withOther = await requestIdJag(refreshToken, {}, { dpop: await other.proof(`${idp.base}/token`) });
      expectError(withOther, 400, 'invalid_request', bound);
      const reply = await requestIdJag(refreshToken, {}, { dpop: await key.proof(`${idp.base}/token`) });
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expect(decodeJwt(reply.body['access_token'] as string)['cnf']).to.deep.equal({ jkt: key.thumbprint });
    });
  });

  describe('refusals, each with its code', () => {
    it('a refresh token bound to a client certificate or an attestation key, not checked here: invalid_request', async () => {
      for (const binding of [{ 'x5t#S256': 'c2VydGlmaWNhdGU' }, { attestationJkt: 'YXR0ZXN0YXRpb24' }]) {
        const refreshToken = await refreshTokenOf();
        const stored = (await idp.provider.RefreshToken.find(refreshToken))!;
        Object.assign(stored, binding);
        await stored.save();
        await refused(refreshToken, 'invalid_request', /bound to a client certificate or attestation/);
      }
    });

    it('another client’s refresh token: invalid_request', async () => {
      const theirs = await refreshTokenOf(OTHER_AGENT);
      await refused(theirs, 'invalid_request', /not a valid refresh token of this client/);
    });

    it('an unknown token, or another kind of token named a refresh token: invalid_request', async () => {
      const invalid = /not a valid refresh token of this client/;
      await refused('not-a-refresh-token', 'invalid_request', invalid);
      // Text no store can keep under its own name is looked up as any other, never a 500.
      await refused('not\u0000stored\ud800', 'invalid_request', invalid);
      const { idToken, accessToken } = await userSignIn(idp, 'alice', { client: AGENT, scope: 'openid' });
      await refused(idToken!, 'invalid_request', invalid);
      await refused(accessToken, 'invalid_request', invalid);
      await refused(await userAccessToken(idp, 'alice', { client: AGENT, resource: API }), 'invalid_request', invalid);
    });

    it('an expired refresh token: invalid_request', async () => {
      refreshTokenTtl = 1;
      const refreshToken = await refreshTokenOf();
      await sleep(2100);
      await refused(refreshToken, 'invalid_request', /not a valid refresh token of this client/);
    });

    it('a revoked refresh token: invalid_request', async () => {
      const refreshToken = await refreshTokenOf();
      const revocation = await fetch(`${idp.base}/token/revocation`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: basic(AGENT) },
        body: new URLSearchParams({ token: refreshToken, token_type_hint: 'refresh_token' }),
      });
      expect(revocation.status).to.equal(200);
      await refused(refreshToken, 'invalid_request', /not a valid refresh token of this client/);
    });

    it('a refresh token consumed by its rotation at the refresh_token grant: invalid_request', async () => {
      const refreshToken = await refreshTokenOf();
      const rotated = await refreshGrant(refreshToken);
      expect(rotated.status, JSON.stringify(rotated.body)).to.equal(200);
      expect(rotated.body['refresh_token']).to.be.a('string').and.not.equal(refreshToken);
      const { grantId } = (await idp.provider.RefreshToken.find(refreshToken))!;
      const revokedGrants: string[] = [];
      const onRevoked = (_ctx: unknown, id: string) => revokedGrants.push(id);
      idp.provider.on('grant.revoked', onRevoked);
      await refused(refreshToken, 'invalid_request', /not a valid refresh token of this client/);
      idp.provider.off('grant.revoked', onRevoked);
      // Announced as oidc-provider announces it: the plugin then ends the sessions begun from that grant.
      expect(revokedGrants).to.deep.equal([grantId]);
      // As the refresh_token grant: the rotated token presented again ends the grant, and the token that replaced it.
      await refused(
        rotated.body['refresh_token'] as string,
        'invalid_request',
        /not a valid refresh token of this client/,
      );
      expect((await refreshGrant(rotated.body['refresh_token'] as string)).body).to.include({ error: 'invalid_grant' });
    });

    it('a refresh token whose grant has ended: invalid_request', async () => {
      const refreshToken = await refreshTokenOf();
      const { grantId } = (await idp.provider.RefreshToken.find(refreshToken))!;
      await (await idp.provider.Grant.find(grantId!))!.destroy();
      await refused(refreshToken, 'invalid_request', /grant has ended/);
    });

    it("the ID-JAG's scope is the other server's: not bounded by the refresh token's", async () => {
      const refreshToken = await refreshTokenOf();
      const issued = await requestIdJag(refreshToken, { scope: 'chat.read' });
      expect(issued.status, JSON.stringify(issued.body)).to.equal(200);
      expect(decodeJwt(issued.body['access_token'] as string)).to.include({ scope: 'chat.read' });
    });

    it("a pairwise client's refresh token: invalid_request, its user's account id never told", async () => {
      const refreshToken = await refreshTokenOf(PAIRWISE_AGENT);
      const reply = await requestIdJag(refreshToken, {}, {}, PAIRWISE_AGENT);
      expectError(reply, 400, 'invalid_request', /pairwise client's subject is not passed on/);
      expect(JSON.stringify(reply.body)).not.to.include('alice');
    });

    it('a client that may not use the refresh_token grant: unauthorized_client', async () => {
      const refreshToken = await refreshTokenOf(NO_REFRESH_AGENT);
      const reply = await requestIdJag(refreshToken, {}, {}, NO_REFRESH_AGENT);
      expectError(reply, 400, 'unauthorized_client', /uses no refresh token/);
    });

    it('a refresh token named an ID token is no ID token: invalid_request', async () => {
      const refreshToken = await refreshTokenOf();
      await refused(refreshToken, 'invalid_request', /not a valid ID token/, { subject_token_type: ID_TOKEN_TYPE });
    });
  });
});
