import { lookup } from 'node:dns/promises';
import { createServer, type Server } from 'node:http';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import Koa from 'koa';
import { FIXTURE_CLIENTS } from '../../fixtures/provider.js';
import { createImpersonation } from '../../lib/index.js';
import type { OutboxCapable } from '../../lib/outbox/contract.js';
import { mountCallback, mountComposedNow } from '../support/mount.js';
import { ADAPTERS } from '../support/adapters.js';
import { decodeJwt, expectError, m2mToken, tokenRequest, userAccessToken } from '../support/http.js';
import { adminToken, impersonate, revokeSession } from '../support/impersonations.js';
import { CLIENTS, MANAGEMENT, MANAGEMENT_SCOPE, startProvider, type TestProvider } from '../support/provider.js';
import {
  pollResponseProblems,
  setProblems,
  streamConfigurationProblems,
  transmitterMetadataProblems,
} from '../support/ssf-rules.js';
import {
  POLL,
  pollUntil,
  PUSH,
  RECEIVERS,
  receiverToken,
  SESSION_REVOKED,
  SSF_RECEIVER_CLIENTS,
  SSF_SCOPE,
  ssfRequest,
  startSsfProvider,
  STREAMS,
  VERIFICATION,
  verifySet,
} from '../support/ssf.js';
import { startReceiver, type Receiver } from '../support/webhook-receiver.js';
import { scaled } from '../support/time.js';

const SUBJECT = { userId: 'bob', context: { ticket: 'SUP-42', reason: 'billing question' } };

