/**
 * A stop at the issuing provider ends, at the redeeming one, the tokens its
 * ID-JAG was redeemed for: two providers over HTTP on TEST_ADAPTER's store,
 * the first issuing ID-JAGs and transmitting SSF, the second redeeming them
 * and polling the first's stream; a resource server reads the second's
 * revocation feed.
 */
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { importJWK, SignJWT, type JSONWebKeySet } from 'jose';
import Provider from 'oidc-provider';
import { createImpersonation, createMemoryAdapter, type IdJagOptions } from '../../lib/index.js';
import { JWT_BEARER_GRANT } from '../../lib/exchange/id-jag.js';
import {
  createImpersonationVerifier,
  ImpersonationTokenError,
  type ImpersonationVerifier,
} from '../../lib/resource-server/index.js';
import { FIXTURE_JWKS } from '../../fixtures/keys.js';
import { API, FIXTURE_CLIENTS, MANAGEMENT, OPAQUE_API, startProvider, type TestProvider } from '../support/provider.js';
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
import { MINIMAL_CONFIGURATION } from '../support/keys.js';
import { AGENT, agentAtIdp, agentAtRedeemer, CHAT, exchangeForIdJag } from '../support/id-jag.js';

const AGENT_AT_IDP = agentAtIdp(AGENT, CHAT);
const AGENT_AT_CHAT = agentAtRedeemer(AGENT);

const now = () => Math.floor(Date.now() / 1000);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Past the bound (5 s) on the age of a stream's last complete read. */
const STALE = 5500;

