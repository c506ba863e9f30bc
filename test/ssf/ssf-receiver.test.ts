import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { createLocalJWKSet, exportJWK, generateKeyPair, SignJWT, type JWK, type JWTVerifyGetKey } from 'jose';
import {
  createImpersonationVerifier,
  ImpersonationTokenError,
  type ImpersonationVerifier,
} from '../../lib/resource-server/index.js';
import { SSF_SET_ERROR } from '../../lib/index.js';
import { ADAPTERS } from '../support/adapters.js';
import { ACCESS_TOKEN, exchange, subjectToken, userAccessToken, decodeJwt } from '../support/http.js';
import { adminToken, revokeSession } from '../support/impersonations.js';
import { API, type TestProvider } from '../support/provider.js';
import {
  POLL,
  RECEIVERS,
  receiverToken,
  SESSION_REVOKED,
  ssfRequest,
  startSsfProvider,
  STREAMS,
} from '../support/ssf.js';
import { scaled } from '../support/time.js';

async function refusal(verifier: ImpersonationVerifier, token: string): Promise<ImpersonationTokenError | undefined> {
  try {
    await verifier.verify(token);
    return undefined;
  } catch (error) {
    return error as ImpersonationTokenError;
  }
}

async function refusedWithin(verifier: ImpersonationVerifier, token: string, ms: number) {
  const deadline = Date.now() + scaled(ms);
  let error: ImpersonationTokenError | undefined;
  while (!error && Date.now() < deadline) {
    error = await refusal(verifier, token);
    if (!error) await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return error;
}

/** Verifies `token` until it is refused with `code`, or `ms` pass; resolves the last refusal. */
async function refusedAs(verifier: ImpersonationVerifier, token: string, code: string, ms: number) {
  const deadline = Date.now() + scaled(ms);
  let error = await refusal(verifier, token);
  while (error?.code !== code && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    error = await refusal(verifier, token);
  }
  return error;
}

/** A relay the test can cut, in front of the poll endpoint, as a network partition would. */
async function relayTo(target: string): Promise<{ url: string; cut: boolean; server: Server }> {
  const relay = { url: '', cut: false, server: createServer() };
  relay.server.on('request', (request: IncomingMessage, response) => {
    if (relay.cut) {
      response.destroy();
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      fetch(target, {
        method: 'POST',
        headers: {
          authorization: String(request.headers['authorization']),
          'content-type': 'application/json',
        },
        body: Buffer.concat(chunks),
      }).then(
        async (upstream) => {
          response.writeHead(upstream.status, { 'content-type': 'application/json' });
          response.end(await upstream.text());
        },
        () => response.destroy(),
      );
    });
  });
  await new Promise<void>((resolve) => relay.server.listen(0, '127.0.0.1', resolve));
  relay.url = `http://127.0.0.1:${(relay.server.address() as AddressInfo).port}/poll`;
  return relay;
}

/** The issuer's JWKS behind a relay the test can cut, as an outage of the keys' endpoint would. */
async function jwksRelay(target: string): Promise<{ url: string; cut: boolean; server: Server }> {
  const relay = { url: '', cut: false, server: createServer() };
  relay.server.on('request', (_request: IncomingMessage, response) => {
    if (relay.cut) {
      response.destroy();
      return;
    }
    fetch(target).then(
      async (upstream) => {
        response.writeHead(upstream.status, { 'content-type': 'application/json' });
        response.end(await upstream.text());
      },
      () => response.destroy(),
    );
  });
  await new Promise<void>((resolve) => relay.server.listen(0, '127.0.0.1', resolve));
  relay.url = `http://127.0.0.1:${(relay.server.address() as AddressInfo).port}/jwks`;
  return relay;
}

