import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import {
  createImpersonationVerifier,
  ImpersonationTokenError,
  type ImpersonationVerifier,
} from '../lib/resource-server/index.js';
import { API, CLIENTS, READ_SCOPE, REVOKE_SCOPE, startProvider, type TestProvider } from './support/provider.js';
import { ACCESS_TOKEN, decodeJwt, exchange, m2mToken, subjectToken, userAccessToken } from './support/http.js';

/** A relay in front of the revocation feed that the test can cut, as a network partition would. */
async function feedRelay(target: string): Promise<{ url: string; cut: boolean; server: Server }> {
  const relay = { url: '', cut: false, server: createServer() };
  relay.server.on('request', (request, response) => {
    if (relay.cut) {
      response.destroy();
      return;
    }
    fetch(`${target}${request.url!.replace(/^\/feed/, '')}`).then(
      async (upstream) => {
        response.writeHead(upstream.status, { 'content-type': 'application/json' });
        response.end(await upstream.text());
      },
      () => response.destroy(),
    );
  });
  await new Promise<void>((resolve) => relay.server.listen(0, '127.0.0.1', resolve));
  relay.url = `http://127.0.0.1:${(relay.server.address() as AddressInfo).port}/feed`;
  return relay;
}

async function refusal(verifier: ImpersonationVerifier, token: string): Promise<ImpersonationTokenError | undefined> {
  try {
    await verifier.verify(token);
    return undefined;
  } catch (error) {
    return error as ImpersonationTokenError;
  }
}

describe('resource-server helper: verify impersonation JWTs and honour revocations', function () {
  this.timeout(20_000);
  let tp: TestProvider;
  let alice: string;
  let admin: string;
  let relay: Awaited<ReturnType<typeof feedRelay>>;
  let verifier: ImpersonationVerifier;

  before(async () => {
    tp = await startProvider();
    alice = await userAccessToken(tp, 'alice');
    admin = await m2mToken(tp, CLIENTS.admin, `${READ_SCOPE} ${REVOKE_SCOPE}`);
    relay = await feedRelay(`${tp.base}/api/impersonations/revocations`);
    verifier = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: API,
      revocationsUri: relay.url,
      refreshInterval: 200,
      maxStaleness: 1000,
    });
    await verifier.ready();
  });
  after(async () => {
    verifier.close();
    relay.server.closeAllConnections();
    await new Promise((resolve) => relay.server.close(resolve));
    await tp.close();
  });

  async function impersonation(): Promise<string> {
    const result = await exchange(tp, {
      subject_token: await subjectToken(tp),
      resource: API,
      scope: 'profile:read',
      actor_token: alice,
      actor_token_type: ACCESS_TOKEN,
    });
    return result.body['access_token'] as string;
  }

  it('verifies an impersonation token and exposes subject, actor, session and scopes', async () => {
    const token = await impersonation();
    const verified = await verifier.verify(token);
    expect(verified.subject).to.equal('bob');
    expect(verified.actor).to.deep.equal({ sub: 'alice' });
    expect(verified.sessionId).to.equal(decodeJwt(token)['impersonation_session']);
    expect([...verified.scopes]).to.deep.equal(['profile:read']);
  });

  it('refuses a token of its session within one second of DELETE /api/impersonations/{id}', async () => {
    const token = await impersonation();
    const session = decodeJwt(token)['impersonation_session'] as string;
    await verifier.verify(token);
    const response = await fetch(`${tp.base}/api/impersonations/${session}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(response.status).to.equal(204);
    const revokedAt = Date.now();
    let error: ImpersonationTokenError | undefined;
    while (!error && Date.now() - revokedAt < 1000) {
      error = await refusal(verifier, token);
      if (!error) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(error?.code, 'refused within 1 s').to.equal('session_revoked');
    expect(error?.status).to.equal(401);
  });

  it('refuses forged, foreign-audience and garbage tokens', async () => {
    const token = await impersonation();
    expect((await refusal(verifier, `${token.slice(0, -4)}AAAA`))?.code).to.equal('invalid_token');
    expect((await refusal(verifier, 'garbage'))?.code).to.equal('invalid_token');
    const other = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: 'https://elsewhere.example.com',
      revocationsUri: relay.url,
    });
    try {
      await other.ready();
      expect((await refusal(other, token))?.code).to.equal('invalid_token');
    } finally {
      other.close();
    }
  });

  it('fails closed for impersonation tokens when the feed cannot be read beyond maxStaleness, and recovers', async () => {
    const token = await impersonation();
    relay.cut = true;
    try {
      await new Promise((resolve) => setTimeout(resolve, 1300));
      const error = await refusal(verifier, token);
      expect(error?.code).to.equal('revocations_unavailable');
      expect(error?.status).to.equal(503);
      expect(verifier.state.failures).to.be.above(0);
    } finally {
      relay.cut = false;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect((await verifier.verify(token)).subject).to.equal('bob');
  });
});
