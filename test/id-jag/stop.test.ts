/**
 * A stop at the issuing provider ends, at the redeeming one, the tokens its
 * ID-JAG was redeemed for: two providers over HTTP on TEST_ADAPTER's store,
 * the first issuing ID-JAGs and transmitting SSF, the second redeeming them
 * and polling the first's stream; a resource server reads the second's
 * revocation feed.
 */
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { importJWK, SignJWT, type JSONWebKeySet } from 'jose';
import type { AdapterPayload, ClientMetadata } from 'oidc-provider';
import { createImpersonation, createMemoryAdapter, type IdJagOptions } from '../../lib/index.js';
import { JWT_BEARER_GRANT } from '../../lib/exchange/id-jag.js';
import { ID_JAG_TOKEN_TYPE, ID_TOKEN_TYPE } from '../../lib/exchange/id-jag-issuance.js';
import {
  createImpersonationVerifier,
  ImpersonationTokenError,
  type ImpersonationVerifier,
} from '../../lib/resource-server/index.js';
import { FIXTURE_JWKS } from '../../fixtures/keys.js';
import {
  API,
  FIXTURE_CLIENTS,
  MANAGEMENT,
  OPAQUE_API,
  REDIRECT_URI,
  startProvider,
  TOKEN_EXCHANGE,
  type TestProvider,
} from '../support/provider.js';
import { apiRequest, decodeJwt, expectError, introspect, tokenRequest, userSignIn } from '../support/http.js';
import { adminToken, revokeSession, SESSIONS } from '../support/impersonations.js';
import { suiteAdapterKind } from '../support/adapters.js';
import {
  POLL,
  RECEIVERS,
  receiverToken,
  SESSION_REVOKED,
  ssfRequest,
  SSF_RECEIVER_CLIENTS,
  STREAMS,
} from '../support/ssf.js';
import { scaled } from '../support/time.js';

const CHAT = 'https://chat.example.com';
const AGENT = { client_id: 'chat-agent', client_secret: 'chat-agent-secret' };

const AGENT_AT_IDP: ClientMetadata = {
  ...AGENT,
  token_endpoint_auth_method: 'client_secret_basic',
  grant_types: ['authorization_code', TOKEN_EXCHANGE],
  response_types: ['code'],
  redirect_uris: [REDIRECT_URI],
  id_jag_audiences: CHAT,
};

const AGENT_AT_CHAT: ClientMetadata = {
  ...AGENT,
  token_endpoint_auth_method: 'client_secret_basic',
  grant_types: [JWT_BEARER_GRANT],
  response_types: [],
  redirect_uris: [],
};

const now = () => Math.floor(Date.now() / 1000);