for (const kind of ADAPTERS) {
  describe(`SSF transmitter on the ${kind.name} store`, function () {
    this.timeout(60_000);
    const open: { close(): Promise<void> }[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((thing) => thing.close()));
    });

    async function provider(
      ...args: Parameters<typeof startSsfProvider> extends [unknown, ...infer Rest] ? Rest : never
    ) {
      const tp = await startSsfProvider(kind, ...args);
      open.push(tp);
      return tp;
    }

    async function pushReceiver(): Promise<Receiver> {
      const started = await startReceiver();
      started.answer = () => ({ status: 202 });
      open.push(started);
      return started;
    }

    async function stopOneSession(tp: TestProvider): Promise<{ token: string; session: string }> {
      const started = await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: SUBJECT });
      expect((await revokeSession(tp, await adminToken(tp), started.session, { reason: 'done' })).status).to.equal(204);
      return started;
    }

    it('publishes its configuration metadata at /.well-known/ssf-configuration, as SSF 1.0 7.1 defines it', async () => {
      const tp = await provider();
      const reply = await ssfRequest(tp, 'GET', '/.well-known/ssf-configuration');
      expect(reply.status).to.equal(200);
      expect(transmitterMetadataProblems(reply.body, tp.issuer)).to.deep.equal([]);
      expect(reply.body).to.deep.include({
        spec_version: '1_0',
        issuer: tp.issuer,
        jwks_uri: `${tp.issuer}/jwks`,
        delivery_methods_supported: [PUSH, POLL],
        configuration_endpoint: `${tp.issuer}/ssf/streams`,
        status_endpoint: `${tp.issuer}/ssf/status`,
        verification_endpoint: `${tp.issuer}/ssf/verify`,
        critical_subject_members: ['session'],
        default_subjects: 'ALL',
      });
    });

    it("manages streams: create, read, list, update, replace, status, delete; each its own receiver's", async () => {
      const tp = await provider();
      const token = await receiverToken(tp);
      const receiver = 'https://receiver.example/events';
      const created = await ssfRequest(tp, 'POST', STREAMS, token, {
        delivery: { method: PUSH, endpoint_url: receiver, authorization_header: 'Bearer receiver-secret-value' },
        events_requested: [SESSION_REVOKED, 'urn:example:unknown'],
        description: 'support-tool revocations',
      });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      expect(streamConfigurationProblems(created.body, tp.issuer)).to.deep.equal([]);
      const id = created.body['stream_id'] as string;
      expect(created.body).to.deep.include({
        aud: RECEIVERS.first.client_id,
        events_delivered: [SESSION_REVOKED],
        delivery: { method: PUSH, endpoint_url: receiver },
      });
      // The receiver's authorization header is a credential: taken, never shown again.
      expect(JSON.stringify(created.body)).to.not.include('receiver-secret-value');

      const read = await ssfRequest(tp, 'GET', `${STREAMS}?stream_id=${id}`, token);
      expect(read.body).to.deep.equal(created.body);
      const listed = await ssfRequest(tp, 'GET', STREAMS, token);
      expect(listed.body).to.deep.equal([created.body]);

      const updated = await ssfRequest(tp, 'PATCH', STREAMS, token, { stream_id: id, description: 'renamed' });
      expect(updated.status).to.equal(200);
      expect(updated.body).to.deep.include({ description: 'renamed', delivery: created.body['delivery'] });
      const mismatched = await ssfRequest(tp, 'PATCH', STREAMS, token, { stream_id: id, aud: 'someone-else' });
      expectError(mismatched, 400, 'invalid_request', /aud/);

      const replaced = await ssfRequest(tp, 'PUT', STREAMS, token, {
        stream_id: id,
        events_requested: [SESSION_REVOKED],
      });
      expect(replaced.status).to.equal(200);
      expect(replaced.body['delivery']).to.deep.equal({ method: POLL, endpoint_url: `${tp.issuer}/ssf/poll/${id}` });
      expect(replaced.body).to.not.have.property('description');
      expect(streamConfigurationProblems(replaced.body, tp.issuer)).to.deep.equal([]);

      expect((await ssfRequest(tp, 'GET', `/ssf/status?stream_id=${id}`, token)).body).to.deep.equal({
        stream_id: id,
        status: 'enabled',
      });
      const paused = await ssfRequest(tp, 'POST', '/ssf/status', token, {
        stream_id: id,
        status: 'paused',
        reason: 'maintenance',
      });
      expect(paused.body).to.deep.equal({ stream_id: id, status: 'paused', reason: 'maintenance' });

      // Another receiver sees none of it: its ids are as unknown as a made-up one.
      const other = await receiverToken(tp, RECEIVERS.second);
      expect((await ssfRequest(tp, 'GET', STREAMS, other)).body).to.deep.equal([]);
      expectError(await ssfRequest(tp, 'GET', `${STREAMS}?stream_id=${id}`, other), 404, 'not_found');
      expectError(await ssfRequest(tp, 'DELETE', `${STREAMS}?stream_id=${id}`, other), 404, 'not_found');

      expect((await ssfRequest(tp, 'DELETE', `${STREAMS}?stream_id=${id}`, token)).status).to.equal(204);
      expectError(await ssfRequest(tp, 'GET', `${STREAMS}?stream_id=${id}`, token), 404, 'not_found');
      expect(tp.appErrors).to.deep.equal([]);
    });

    it('refuses a call without a token (401), with a token lacking the scope (403), and bad input (400), writing nothing', async () => {
      const tp = await provider();
      const noToken = await ssfRequest(tp, 'POST', STREAMS, undefined, {});
      expectError(noToken, 401, 'invalid_token');
      expect(noToken.headers.get('www-authenticate')).to.equal('Bearer');
      const wrongScope = await m2mToken(tp, CLIENTS.backend, MANAGEMENT_SCOPE);
      expectError(await ssfRequest(tp, 'POST', STREAMS, wrongScope, {}), 403, 'insufficient_scope');
      expectError(await ssfRequest(tp, 'GET', STREAMS, 'not-a-token'), 401, 'invalid_token');

      const token = await receiverToken(tp);
      for (const body of [
        { delivery: { method: 'urn:example:carrier-pigeon' } },
        { delivery: { method: PUSH, endpoint_url: 'http://receiver.example/events' } },
        { delivery: { method: PUSH } },
        { events_requested: 'not-a-list' },
        { description: 42 },
        { stream_id: 'chosen-by-me' },
      ]) {
        expectError(await ssfRequest(tp, 'POST', STREAMS, token, body), 400, 'invalid_request');
      }
      expectError(
        await ssfRequest(tp, 'PATCH', STREAMS, token, { description: 'x' }),
        400,
        'invalid_request',
        /stream_id/,
      );
      expectError(
        await ssfRequest(tp, 'POST', '/ssf/status', token, { stream_id: 'x', status: 'on' }),
        404,
        'not_found',
      );
      const stream = (await ssfRequest(tp, 'POST', STREAMS, token, {})).body['stream_id'] as string;
      expectError(
        await ssfRequest(tp, 'POST', '/ssf/status', token, { stream_id: stream, status: 'on' }),
        400,
        'invalid_request',
      );
      expectError(
        await ssfRequest(tp, 'POST', `/ssf/poll/${stream}`, token, { maxEvents: -1 }),
        400,
        'invalid_request',
      );
      expect((await ssfRequest(tp, 'GET', STREAMS, token)).body).to.have.length(1);
    });

    it('bounds the streams: per receiver and in all (409)', async () => {
      const tp = await provider({ maxStreamsPerReceiver: 2, maxStreams: 3 });
      const [first, second] = [await receiverToken(tp), await receiverToken(tp, RECEIVERS.second)];
      for (let i = 0; i < 2; i += 1) expect((await ssfRequest(tp, 'POST', STREAMS, first, {})).status).to.equal(201);
      expectError(await ssfRequest(tp, 'POST', STREAMS, first, {}), 409, 'too_many_streams');
      expect((await ssfRequest(tp, 'POST', STREAMS, second, {})).status).to.equal(201);
      expectError(await ssfRequest(tp, 'POST', STREAMS, second, {}), 409, 'too_many_streams');
    });

    it('keeps the bound when creations race: a stream over it is taken back, never kept (409)', async () => {
      const tp = await provider({ maxStreamsPerReceiver: 2, maxStreams: 3 });
      const token = await receiverToken(tp);
      const answers = await Promise.all(Array.from({ length: 12 }, () => ssfRequest(tp, 'POST', STREAMS, token, {})));
      const created = answers.filter((answer) => answer.status === 201).length;
      for (const answer of answers) if (answer.status !== 201) expectError(answer, 409, 'too_many_streams');
      expect(created).to.be.within(0, 2);
      expect((await ssfRequest(tp, 'GET', STREAMS, token)).body).to.have.length(created);
      // Racing creations may all be refused; the bound then still lets the receiver create.
      if (created < 2) expect((await ssfRequest(tp, 'POST', STREAMS, token, {})).status).to.equal(201);
    });

    it('does not write back a stream deleted while a change to it was under way (404)', async () => {
      // The change is held after writing, before it checks the stream still exists: the delete runs in between.
      const base = await kind.open();
      let reached!: () => void;
      const atCheck = new Promise<void>((resolve) => {
        reached = resolve;
      });
      let release!: () => void;
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      let holding = false;
      const Gated = class extends (base as unknown as new (name: string) => {
        indexRange(index: string, after: unknown, limit: number): Promise<unknown[]>;
      }) {
        override async indexRange(index: string, after: unknown, limit: number): Promise<unknown[]> {
          if (holding && index.startsWith('alive:')) {
            holding = false;
            reached();
            await held;
          }
          return super.indexRange(index, after, limit);
        }
      };
      const tp = await provider({}, {}, Gated as unknown as typeof base);
      const token = await receiverToken(tp);
      const created = await ssfRequest(tp, 'POST', STREAMS, token, {});
      const id = (created.body as { stream_id: string }).stream_id;
      holding = true;
      const change = ssfRequest(tp, 'PATCH', STREAMS, token, { stream_id: id, description: 'renamed' });
      await atCheck;
      expect((await ssfRequest(tp, 'DELETE', `${STREAMS}?stream_id=${id}`, token)).status).to.equal(204);
      release();
      expectError(await change, 404, 'not_found');
      expectError(await ssfRequest(tp, 'GET', `${STREAMS}?stream_id=${id}`, token), 404, 'not_found');
      expect((await ssfRequest(tp, 'GET', STREAMS, token)).body).to.deep.equal([]);
    });

    it('pushes a CAEP session-revoked SET for a stopped session within a second (RFC 8935)', async () => {
      const hooks = await pushReceiver();
      const tp = await provider();
      const token = await receiverToken(tp);
      const created = await ssfRequest(tp, 'POST', STREAMS, token, {
        delivery: { method: PUSH, endpoint_url: hooks.url, authorization_header: 'Bearer push-credential' },
        events_requested: [SESSION_REVOKED],
      });
      expect(created.status).to.equal(201);
      const started = await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: SUBJECT });
      const stoppedAt = Date.now();
      expect((await revokeSession(tp, await adminToken(tp), started.session)).status).to.equal(204);
      const [delivery] = await hooks.waitFor(1, 1000);
      expect(Date.now() - stoppedAt).to.be.below(scaled(1000));
      expect(delivery!.headers['content-type']).to.equal('application/secevent+jwt');
      expect(delivery!.headers['authorization']).to.equal('Bearer push-credential');
      const { header, claims } = await verifySet(tp, delivery!.body, RECEIVERS.first.client_id);
      expect(setProblems(header, claims)).to.deep.equal([]);
      expect(claims['sub_id']).to.deep.equal({
        format: 'complex',
        session: { format: 'opaque', id: started.session },
        user: { format: 'iss_sub', iss: tp.issuer, sub: 'bob' },
      });
      expect(claims['events']).to.have.all.keys(SESSION_REVOKED);
      expect((claims['events'] as Record<string, Record<string, unknown>>)[SESSION_REVOKED]).to.include({
        initiating_entity: 'admin',
      });
      // The canary: no token value in any SET.
      expect(delivery!.body).to.not.include(started.token);
      expect(JSON.stringify(claims)).to.not.include(started.token);
    });

    it('dead-letters a pushed SET the receiver refuses with an RFC 8935 error (400), keeping only its err code', async () => {
      const hooks = await pushReceiver();
      hooks.answer = () => ({ status: 400, headers: { 'content-type': 'application/json' } });
      const tp = await provider();
      const token = await receiverToken(tp);
      await ssfRequest(tp, 'POST', STREAMS, token, { delivery: { method: PUSH, endpoint_url: hooks.url } });
      await stopOneSession(tp);
      const deadline = Date.now() + scaled(5000);
      while (!(await tp.impersonation.ssf().deadLetters()).length) {
        expect(Date.now()).to.be.below(deadline);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const [letter] = await tp.impersonation.ssf().deadLetters();
      expect(letter!.reason).to.equal('set_error');
      expect(hooks.deliveries).to.have.length(1);
    });

    it('holds a stopped session for polling and hands it out within a second (RFC 8936), until acknowledged', async () => {
      const tp = await provider();
      const token = await receiverToken(tp);
      const created = await ssfRequest(tp, 'POST', STREAMS, token, { delivery: { method: POLL } });
      const endpoint = (created.body['delivery'] as { endpoint_url: string }).endpoint_url;
      const stoppedAt = Date.now();
      const { token: impersonationToken, session } = await stopOneSession(tp);
      const sets = await pollUntil(tp, endpoint, token, 1000 + (Date.now() - stoppedAt));
      expect(Object.keys(sets)).to.have.length(1);
      const [[jti, jwt]] = Object.entries(sets) as [[string, string]];
      const { header, claims } = await verifySet(tp, jwt, RECEIVERS.first.client_id);
      expect(setProblems(header, claims)).to.deep.equal([]);
      expect(claims.jti).to.equal(jti);
      expect((claims['sub_id'] as { session: { id: string } }).session.id).to.equal(session);
      expect(jwt).to.not.include(impersonationToken);

      // Unacknowledged, it comes again; acknowledged, it is gone.
      const again = await ssfRequest(tp, 'POST', new URL(endpoint).pathname, token, { returnImmediately: true });
      expect(pollResponseProblems(again.body)).to.deep.equal([]);
      expect(Object.keys(again.body['sets'] as object)).to.deep.equal([jti]);
      const acked = await ssfRequest(tp, 'POST', new URL(endpoint).pathname, token, {
        ack: [jti],
        returnImmediately: true,
      });
      expect(acked.body).to.deep.equal({ sets: {}, moreAvailable: false });
      // Another receiver cannot poll it.
      const other = await receiverToken(tp, RECEIVERS.second);
      expectError(await ssfRequest(tp, 'POST', new URL(endpoint).pathname, other, {}), 404, 'not_found');
    });

    it('signs a SET as it is delivered, not in the request that stopped the session', async () => {
      const Adapter = await kind.open();
      const stopping = await startSsfProvider(kind, {}, { deliverOutbox: false }, Adapter);
      open.push(stopping);
      const token = await receiverToken(stopping);
      const created = await ssfRequest(stopping, 'POST', STREAMS, token, { delivery: { method: POLL } });
      const id = created.body['stream_id'] as string;
      const { session } = await stopOneSession(stopping);

      // What the stop left in the outbox: the SET's claims, no signature.
      const outbox = (new Adapter('SsfOutboxReader') as unknown as OutboxCapable).outbox();
      const [waiting] = await outbox.claim(10, 1, Date.now(), 0);
      expect(waiting?.subscription).to.equal(`ssf:${id}`);
      const claims = JSON.parse(waiting!.body) as Record<string, unknown>;
      expect(claims['events']).to.have.property(SESSION_REVOKED);
      expect((claims['sub_id'] as { session: { id: string } }).session.id).to.equal(session);

      const delivering = await startSsfProvider(kind, {}, {}, Adapter);
      open.push(delivering);
      const endpoint = `${delivering.base}/ssf/poll/${id}`;
      const sets: Record<string, string> = {};
      const deadline = Date.now() + scaled(5000);
      while (Object.keys(sets).length < 1 && Date.now() < deadline) {
        Object.assign(sets, await pollUntil(delivering, endpoint, await receiverToken(delivering), 500));
      }
      expect(Object.keys(sets)).to.deep.equal([claims['jti'] as string]);
      // Signed with the key both instances share, as the stopping one issued it.
      const delivered = await verifySet(stopping, sets[claims['jti'] as string]!, RECEIVERS.first.client_id);
      expect(setProblems(delivered.header, delivered.claims)).to.deep.equal([]);
      expect(delivered.claims).to.deep.equal(claims);
    });

    it('sends a verification event on request, with the state, and refuses another before min_verification_interval (429)', async () => {
      const tp = await provider();
      const token = await receiverToken(tp);
      const created = await ssfRequest(tp, 'POST', STREAMS, token, {});
      const id = created.body['stream_id'] as string;
      const verify = await ssfRequest(tp, 'POST', '/ssf/verify', token, { stream_id: id, state: 'abc-123' });
      expect(verify.status).to.equal(204);
      expectError(await ssfRequest(tp, 'POST', '/ssf/verify', token, { stream_id: id }), 429, 'too_many_requests');
      const sets = await pollUntil(tp, `${tp.base}/ssf/poll/${id}`, token, 2000);
      const { header, claims } = await verifySet(tp, Object.values(sets)[0]!, RECEIVERS.first.client_id);
      expect(setProblems(header, claims)).to.deep.equal([]);
      expect(claims['sub_id']).to.deep.equal({ format: 'opaque', id });
      expect(claims['events']).to.deep.equal({ [VERIFICATION]: { state: 'abc-123' } });
    });

    it('shares streams between two instances on one store, and delivers each stop once, pushed and polled', async () => {
      const hooks = await pushReceiver();
      const Adapter = await kind.open();
      const first = await startSsfProvider(kind, {}, {}, Adapter);
      open.push(first);
      const second = await startSsfProvider(kind, {}, {}, Adapter);
      open.push(second);
      const [atFirst, atSecond] = [await receiverToken(first), await receiverToken(second)];
      await ssfRequest(first, 'POST', STREAMS, atFirst, { delivery: { method: PUSH, endpoint_url: hooks.url } });
      const polled = await ssfRequest(second, 'POST', STREAMS, atSecond, {});
      const id = polled.body['stream_id'] as string;
      // Created at the second instance, read at the first.
      expect((await ssfRequest(first, 'GET', `${STREAMS}?stream_id=${id}`, atFirst)).status).to.equal(200);
      const sessions: string[] = [];
      for (let i = 0; i < 4; i += 1) sessions.push((await stopOneSession(i % 2 ? first : second)).session);
      await hooks.waitFor(4, 5000);
      const sets: Record<string, string> = {};
      const deadline = Date.now() + scaled(5000);
      while (Object.keys(sets).length < 4 && Date.now() < deadline) {
        Object.assign(
          sets,
          await pollUntil(second, `${second.base}/ssf/poll/${id}`, atSecond, 200, { ack: Object.keys(sets) }),
        );
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
      const sessionOf = (jwt: string) => (decodeJwt(jwt)['sub_id'] as { session: { id: string } }).session.id;
      expect(hooks.deliveries.map((delivery) => sessionOf(delivery.body)).sort()).to.deep.equal([...sessions].sort());
      expect(Object.values(sets).map(sessionOf).sort()).to.deep.equal([...sessions].sort());
    });

    it('holds SETs of a paused stream and delivers them once enabled; a disabled stream gets none; neither says "nothing" (503)', async () => {
      const tp = await provider();
      const token = await receiverToken(tp);
      const id = (await ssfRequest(tp, 'POST', STREAMS, token, {})).body['stream_id'] as string;
      const endpoint = `${tp.base}/ssf/poll/${id}`;
      const poll = (body: Record<string, unknown> = {}) =>
        ssfRequest(tp, 'POST', `/ssf/poll/${id}`, token, { returnImmediately: true, ...body });
      await ssfRequest(tp, 'POST', '/ssf/status', token, { stream_id: id, status: 'paused' });
      await stopOneSession(tp);
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Its queue is empty, yet a stop is held for it: an empty answer would say nothing was revoked.
      const paused = await poll();
      expectError(paused, 503, 'temporarily_unavailable', /paused/);
      expect(paused.headers.get('retry-after')).to.equal('1');
      await ssfRequest(tp, 'POST', '/ssf/status', token, { stream_id: id, status: 'enabled' });
      const sets = await pollUntil(tp, endpoint, token, 2000);
      expect(Object.keys(sets)).to.have.length(1);
      expect((await poll({ ack: Object.keys(sets) })).body).to.deep.equal({ sets: {}, moreAvailable: false });
      await ssfRequest(tp, 'POST', '/ssf/status', token, { stream_id: id, status: 'disabled' });
      await stopOneSession(tp);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expectError(await poll(), 503, 'temporarily_unavailable', /disabled/);
      expect((await tp.impersonation.ssf().stats()).subscriptions[`ssf:${id}`]?.pending ?? 0).to.equal(0);
    });
  });
}