/** An ID-JAG signed with the fixture key (the IdP's), for `aud` CHAT and the agent, of `claims`. */
async function signedIdJag(claims: Record<string, unknown>): Promise<string> {
  const key = await importJWK(FIXTURE_JWKS.keys[0]!, 'RS256');
  return new SignJWT({
    sub: 'alice',
    aud: CHAT,
    client_id: AGENT.client_id,
    jti: randomUUID(),
    resource: API,
    ...claims,
  })
    .setIssuedAt()
    .setExpirationTime(now() + 120)
    .setProtectedHeader({ alg: 'RS256', kid: FIXTURE_JWKS.keys[0]!.kid!, typ: 'oauth-id-jag+jwt' })
    .sign(key);
}

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
    const reply = await exchangeForIdJag(idp, AGENT, { subject_token: idToken, audience: CHAT, resource, scope });
    expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
    return reply.body['access_token'] as string;
  }

  /** A poll stream of `receiver` at the IdP, as `ssf` options: every stop from now on is on it. */
  async function newStream(receiver = RECEIVERS.second) {
    const created = await ssfRequest(idp, 'POST', STREAMS, await receiverToken(idp, receiver), {
      delivery: { method: POLL },
      events_requested: [SESSION_REVOKED],
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const endpoint = (created.body['delivery'] as { endpoint_url: string }).endpoint_url;
    return { endpoint, accessToken: () => receiverToken(idp, receiver), audience: receiver.client_id };
  }

  /** An ID-JAG of the IdP's that reaches its stream's check, then is refused (400) for naming no account here. */
  const probe = () => signedIdJag({ iss: idp.issuer, sub: 'nobody', impersonation_session: 'imp_probe' });

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
      override async saveWithinQuotas(write: Parameters<InstanceType<typeof Memory>['saveWithinQuotas']>[0]) {
        if (failed === 0 && write.write.id.startsWith('ended:issuer-session:')) {
          failed += 1;
          throw new Error('the store is down');
        }
        return super.saveWithinQuotas(write);
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

  it("an issuer's stops beyond its hourly share: its stream goes stale and only its ID-JAGs are refused (503), the sessions it stops still end", async () => {
    const ssf = await newStream();
    // Another issuer (the fixture key too), whose stream is not followed.
    const other = { issuer: 'https://other-idp.example.com', jwks, accountOf: ({ sub }: { sub: string }) => sub };
    const bounded = await redeemer({
      trustedIssuers: [{ ...idJag.trustedIssuers[0]!, ssf }, other],
      maxStopsPerIssuer: 1,
    });
    try {
      const assertion = await issue();
      const token = await redeemed(assertion, bounded);
      const sessionId = decodeJwt(token)['impersonation_session'] as string;
      const idpAdmin = await adminToken(idp);
      // Two stops of sessions nothing here was redeemed from, then the redeemed one's: three marks for a share of one.
      for (const unrelated of [await issue(), await issue(), assertion]) {
        const stop = await revokeSession(idp, idpAdmin, decodeJwt(unrelated)['impersonation_session'] as string);
        expect(stop.status).to.equal(204);
      }
      const admin = await adminToken(bounded);
      const ended = async () =>
        (await apiRequest(bounded, 'GET', `${SESSIONS}/${sessionId}`, admin)).body['state'] === 'ended';
      expect(await until(ended, 5000)).to.equal(true);
      const probed = await probe();
      const refused = async () => (await redeem(probed, bounded)).status === 503;
      expect(await until(refused, STALE + 3000)).to.equal(true);
      expectError(await redeem(probed, bounded), 503, 'temporarily_unavailable', /stream of stopped sessions/);
      expect(bounded.appErrors.map(String).join('\n')).to.match(/idJag\.maxStopsPerIssuer/);
      // No other principal is affected: the other issuer's ID-JAGs are redeemed.
      const elsewhere = await redeem(await signedIdJag({ iss: other.issuer }), bounded);
      expect(elsewhere.status, JSON.stringify(elsewhere.body)).to.equal(200);
    } finally {
      bounded.impersonation.stopIssuerStreams();
      await bounded.close();
    }
  });

  it('a stream gone stale during the redemption: refused (503) right before the commit, nothing spent', async () => {
    const { endpoint, ...ssf } = await newStream();
    const assertion = await issue();
    const slowJti = decodeJwt(assertion)['jti'];
    let cut = false;
    let slowed = 0;
    const slow = await redeemer({
      trustedIssuers: [
        {
          ...idJag.trustedIssuers[0]!,
          ssf: {
            ...ssf,
            endpoint: () => {
              if (cut) throw new Error('the stream is cut');
              return endpoint;
            },
          },
          // The first redemption waits, past the stream's bound, after its first check of the stream.
          accountOf: async ({ sub, jti }) => {
            if (jti === slowJti && slowed++ === 0) {
              cut = true;
              await sleep(STALE);
            }
            return sub;
          },
        },
      ],
    });
    try {
      await until(async () => (await redeem(await probe(), slow)).status === 400, 5000);
      expectError(await redeem(assertion, slow), 503, 'temporarily_unavailable', /stream of stopped sessions/);
      expect(slowed).to.equal(1);
      cut = false;
      // Nothing was spent: the same assertion is redeemed once the stream is read again.
      await redeemed(assertion, slow);
    } finally {
      slow.impersonation.stopIssuerStreams();
      await slow.close();
    }
  });

  it('an endpoint resolved to plain http on a host that is no loopback: the stream is not read, nothing is sent', async () => {
    let requests = 0;
    const server = createServer((_req, res) => {
      requests += 1;
      res.end('{"sets":{}}');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.2', resolve));
    const plain = `http://127.0.0.2:${(server.address() as AddressInfo).port}/poll`;
    let tokens = 0;
    const ssf = {
      endpoint: async () => plain,
      accessToken: () => String((tokens += 1)),
      audience: 'chat',
    };
    const insecure = await redeemer({ trustedIssuers: [{ ...idJag.trustedIssuers[0]!, ssf }] });
    try {
      await sleep(scaled(1500));
      expectError(await redeem(await probe(), insecure), 503, 'temporarily_unavailable', /stream of stopped sessions/);
      expect({ requests, tokens }).to.deep.equal({ requests: 0, tokens: 0 });
      expect(insecure.appErrors.map(String).join('\n')).to.match(/not an https URL/);
    } finally {
      insecure.impersonation.stopIssuerStreams();
      await insecure.close();
      server.close();
    }
  });

  it('stopIssuerStreams() before install(): no stream is polled, the issuer’s ID-JAGs are refused (503)', async () => {
    let polls = 0;
    const ssf = {
      ...idJag.trustedIssuers[0]!.ssf!,
      endpoint: () => {
        polls += 1;
        return 'http://127.0.0.1:9/poll';
      },
    };
    const stopped = await startProvider(
      {
        issuer: CHAT,
        plugin: { idJag: { trustedIssuers: [{ ...idJag.trustedIssuers[0]!, ssf }] } },
        configuration: { clients: [...FIXTURE_CLIENTS, AGENT_AT_CHAT] },
        mount: (_provider, install, impersonation) => {
          impersonation.stopIssuerStreams();
          install();
        },
      },
      kind,
    );
    stopped.server.on('request', stopped.provider.callback());
    try {
      await sleep(scaled(1000));
      expectError(await redeem(await probe(), stopped), 503, 'temporarily_unavailable', /stream of stopped sessions/);
      expect(polls).to.equal(0);
    } finally {
      await stopped.close();
    }
  });

  it('install() on a second provider is refused while an issuer’s stream is followed: each stream has one reader', () => {
    const impersonation = createImpersonation({ managementResource: MANAGEMENT, idJag });
    const first = new Provider('http://127.0.0.1:1', impersonation.configure(MINIMAL_CONFIGURATION));
    const second = new Provider('http://127.0.0.1:2', impersonation.configure(MINIMAL_CONFIGURATION));
    impersonation.stopIssuerStreams();
    impersonation.install(first, { mountManagementApi: false });
    expect(() => impersonation.install(second, { mountManagementApi: false })).to.throw(
      TypeError,
      /^impersonation\.install: idJag\.trustedIssuers\[\]\.ssf is set: a stream is read, and acknowledged, for one provider only/,
    );
    // Without a stream, several providers take ID-JAGs.
    const { ssf: _none, ...unfollowed } = idJag.trustedIssuers[0]!;
    const plain = createImpersonation({ managementResource: MANAGEMENT, idJag: { trustedIssuers: [unfollowed] } });
    for (const port of [3, 4]) {
      const provider = new Provider(`http://127.0.0.1:${port}`, plain.configure(MINIMAL_CONFIGURATION));
      plain.install(provider, { mountManagementApi: false });
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
    expect(make({ endpoint: 'http://idp.example.com/poll', accessToken: 't', audience: 'a' })).to.throw(
      /"idJag\.trustedIssuers\[0\]\.ssf\.endpoint" must be an https URL \(http only on a loopback host\)/,
    );
    for (const endpoint of [
      'https://idp.example.com/poll',
      'http://127.0.0.1:9/poll',
      () => 'http://idp.example.com',
    ]) {
      expect(make({ endpoint, accessToken: 't', audience: 'a' })).not.to.throw();
    }
  });
});
