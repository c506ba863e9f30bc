import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { createServer } from 'node:net';
import { expect } from 'chai';
import { generateKeyPair, SignJWT, type JSONWebKeySet } from 'jose';
import {
  createImpersonationVerifier,
  type ImpersonationTokenError,
  type ImpersonationVerifier,
  type SsfPushOptions,
} from '../../lib/resource-server/index.js';
import { suiteAdapterKind } from '../support/adapters.js';
import { userAccessToken } from '../support/http.js';
import { adminToken, impersonate, revokeSession } from '../support/impersonations.js';
import { API, type TestProvider } from '../support/provider.js';
import { pushEndpoint } from '../support/push-endpoint.js';
import { RECEIVERS, receiverToken, ssfRequest, startSsfProvider, STREAMS, VERIFICATION } from '../support/ssf.js';

const CREDENTIAL = 'Bearer push-credential-of-the-resource-server';

async function refusal(verifier: ImpersonationVerifier, token: string): Promise<ImpersonationTokenError | undefined> {
  try {
    await verifier.verify(token);
    return undefined;
  } catch (error) {
    return error as ImpersonationTokenError;
  }
}

/** Verifies `token` until it is refused with `code`, or `ms` pass; resolves the last refusal. */
async function refusedAs(verifier: ImpersonationVerifier, token: string, code: string, ms: number) {
  const deadline = Date.now() + ms;
  let error = await refusal(verifier, token);
  while (error?.code !== code && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 20));
    error = await refusal(verifier, token);
  }
  return error;
}

function pushOptions(tp: TestProvider, endpointUrl: string, more: Partial<SsfPushOptions> = {}): SsfPushOptions {
  return {
    delivery: 'push',
    endpointUrl,
    configurationEndpoint: `${tp.base}${STREAMS}`,
    verificationEndpoint: `${tp.base}/ssf/verify`,
    accessToken: () => receiverToken(tp),
    audience: RECEIVERS.first.client_id,
    authorization: CREDENTIAL,
    ...more,
  };
}

async function closeServer(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}

describe('resource-server helper: the options it is given', () => {
  const keyless = {
    issuer: 'https://id.example.com',
    audience: API,
    jwks: async () => {
      throw new Error('no keys');
    },
  };
  const push = {
    delivery: 'push',
    endpointUrl: 'https://api.example.com/caep',
    configurationEndpoint: 'http://127.0.0.1:9/ssf/streams',
    verificationEndpoint: 'http://127.0.0.1:9/ssf/verify',
    accessToken: 'x',
    audience: 'api-gateway',
    authorization: CREDENTIAL,
  } as const;
  const create = (options: object) => () => createImpersonationVerifier({ ...keyless, ...options } as never);

  it('refuses an option it does not know, naming the nearest one it knows', () => {
    expect(create({ revocationsUri: 'http://127.0.0.1:9/feed', refreshIntervall: 100 })).to.throw(
      TypeError,
      'createImpersonationVerifier: option "refreshIntervall" is unknown; did you mean "refreshInterval"?',
    );
    const poll = { endpoint: 'http://127.0.0.1:9/ssf/poll/x', accessToken: 'x', audience: 'api-gateway' };
    expect(create({ ssf: { ...poll, clockskew: 0 } })).to.throw(
      TypeError,
      'option "ssf.clockskew" is unknown; did you mean "ssf.clockSkew"?',
    );
    expect(create({ ssf: { ...push, streamId: 'x' } })).to.throw(TypeError, 'option "ssf.streamId" is unknown');
  });

  it('refuses a polled stream over plain http, but on a loopback host', () => {
    const poll = { accessToken: 'x', audience: 'api-gateway' };
    expect(create({ ssf: { ...poll, endpoint: 'http://id.example.com/ssf/poll/x' } })).to.throw(
      TypeError,
      'option "ssf.endpoint" must be an https URL (http only on a loopback host)',
    );
    for (const endpoint of ['https://id.example.com/ssf/poll/x', 'http://127.0.0.1:9/ssf/poll/x', () => 'x']) {
      create({ ssf: { ...poll, endpoint } })().close();
    }
  });

  it('refuses a pushed stream without the Authorization header its pushes carry, and a maxStaleness it cannot meet', () => {
    const { authorization: _none, ...anonymous } = push;
    expect(create({ ssf: anonymous })).to.throw(
      TypeError,
      'option "ssf.authorization" must be the Authorization header',
    );
    expect(create({ ssf: push, refreshInterval: 2000, maxStaleness: 2000 })).to.throw(
      TypeError,
      'option "maxStaleness" must be more than "refreshInterval"',
    );
  });
});

const kind = suiteAdapterKind();