async function until(condition: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + scaled(ms);
  while (!condition() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  return condition();
}

for (const kind of ADAPTERS) {
  describe(`resource-server helper as an SSF receiver (poll), on the ${kind.name} store`, function () {
    this.timeout(30_000);
    let tp: TestProvider;
    let relay: Awaited<ReturnType<typeof relayTo>>;
    let verifier: ImpersonationVerifier;
    // A busy machine's first read may take longer than an idle one's whole staleness bound.
    const maxStaleness = scaled(1000);
    let alice: string;
    let endpoint: string;

    before(async () => {
      tp = await startSsfProvider(kind);
      alice = await userAccessToken(tp, 'alice');
      const created = await ssfRequest(tp, 'POST', STREAMS, await receiverToken(tp), {
        delivery: { method: POLL },
        events_requested: [SESSION_REVOKED],
      });
      endpoint = (created.body['delivery'] as { endpoint_url: string }).endpoint_url;
      relay = await relayTo(endpoint);
      verifier = createImpersonationVerifier({
        issuer: tp.issuer,
        audience: API,
        ssf: {
          endpoint: relay.url,
          accessToken: () => receiverToken(tp),
          audience: RECEIVERS.first.client_id,
          clockSkew: 0,
        },
        refreshInterval: 100,
        maxStaleness,
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
        actor_token: alice,
        actor_token_type: ACCESS_TOKEN,
      });
      return result.body['access_token'] as string;
    }

    it('refuses a token of a stopped session within one second, from the CAEP session-revoked SET', async () => {
      const token = await impersonation();
      expect((await verifier.verify(token)).subject).to.equal('bob');
      const session = decodeJwt(token)['impersonation_session'] as string;
      expect((await revokeSession(tp, await adminToken(tp), session)).status).to.equal(204);
      const error = await refusedWithin(verifier, token, 1000);
      expect(error?.code, 'refused within 1 s').to.equal('session_revoked');
      // The SET was acknowledged: the stream holds nothing more.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const again = await ssfRequest(tp, 'POST', new URL(endpoint).pathname, await receiverToken(tp), {
        returnImmediately: true,
      });
      expect(again.body).to.deep.equal({ sets: {}, moreAvailable: false });
    });

    it('fails closed when the stream cannot be polled beyond maxStaleness, and recovers', async () => {
      const token = await impersonation();
      relay.cut = true;
      try {
        await new Promise((resolve) => setTimeout(resolve, maxStaleness + 300));
        const error = await refusal(verifier, token);
        expect(error?.code).to.equal('revocations_unavailable');
        expect(error?.status).to.equal(503);
      } finally {
        relay.cut = false;
      }
      await new Promise((resolve) => setTimeout(resolve, scaled(500)));
      expect((await verifier.verify(token)).subject).to.equal('bob');
    });

    it('keeps a SET it cannot verify while the keys are unavailable, failing closed, and honours the stop once they are back', async () => {
      const keys = await jwksRelay(`${tp.issuer}/jwks`);
      const own = await ssfRequest(tp, 'POST', STREAMS, await receiverToken(tp, RECEIVERS.second), {
        delivery: { method: POLL },
        events_requested: [SESSION_REVOKED],
      });
      const reported: unknown[] = [];
      const onReport = (detail: unknown) => reported.push(detail);
      (tp.provider as unknown as NodeJS.EventEmitter).on(SSF_SET_ERROR, onReport);
      const keyless = createImpersonationVerifier({
        issuer: tp.issuer,
        audience: API,
        jwks: keys.url,
        ssf: {
          endpoint: (own.body['delivery'] as { endpoint_url: string }).endpoint_url,
          accessToken: () => receiverToken(tp, RECEIVERS.second),
          audience: RECEIVERS.second.client_id,
          clockSkew: 0,
        },
        refreshInterval: 100,
        maxStaleness,
      });
      try {
        await keyless.ready();
        const token = await impersonation();
        const session = decodeJwt(token)['impersonation_session'] as string;
        keys.cut = true;
        expect((await revokeSession(tp, await adminToken(tp), session)).status).to.equal(204);
        // It holds the SET, unverified: stale at once, whatever its last read.
        expect(await until(() => keyless.state.stale, 1500), 'stale while the SET is unverified').to.equal(true);
        expect(await refusal(keyless, token)).to.be.instanceOf(ImpersonationTokenError);
        await new Promise((resolve) => setTimeout(resolve, 300));
        expect(keyless.state.stale).to.equal(true);
        keys.cut = false;
        const error = await refusedAs(keyless, token, 'session_revoked', 1500);
        expect(error?.code, 'refused once the keys are back').to.equal('session_revoked');
        expect(await until(() => !keyless.state.stale, 1000)).to.equal(true);
        // Never reported as a SET it would not process: the transmitter would have forgotten it.
        expect(reported).to.deep.equal([]);
      } finally {
        keyless.close();
        (tp.provider as unknown as NodeJS.EventEmitter).off(SSF_SET_ERROR, onReport);
        keys.server.closeAllConnections();
        await new Promise((resolve) => keys.server.close(resolve));
      }
    });

    it('refuses impersonation tokens issued before it began polling: their revocation may be acknowledged already', async () => {
      const older = await impersonation();
      await new Promise((resolve) => setTimeout(resolve, 1100));
      const late = createImpersonationVerifier({
        issuer: tp.issuer,
        audience: API,
        ssf: {
          endpoint: relay.url,
          accessToken: () => receiverToken(tp, RECEIVERS.first),
          audience: RECEIVERS.first.client_id,
          clockSkew: 0,
        },
      });
      try {
        await late.ready();
        expect((await refusal(late, older))?.code).to.equal('invalid_token');
        expect((await late.verify(await impersonation())).subject).to.equal('bob');
      } finally {
        late.close();
      }
    });
  });
}

