import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import Koa from 'koa';
import { FIXTURE_CLIENTS } from '../../fixtures/provider.js';
import { sessionStopOf, MAX_REASON_ADMIN } from '../../lib/ssf/set.js';
import { EVENTS } from '../../lib/index.js';
import { ADAPTERS } from '../support/adapters.js';
import { m2mToken, userAccessToken } from '../support/http.js';
import { adminToken, impersonate, revokeSession } from '../support/impersonations.js';
import { mountCallback, PREFIX } from '../support/mount.js';
import { startReceiver } from '../support/webhook-receiver.js';
import { startProvider, type TestProvider } from '../support/provider.js';
import { setProblems, transmitterMetadataProblems } from '../support/ssf-rules.js';
import {
  LOOPBACK_RECEIVERS,
  pollUntil,
  PUSH,
  RECEIVERS,
  receiverToken,
  SESSION_REVOKED,
  SSF_RECEIVER_CLIENTS,
  ssfRequest,
  startSsfProvider,
  STREAMS,
  VERIFICATION,
  verifySet,
} from '../support/ssf.js';

/** Receivers that hold only the CAEP Interoperability Profile's scopes. */
const PROFILE_RECEIVERS = {
  manager: { client_id: 'caep-manager', client_secret: 'caep-manager-secret', scope: 'ssf.manage' },
  reader: { client_id: 'caep-reader', client_secret: 'caep-reader-secret', scope: 'ssf.read' },
};
const PROFILE_CLIENTS = Object.values(PROFILE_RECEIVERS).map(({ scope, ...client }) => ({
  ...client,
  token_endpoint_auth_method: 'client_secret_basic' as const,
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
  impersonation_management_scope: scope,
}));

function decodeEvents(jwt: string): string[] {
  const claims = JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString()) as { events?: object };
  return Object.keys(claims.events ?? {});
}

async function raw(url: string, init: RequestInit = {}): Promise<{ status: number; text: string }> {
  const response = await fetch(url, init);
  return { status: response.status, text: await response.text() };
}

describe('SSF: discovery at the SSF 1.0 7.2 location for an issuer with a path', function () {
  this.timeout(30_000);
  const open: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((thing) => thing.close()));
  });

  /** A provider mounted at /oidc of a parent Koa app, the Management API either inside it or at the parent's root. */
  async function mountedAtOidc(apiAt: 'provider' | 'root'): Promise<{ tp: TestProvider; origin: string }> {
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const parent = new Koa();
    const tp = await startProvider({
      issuer: `${origin}${PREFIX}`,
      plugin: { ssf: {} },
      configuration: { clients: [...FIXTURE_CLIENTS, ...SSF_RECEIVER_CLIENTS] },
      mount: (provider, install, impersonation) => {
        install({ mountManagementApi: apiAt === 'provider' });
        if (apiAt === 'root') parent.use(impersonation.managementApi());
        else parent.use(impersonation.ssfDiscovery());
        parent.use(mountCallback(PREFIX, provider));
      },
    });
    server.on('request', parent.callback());
    const close = tp.close;
    open.push({
      close: async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
        await close();
      },
    });
    return { tp, origin };
  }

  it('ssfDiscovery() at the host root answers /.well-known/ssf-configuration/oidc, naming the issuer …/oidc', async () => {
    const { tp, origin } = await mountedAtOidc('provider');
    const reply = await fetch(`${origin}/.well-known/ssf-configuration/oidc`);
    expect(reply.status).to.equal(200);
    const metadata = (await reply.json()) as Record<string, unknown>;
    expect(metadata['issuer']).to.equal(tp.issuer);
    expect(transmitterMetadataProblems(metadata, tp.issuer)).to.deep.equal([]);
    // Nothing else at the root: the provider and the host keep every other path.
    expect((await raw(`${origin}/.well-known/ssf-configuration`)).status).to.equal(404);
    expect((await raw(`${origin}/.well-known/ssf-configuration/oidc`, { method: 'POST' })).status).to.equal(404);
  });

  it('the Management API mounted at the host root serves the 7.2 location itself', async () => {
    const { tp, origin } = await mountedAtOidc('root');
    const reply = await fetch(`${origin}/.well-known/ssf-configuration/oidc`);
    expect(reply.status).to.equal(200);
    expect(((await reply.json()) as Record<string, unknown>)['issuer']).to.equal(tp.issuer);
  });

  it('ssfDiscoveryHandler() serves it to a Node host and passes every other request on', async () => {
    const tp = await startSsfProvider(ADAPTERS[0]!, {}, {});
    open.push(tp);
    const handler = tp.impersonation.ssfDiscoveryHandler();
    const server = createServer((req, res) =>
      handler(req, res, () => {
        res.statusCode = 418;
        res.end('next');
      }),
    );
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    open.push({ close: () => new Promise((resolve) => server.close(() => resolve())) });
    const at = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    // An issuer without a path: the well-known path itself.
    const reply = await fetch(`${at}/.well-known/ssf-configuration`);
    expect(reply.status).to.equal(200);
    expect(((await reply.json()) as Record<string, unknown>)['issuer']).to.equal(tp.issuer);
    expect((await raw(`${at}/elsewhere`)).status).to.equal(418);
  });

  it('ssfDiscovery() without the ssf option is refused, naming it', async () => {
    const tp = await startProvider({});
    open.push(tp);
    expect(() => tp.impersonation.ssfDiscovery()).to.throw(/"ssf" option is not set/);
  });
});