describe(`resource-server helper as a push receiver, on the ${kind.name} store`, function () {
  this.timeout(40_000);
  let tp: TestProvider;
  let alice: string;
  let endpoint: Awaited<ReturnType<typeof pushEndpoint>>;
  let verifier: ImpersonationVerifier | undefined;

  const impersonation = async () => (await impersonate(tp, { actorToken: alice })).token;
  /** A start of the resource server: the process before it stopped without a word. */
  async function start(): Promise<void> {
    verifier?.close();
    verifier = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: API,
      ssf: pushOptions(tp, endpoint.url, { clockSkew: 0 }),
      refreshInterval: 1100,
      maxStaleness: 3000,
    });
    await verifier.ready();
  }

  before(async () => {
    tp = await startSsfProvider(kind, { minVerificationInterval: 1, maxStreams: 3, maxStreamsPerReceiver: 2 });
    alice = await userAccessToken(tp, 'alice');
    endpoint = await pushEndpoint(() => verifier);
    await start();
  });
  after(async () => {
    verifier?.close();
    await closeServer(endpoint.server);
    await tp.close();
  });

  it('replaces its stream at each start: restarted more often than the receiver may have streams, it works', async () => {
    for (let restart = 0; restart < 3; restart += 1) await start();
    const listed = await ssfRequest(tp, 'GET', STREAMS, await receiverToken(tp));
    expect((listed.body as unknown as unknown[]).length).to.equal(1);
    const { token, session } = await impersonate(tp, { actorToken: alice });
    expect((await verifier!.verify(token)).subject).to.equal('bob');
    expect((await revokeSession(tp, await adminToken(tp), session)).status).to.equal(204);
    expect((await refusedAs(verifier!, token, 'session_revoked', 1000))?.code).to.equal('session_revoked');
  });

  it('holds nothing that a stranger posts to the push route: SETs signed by keys the issuer does not publish', async () => {
    const jwks = (await (await fetch(`${tp.base}/jwks`)).json()) as JSONWebKeySet;
    const issuerKid = jwks.keys[0]!.kid!;
    const claims = {
      iss: tp.issuer,
      aud: RECEIVERS.first.client_id,
      iat: Math.floor(Date.now() / 1000),
      events: { [VERIFICATION]: {} },
    };
    const forged: string[] = [];
    for (const [alg, kid] of [
      ['ES256', 'not-published'],
      ['ES256', issuerKid],
      ['PS256', issuerKid],
    ] as const) {
      const { privateKey } = await generateKeyPair(alg);
      forged.push(
        await new SignJWT({ ...claims, jti: randomUUID() })
          .setProtectedHeader({ alg, kid, typ: 'secevent+jwt' })
          .sign(privateKey),
      );
    }
    for (const body of forged) {
      for (const headers of [{}, { authorization: 'Bearer guessed' }] as Array<Record<string, string>>) {
        const answer = await fetch(endpoint.url, { method: 'POST', headers, body });
        expect(answer.status).to.equal(401);
      }
    }
    expect(verifier!.state).to.include({ stale: false, failures: 0 });
    expect(await refusal(verifier!, await impersonation())).to.equal(undefined);
  });

  it("awaits a SET carrying the stream's credential that no published key verifies for maxStaleness, then refuses tokens issued before", async () => {
    const before = await impersonation();
    expect(await refusal(verifier!, before)).to.equal(undefined);
    const { privateKey } = await generateKeyPair('ES256');
    const unverifiable = await new SignJWT({ iss: tp.issuer, aud: RECEIVERS.first.client_id, jti: randomUUID() })
      .setProtectedHeader({ alg: 'ES256', kid: 'rotated-in-later', typ: 'secevent+jwt' })
      .sign(privateKey);
    const answer = await fetch(endpoint.url, {
      method: 'POST',
      headers: { authorization: CREDENTIAL },
      body: unverifiable,
    });
    expect(answer.status).to.equal(503);
    expect((await refusal(verifier!, before))?.code).to.equal('revocations_unavailable');
    const awaitedAt = Date.now();
    // It may have been given up on: what it revoked is unknown, as after a gap.
    const predates = await refusedAs(verifier!, before, 'invalid_token', 3000 + 2000);
    expect(predates?.message).to.match(/predates the revocations/);
    expect(Date.now() - awaitedAt).to.be.below(3000 + 2000);
    expect(verifier!.state.stale).to.equal(false);
    expect(await refusal(verifier!, await impersonation())).to.equal(undefined);
  });

  it('never refuses as "predates" a token issued once ready() resolved', async () => {
    const own = await pushEndpoint(() => fresh);
    const skew = 2;
    const fresh = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: API,
      ssf: pushOptions(tp, own.url, { clockSkew: skew }),
      refreshInterval: 1100,
      maxStaleness: 3000,
    });
    try {
      const started = Date.now();
      await fresh.ready();
      expect(Date.now() - started).to.be.below((2 * skew + 2) * 1000);
      expect(await refusal(fresh, await impersonation())).to.equal(undefined);
    } finally {
      fresh.close();
      await closeServer(own.server);
    }
  });
});