/**
 * A transmitter that is not this project: an RFC 8936 poll endpoint serving
 * SETs built with jose alone, and the JWKS of its key, as a third party (or
 * another identity service) would; it records what the receiver acknowledges
 * and reports.
 */
async function thirdPartyTransmitter() {
  const { privateKey, publicKey } = await generateKeyPair('ES256');
  const jwk: JWK = { ...(await exportJWK(publicKey)), kid: 'third-party', alg: 'ES256', use: 'sig' };
  // A key it signs with from `rotate()` on, published only by `publish()`.
  const next = await generateKeyPair('ES256');
  const nextJwk: JWK = { ...(await exportJWK(next.publicKey)), kid: 'third-party-next', alg: 'ES256', use: 'sig' };
  const published: JWK[] = [jwk];
  let signing = { key: privateKey, kid: 'third-party' };
  const state = {
    issuer: '',
    queue: new Map<string, string>(),
    acknowledged: [] as string[],
    errors: {} as Record<string, { err: string }>,
  };
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      if (request.headers['authorization'] !== 'Bearer third-party-token') {
        response.writeHead(401).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString() || '{}') as {
        ack?: string[];
        setErrs?: Record<string, { err: string }>;
      };
      for (const jti of body.ack ?? []) {
        state.acknowledged.push(jti);
        state.queue.delete(jti);
      }
      for (const [jti, error] of Object.entries(body.setErrs ?? {})) {
        state.errors[jti] = error;
        state.queue.delete(jti);
      }
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ sets: Object.fromEntries(state.queue), moreAvailable: false }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const sign = (claims: Record<string, unknown>, typ = 'secevent+jwt') =>
    new SignJWT(claims).setProtectedHeader({ alg: 'ES256', kid: signing.kid, typ }).sign(signing.key);
  return {
    state,
    server,
    keys: ((header, token) => createLocalJWKSet({ keys: published })(header, token)) as JWTVerifyGetKey,
    rotate() {
      signing = { key: next.privateKey, kid: 'third-party-next' };
    },
    publish() {
      published.push(nextJwk);
    },
    async queue(claims: Record<string, unknown>, typ?: string): Promise<string> {
      const jti = randomUUID();
      state.queue.set(jti, await sign({ iss: state.issuer, jti, iat: Math.floor(Date.now() / 1000), ...claims }, typ));
      return jti;
    },
    /** An impersonation access token as the identity service would issue it, for `session`. */
    accessToken: (session: string) =>
      new SignJWT({ impersonation_session: session, act: { sub: 'alice' }, scope: 'read' })
        .setProtectedHeader({ alg: 'ES256', kid: 'third-party', typ: 'at+jwt' })
        .setIssuer(state.issuer)
        .setAudience('https://api.example.com')
        .setSubject('bob')
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(privateKey),
  };
}

