import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import {
  ACCESS_TOKEN_TYPE,
  basic,
  callResourceApi,
  CookieJar,
  exchange,
  follow,
  quiet,
  request,
  requestImpersonation,
  signIn,
  REQUEST_TIMEOUT,
  TOKEN_EXCHANGE,
} from './helpers.js';
import { DpopKey } from '../support/dpop.js';
import { scaled } from '../support/time.js';

/** A customer who needs no approval: support acts as dave as soon as it asks (bob's approval is in approval.test.ts). */
const DAVE = { userId: 'dave', reason: 'Cannot see the invoices', ticketId: 'T-1234' };

describe('demo: integrator backend (POST /api/request-impersonation)', function () {
  this.timeout(20_000);
  let demo: Demo;
  let alice: string;
  let bob: string;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet });
    alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    bob = await signIn(demo, { login: 'bob', password: 'bob-password' });
  });

  after(async () => {
    await demo?.close();
  });

  describe('success', () => {
    it('returns a subject token for support staff, which the console exchanges with the actor token', async () => {
      const answer = await requestImpersonation(demo, alice, DAVE);
      expect(answer.status).to.equal(200);
      expect(answer.body).to.have.keys('subjectToken', 'expiresIn');
      expect(answer.body['subjectToken']).to.be.a('string');
      expect(answer.body['expiresIn']).to.equal(60);
      expect(answer.headers.get('cache-control')).to.equal('no-store');

      const exchanged = await exchange(demo, answer.body['subjectToken'] as string, alice);
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
      expect(exchanged.body).to.not.have.property('refresh_token');
      const claims = decodeJwt(exchanged.body['access_token'] as string);
      expect(claims.sub).to.equal('dave');
      expect(claims.aud).to.equal('https://api.example.com');
      expect(claims['act']).to.deep.equal({ sub: 'alice' });
      expect(claims['impersonation_context']).to.deep.equal({
        ticket_id: 'T-1234',
        reason: 'Cannot see the invoices',
        support_engineer: 'alice',
      });

      const api = await callResourceApi(demo, exchanged.body['access_token'] as string);
      expect(api.status).to.equal(200);
      expect(api.body).to.include({ subject: 'dave', actor: 'alice', message: 'alice is acting as dave' });

      const replay = await exchange(demo, answer.body['subjectToken'] as string, alice);
      expect(replay.status).to.equal(400);
    });

    it('accepts an openid profile token of the confidential support-web client too, for an exchange by that client', async () => {
      const web = await signIn(demo, { login: 'alice', password: 'alice-password', client: 'support-web' });
      const answer = await requestImpersonation(demo, web, DAVE);
      expect(answer.status).to.equal(200);
      const exchanged = await exchange(demo, answer.body['subjectToken'] as string, web, {
        id: 'support-web',
        secret: 'support-web-secret',
      });
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
      expect(decodeJwt(exchanged.body['access_token'] as string)['act']).to.deep.equal({ sub: 'alice' });
    });

    it('the support-web sign-in (/web/login) shows an actor token that the curl walk-through can use', async () => {
      const jar = new CookieJar();
      let response = await follow(jar, `${demo.backend.url}/web/login`);
      expect(response.url).to.match(/\/interaction\/[^/]+$/);
      response = await follow(jar, `${response.url}/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ login: 'alice', password: 'alice-password' }),
      });
      expect(response.url).to.match(/\/web\/callback\?/);
      const html = await response.text();
      const token = /<pre id="access-token">([^<]+)<\/pre>/.exec(html)?.[1];
      expect(token, html).to.be.a('string');

      const answer = await requestImpersonation(demo, token, DAVE);
      expect(answer.status).to.equal(200);
      const exchanged = await fetch(`${demo.identity.issuer}/token`, {
        method: 'POST',
        headers: { authorization: basic('support-web', 'support-web-secret') },
        body: new URLSearchParams({
          grant_type: TOKEN_EXCHANGE,
          scope: 'profile:read',
          subject_token: answer.body['subjectToken'] as string,
          subject_token_type: ACCESS_TOKEN_TYPE,
          resource: 'https://api.example.com',
          actor_token: token!,
          actor_token_type: ACCESS_TOKEN_TYPE,
        }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT),
      });
      const body = (await exchanged.json()) as { access_token: string };
      expect(exchanged.status, JSON.stringify(body)).to.equal(200);
      expect(decodeJwt(body.access_token)).to.include({ sub: 'dave', client_id: 'support-web' });
    });

    it('the support-web client without its Basic credentials gets 401 invalid_client', async () => {
      const answer = await requestImpersonation(demo, alice, DAVE);
      const exchanged = await fetch(`${demo.identity.issuer}/token`, {
        method: 'POST',
        body: new URLSearchParams({
          grant_type: TOKEN_EXCHANGE,
          client_id: 'support-web',
          scope: 'profile:read',
          subject_token: answer.body['subjectToken'] as string,
          subject_token_type: ACCESS_TOKEN_TYPE,
          resource: 'https://api.example.com',
        }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT),
      });
      expect(exchanged.status).to.equal(401);
      expect(((await exchanged.json()) as { error: string }).error).to.equal('invalid_client');
    });

    it('reuses its M2M token instead of fetching one per request', async () => {
      const before = demo.backend.m2mTokensFetched;
      expect(before).to.be.at.least(1);
      for (let i = 0; i < 3; i += 1) {
        expect((await requestImpersonation(demo, alice, DAVE)).status).to.equal(200);
      }
      expect(demo.backend.m2mTokensFetched).to.equal(before);
    });
  });

  describe('the actor', () => {
    it('401 without a token', async () => {
      const answer = await requestImpersonation(demo, undefined, DAVE);
      expect(answer.status).to.equal(401);
      expect(answer.body['error']).to.equal('invalid_token');
      expect(answer.headers.get('www-authenticate')).to.equal('Bearer');
    });

    it('401 with a token the identity service does not know', async () => {
      const answer = await requestImpersonation(demo, 'not-a-real-token', DAVE);
      expect(answer.status).to.equal(401);
      expect(answer.body['error']).to.equal('invalid_token');
    });

    it('401 with a token of another scheme', async () => {
      const response = await fetch(`${demo.backend.url}/api/request-impersonation`, {
        method: 'POST',
        headers: { authorization: basic('alice', 'alice-password'), 'content-type': 'application/json' },
        body: JSON.stringify(DAVE),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT),
      });
      expect(response.status).to.equal(401);
    });

    it('401 with an M2M token instead of a user token', async () => {
      const m2m = await managementToken(demo);
      expect((await requestImpersonation(demo, m2m, DAVE)).status).to.equal(401);
    });

    it('403 when the actor is not support staff', async () => {
      const answer = await requestImpersonation(demo, bob, { ...DAVE, userId: 'carol' });
      expect(answer.status).to.equal(403);
      expect(answer.body['error']).to.equal('access_denied');
      expect(answer.body['error_description']).to.contain('bob is not support staff');
    });
  });

  describe('the body', () => {
    const cases: Array<[string, unknown, string?]> = [
      ['not JSON', '{"userId": ', undefined],
      ['a JSON array', '[]', undefined],
      ['missing userId', JSON.stringify({ reason: 'r', ticketId: 't' })],
      ['an empty userId', JSON.stringify({ ...DAVE, userId: '  ' })],
      ['a numeric ticketId', JSON.stringify({ ...DAVE, ticketId: 1234 })],
      ['missing reason', JSON.stringify({ userId: 'dave', ticketId: 't' })],
      ['an unknown field', JSON.stringify({ ...DAVE, admin: true })],
      ['a reason that is too long', JSON.stringify({ ...DAVE, reason: 'x'.repeat(501) })],
      ['a form instead of JSON', 'userId=dave&reason=r&ticketId=t', 'application/x-www-form-urlencoded'],
      ['the actor themselves', JSON.stringify({ ...DAVE, userId: 'alice' })],
    ];
    for (const [name, body, contentType] of cases) {
      it(`400 for ${name}`, async () => {
        const answer = await requestImpersonation(demo, alice, body as string, contentType);
        expect(answer.status).to.equal(400);
        expect(answer.body['error']).to.equal('invalid_request');
        expect(answer.body['error_description']).to.be.a('string').and.not.equal('');
      });
    }
  });

  describe('Management API refusals are passed on', () => {
    it('403 for carol, who is protected from impersonation', async () => {
      const answer = await requestImpersonation(demo, alice, { ...DAVE, userId: 'carol' });
      expect(answer.status).to.equal(403);
      expect(answer.body).to.deep.equal({
        error: 'access_denied',
        error_description: 'carol is protected from impersonation',
      });
    });

    it('404 for a user that does not exist', async () => {
      const answer = await requestImpersonation(demo, alice, { ...DAVE, userId: 'mallory' });
      expect(answer.status).to.equal(404);
      expect(answer.body['error']).to.equal('user_not_found');
    });
  });
});

describe('demo: the backend when the Management API fails', function () {
  this.timeout(20_000);

  it('502 when the Management API cannot be reached', async () => {
    const closedPort = await freePort();
    const demo = await startDemo({
      identityPort: 0,
      backendPort: 0,
      log: quiet,
      backend: { managementUrl: `http://127.0.0.1:${closedPort}/api/subject-tokens`, timeoutMs: 2000 },
    });
    try {
      const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
      const answer = await requestImpersonation(demo, alice, DAVE);
      expect(answer.status).to.equal(502);
      expect(answer.body['error']).to.equal('bad_gateway');
      expect(answer.body['error_description']).to.contain('cannot be reached');
    } finally {
      await demo.close();
    }
  });

  it('502 when the Management API does not answer in time', async () => {
    const stalled = http.createServer(() => {
      /* never answers */
    });
    await new Promise<void>((resolve) => stalled.listen(0, '127.0.0.1', resolve));
    const demo = await startDemo({
      identityPort: 0,
      backendPort: 0,
      log: quiet,
      backend: {
        managementUrl: `http://127.0.0.1:${(stalled.address() as AddressInfo).port}/api/subject-tokens`,
        timeoutMs: 500,
      },
    });
    try {
      const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
      const answer = await requestImpersonation(demo, alice, DAVE);
      expect(answer.status).to.equal(502);
    } finally {
      await demo.close();
      stalled.closeAllConnections();
      await new Promise((resolve) => stalled.close(resolve));
    }
  });

  it('passes on the status of a Management API that answers 503', async () => {
    const calls: string[] = [];
    const failing = http.createServer((req, res) => {
      calls.push(`${req.method} ${req.url} ${req.headers.authorization?.split(' ')[0]}`);
      res.writeHead(503, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: 'temporarily_unavailable', error_description: 'store down' }));
    });
    await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
    const demo = await startDemo({
      identityPort: 0,
      backendPort: 0,
      log: quiet,
      backend: { managementUrl: `http://127.0.0.1:${(failing.address() as AddressInfo).port}/api/subject-tokens` },
    });
    try {
      const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
      const answer = await requestImpersonation(demo, alice, DAVE);
      expect(answer.status).to.equal(503);
      expect(answer.body).to.deep.equal({ error: 'temporarily_unavailable', error_description: 'store down' });
      expect(calls).to.deep.equal(['POST /api/subject-tokens Bearer']);
    } finally {
      await demo.close();
      failing.closeAllConnections();
      await new Promise((resolve) => failing.close(resolve));
    }
  });

  it('502 when the whole identity service is down', async () => {
    const demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet, backend: { timeoutMs: 2000 } });
    try {
      const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
      await demo.identity.close();
      const answer = await requestImpersonation(demo, alice, DAVE);
      expect(answer.status).to.equal(502);
    } finally {
      await demo.close();
    }
  });
});

