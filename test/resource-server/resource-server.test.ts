import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import {
  createImpersonationVerifier,
  ImpersonationTokenError,
  type ImpersonationVerifier,
} from '../../lib/resource-server/index.js';
import { API, CLIENTS, READ_SCOPE, REVOKE_SCOPE, startProvider, type TestProvider } from '../support/provider.js';
import { ACCESS_TOKEN, decodeJwt, exchange, m2mToken, subjectToken, userAccessToken } from '../support/http.js';

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

  it('takes an option given as undefined for the option not given: the keys at `${issuer}/jwks`, the default timings', async () => {
    const defaults = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: API,
      revocationsUri: relay.url,
      jwks: undefined,
      refreshInterval: undefined,
      maxStaleness: undefined,
      timeout: undefined,
    });
    try {
      await defaults.ready();
      expect((await defaults.verify(await impersonation())).subject).to.equal('bob');
    } finally {
      defaults.close();
    }
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

  it('a revocationsUri that is no feed (404, the Management API served elsewhere): ready() rejects, naming the option', async () => {
    const misplaced = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: API,
      revocationsUri: `${tp.base}/oidc/api/impersonations/revocations`,
    });
    const refused = await misplaced.ready().then(
      () => undefined,
      (error: unknown) => error as Error,
    );
    misplaced.close();
    expect(refused?.message).to.equal(
      'the revocation feed answered 404: check "revocationsUri" ({sessionsPath}/revocations where the API is served)',
    );
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

/**
 * A relay in front of the feed that serves it in pages of one (`limit=1`) and holds back chosen
 * pages of every read, as a congested path would; it tells when each read begins.
 */
async function slowFeedRelay(
  target: string,
  slow: { pages: ReadonlySet<number>; delay: number },
): Promise<{ url: string; server: Server; readBegins(): Promise<void> }> {
  let pageOfRead = 0;
  const waiting: Array<() => void> = [];
  const server = createServer((request, response) => {
    const query = new URL(request.url!, 'http://relay').searchParams;
    pageOfRead = query.has('cursor') ? pageOfRead + 1 : 1;
    if (pageOfRead === 1) for (const resolve of waiting.splice(0)) resolve();
    const delay = slow.pages.has(pageOfRead) ? slow.delay : 0;
    query.set('limit', '1');
    fetch(`${target}?${query}`).then(
      async (upstream) => {
        const body = await upstream.text();
        setTimeout(() => {
          response.writeHead(upstream.status, { 'content-type': 'application/json' });
          response.end(body);
        }, delay);
      },
      () => response.destroy(),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/feed`,
    server,
    readBegins: () => new Promise<void>((resolve) => waiting.push(resolve)),
  };
}

describe('resource-server helper: freshness counts from the start of a read, over slow pages', function () {
  this.timeout(20_000);
  const MAX_STALENESS = 1000;
  const SLOW_PAGE = 300;
  /** Timers and the 20 ms polling of the test. */
  const MARGIN = 150;
  let tp: TestProvider;
  let alice: string;
  let admin: string;
  let relay: Awaited<ReturnType<typeof slowFeedRelay>>;
  let verifier: ImpersonationVerifier;

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

  async function revoke(token: string): Promise<void> {
    const session = decodeJwt(token)['impersonation_session'] as string;
    const response = await fetch(`${tp.base}/api/impersonations/${session}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${admin}` },
    });
    expect(response.status).to.equal(204);
  }

  before(async () => {
    tp = await startProvider();
    alice = await userAccessToken(tp, 'alice');
    admin = await m2mToken(tp, CLIENTS.admin, `${READ_SCOPE} ${REVOKE_SCOPE}`);
    // Two stopped sessions: with pages of one, the feed is three pages long ([a], [b], []).
    for (let i = 0; i < 2; i += 1) await revoke(await impersonation());
    relay = await slowFeedRelay(`${tp.base}/api/impersonations/revocations`, {
      pages: new Set([2, 3]),
      delay: SLOW_PAGE,
    });
    verifier = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: API,
      revocationsUri: relay.url,
      refreshInterval: 100,
      maxStaleness: MAX_STALENESS,
    });
    await verifier.ready();
  });
  after(async () => {
    verifier?.close();
    relay?.server.closeAllConnections();
    await new Promise((resolve) => relay?.server.close(resolve));
    await tp?.close();
  });

  it('refuses a revoked token within maxStaleness of the revocation, failing closed while a slow read is in flight', async () => {
    const token = await impersonation();
    const acceptedBefore = Date.now();
    while ((await refusal(verifier, token)) !== undefined) {
      expect(Date.now() - acceptedBefore, 'the token is accepted before its revocation').to.be.below(3000);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // Revoked just after a read began: that read cannot be sure to see it, the next one is slow too.
    await relay.readBegins();
    await revoke(token);
    const revokedAt = Date.now();
    const answers: Array<{ at: number; code: string }> = [];
    while (Date.now() - revokedAt < 2 * MAX_STALENESS + 500) {
      const error = await refusal(verifier, token);
      answers.push({ at: Date.now() - revokedAt, code: error?.code ?? 'accepted' });
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const lastAccepted = answers.filter((answer) => answer.code === 'accepted').at(-1);
    expect(lastAccepted?.at ?? 0, 'accepted until (ms after the revocation)').to.be.at.most(MAX_STALENESS + MARGIN);
    const codes = new Set(answers.map((answer) => answer.code));
    expect([...codes], 'a fail-closed answer while a read is slow').to.include('revocations_unavailable');
    expect([...codes], 'then the read that saw the revocation').to.include('session_revoked');
    expect(answers.at(-1)?.code).to.not.equal('accepted');
  });

  it('abandons a read whose pages together take longer than maxStaleness, and keeps failing closed', async () => {
    const slower = await slowFeedRelay(`${tp.base}/api/impersonations/revocations`, {
      pages: new Set([2, 3]),
      delay: MAX_STALENESS / 2 + 100,
    });
    const requests: number[] = [];
    slower.server.prependListener('request', () => requests.push(Date.now()));
    const patient = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: API,
      revocationsUri: slower.url,
      refreshInterval: 100,
      maxStaleness: MAX_STALENESS,
      // Each page alone is within its own bound: only the whole read is too long.
      timeout: 5000,
    });
    try {
      const started = Date.now();
      const first = await patient.ready().then(
        () => 'read',
        (error: Error) => error.message,
      );
      // Named, so that a maxStaleness given in seconds (a unit mix-up) is told apart from a slow feed.
      expect(first).to.equal(`a read of the revocations took longer than "maxStaleness" (${MAX_STALENESS} ms)`);
      expect(Date.now() - started).to.be.below(MAX_STALENESS + MARGIN);
      expect((await refusal(patient, await impersonation()))?.code).to.equal('revocations_unavailable');
      expect(patient.state.refreshedAt).to.equal(0);
    } finally {
      patient.close();
      slower.server.closeAllConnections();
      await new Promise((resolve) => slower.server.close(resolve));
    }
    expect(requests.length).to.be.at.least(2);
  });

  it('close() abandons a read in flight', async () => {
    const closing = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: API,
      revocationsUri: relay.url,
      maxStaleness: 10_000,
      timeout: 10_000,
    });
    const started = Date.now();
    setTimeout(() => closing.close(), SLOW_PAGE / 2);
    const first = await closing.ready().then(
      () => 'read',
      (error: Error) => error.name,
    );
    expect(first).to.equal('AbortError');
    // Sooner than the read's two slow pages could have come back (a loaded machine may add some delay to the abort).
    expect(Date.now() - started).to.be.below(2 * SLOW_PAGE);
  });
});