describe('SSF transmitter: options and mounting', function () {
  this.timeout(30_000);

  it('checks its options at start-up, naming the one that is wrong and never echoing a value', () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ scopes: 'x' }, /ssf\.scopes" is unknown; did you mean "ssf\.scope"/],
      [{ scope: MANAGEMENT_SCOPE }, /ssf\.scope.*must differ/],
      [{ scope: 'two words' }, /ssf\.scope.*single scope name/],
      [{ path: '/api/impersonations' }, /ssf\.path.*overlap/],
      [{ path: '/.well-known/x' }, /ssf\.path/],
      [{ maxStreams: 0 }, /ssf\.maxStreams.*integer from 1/],
      [{ maxStreams: 2, maxStreamsPerReceiver: 3 }, /ssf\.maxStreamsPerReceiver.*must not exceed/],
      [{ baseUrl: 'https://user:hunter2@id.example.com' }, /ssf\.baseUrl/],
      [{ pushAllowList: 'localhost' }, /ssf\.pushAllowList.*host names, IP addresses and CIDR ranges/],
      [{ pushAllowList: ['hunter2 and more'] }, /ssf\.pushAllowList/],
      [{ pushAllowList: ['10.0.0.0/33'] }, /ssf\.pushAllowList/],
      [{ pushAllowList: ['10.0.0.0/8/8'] }, /ssf\.pushAllowList/],
    ];
    for (const [ssf, message] of cases) {
      expect(() => createImpersonation({ managementResource: MANAGEMENT, ssf }), JSON.stringify(ssf))
        .to.throw(TypeError, message)
        .and.satisfy((error: Error) => !error.message.includes('hunter2'));
    }
  });

  it('refuses to install on a provider without a key for its ID token algorithm', async () => {
    let installError: unknown;
    const tp = await startProvider({
      plugin: { ssf: {} },
      configuration: { clientDefaults: { id_token_signed_response_alg: 'ES256' } },
      mount: (_provider, install) => {
        try {
          install();
        } catch (error) {
          installError = error;
        }
      },
    });
    await tp.server.close();
    expect(String(installError)).to.match(/no signing key for ES256.*"ssf"/);
  });

  it('refuses a receiver token on a provider mounted before install(), saying what to change', async () => {
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const parent = new Koa();
    const tp = await startProvider({
      issuer: `${origin}/oidc`,
      plugin: { ssf: {} },
      configuration: { clients: [...FIXTURE_CLIENTS, ...SSF_RECEIVER_CLIENTS] },
      mount: (provider, install) => {
        // What koa-mount does: the provider's middleware is composed here, before install() adds the API.
        parent.use(mountComposedNow('/oidc', provider));
        install();
      },
    });
    server.on('request', parent.callback());
    try {
      const refused = await tokenRequest(
        { ...tp, base: `${origin}/oidc` },
        { grant_type: 'client_credentials', scope: SSF_SCOPE, resource: MANAGEMENT },
        RECEIVERS.first,
      );
      expect(refused.status).to.equal(500);
      expect(refused.body['error_description']).to.match(/install\(\) right after new Provider\(\)/);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await tp.close();
    }
  });

  it('serves the stream API from a parent app with mountManagementApi: false, at the baseUrl it advertises', async () => {
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const parent = new Koa();
    const tp = await startProvider({
      issuer: `${origin}/oidc`,
      plugin: { ssf: { baseUrl: origin, pollInterval: 50 } },
      configuration: { clients: [...FIXTURE_CLIENTS, ...SSF_RECEIVER_CLIENTS] },
      mount: (provider, install, impersonation) => {
        parent.use(mountCallback('/oidc', provider));
        install({ mountManagementApi: false });
        parent.use(impersonation.managementApi());
      },
    });
    server.on('request', parent.callback());
    try {
      const provider = { ...tp, base: `${origin}/oidc` };
      const metadata = (await (await fetch(`${origin}/.well-known/ssf-configuration/oidc`)).json()) as Record<
        string,
        string
      >;
      expect(metadata).to.include({ issuer: `${origin}/oidc`, configuration_endpoint: `${origin}/ssf/streams` });
      const token = await m2mToken(provider, RECEIVERS.first, SSF_SCOPE);
      const created = await fetch(metadata['configuration_endpoint']!, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: '{}',
      });
      expect(created.status).to.equal(201);
      const stream = (await created.json()) as { delivery: { endpoint_url: string } };
      expect(stream.delivery.endpoint_url).to.match(new RegExp(`^${origin}/ssf/poll/`));
      expect(await pollUntil(provider, stream.delivery.endpoint_url, token, 0)).to.deep.equal({});
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await tp.close();
    }
  });
});

