import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createRemoteJWKSet, decodeJwt, jwtVerify, type JWTPayload } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { exchange, REQUEST_TIMEOUT, requestImpersonation, signIn } from '../demo/helpers.js';
import { scaled } from '../support/time.js';

/*
 * The demo's identity service as an SSF receiver outside the project sees it: only what SSF 1.0,
 * CAEP 1.0, the CAEP Interoperability Profile and RFCs 8417, 8935, 8936 and 9493 promise, found
 * through the metadata at the SSF 1.0 7.2 location, with docs/demo.md's receiver client.
 */

const PUSH = 'urn:ietf:rfc:8935';
const POLL = 'urn:ietf:rfc:8936';
const SESSION_REVOKED = 'https://schemas.openid.net/secevent/caep/event-type/session-revoked';
const VERIFICATION = 'https://schemas.openid.net/secevent/ssf/event-type/verification';
/** Longer than the transmitter's long poll (10 s by default). */
const LONG_POLL_BOUND = scaled(15_000);
const RECEIVER = { id: 'caep-receiver', secret: 'caep-receiver-secret' };

interface Metadata {
  spec_version?: string;
  issuer: string;
  jwks_uri: string;
  delivery_methods_supported: string[];
  configuration_endpoint: string;
  status_endpoint: string;
  add_subject_endpoint: string;
  remove_subject_endpoint: string;
  verification_endpoint: string;
  authorization_schemes?: { spec_urn: string }[];
  [member: string]: unknown;
}

interface StreamConfiguration {
  stream_id: string;
  iss: string;
  aud: string | string[];
  events_supported?: string[];
  events_requested?: string[];
  events_delivered: string[];
  delivery: { method: string; endpoint_url?: string; authorization_header?: string };
  min_verification_interval?: number;
  description?: string;
}

interface Answer<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

interface Pushed {
  authorization: string | undefined;
  accept: string | undefined;
  contentType: string | undefined;
  set: string;
}