/** The code block of docs/resource-server.md after `<!-- example: NAME -->`, as a reader copies it. */
function docsExample(name: string): string {
  const page = readFileSync(new URL('../../../docs/resource-server.md', import.meta.url), 'utf8');
  const block = new RegExp(`<!-- example: ${name} -->\\n\`\`\`js\\n([\\s\\S]*?)\`\`\``).exec(page);
  if (!block) throw new Error(`docs/resource-server.md has no example ${name}`);
  return block[1]!;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

describe(`the push receiver of docs/resource-server.md against the transmitter's defaults, on the ${kind.name} store`, function () {
  this.timeout(40_000);
  let tp: TestProvider;
  let alice: string;

  before(async () => {
    tp = await startSsfProvider(kind);
    alice = await userAccessToken(tp, 'alice');
  });
  after(() => tp.close());

  it('runs as written: fresh past its first seconds, it refuses a stopped session within one second', async () => {
    const port = await freePort();
    let code = docsExample('push-receiver');
    for (const [from, to] of [
      ["'oidc-provider-impersonation/resource-server'", "'../../lib/resource-server/index.js'"],
      ['https://api.example.com/caep', `http://127.0.0.1:${port}/caep`],
      ["'https://api.example.com'", JSON.stringify(API)],
      ['https://id.example.com', tp.base],
      ["'api-gateway'", JSON.stringify(RECEIVERS.first.client_id)],
      ['app.listen(8080);', `export const server = app.listen(${port});`],
    ]) {
      expect(code, from!).to.include(from);
      code = code.replaceAll(from!, to!);
    }
    process.env['SSF_RECEIVER_TOKEN'] = await receiverToken(tp);
    process.env['SSF_PUSH_AUTHORIZATION'] = CREDENTIAL;
    const file = new URL('./docs-push-receiver.mjs', import.meta.url);
    writeFileSync(file, `${code}\nexport { verifier };\n`);
    const example = (await import(file.href)) as { verifier: ImpersonationVerifier; server: Server };
    try {
      const { token, session } = await impersonate(tp, { actorToken: alice });
      expect((await example.verifier.verify(token)).subject).to.equal('bob');
      // The former example (refreshInterval 2000, maxStaleness 6000) was stale from about 6 s on.
      await new Promise((resolve) => setTimeout(resolve, 7000));
      expect(example.verifier.state).to.include({ stale: false, failures: 0 });
      expect((await example.verifier.verify(token)).subject).to.equal('bob');
      expect((await revokeSession(tp, await adminToken(tp), session)).status).to.equal(204);
      expect((await refusedAs(example.verifier, token, 'session_revoked', 1000))?.code).to.equal('session_revoked');
    } finally {
      example.verifier.close();
      await closeServer(example.server);
      delete process.env['SSF_RECEIVER_TOKEN'];
      delete process.env['SSF_PUSH_AUTHORIZATION'];
    }
  });

  it("says why the transmitter refused its stream: a push URL on the private network, outside the transmitter's pushAllowList", async () => {
    const inside = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: API,
      ssf: pushOptions(tp, 'https://10.0.0.5/caep'),
    });
    try {
      const error = await inside.ready().then(
        () => undefined,
        (failure: Error) => failure,
      );
      expect(error?.message).to.match(/^the SSF transmitter answered 400 to POST \/ssf\/streams: .*internal/);
      expect(error?.message).to.not.include(CREDENTIAL);
    } finally {
      inside.close();
    }
  });

  it("refuses at its first read a refreshInterval shorter than the stream's min_verification_interval, naming what to change", async () => {
    const endpoint = await pushEndpoint(() => undefined);
    const eager = createImpersonationVerifier({
      issuer: tp.issuer,
      audience: API,
      ssf: pushOptions(tp, endpoint.url),
      refreshInterval: 2000,
      maxStaleness: 6000,
    });
    try {
      const error = await eager.ready().then(
        () => undefined,
        (failure: Error) => failure,
      );
      expect(error?.message).to.match(/min_verification_interval/);
      expect(error?.message).to.include('"refreshInterval" to at least 30000');
      expect(error?.message).to.include('"ssf.minVerificationInterval"');
    } finally {
      eager.close();
      await closeServer(endpoint.server);
    }
  });
});