describe('resource-server helper fed by SETs another transmitter built with jose', function () {
  this.timeout(20_000);

  it('honours session-revoked with a complex or an opaque subject, ignores other events, and reports SETs it cannot trust', async () => {
    const transmitter = await thirdPartyTransmitter();
    const verifier = createImpersonationVerifier({
      issuer: transmitter.state.issuer,
      audience: 'https://api.example.com',
      jwks: transmitter.keys,
      ssf: {
        endpoint: `${transmitter.state.issuer}/poll`,
        accessToken: 'third-party-token',
        audience: 'resource-server',
        clockSkew: 0,
      },
      refreshInterval: 100,
      maxStaleness: 2000,
    });
    try {
      await verifier.ready();
      const [complex, opaque, untouched, wrongAudience, wrongType] = ['imp_a', 'imp_b', 'imp_c', 'imp_d', 'imp_e'];
      const tokens = Object.fromEntries(
        await Promise.all(
          [complex, opaque, untouched, wrongAudience, wrongType].map(
            async (session) => [session, await transmitter.accessToken(session)] as const,
          ),
        ),
      ) as Record<string, string>;
      for (const token of Object.values(tokens)) expect((await verifier.verify(token)).subject).to.equal('bob');

      const revoked = (sub_id: unknown, aud = 'resource-server') => ({
        aud,
        sub_id,
        events: { [SESSION_REVOKED]: { event_timestamp: Math.floor(Date.now() / 1000) } },
      });
      const accepted = [
        await transmitter.queue(
          revoked({
            format: 'complex',
            session: { format: 'opaque', id: complex },
            user: { format: 'iss_sub', iss: transmitter.state.issuer, sub: 'bob' },
          }),
        ),
        await transmitter.queue(revoked({ format: 'opaque', id: opaque })),
        // Another event, about another subject: acknowledged, and nothing refused for it.
        await transmitter.queue({
          aud: 'resource-server',
          sub_id: { format: 'opaque', id: untouched },
          events: { 'https://schemas.openid.net/secevent/caep/event-type/credential-change': {} },
        }),
      ];
      const refusedAudience = await transmitter.queue(revoked({ format: 'opaque', id: wrongAudience }, 'someone-else'));
      const refusedType = await transmitter.queue(revoked({ format: 'opaque', id: wrongType }), 'JWT');

      expect((await refusedWithin(verifier, tokens[complex]!, 1000))?.code).to.equal('session_revoked');
      expect((await refusedWithin(verifier, tokens[opaque]!, 1000))?.code).to.equal('session_revoked');
      await new Promise((resolve) => setTimeout(resolve, 300));
      for (const session of [untouched, wrongAudience, wrongType]) {
        expect((await verifier.verify(tokens[session]!)).sessionId).to.equal(session);
      }
      expect(transmitter.state.acknowledged).to.include.members(accepted);
      expect(transmitter.state.errors).to.deep.equal({
        [refusedAudience]: { err: 'invalid_audience', description: 'the SET could not be verified' },
        [refusedType]: { err: 'invalid_request', description: 'the SET could not be verified' },
      });
    } finally {
      verifier.close();
      transmitter.server.closeAllConnections();
      await new Promise((resolve) => transmitter.server.close(resolve));
    }
  });

  it('keeps a SET signed with a key not published yet, refusing impersonation tokens until it can verify it', async () => {
    const transmitter = await thirdPartyTransmitter();
    const verifier = createImpersonationVerifier({
      issuer: transmitter.state.issuer,
      audience: 'https://api.example.com',
      jwks: transmitter.keys,
      ssf: {
        endpoint: `${transmitter.state.issuer}/poll`,
        accessToken: 'third-party-token',
        audience: 'resource-server',
        clockSkew: 0,
      },
      refreshInterval: 100,
      maxStaleness: 5000,
    });
    try {
      await verifier.ready();
      const [stopped, other] = await Promise.all(['imp_f', 'imp_g'].map((id) => transmitter.accessToken(id)));
      transmitter.rotate();
      const jti = await transmitter.queue({
        aud: 'resource-server',
        sub_id: { format: 'opaque', id: 'imp_f' },
        events: { [SESSION_REVOKED]: { event_timestamp: Math.floor(Date.now() / 1000) } },
      });
      // The access tokens' key is known: they are refused for the revocation the helper cannot read yet.
      expect(await until(() => verifier.state.stale, 1000)).to.equal(true);
      for (const token of [stopped!, other!]) {
        expect((await refusal(verifier, token))?.code).to.equal('revocations_unavailable');
      }
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(transmitter.state.errors).to.deep.equal({});
      expect(transmitter.state.acknowledged).to.not.include(jti);
      expect(transmitter.state.queue.has(jti)).to.equal(true);

      transmitter.publish();
      expect((await refusedAs(verifier, stopped!, 'session_revoked', 1000))?.code).to.equal('session_revoked');
      expect((await verifier.verify(other!)).sessionId).to.equal('imp_g');
      expect(verifier.state.stale).to.equal(false);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(transmitter.state.acknowledged).to.include(jti);
      expect(transmitter.state.errors).to.deep.equal({});
    } finally {
      verifier.close();
      transmitter.server.closeAllConnections();
      await new Promise((resolve) => transmitter.server.close(resolve));
    }
  });
});