for (const kind of ADAPTERS) {
  describe(`SSF as the conformance suite's transmitter plans exercise it, on the ${kind.name} store`, function () {
    this.timeout(60_000);
    let tp: TestProvider;
    let token: string;
    before(async () => {
      tp = await startSsfProvider(
        kind,
        { minVerificationInterval: 1, pushAllowList: LOOPBACK_RECEIVERS },
        {},
        undefined,
        PROFILE_CLIENTS,
      );
      token = await receiverToken(tp);
    });
    after(() => tp?.close());

    async function createStream(body: unknown = {}, with_ = token): Promise<string> {
      const created = await ssfRequest(tp, 'POST', STREAMS, with_, body);
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      return created.body['stream_id'] as string;
    }

    it('accepts the profile scopes: ssf.manage manages, ssf.read reads but changes nothing', async () => {
      const manager = await m2mToken(tp, PROFILE_RECEIVERS.manager, 'ssf.manage');
      const reader = await m2mToken(tp, PROFILE_RECEIVERS.reader, 'ssf.read');
      const id = await createStream({}, manager);
      expect((await ssfRequest(tp, 'GET', `${STREAMS}?stream_id=${id}`, manager)).status).to.equal(200);
      expect((await ssfRequest(tp, 'POST', '/ssf/verify', manager, { stream_id: id })).status).to.equal(204);
      const refused = await ssfRequest(tp, 'POST', STREAMS, reader, {});
      expect(refused.status).to.equal(403);
      expect(refused.body['error']).to.equal('insufficient_scope');
      // A reader's streams are its own: it lists none of the manager's.
      expect((await ssfRequest(tp, 'GET', STREAMS, reader)).body).to.deep.equal([]);
      expect((await ssfRequest(tp, 'GET', `/ssf/status?stream_id=${id}`, reader)).status).to.equal(404);
      expect((await ssfRequest(tp, 'POST', '/ssf/verify', reader, { stream_id: id })).status).to.equal(403);
      await ssfRequest(tp, 'DELETE', `${STREAMS}?stream_id=${id}`, manager);
    });

    it('adds (200, empty) and removes (204) subjects of SSF 1.0 8.1.3, refusing what is no subject', async () => {
      const id = await createStream();
      const add = await raw(`${tp.base}/ssf/subjects/add`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          stream_id: id,
          subject: { format: 'email', email: 'example.user@example.com' },
          verified: true,
        }),
      });
      expect(add).to.deep.equal({ status: 200, text: '' });
      const remove = await ssfRequest(tp, 'POST', '/ssf/subjects/remove', token, {
        stream_id: id,
        subject: { format: 'email', email: 'example.user@example.com' },
      });
      expect(remove.status).to.equal(204);
      for (const subject of [
        { format: 'complex', user: { format: 'iss_sub', iss: 'https://idp.example', sub: 'bob' } },
        { format: 'aliases', identifiers: [{ format: 'opaque', id: 'x' }] },
      ]) {
        expect((await ssfRequest(tp, 'POST', '/ssf/subjects/add', token, { stream_id: id, subject })).status).to.equal(
          200,
        );
      }
      for (const body of [
        { stream_id: id },
        { stream_id: id, subject: 'bob' },
        { stream_id: id, subject: { format: 'email' } },
        { stream_id: id, subject: { format: 'unknown', id: 'x' } },
        // A format named as a member every object inherits is no format.
        { stream_id: id, subject: { format: 'constructor', id: 'x' } },
        { stream_id: id, subject: { format: 'complex', toString: { format: 'toString' } } },
        { stream_id: id, subject: { format: 'opaque', id: 'x' }, verified: 'yes' },
      ]) {
        const refused = await ssfRequest(tp, 'POST', '/ssf/subjects/add', token, body);
        expect(refused.status, JSON.stringify(body)).to.equal(400);
        expect(refused.body['error']).to.equal('invalid_request');
      }
      const unknown = await ssfRequest(tp, 'POST', '/ssf/subjects/remove', token, {
        stream_id: 'no-such-stream',
        subject: { format: 'opaque', id: 'x' },
      });
      expect(unknown.status).to.equal(404);
    });

    it('answers a broken JSON body with 400 on create, update and replace; an unknown stream with 404', async () => {
      const id = await createStream();
      for (const method of ['POST', 'PATCH', 'PUT']) {
        const broken = await raw(`${tp.base}${STREAMS}`, {
          method,
          headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
          body: ';{ broken',
        });
        expect(broken.status, method).to.equal(400);
        expect(JSON.parse(broken.text)).to.include({ error: 'invalid_request' });
      }
      for (const [method, path, body] of [
        ['GET', `${STREAMS}?stream_id=unknown`, undefined],
        ['PATCH', STREAMS, { stream_id: 'unknown', description: 'x' }],
        ['PUT', STREAMS, { stream_id: 'unknown' }],
        ['DELETE', `${STREAMS}?stream_id=unknown`, undefined],
      ] as const) {
        expect((await ssfRequest(tp, method, path, token, body)).status, method).to.equal(404);
      }
      for (const [method, path] of [
        ['POST', STREAMS],
        ['GET', `${STREAMS}?stream_id=${id}`],
        ['PATCH', STREAMS],
        ['PUT', STREAMS],
        ['DELETE', `${STREAMS}?stream_id=${id}`],
      ] as const) {
        const body = method === 'GET' || method === 'DELETE' ? undefined : { stream_id: id };
        const reply = await ssfRequest(tp, method, path, 'not-a-token', body);
        expect(reply.status, method).to.equal(401);
      }
    });

    it('verifies by poll, poll-and-acknowledge and acknowledge-only, echoing the state', async () => {
      const created = await ssfRequest(tp, 'POST', STREAMS, token, {});
      const id = created.body['stream_id'] as string;
      const endpoint = (created.body['delivery'] as { endpoint_url: string }).endpoint_url;
      expect((await ssfRequest(tp, 'POST', '/ssf/verify', token, { stream_id: id, state: 'st-1' })).status).to.equal(
        204,
      );
      const first = await pollUntil(tp, endpoint, token, 3000, { maxEvents: 10 });
      const [jti, jwt] = Object.entries(first)[0]!;
      const { header, claims } = await verifySet(tp, jwt, RECEIVERS.first.client_id);
      expect(setProblems(header, claims)).to.deep.equal([]);
      expect(claims['sub_id']).to.deep.equal({ format: 'opaque', id });
      expect(claims['events']).to.deep.equal({ [VERIFICATION]: { state: 'st-1' } });
      // Poll-only again: not acknowledged, it comes again.
      expect(Object.keys(await pollUntil(tp, endpoint, token, 0, { maxEvents: 10 }))).to.deep.equal([jti]);
      // Poll and acknowledge: gone, and the next one comes.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      await ssfRequest(tp, 'POST', '/ssf/verify', token, { stream_id: id, state: 'st-2' });
      const second = await pollUntil(tp, endpoint, token, 3000, { maxEvents: 10, ack: [jti] });
      expect(Object.keys(second)).to.not.include(jti);
      const [jti2] = Object.keys(second);
      // Acknowledge only.
      const acked = await ssfRequest(tp, 'POST', new URL(endpoint).pathname, token, {
        maxEvents: 0,
        returnImmediately: true,
        ack: [jti2],
      });
      expect(acked.body).to.deep.equal({ sets: {}, moreAvailable: false });
      expect(await pollUntil(tp, endpoint, token, 0, { maxEvents: 10 })).to.deep.equal({});
    });

    it('pushes a stream in order: a verification SET comes behind a SET whose push is being retried', async () => {
      const hooks = await startReceiver();
      try {
        let refusedOnce = false;
        hooks.answer = (delivery) => {
          if (!refusedOnce && delivery.body.length > 0 && decodeEvents(delivery.body).includes(SESSION_REVOKED)) {
            refusedOnce = true;
            return { status: 503 };
          }
          return { status: 202 };
        };
        const created = await ssfRequest(tp, 'POST', STREAMS, token, {
          delivery: { method: PUSH, endpoint_url: hooks.url },
        });
        const id = created.body['stream_id'] as string;
        const started = await impersonate(tp, {
          actorToken: await userAccessToken(tp, 'alice'),
          subject: { userId: 'bob' },
        });
        expect((await revokeSession(tp, await adminToken(tp), started.session)).status).to.equal(204);
        expect((await ssfRequest(tp, 'POST', '/ssf/verify', token, { stream_id: id, state: 'after' })).status).to.equal(
          204,
        );
        const acknowledged = await hooks.waitFor(2, 10_000);
        expect(refusedOnce).to.equal(true);
        expect(acknowledged.map((delivery) => decodeEvents(delivery.body)[0])).to.deep.equal([
          SESSION_REVOKED,
          VERIFICATION,
        ]);
        await ssfRequest(tp, 'DELETE', `${STREAMS}?stream_id=${id}`, token);
      } finally {
        await hooks.close();
      }
    });

    it("sends session-revoked with initiating_entity admin and the stop's reason as reason_admin, bounded", async () => {
      const created = await ssfRequest(tp, 'POST', STREAMS, token, { events_requested: [SESSION_REVOKED] });
      const endpoint = (created.body['delivery'] as { endpoint_url: string }).endpoint_url;
      const reasons = ['customer asked to end the call', 'x'.repeat(MAX_REASON_ADMIN + 40)];
      for (const reason of reasons) {
        const started = await impersonate(tp, {
          actorToken: await userAccessToken(tp, 'alice'),
          subject: { userId: 'bob' },
        });
        expect((await revokeSession(tp, await adminToken(tp), started.session, { reason })).status).to.equal(204);
        const sets = await pollUntil(tp, endpoint, token, 3000, { maxEvents: 10 });
        const [jti, jwt] = Object.entries(sets)[0]!;
        const { header, claims } = await verifySet(tp, jwt, RECEIVERS.first.client_id);
        expect(setProblems(header, claims)).to.deep.equal([]);
        const event = (claims['events'] as Record<string, Record<string, unknown>>)[SESSION_REVOKED]!;
        expect(event['initiating_entity']).to.equal('admin');
        expect(event['reason_admin']).to.deep.equal({ en: reason.slice(0, MAX_REASON_ADMIN) });
        expect(jwt).to.not.include(started.token);
        await ssfRequest(tp, 'POST', new URL(endpoint).pathname, token, { maxEvents: 0, ack: [jti] });
      }
    });
  });
}

describe('SSF: how a stop is told (initiating_entity, reason_admin)', () => {
  const base = { sessionId: 'imp_1', subject: 'bob', actor: 'alice' };

  it('names who or what ended the session, by its cause, with a text for each', () => {
    const cases = [
      ['actor_logout', 'user'],
      ['actor_grant_revoked', 'system'],
      ['access_grant_ended', 'user'],
      ['parent_session_stopped', 'policy'],
      ['issuer_session_stopped', 'policy'],
    ] as const;
    for (const [endReason, entity] of cases) {
      const stop = sessionStopOf({ name: EVENTS.sessionEnded, ...base, endReason } as never);
      expect(stop.initiatingEntity, endReason).to.equal(entity);
      expect(stop.reasonAdmin, endReason).to.be.a('string').with.length.above(10);
    }
    const revoked = sessionStopOf({ name: EVENTS.sessionRevoked, ...base, revokedBy: 'console' } as never);
    expect(revoked).to.include({
      initiatingEntity: 'admin',
      reasonAdmin: 'An administrator stopped the impersonation.',
    });
  });
});