describe('demo: resource API (GET /api/me) and settings', function () {
  this.timeout(20_000);
  let demo: Demo;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet, subjectTokenTTL: 7 });
  });

  after(async () => {
    await demo?.close();
  });

  it('401 without a token, and for tokens that are not JWTs for https://api.example.com', async () => {
    expect((await callResourceApi(demo)).status).to.equal(401);
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const opaque = await callResourceApi(demo, alice);
    expect(opaque.status).to.equal(401);
    expect(opaque.body['error']).to.equal('invalid_token');

    const m2m = await managementToken(demo);
    expect(decodeJwt(m2m).aud).to.equal(demo.identity.managementResource);
    expect((await callResourceApi(demo, m2m)).status).to.equal(401);
  });

  it('binds every subject token to the requesting engineer and the application they signed in with', async () => {
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const bob = await signIn(demo, { login: 'bob', password: 'bob-password' });
    const aliceWeb = await signIn(demo, { login: 'alice', password: 'alice-password', client: 'support-web' });
    const subject = (await requestImpersonation(demo, alice, DAVE)).body['subjectToken'] as string;

    const refusals: Array<[string, Awaited<ReturnType<typeof exchange>>, RegExp]> = [
      ['no actor token', await exchange(demo, subject), /bound to an actor/],
      ["another user's token", await exchange(demo, subject, bob), /not from the actor/],
      [
        'another application',
        await exchange(demo, subject, aliceWeb, { id: 'support-web', secret: 'support-web-secret' }),
        /another client/,
      ],
    ];
    for (const [name, result, description] of refusals) {
      expect(result.status, name).to.equal(400);
      expect(result.body['error_description'], name).to.match(description);
    }
    const exchanged = await exchange(demo, subject, alice);
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
  });

  it('refuses the token of a revoked impersonation within one second (DELETE /api/impersonations/{id})', async () => {
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const subject = (await requestImpersonation(demo, alice, DAVE)).body['subjectToken'] as string;
    const token = (await exchange(demo, subject, alice)).body['access_token'] as string;
    expect((await callResourceApi(demo, token)).status).to.equal(200);
    const session = decodeJwt(token)['impersonation_session'] as string;
    const revoke = await fetch(`${new URL(demo.identity.issuer).origin}/api/impersonations/${session}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${await managementToken(demo, 'impersonations:revoke')}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    expect(revoke.status).to.equal(204);
    const revokedAt = Date.now();
    let answer = await callResourceApi(demo, token);
    while (answer.status === 200 && Date.now() - revokedAt < scaled(1000)) {
      await new Promise((resolve) => setTimeout(resolve, 25));
      answer = await callResourceApi(demo, token);
    }
    expect(answer.status, 'refused within 1 s').to.equal(401);
    expect(answer.body['error_description']).to.equal('this impersonation was stopped');
  });

  it("tells a console listening to its engineer's impersonation (GET /api/impersonation-events) that it stopped, a few consoles per engineer", async () => {
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const erin = await signIn(demo, { login: 'erin', password: 'erin-password' });
    const bob = await signIn(demo, { login: 'bob', password: 'bob-password' });
    const impersonation = async () => {
      const subject = (await requestImpersonation(demo, alice, DAVE)).body['subjectToken'] as string;
      const token = (await exchange(demo, subject, alice)).body['access_token'] as string;
      return decodeJwt(token)['impersonation_session'] as string;
    };
    const listen = (session: string, token?: string, signal = AbortSignal.timeout(REQUEST_TIMEOUT)) =>
      fetch(`${demo.backend.url}/api/impersonation-events?sessionId=${session}`, {
        headers: token ? { authorization: `Bearer ${token}` } : {},
        signal,
      });
    const session = await impersonation();
    for (const [who, token, status] of [
      ['no one', undefined, 401],
      ['a customer', bob, 403],
      ['another engineer', erin, 404],
    ] as const) {
      const refused = await listen(session, token);
      expect(refused.status, who).to.equal(status);
      expect(((await refused.json()) as { error?: string }).error, who).to.be.a('string');
    }
    expect((await listen('apr_not-a-session', alice)).status).to.equal(400);

    const listening = await listen(session, alice);
    expect(listening.headers.get('content-type')).to.match(/^text\/event-stream/);
    const revoke = await fetch(`${new URL(demo.identity.issuer).origin}/api/impersonations/${session}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${await managementToken(demo, 'impersonations:revoke')}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    expect(revoke.status).to.equal(204);
    // Told by the identity service's webhook: the stream says so and ends.
    expect(await listening.text()).to.equal(': listening\n\nevent: stopped\ndata: {}\n\n');
    // Stopped before a console listens: told at once.
    expect(await (await listen(session, alice)).text()).to.contain('event: stopped');

    // Ten consoles of alice's listen at most; one that goes makes room.
    const active = await impersonation();
    const consoles = Array.from({ length: 10 }, () => new AbortController());
    const open = await Promise.all(consoles.map((controller) => listen(active, alice, controller.signal)));
    expect(open.map((response) => response.status)).to.deep.equal(Array(10).fill(200));
    const eleventh = await listen(active, alice);
    expect(eleventh.status).to.equal(429);
    expect(await eleventh.json()).to.include({ error: 'too_many_requests' });
    consoles[0]!.abort();
    let again = await listen(active, alice);
    for (const deadline = Date.now() + 2000; again.status === 429 && Date.now() < deadline;) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      again = await listen(active, alice);
    }
    expect(again.status).to.equal(200);
    await again.body?.cancel();
    for (const controller of consoles) controller.abort();
  });

  it('reports a token without act as the subject acting as themselves', async () => {
    const created = await fetch(demo.identity.managementUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${await managementToken(demo)}`, 'content-type': 'application/json' },
      body: JSON.stringify({ userId: 'dave', context: { ticketId: 'T-1234' } }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const { subjectToken } = (await created.json()) as { subjectToken: string };
    const exchanged = await exchange(demo, subjectToken);
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    const api = await callResourceApi(demo, exchanged.body['access_token'] as string);
    expect(api.status).to.equal(200);
    expect(api.body).to.include({ subject: 'dave', actor: null, message: 'dave is acting as themselves' });
  });

  it('honours a DPoP-bound token only with the DPoP scheme and a fresh proof of its key for this request', async () => {
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const subject = (await requestImpersonation(demo, alice, DAVE)).body['subjectToken'] as string;
    const key = await DpopKey.generate();
    const exchanged = await exchange(demo, subject, alice, undefined, {
      dpop: await key.proof(`${demo.identity.issuer}/token`),
    });
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    expect(exchanged.body['token_type']).to.equal('DPoP');
    const token = exchanged.body['access_token'] as string;
    const me = `${demo.backend.url}/api/me`;
    const ath = createHash('sha256').update(token).digest('base64url');
    const call = async (authorization: string, proof?: string) => {
      const response = await fetch(me, {
        headers: { authorization, ...(proof ? { dpop: proof } : {}) },
        signal: AbortSignal.timeout(REQUEST_TIMEOUT),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };

    const other = await DpopKey.generate();
    const refused: Array<[string, Awaited<ReturnType<typeof call>>]> = [
      ['as a Bearer token', await call(`Bearer ${token}`)],
      ['as a Bearer token with a proof', await call(`Bearer ${token}`, await key.proof(me, 'GET', { ath }))],
      ['without a proof', await call(`DPoP ${token}`)],
      ['with a proof of another key', await call(`DPoP ${token}`, await other.proof(me, 'GET', { ath }))],
      ['with a proof for another request', await call(`DPoP ${token}`, await key.proof(me, 'POST', { ath }))],
      [
        'with a proof for another token',
        await call(`DPoP ${token}`, await key.proof(me, 'GET', { ath: 'x'.repeat(43) })),
      ],
    ];
    for (const [name, result] of refused) expect(result.status, name).to.equal(401);

    const proof = await key.proof(me, 'GET', { ath });
    const accepted = await call(`DPoP ${token}`, proof);
    expect(accepted.status, JSON.stringify(accepted.body)).to.equal(200);
    expect(accepted.body).to.include({ subject: 'dave', actor: 'alice' });
    expect((await call(`DPoP ${token}`, proof)).status, 'a replayed proof').to.equal(401);
  });

  it('subjectTokenTTL (SUBJECT_TOKEN_TTL) sets the subject-token lifetime', async () => {
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const answer = await requestImpersonation(demo, alice, DAVE);
    expect(answer.body['expiresIn']).to.equal(7);
  });

  it('the login form refuses a wrong password and says so', async () => {
    const jar = new CookieJar();
    const authorize = `${demo.identity.issuer}/auth?${new URLSearchParams({
      client_id: 'support-console',
      response_type: 'code',
      scope: 'openid profile',
      redirect_uri: `${demo.backend.url}/callback`,
      code_challenge: 'x'.repeat(43),
      code_challenge_method: 'S256',
    })}`;
    const started = await request(jar, authorize);
    expect(started.status).to.equal(303);
    const interaction = new URL(started.headers.get('location')!, authorize).href;
    const form = await request(jar, interaction);
    const html = await form.text();
    expect(html).to.contain('name="login"').and.contain('name="password"');
    const refused = await request(jar, `${interaction}/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ login: 'alice', password: 'wrong' }),
    });
    expect(refused.status).to.equal(401);
    expect(await refused.text()).to.contain('Invalid login or password.');
  });
});

/** The M2M token the backend would get for the Management API. */
async function managementToken(demo: Demo, scope = 'subject-tokens:create'): Promise<string> {
  const response = await fetch(`${demo.identity.issuer}/token`, {
    method: 'POST',
    headers: { authorization: basic('impersonation-backend', 'impersonation-backend-secret') },
    body: new URLSearchParams({
      grant_type: 'client_credentials',
      resource: demo.identity.managementResource,
      scope,
    }),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT),
  });
  const { access_token: m2m } = (await response.json()) as { access_token: string };
  return m2m;
}

async function freePort(): Promise<number> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}