/** A receiver's push endpoint (RFC 8935) on 127.0.0.1: keeps every SET it is given, answers 202. */
async function startPushEndpoint(): Promise<{ url: string; received: Pushed[]; close(): Promise<void> }> {
  const received: Pushed[] = [];
  const read = async (request: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString();
  };
  const server: Server = createServer((request, response) => {
    void read(request).then((set) => {
      received.push({
        authorization: request.headers.authorization,
        accept: request.headers.accept,
        contentType: request.headers['content-type'],
        set,
      });
      response.writeHead(202).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/caep`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function call<T = Record<string, unknown>>(
  method: string,
  url: string,
  token: string | undefined,
  body?: unknown,
): Promise<Answer<T>> {
  const headers: Record<string, string> = {};
  if (token) headers['authorization'] = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(url, {
    method,
    headers,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    signal: AbortSignal.timeout(LONG_POLL_BOUND),
  });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: (text ? JSON.parse(text) : undefined) as T };
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, ms = 5000): Promise<T> {
  const until = Date.now() + scaled(ms);
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > until) throw new Error(`no ${what} within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('SSF: the demo as an outside receiver sees it (SSF 1.0, CAEP 1.0, RFC 8417/8935/8936/9493)', function () {
  this.timeout(60_000);
  let demo: Demo;
  let metadata: Metadata;
  let manage: string;
  let read: string;
  let push: Awaited<ReturnType<typeof startPushEndpoint>>;
  let jwks: ReturnType<typeof createRemoteJWKSet>;
  let pollStream: StreamConfiguration;
  let pushStream: StreamConfiguration;

  async function receiverToken(scope: string, client = RECEIVER): Promise<string> {
    const response = await fetch(`${metadata.issuer}/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${client.id}:${client.secret}`).toString('base64')}` },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        resource: demo.identity.managementResource,
        scope,
      }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const body = (await response.json()) as { access_token?: string; scope?: string };
    expect(response.status, JSON.stringify(body)).to.equal(200);
    return body.access_token ?? '';
  }

  /** Verifies a SET as RFC 8417 and SSF 1.0 4 ask, for the stream's audience; resolves its claims. */
  async function verifySet(set: string, stream: StreamConfiguration): Promise<JWTPayload & Record<string, unknown>> {
    const { payload, protectedHeader } = await jwtVerify(set, jwks, {
      issuer: metadata.issuer,
      audience: stream.aud,
      typ: 'secevent+jwt',
    });
    expect(protectedHeader.typ).to.equal('secevent+jwt');
    // The CAEP Interoperability Profile's signing algorithm, with the key id that names a key of jwks_uri.
    expect(protectedHeader.alg).to.equal('RS256');
    expect(protectedHeader.kid).to.be.a('string');
    expect(payload.jti).to.be.a('string').and.not.equal('');
    expect(Number.isInteger(payload.iat), 'iat in whole seconds (RFC 7519 2 NumericDate)').to.equal(true);
    expect(payload, 'no sub (SSF 1.0 4.1.2)').not.to.have.property('sub');
    expect(payload, 'no exp (RFC 8417 2.2)').not.to.have.property('exp');
    expect(payload['sub_id'], 'a top-level sub_id (SSF 1.0 4.1.2)').to.be.an('object');
    expect((payload['sub_id'] as { format?: unknown }).format).to.be.a('string');
    expect(Object.keys(payload['events'] as object), 'one event (SSF 1.0 4.1.4)').to.have.length(1);
    return payload as JWTPayload & Record<string, unknown>;
  }

  async function poll(body: Record<string, unknown>, stream = pollStream, token = manage) {
    return call<{ sets: Record<string, string>; moreAvailable: boolean }>(
      'POST',
      stream.delivery.endpoint_url ?? '',
      token,
      body,
    );
  }

  async function verification(stream: StreamConfiguration, state: string | undefined): Promise<void> {
    // min_verification_interval (1 s in the demo) between two requests of a stream.
    const answer = await waitFor('verification accepted', async () => {
      const asked = await call('POST', metadata.verification_endpoint, manage, { stream_id: stream.stream_id, state });
      return asked.status === 429 ? undefined : asked;
    });
    expect(answer.status, JSON.stringify(answer.body)).to.equal(204);
  }

  /** Polls (and acknowledges) until a SET of `event` with `match` comes; resolves its claims. */
  async function polledUntil(
    event: string,
    match: (claims: Record<string, unknown>) => boolean,
  ): Promise<Record<string, unknown>> {
    let ack: string[] = [];
    return waitFor(`${event} SET`, async () => {
      const answer = await poll({ ack, returnImmediately: true, maxEvents: 10 });
      ack = [];
      if (answer.status === 503) return undefined;
      expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
      let found: Record<string, unknown> | undefined;
      for (const [jti, set] of Object.entries(answer.body.sets)) {
        const claims = await verifySet(set, pollStream);
        expect(claims.jti, 'the sets map is keyed by jti (RFC 8936 2.4)').to.equal(jti);
        ack.push(jti);
        const events = claims['events'] as Record<string, Record<string, unknown>>;
        if (events[event] && match(claims)) found = claims;
      }
      if (found) await poll({ ack, returnImmediately: true, maxEvents: 0 });
      return found;
    });
  }

  /** alice acts as dave and stops in the console, as docs/demo.md shows; resolves the session id. */
  async function stopAnImpersonation(ticketId: string): Promise<string> {
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const asked = await requestImpersonation(demo, alice, { userId: 'dave', reason: 'Invoices', ticketId });
    expect(asked.status, JSON.stringify(asked.body)).to.equal(200);
    const exchanged = await exchange(demo, asked.body['subjectToken'] as string, alice);
    expect(exchanged.status).to.equal(200);
    const sessionId = decodeJwt(exchanged.body['access_token'] as string)['impersonation_session'] as string;
    const stopped = await fetch(`${demo.backend.url}/api/stop-impersonation`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sessionId }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    expect(stopped.status).to.equal(204);
    return sessionId;
  }

  before(async () => {
    push = await startPushEndpoint();
    demo = await startDemo({ identityPort: 0, backendPort: 0, bindAddress: '127.0.0.1' });
  });
  after(async () => {
    await demo?.close();
    await push?.close();
  });

  it('1. discovery: metadata at /.well-known/ssf-configuration/oidc for the issuer …/oidc (SSF 1.0 7.1, 7.2)', async () => {
    const issuer = new URL(demo.identity.issuer);
    const location = `${issuer.origin}/.well-known/ssf-configuration${issuer.pathname}`;
    const answer = await call<Metadata>('GET', location, undefined);
    expect(answer.status).to.equal(200);
    expect(answer.headers.get('content-type')).to.match(/^application\/json/);
    metadata = answer.body;
    expect(metadata.issuer).to.equal(demo.identity.issuer);
    expect(metadata.spec_version).to.equal('1_0');
    expect(metadata.delivery_methods_supported).to.include.members([PUSH, POLL]);
    for (const endpoint of [
      'jwks_uri',
      'configuration_endpoint',
      'status_endpoint',
      'add_subject_endpoint',
      'remove_subject_endpoint',
      'verification_endpoint',
    ]) {
      expect(() => new URL(metadata[endpoint] as string), endpoint).not.to.throw();
    }
    expect(metadata.authorization_schemes).to.deep.include({ spec_urn: 'urn:ietf:rfc:6749' });
    // No member is an empty array (SSF 1.0 7.1: omitted rather than empty).
    for (const [member, value] of Object.entries(metadata))
      if (Array.isArray(value)) expect(value.length, member).to.be.above(0);
  });

  it('2. jwks_uri publishes signing keys a receiver can use', async () => {
    const answer = await call<{ keys: { kty: string; use?: string; d?: string }[] }>(
      'GET',
      metadata.jwks_uri,
      undefined,
    );
    expect(answer.status).to.equal(200);
    expect(answer.body.keys.length).to.be.above(0);
    for (const key of answer.body.keys) expect(key, 'public keys only').not.to.have.property('d');
    jwks = createRemoteJWKSet(new URL(metadata.jwks_uri));
  });

  it("3. a receiver token with docs/demo.md's client and the profile's scopes (CAEP IOP 2.7)", async () => {
    manage = await receiverToken('ssf.manage ssf.read');
    read = await receiverToken('ssf.read');
    expect(manage).to.be.a('string').and.not.equal('');
  });

  it('3b. the token is one for the stream API without a resource indicator too (CAEP IOP 2.7 names scopes only)', async () => {
    for (const scope of ['ssf.manage ssf.read', 'ssf.read']) {
      const response = await fetch(`${metadata.issuer}/token`, {
        method: 'POST',
        headers: { authorization: `Basic ${Buffer.from(`${RECEIVER.id}:${RECEIVER.secret}`).toString('base64')}` },
        body: new URLSearchParams({ grant_type: 'client_credentials', scope }),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT),
      });
      const body = (await response.json()) as { access_token: string; scope?: string };
      expect(response.status).to.equal(200);
      expect(body.scope, 'the scopes granted, as asked').to.equal(scope);
      const listed = await call('GET', metadata.configuration_endpoint, body.access_token);
      expect(listed.status, JSON.stringify(listed.body)).to.equal(200);
    }
    // A client whose metadata lists no SSF scope gets no stream API token by asking for one.
    const response = await fetch(`${metadata.issuer}/token`, {
      method: 'POST',
      headers: {
        authorization: `Basic ${Buffer.from('impersonation-backend:impersonation-backend-secret').toString('base64')}`,
      },
      body: new URLSearchParams({ grant_type: 'client_credentials', scope: 'ssf.manage' }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const other = (await response.json()) as { access_token?: string; scope?: string };
    expect(other.scope).to.equal(undefined);
    if (other.access_token)
      expect((await call('GET', metadata.configuration_endpoint, other.access_token)).status).to.equal(401);
  });

  it('4. without a token 401 with a Bearer challenge; ssf.read may not change a stream (403)', async () => {
    const anonymous = await call('POST', metadata.configuration_endpoint, undefined, { delivery: { method: POLL } });
    expect(anonymous.status).to.equal(401);
    expect(anonymous.headers.get('www-authenticate')).to.match(/^Bearer\b/);
    const garbled = await call('GET', metadata.configuration_endpoint, 'not-a-token');
    expect(garbled.status).to.equal(401);
    const reader = await call('POST', metadata.configuration_endpoint, read, { delivery: { method: POLL } });
    expect(reader.status).to.equal(403);
    expect(reader.body['error']).to.equal('insufficient_scope');
  });

  it('5. stream create by poll (201): transmitter-supplied iss, aud, events_delivered, the poll endpoint_url', async () => {
    const created = await call<StreamConfiguration>('POST', metadata.configuration_endpoint, manage, {
      delivery: { method: POLL },
      events_requested: [SESSION_REVOKED, VERIFICATION],
      description: 'outside receiver (poll)',
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    pollStream = created.body;
    expect(pollStream.stream_id).to.be.a('string').and.not.equal('');
    expect(pollStream.iss).to.equal(metadata.issuer);
    expect([pollStream.aud].flat()).to.include(RECEIVER.id);
    expect(pollStream.delivery.method).to.equal(POLL);
    expect(() => new URL(pollStream.delivery.endpoint_url ?? '')).not.to.throw();
    expect(pollStream.events_delivered).to.include(SESSION_REVOKED);
    expect(pollStream.events_supported).to.include(SESSION_REVOKED);
    expect(Number.isInteger(pollStream.min_verification_interval)).to.equal(true);
  });

  it('6. stream create by push to 127.0.0.1, the authorization_header never shown back', async () => {
    const created = await call<StreamConfiguration>('POST', metadata.configuration_endpoint, manage, {
      delivery: { method: PUSH, endpoint_url: push.url, authorization_header: 'Bearer receiver-push-credential' },
      events_requested: [SESSION_REVOKED],
    });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    pushStream = created.body;
    expect(pushStream.delivery).to.deep.equal({ method: PUSH, endpoint_url: push.url });
    expect(JSON.stringify(pushStream)).not.to.include('receiver-push-credential');
  });

  it('7. stream read: one by stream_id, all as a list (SSF 1.0 8.1.1.2)', async () => {
    const one = await call<StreamConfiguration>(
      'GET',
      `${metadata.configuration_endpoint}?stream_id=${pollStream.stream_id}`,
      read,
    );
    expect(one.status).to.equal(200);
    expect(one.body).to.deep.equal(pollStream);
    const all = await call<StreamConfiguration[]>('GET', metadata.configuration_endpoint, read);
    expect(all.status).to.equal(200);
    expect(all.body.map((stream) => stream.stream_id)).to.include.members([pollStream.stream_id, pushStream.stream_id]);
  });

  it('8. stream update (PATCH) and replace (PUT) (SSF 1.0 8.1.1.3, 8.1.1.4)', async () => {
    const patched = await call<StreamConfiguration>('PATCH', metadata.configuration_endpoint, manage, {
      stream_id: pollStream.stream_id,
      description: 'patched',
    });
    expect(patched.status, JSON.stringify(patched.body)).to.equal(200);
    expect(patched.body.description).to.equal('patched');
    expect(patched.body.events_requested).to.deep.equal(pollStream.events_requested);
    // A receiver may send back the whole configuration it read, transmitter-supplied values included.
    const echoedPatch = await call<StreamConfiguration>('PATCH', metadata.configuration_endpoint, manage, {
      ...patched.body,
      description: 'patched again',
    });
    expect(echoedPatch.status, JSON.stringify(echoedPatch.body)).to.equal(200);
    expect(echoedPatch.body).to.deep.equal({ ...patched.body, description: 'patched again' });
    const echoedPut = await call<StreamConfiguration>('PUT', metadata.configuration_endpoint, manage, {
      ...echoedPatch.body,
      description: 'replaced whole',
    });
    expect(echoedPut.status, JSON.stringify(echoedPut.body)).to.equal(200);
    expect(echoedPut.body).to.deep.equal({ ...patched.body, description: 'replaced whole' });
    const echoedPush = await call<StreamConfiguration>('PUT', metadata.configuration_endpoint, manage, {
      ...pushStream,
      delivery: { ...pushStream.delivery, authorization_header: 'Bearer receiver-push-credential' },
    });
    expect(echoedPush.status, JSON.stringify(echoedPush.body)).to.equal(200);
    expect(echoedPush.body).to.deep.equal(pushStream);
    const replaced = await call<StreamConfiguration>('PUT', metadata.configuration_endpoint, manage, {
      stream_id: pollStream.stream_id,
      delivery: { method: POLL },
      events_requested: [SESSION_REVOKED, VERIFICATION],
    });
    expect(replaced.status, JSON.stringify(replaced.body)).to.equal(200);
    expect(replaced.body, 'a replaced stream keeps no property left out').not.to.have.property('description');
    const narrowed = await call<StreamConfiguration>('PATCH', metadata.configuration_endpoint, manage, {
      stream_id: pushStream.stream_id,
      events_requested: [VERIFICATION],
    });
    expect(narrowed.status).to.equal(200);
    expect(narrowed.body.events_delivered, 'events_delivered follows events_requested').to.deep.equal([]);
    const widened = await call<StreamConfiguration>('PATCH', metadata.configuration_endpoint, manage, {
      stream_id: pushStream.stream_id,
      events_requested: [SESSION_REVOKED],
    });
    expect(widened.body.events_delivered).to.deep.equal([SESSION_REVOKED]);
    expect(replaced.body.delivery.endpoint_url).to.equal(pollStream.delivery.endpoint_url);
    const changedIss = await call('PATCH', metadata.configuration_endpoint, manage, {
      stream_id: pollStream.stream_id,
      iss: 'https://elsewhere.example',
    });
    expect(changedIss.status, 'a transmitter-supplied value that differs').to.equal(400);
    pollStream = replaced.body;
  });

  it('9. errors: unknown stream 404, broken or wrong body 400, each as { error, error_description }', async () => {
    const unknown = await call('GET', `${metadata.configuration_endpoint}?stream_id=no-such-stream`, manage);
    expect(unknown.status).to.equal(404);
    // Another receiver's stream (the resource API's, made at start-up) is as unknown as a made-up one.
    const resourceApiToken = await receiverToken('ssf.read', {
      id: 'resource-api-receiver',
      secret: 'resource-api-receiver-secret',
    });
    const theirs = await call<StreamConfiguration[]>('GET', metadata.configuration_endpoint, resourceApiToken);
    expect(theirs.status).to.equal(200);
    const [their] = theirs.body;
    expect(their, 'the resource API polls a stream of its own').not.to.equal(undefined);
    const mine = await call<StreamConfiguration[]>('GET', metadata.configuration_endpoint, manage);
    expect(mine.body.map((stream) => stream.stream_id)).not.to.include(their?.stream_id);
    for (const [method, url] of [
      ['GET', `${metadata.configuration_endpoint}?stream_id=${their?.stream_id}`],
      ['GET', `${metadata.status_endpoint}?stream_id=${their?.stream_id}`],
      ['DELETE', `${metadata.configuration_endpoint}?stream_id=${their?.stream_id}`],
    ] as const)
      expect((await call(method, url, manage)).status, `another receiver's: ${method} ${url}`).to.equal(404);
    const theirPoll = await call('POST', their?.delivery.endpoint_url ?? '', manage, { returnImmediately: true });
    expect(theirPoll.status, "polling another receiver's stream").to.equal(404);
    for (const [method, url] of [
      ['GET', `${metadata.status_endpoint}?stream_id=no-such-stream`],
      ['DELETE', `${metadata.configuration_endpoint}?stream_id=no-such-stream`],
    ] as const)
      expect((await call(method, url, manage)).status, `${method} ${url}`).to.equal(404);
    const unknownPatch = await call('PATCH', metadata.configuration_endpoint, manage, {
      stream_id: 'no-such-stream',
      description: 'x',
    });
    expect(unknownPatch.status).to.equal(404);
    const unknownVerify = await call('POST', metadata.verification_endpoint, manage, { stream_id: 'no-such-stream' });
    expect(unknownVerify.status).to.equal(404);
    const unknownPoll = await call(
      'POST',
      pollStream.delivery.endpoint_url?.replace(pollStream.stream_id, 'nope') ?? '',
      manage,
      {},
    );
    expect(unknownPoll.status).to.equal(404);

    const broken = await call('POST', metadata.configuration_endpoint, manage, '{"delivery":');
    expect(broken.status).to.equal(400);
    expect(broken.body).to.have.keys('error', 'error_description');
    const wrongMethod = await call('POST', metadata.configuration_endpoint, manage, {
      delivery: { method: 'urn:example:carrier-pigeon' },
    });
    expect(wrongMethod.status).to.equal(400);
    const pushWithoutUrl = await call('POST', metadata.configuration_endpoint, manage, { delivery: { method: PUSH } });
    expect(pushWithoutUrl.status).to.equal(400);
    const wrongStatus = await call('POST', metadata.status_endpoint, manage, {
      stream_id: pollStream.stream_id,
      status: 'sleeping',
    });
    expect(wrongStatus.status).to.equal(400);
  });

  it('10. subjects: add 200, remove 204 (SSF 1.0 8.1.3); a malformed subject 400', async () => {
    const subject = { format: 'iss_sub', iss: metadata.issuer, sub: 'dave' };
    const added = await call('POST', metadata.add_subject_endpoint, manage, {
      stream_id: pollStream.stream_id,
      subject,
      verified: true,
    });
    expect(added.status).to.equal(200);
    const removed = await call('POST', metadata.remove_subject_endpoint, manage, {
      stream_id: pollStream.stream_id,
      subject,
    });
    expect(removed.status).to.equal(204);
    const email = await call('POST', metadata.add_subject_endpoint, manage, {
      stream_id: pollStream.stream_id,
      subject: { format: 'email', email: 'dave@example.com' },
    });
    expect(email.status).to.equal(200);
    const malformed = await call('POST', metadata.add_subject_endpoint, manage, {
      stream_id: pollStream.stream_id,
      subject: { format: 'iss_sub', iss: metadata.issuer },
    });
    expect(malformed.status).to.equal(400);
    const byReader = await call('POST', metadata.add_subject_endpoint, read, {
      stream_id: pollStream.stream_id,
      subject,
    });
    expect(byReader.status).to.equal(403);
  });

  it('11. verification: 204, then a verification SET whose sub_id is the stream and state is echoed (SSF 1.0 8.1.4)', async () => {
    await verification(pollStream, 'state-one');
    const claims = await polledUntil(VERIFICATION, (set) => {
      const event = (set['events'] as Record<string, { state?: string }>)[VERIFICATION];
      return event?.state === 'state-one';
    });
    expect(claims['sub_id']).to.deep.equal({ format: 'opaque', id: pollStream.stream_id });
    expect([claims['aud']].flat()).to.deep.equal([pollStream.aud].flat());
  });

  it('12. poll: maxEvents bounds the answer, moreAvailable says so, what is acknowledged does not come again (RFC 8936 2)', async () => {
    await verification(pollStream, 'state-two');
    await verification(pollStream, 'state-three');
    const first = await waitFor('two queued SETs', async () => {
      const answer = await poll({ returnImmediately: true, maxEvents: 1 });
      return answer.status === 200 && answer.body.moreAvailable ? answer : undefined;
    });
    expect(Object.keys(first.body.sets)).to.have.length(1);
    const [firstJti] = Object.keys(first.body.sets);
    // Not acknowledged: comes again, with the other.
    const again = await poll({ returnImmediately: true, maxEvents: 10 });
    expect(again.status).to.equal(200);
    expect(Object.keys(again.body.sets)).to.include(firstJti);
    expect(Object.keys(again.body.sets)).to.have.length(2);
    expect(again.body.moreAvailable).to.equal(false);
    // Acknowledged, and the empty answer at once.
    const acked = await poll({ ack: Object.keys(again.body.sets), returnImmediately: true });
    expect(acked.status).to.equal(200);
    expect(acked.body.sets).to.deep.equal({});
    // An unknown jti acknowledged is no error; maxEvents 0 acknowledges without asking for SETs (RFC 8936 2.4).
    await verification(pollStream, 'state-four');
    await new Promise((resolve) => setTimeout(resolve, 500));
    const ackOnly = await poll({ ack: ['not-a-jti-of-this-stream'], maxEvents: 0, returnImmediately: true });
    expect(ackOnly.status).to.equal(200);
    expect(ackOnly.body.sets).to.deep.equal({});
    const stillThere = await polledUntil(VERIFICATION, (set) => {
      const event = (set['events'] as Record<string, { state?: string }>)[VERIFICATION];
      return event?.state === 'state-four';
    });
    expect(stillThere['jti']).to.be.a('string');
    // A reader token may poll (CAEP IOP 2.7).
    const byReader = await poll({ returnImmediately: true }, pollStream, read);
    expect(byReader.status).to.equal(200);
  });

  it('12b. poll: a long poll (returnImmediately false) answers once a SET comes; setErrs are taken; state is optional (RFC 8936 2.4, 2.5)', async () => {
    const waiting = poll({ returnImmediately: false, maxEvents: 10 });
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const asked = Date.now();
    const answered = waiting.then((answer) => ({ answer, after: Date.now() - asked }));
    await verification(pollStream, undefined);
    const { answer, after } = await answered;
    expect(answer.status).to.equal(200);
    expect(after, 'answered soon after the SET, not at the long poll timeout').to.be.below(3000);
    const sets = Object.entries(answer.body.sets);
    expect(sets).to.have.length(1);
    const [[jti, set] = ['', '']] = sets;
    const claims = await verifySet(set, pollStream);
    expect(claims['events'], 'no state asked, none echoed').to.deep.equal({ [VERIFICATION]: {} });
    const reported = await poll({
      setErrs: { [jti]: { err: 'invalid_key', description: 'the receiver does not know the key' } },
      returnImmediately: true,
    });
    expect(reported.status).to.equal(200);
    expect(reported.body).to.deep.equal({ sets: {}, moreAvailable: false });
  });

  it('12c. events the transmitter does not know are kept as requested and not delivered (SSF 1.0 8.1.1)', async () => {
    const created = await call<StreamConfiguration>('POST', metadata.configuration_endpoint, manage, {
      events_requested: [SESSION_REVOKED, 'urn:example:unknown-event'],
    });
    expect(created.status).to.equal(201);
    expect(created.body.delivery.method, 'no delivery named is poll').to.equal(POLL);
    expect(created.body.events_requested).to.deep.equal([SESSION_REVOKED, 'urn:example:unknown-event']);
    expect(created.body.events_delivered).to.deep.equal([SESSION_REVOKED]);
    const deleted = await call(
      'DELETE',
      `${metadata.configuration_endpoint}?stream_id=${created.body.stream_id}`,
      manage,
    );
    expect(deleted.status).to.equal(204);
  });

  it('13. push: verification SET POSTed as application/secevent+jwt with the authorization_header (RFC 8935 2)', async () => {
    await verification(pushStream, 'pushed-state');
    const pushed = await waitFor('pushed verification', () =>
      push.received.find((entry) => {
        const events = decodeJwt(entry.set)['events'] as Record<string, { state?: string }>;
        return events[VERIFICATION]?.state === 'pushed-state';
      }),
    );
    expect(pushed.authorization).to.equal('Bearer receiver-push-credential');
    expect(pushed.contentType).to.match(/^application\/secevent\+jwt/);
    expect(pushed.accept).to.equal('application/json');
    const claims = await verifySet(pushed.set, pushStream);
    expect(claims['sub_id']).to.deep.equal({ format: 'opaque', id: pushStream.stream_id });
  });

  it('14. status: read, and paused holds SETs, delivered once enabled (SSF 1.0 8.1.2)', async () => {
    const status = await call('GET', `${metadata.status_endpoint}?stream_id=${pushStream.stream_id}`, read);
    expect(status.status).to.equal(200);
    expect(status.body).to.include({ stream_id: pushStream.stream_id, status: 'enabled' });

    const paused = await call('POST', metadata.status_endpoint, manage, {
      stream_id: pushStream.stream_id,
      status: 'paused',
      reason: 'maintenance',
    });
    expect(paused.status, JSON.stringify(paused.body)).to.equal(200);
    expect(paused.body).to.include({ stream_id: pushStream.stream_id, status: 'paused' });
    expect((await call('GET', `${metadata.status_endpoint}?stream_id=${pushStream.stream_id}`, read)).body).to.include({
      status: 'paused',
      reason: 'maintenance',
    });
    const byReader = await call('POST', metadata.status_endpoint, read, {
      stream_id: pushStream.stream_id,
      status: 'enabled',
    });
    expect(byReader.status).to.equal(403);

    await verification(pushStream, 'while-paused');
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const heldState = (entry: Pushed) =>
      (decodeJwt(entry.set)['events'] as Record<string, { state?: string }>)[VERIFICATION]?.state === 'while-paused';
    expect(push.received.some(heldState), 'nothing pushed while paused').to.equal(false);

    const enabled = await call('POST', metadata.status_endpoint, manage, {
      stream_id: pushStream.stream_id,
      status: 'enabled',
    });
    expect(enabled.status).to.equal(200);
    await waitFor('the held SET once enabled', () => push.received.find(heldState));
  });

  it('15. CAEP session-revoked after a stop in the console: event_timestamp, initiating_entity, reason_admin (CAEP 1.0 3.1)', async () => {
    const stoppedAt = Math.floor(Date.now() / 1000);
    const sessionId = await stopAnImpersonation('T-9');

    const isThisSession = (claims: Record<string, unknown>) =>
      (claims['sub_id'] as { session?: { id?: string } }).session?.id === sessionId;
    const polled = await polledUntil(SESSION_REVOKED, isThisSession);
    expect(polled['sub_id']).to.deep.equal({
      format: 'complex',
      session: { format: 'opaque', id: sessionId },
      user: { format: 'iss_sub', iss: metadata.issuer, sub: 'dave' },
    });
    const event = (polled['events'] as Record<string, Record<string, unknown>>)[SESSION_REVOKED] ?? {};
    expect(event['event_timestamp'])
      .to.be.a('number')
      .within(stoppedAt - 5, stoppedAt + 5);
    expect(event['initiating_entity']).to.be.oneOf(['admin', 'user', 'policy', 'system']);
    expect(event['reason_admin']).to.have.property('en').that.is.a('string').and.not.equal('');
    expect(metadata['critical_subject_members'] ?? []).to.include('session');

    const pushed = await waitFor('pushed session-revoked', () =>
      push.received.find((entry) => isThisSession(decodeJwt(entry.set) as Record<string, unknown>)),
    );
    const claims = await verifySet(pushed.set, pushStream);
    expect(claims['txn'], 'one txn for the SETs of one stop (RFC 8417 2.2)').to.equal(polled['txn']);
    expect(claims['jti']).not.to.equal(polled['jti']);
  });

  it('16. disabled: a stop while disabled is never delivered, not even once enabled again (SSF 1.0 8.1.2)', async () => {
    const disabled = await call('POST', metadata.status_endpoint, manage, {
      stream_id: pollStream.stream_id,
      status: 'disabled',
    });
    expect(disabled.status).to.equal(200);
    expect(disabled.body).to.include({ stream_id: pollStream.stream_id, status: 'disabled' });
    const sessionId = await stopAnImpersonation('T-10');
    const isThisSession = (set: string) =>
      (decodeJwt(set)['sub_id'] as { session?: { id?: string } }).session?.id === sessionId;
    // Delivered to the push stream, which is enabled: the stop went out.
    await waitFor('the stop pushed', () => push.received.find((entry) => isThisSession(entry.set)));
    const whileDisabled = await poll({ returnImmediately: true });
    // Nothing of the stop; an empty queue of a stream that is not enabled answers 503 (docs/ssf.md, Delivery).
    if (whileDisabled.status === 200)
      expect(Object.values(whileDisabled.body.sets).some(isThisSession)).to.equal(false);
    else expect(whileDisabled.status).to.equal(503);

    const enabled = await call('POST', metadata.status_endpoint, manage, {
      stream_id: pollStream.stream_id,
      status: 'enabled',
    });
    expect(enabled.status).to.equal(200);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const afterwards = await waitFor('an answer once enabled', async () => {
      const answer = await poll({ returnImmediately: true, maxEvents: 100 });
      return answer.status === 200 ? answer : undefined;
    });
    expect(Object.values(afterwards.body.sets).some(isThisSession), 'a disabled stream holds nothing').to.equal(false);
  });

  it('17. delete (204): the stream is gone (404 on read, status, poll) and a stop afterwards pushes nothing (SSF 1.0 8.1.1.5)', async () => {
    for (const stream of [pushStream, pollStream]) {
      const deleted = await call('DELETE', `${metadata.configuration_endpoint}?stream_id=${stream.stream_id}`, manage);
      expect(deleted.status).to.equal(204);
      for (const url of [
        `${metadata.configuration_endpoint}?stream_id=${stream.stream_id}`,
        `${metadata.status_endpoint}?stream_id=${stream.stream_id}`,
      ])
        expect((await call('GET', url, manage)).status, url).to.equal(404);
    }
    expect((await poll({ returnImmediately: true })).status).to.equal(404);

    const before = push.received.length;
    await stopAnImpersonation('T-11');
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(push.received.length, 'nothing pushed to a deleted stream').to.equal(before);
  });
});