describe('SSF push endpoints: no internal target', function () {
  this.timeout(60_000);
  const open: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((thing) => thing.close()));
  });
  const memory = ADAPTERS.find((kind) => kind.id === 'memory')!;

  async function stopOneSession(tp: TestProvider): Promise<void> {
    const started = await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), subject: SUBJECT });
    expect((await revokeSession(tp, await adminToken(tp), started.session)).status).to.equal(204);
  }

  /** The machine's own name, when it resolves to an internal address (as in a container, or /etc/hosts). */
  async function internalName(): Promise<string | undefined> {
    const name = hostname().toLowerCase();
    try {
      const addresses = await lookup(name, { all: true });
      return addresses.length &&
        addresses.every(({ address }) => /^(127\.|10\.|172\.|192\.168\.|::1$|f[cd])/.test(address))
        ? name
        : undefined;
    } catch {
      return undefined;
    }
  }

  it('refuses a push endpoint on an internal address, in any of its forms, or over plain http (400), unless the allow-list names it', async () => {
    const tp = await startSsfProvider(memory, { pushAllowList: [] });
    open.push(tp);
    const token = await receiverToken(tp);
    const refused = [
      'http://receiver.example/caep',
      'https://127.0.0.1/caep',
      'https://127.1.2.3:8443/caep',
      'https://0x7f.1/caep',
      'https://2130706433/caep',
      'https://localhost:8443/caep',
      'https://api.localhost/caep',
      'https://[::1]/caep',
      'https://[::]/caep',
      'https://0.0.0.0/caep',
      'https://[::ffff:127.0.0.1]/caep',
      'https://[::ffff:169.254.169.254]/caep',
      'https://169.254.169.254/latest/meta-data',
      'https://10.1.2.3/caep',
      'https://172.16.0.1/caep',
      'https://192.168.1.1/caep',
      'https://100.64.0.1/caep',
      'https://[fe80::1]/caep',
      'https://[fc00::1]/caep',
      'https://[fd12:3456::1]/caep',
      'https://[64:ff9b::a9fe:a9fe]/caep',
      'https://[2002:a00:1::]/caep',
      'https://224.0.0.1/caep',
    ];
    const name = await internalName();
    if (name) refused.push(`https://${name}:8443/caep`);
    const poll = (await ssfRequest(tp, 'POST', STREAMS, token, {})).body['stream_id'] as string;
    for (const url of refused) {
      const delivery = { method: PUSH, endpoint_url: url };
      expectError(await ssfRequest(tp, 'POST', STREAMS, token, { delivery }), 400, 'invalid_request', /endpoint_url/);
      expectError(
        await ssfRequest(tp, 'PATCH', STREAMS, token, { stream_id: poll, delivery }),
        400,
        'invalid_request',
        /endpoint_url/,
      );
    }
    // Only the poll stream was written.
    expect((await ssfRequest(tp, 'GET', STREAMS, token)).body).to.have.length(1);
    // A public address; a name that does not resolve now (every delivery checks it again).
    for (const url of ['https://93.184.215.14/caep', 'https://receiver.invalid/caep']) {
      const created = await ssfRequest(tp, 'POST', STREAMS, token, { delivery: { method: PUSH, endpoint_url: url } });
      expect(created.status, `${url}: ${JSON.stringify(created.body)}`).to.equal(201);
    }

    const allowing = await startSsfProvider(memory, { pushAllowList: ['127.0.0.0/8', 'localhost'] });
    open.push(allowing);
    const receiver = await receiverToken(allowing);
    for (const url of ['http://127.0.0.1:9000/caep', 'https://127.5.5.5/caep', 'http://localhost:9000/caep']) {
      const created = await ssfRequest(allowing, 'POST', STREAMS, receiver, {
        delivery: { method: PUSH, endpoint_url: url },
      });
      expect(created.status, `${url}: ${JSON.stringify(created.body)}`).to.equal(201);
    }
    for (const url of ['http://10.0.0.1/caep', 'https://[::1]/caep', 'http://receiver.example/caep']) {
      expectError(
        await ssfRequest(allowing, 'POST', STREAMS, receiver, { delivery: { method: PUSH, endpoint_url: url } }),
        400,
        'invalid_request',
        /endpoint_url/,
      );
    }
  });

  it('checks again at every delivery: what the allow-list no longer covers is dead-lettered, and a name resolving to an internal address is never connected to', async () => {
    const name = await internalName();
    const hooks = await startReceiver();
    hooks.answer = () => ({ status: 202 });
    open.push(hooks);
    // A TLS port in name only: what matters is whether anything connects to it.
    // Counted only when the first bytes name the host (a TLS ClientHello carries it as its SNI):
    // over a long run, a delivery of another test's, retrying to a port closed since, may knock here.
    let connections = 0;
    const listener = createServer();
    listener.on('connection', (socket) => {
      socket.once('data', (first: Buffer) => {
        if (name && first.includes(name)) connections += 1;
        socket.destroy();
      });
      socket.on('error', () => {});
      socket.setTimeout(1000, () => socket.destroy());
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    open.push({ close: () => new Promise((resolve) => listener.close(() => resolve())) });
    const port = (listener.address() as AddressInfo).port;

    const Adapter = await memory.open();
    // Where the streams were created: it allowed them, and delivers nothing.
    const before = await startSsfProvider(
      memory,
      { pushAllowList: ['127.0.0.1', ...(name ? [name] : [])] },
      { deliverOutbox: false },
      Adapter,
    );
    open.push(before);
    const token = await receiverToken(before);
    const push = (url: string) =>
      ssfRequest(before, 'POST', STREAMS, token, { delivery: { method: PUSH, endpoint_url: url } });
    const loopback = (await push(hooks.url)).body['stream_id'] as string;
    const named = name ? ((await push(`https://${name}:${port}/caep`)).body['stream_id'] as string) : undefined;
    // The instance that delivers allows no internal host.
    const now = await startSsfProvider(memory, { pushAllowList: [] }, {}, Adapter);
    open.push(now);
    await stopOneSession(now);

    const deadline = Date.now() + scaled(5000);
    while (!(await now.impersonation.ssf().deadLetters()).some((letter) => letter.subscription === `ssf:${loopback}`)) {
      expect(Date.now(), 'dead-lettered').to.be.below(deadline);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const [letter] = (await now.impersonation.ssf().deadLetters()).filter(
      (dead) => dead.subscription === `ssf:${loopback}`,
    );
    expect(letter!.reason).to.equal('push_target_refused');
    expect(hooks.deliveries).to.deep.equal([]);
    if (named) {
      // Tried, and retried: never connected to, whatever the name resolved to when the stream was written.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(connections).to.equal(0);
      expect((await now.impersonation.ssf().stats()).subscriptions[`ssf:${named}`]?.pending).to.equal(1);
    }
  });
});