async function until(condition: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + scaled(ms);
  while (!(await condition()) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return condition();
}

async function refusal(verifier: ImpersonationVerifier, token: string): Promise<string | undefined> {
  try {
    await verifier.verify(token);
    return undefined;
  } catch (error) {
    return (error as ImpersonationTokenError).code;
  }
}

describe('ID-JAG stop: a stop at the issuer ends the tokens redeemed for it, over SSF', function () {
  this.timeout(60_000);
  const kind = suiteAdapterKind();
  let idp: TestProvider;
  let chat: TestProvider;
  let jwks: JSONWebKeySet;
  let idToken: string;
  let verifier: ImpersonationVerifier;
  let idJag: IdJagOptions;

  before(async () => {
    idp = await startProvider(
      {
        plugin: { idJagIssuance: {}, ssf: { pollInterval: 50, timeout: 2000 } },
        configuration: { clients: [...FIXTURE_CLIENTS, ...SSF_RECEIVER_CLIENTS, AGENT_AT_IDP] },
      },
      kind,
    );
    jwks = (await (await fetch(`${idp.base}/jwks`)).json()) as JSONWebKeySet;
    const created = await ssfRequest(idp, 'POST', STREAMS, await receiverToken(idp), {
      delivery: { method: POLL },
      events_requested: [SESSION_REVOKED],
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const endpoint = (created.body['delivery'] as { endpoint_url: string }).endpoint_url;
    const ssf = { endpoint, accessToken: () => receiverToken(idp), audience: RECEIVERS.first.client_id };
    idJag = { trustedIssuers: [{ issuer: idp.issuer, jwks, accountOf: ({ sub }) => sub, ssf }] };
    chat = await redeemer(idJag);
    idToken = (await userSignIn(idp, 'alice', { client: AGENT, scope: 'openid' })).idToken!;
    verifier = createImpersonationVerifier({
      issuer: CHAT,
      audience: API,
      jwks: `${chat.base}/jwks`,
      revocationsUri: `${chat.base}${SESSIONS}/revocations`,
      refreshInterval: 200,
    });
    await verifier.ready();
  });
  after(async () => {
    verifier.close();
    for (const tp of [chat, idp]) {
      tp.impersonation.stopIssuerStreams();
      await tp.close();
    }
  });

  function redeemer(options: IdJagOptions): Promise<TestProvider> {
    return startProvider(
      { issuer: CHAT, plugin: { idJag: options }, configuration: { clients: [...FIXTURE_CLIENTS, AGENT_AT_CHAT] } },
      kind,
    );
  }

  async function issue(resource = API, scope = 'profile:read'): Promise<string> {
    const reply = await tokenRequest(
      idp,
      {
        grant_type: TOKEN_EXCHANGE,
        requested_token_type: ID_JAG_TOKEN_TYPE,
        subject_token: idToken,
        subject_token_type: ID_TOKEN_TYPE,
        audience: CHAT,
        resource,
        scope,
      },
      AGENT,
    );
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    return reply.body['access_token'] as string;
  }

  const redeem = (assertion: string, at = chat) => tokenRequest(at, { grant_type: JWT_BEARER_GRANT, assertion }, AGENT);

  /** Waits until the issuer's stream was read, so that redemptions are taken. */
  async function redeemed(assertion: string, at = chat): Promise<string> {
    let reply = await redeem(assertion, at);
    for (let tries = 0; reply.status === 503 && tries < 100; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      reply = await redeem(assertion, at);
    }
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    return reply.body['access_token'] as string;
  }

  it('the access token is refused once its ID-JAG session is stopped; its session at the redeemer ends; a later redemption is refused', async () => {
    const first = await issue();
    const issuerSession = decodeJwt(first)['impersonation_session'] as string;
    expect(issuerSession).to.match(/^imp_/);
    const token = await redeemed(first);
    const sessionId = decodeJwt(token)['impersonation_session'] as string;
    expect(sessionId).to.match(/^imp_/);
    expect((await verifier.verify(token)).subject).to.equal('alice');

    const admin = await adminToken(chat);
    const listed = await apiRequest(chat, 'GET', `${SESSIONS}?subject=alice`, admin);
    expect(
      (listed.body['items'] as Array<Record<string, unknown>>).find((item) => item['id'] === sessionId),
    ).to.deep.include({
      type: 'id-jag-redemption',
      clientId: AGENT.client_id,
      resource: API,
      scope: 'profile:read',
      state: 'active',
      context: { issuer: idp.issuer, assertionId: decodeJwt(first)['jti'] },
    });

    // Another ID-JAG, not redeemed yet: its stop reaches the redeemer before the first's.
    const second = await issue();
    const idpAdmin = await adminToken(idp);
    expect((await revokeSession(idp, idpAdmin, decodeJwt(second)['impersonation_session'] as string)).status).to.equal(
      204,
    );
    expect((await revokeSession(idp, idpAdmin, issuerSession)).status).to.equal(204);

    // The bound: the issuer's SSF delivery, the redeemer's read of the stream (0.5 s), the resource server's of the feed.
    expect(await until(async () => (await refusal(verifier, token)) === 'session_revoked', 5000)).to.equal(true);
    const session = await apiRequest(chat, 'GET', `${SESSIONS}/${sessionId}`, admin);
    expect(session.body).to.include({ state: 'ended', endReason: 'issuer_session_stopped' });
    expectError(await redeem(second), 400, 'invalid_grant', /session at its issuer was stopped/);
  });

  it('an opaque token ends with its session: introspection shows it inactive', async () => {
    const assertion = await issue(OPAQUE_API, 'read');
    const token = await redeemed(assertion);
    expect(await introspect(chat, token)).to.include({ active: true, sub: 'alice' });
    const idpAdmin = await adminToken(idp);
    const stop = await revokeSession(idp, idpAdmin, decodeJwt(assertion)['impersonation_session'] as string);
    expect(stop.status).to.equal(204);
    expect(await until(async () => (await introspect(chat, token))['active'] === false, 5000)).to.equal(true);
  });

  it('a SET whose ending failed is not acknowledged: it comes again, and the session still ends', async () => {
    // A stream of its own, so that no other redeemer takes its SETs.
    const created = await ssfRequest(idp, 'POST', STREAMS, await receiverToken(idp, RECEIVERS.second), {
      delivery: { method: POLL },
      events_requested: [SESSION_REVOKED],
    });
    const endpoint = (created.body['delivery'] as { endpoint_url: string }).endpoint_url;
    const ssf = {
      endpoint,
      accessToken: () => receiverToken(idp, RECEIVERS.second),
      audience: RECEIVERS.second.client_id,
    };
    let failed = 0;
    const Memory = createMemoryAdapter();
    class FailingOnce extends Memory {
      override async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
        if (failed === 0 && id.startsWith('ended:issuer-session:')) {
          failed += 1;
          throw new Error('the store is down');
        }
        return super.upsert(id, payload, expiresIn);
      }
    }
    const flaky = await startProvider({
      issuer: CHAT,
      adapter: FailingOnce,
      plugin: { idJag: { trustedIssuers: [{ ...idJag.trustedIssuers[0]!, ssf }] } },
      configuration: { clients: [...FIXTURE_CLIENTS, AGENT_AT_CHAT] },
    });
    try {
      const assertion = await issue();
      const token = await redeemed(assertion, flaky);
      const sessionId = decodeJwt(token)['impersonation_session'] as string;
      const stop = await revokeSession(
        idp,
        await adminToken(idp),
        decodeJwt(assertion)['impersonation_session'] as string,
      );
      expect(stop.status).to.equal(204);
      const admin = await adminToken(flaky);
      const ended = async () =>
        (await apiRequest(flaky, 'GET', `${SESSIONS}/${sessionId}`, admin)).body['state'] === 'ended';
      expect(await until(ended, 5000)).to.equal(true);
      expect(failed).to.equal(1);
      expect(flaky.appErrors.map(String)).to.include('Error: the store is down');
    } finally {
      flaky.impersonation.stopIssuerStreams();
      await flaky.close();
    }
  });

  it('an ID-JAG that names no session of an issuer whose stream is followed: invalid_grant', async () => {
    const key = await importJWK(FIXTURE_JWKS.keys[0]!, 'RS256');
    const unnamed = await new SignJWT({
      iss: idp.issuer,
      sub: 'alice',
      aud: CHAT,
      client_id: AGENT.client_id,
      jti: randomUUID(),
      iat: now(),
      exp: now() + 60,
      resource: API,
    })
      .setProtectedHeader({ alg: 'RS256', kid: FIXTURE_JWKS.keys[0]!.kid!, typ: 'oauth-id-jag+jwt' })
      .sign(key);
    expectError(await redeem(unnamed), 400, 'invalid_grant', /names no session of its issuer/);
  });

  it('a stream that cannot be read: its issuer’s ID-JAGs are refused, 503 temporarily_unavailable', async () => {
    const unreachable = { endpoint: 'http://127.0.0.1:9/poll', accessToken: 'token', audience: 'chat' };
    const cut = await redeemer({ trustedIssuers: [{ ...idJag.trustedIssuers[0]!, ssf: unreachable }] });
    try {
      expectError(await redeem(await issue(), cut), 503, 'temporarily_unavailable', /stream of stopped sessions/);
    } finally {
      cut.impersonation.stopIssuerStreams();
      await cut.close();
    }
  });

  it('its options are checked at start-up', () => {
    const make = (ssf: unknown) => () =>
      createImpersonation({
        managementResource: MANAGEMENT,
        idJag: { trustedIssuers: [{ ...idJag.trustedIssuers[0]!, ssf: ssf as never }] },
      });
    expect(make({ endpoint: 'http://127.0.0.1:9/poll', accessToken: 't' })).to.throw(/trustedIssuers\[0\]\.ssf/);
    expect(make({ endpoint: 'http://127.0.0.1:9/poll', accessToken: 't', audience: 'a', every: 1 })).to.throw(
      /trustedIssuers\[0\]\.ssf\.every/,
    );
    expect(make({ delivery: 'push', endpoint: 'http://127.0.0.1:9/poll', accessToken: 't', audience: 'a' })).to.throw(
      /ssf\.delivery/,
    );
  });
});
