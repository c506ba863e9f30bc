import { mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { portOf } from '../../demo/http.js';
import { generateDemoKeys, sharedDemoKeys, type DemoKeys } from '../../demo/keys.js';
import { assertRedisReachable, closeTestAdapters, redisTestAdapter, testPrefix } from '../support/adapter.js';
import {
  ACCESS_TOKEN_TYPE,
  basic,
  callResourceApi,
  managementToken,
  quiet,
  REQUEST_TIMEOUT,
  signIn,
  TOKEN_EXCHANGE,
} from './helpers.js';
import { scaled } from '../support/time.js';

describe('demo: the key file that instances sharing a store share', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'demo-keys-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('is made on first start (readable by its owner only), then read; instances starting together agree', async () => {
    const file = path.join(dir, 'keys.json');
    const [first, second] = await Promise.all([sharedDemoKeys(file, {}), sharedDemoKeys(file, {})]);
    expect(first.keys).to.deep.equal(second.keys);
    expect([first.source, second.source].filter((source) => source.endsWith('(created)'))).to.have.length(1);
    expect((await stat(file)).mode & 0o777).to.equal(0o600);
    expect((await sharedDemoKeys(file, {})).keys).to.deep.equal(first.keys);
  });

  it('comes from DEMO_KEYS when set, and a damaged one stops the start with a message', async () => {
    const keys = generateDemoKeys();
    expect(
      (await sharedDemoKeys(path.join(dir, 'unused.json'), { DEMO_KEYS: JSON.stringify(keys) })).keys,
    ).to.deep.equal(keys);
    let caught: Error | undefined;
    try {
      await sharedDemoKeys(path.join(dir, 'unused.json'), { DEMO_KEYS: '{"jwks":{"keys":[]}}' });
    } catch (error) {
      caught = error as Error;
    }
    expect(caught?.message).to.match(/^DEMO_KEYS must be/);
    const damaged = path.join(dir, 'damaged.json');
    await writeFile(damaged, 'not json\n');
    caught = undefined;
    try {
      await sharedDemoKeys(damaged, {});
    } catch (error) {
      caught = error as Error;
    }
    expect(caught?.message).to.equal(`${damaged} is not JSON: delete it to have new keys made, or fix it`);
  });
});

describe('demo: two instances on Redis', function () {
  this.timeout(30_000);
  let dir: string;
  const demos: Demo[] = [];

  before(async () => {
    await assertRedisReachable();
    dir = await mkdtemp(path.join(tmpdir(), 'demo-instances-'));
  });
  after(async () => {
    await Promise.all(demos.map((demo) => demo.close()));
    await closeTestAdapters();
    await rm(dir, { recursive: true, force: true });
  });

  /** Two instances behind one address (the first's), sharing a Redis prefix; the second's keys as given. */
  async function pair(keysOfSecond: (shared: DemoKeys) => DemoKeys): Promise<[Demo, Demo]> {
    const keyPrefix = testPrefix();
    const file = path.join(dir, `${keyPrefix.replace(/[^a-z0-9]/gi, '_')}.json`);
    const first = await startDemo({
      identityPort: 0,
      backendPort: 0,
      log: quiet,
      adapter: redisTestAdapter({ keyPrefix }),
      keys: (await sharedDemoKeys(file, {})).keys,
    });
    demos.push(first);
    const second = await startDemo({
      identityPort: 0,
      backendPort: 0,
      log: quiet,
      adapter: redisTestAdapter({ keyPrefix }),
      keys: keysOfSecond((await sharedDemoKeys(file, {})).keys),
      identityPublicUrl: first.identity.baseUrl,
    });
    demos.push(second);
    return [first, second];
  }

  /** Creates a subject token and exchanges it at the second instance's own server, as a balancer would send it there. */
  async function impersonateAt(first: Demo, second: Demo): Promise<string> {
    const alice = await signIn(first, { login: 'alice', password: 'alice-password' });
    const direct = `http://localhost:${portOf(second.identity.server)}`;
    const m2m = await fetch(`${direct}/oidc/token`, {
      method: 'POST',
      headers: { authorization: basic('impersonation-backend', 'impersonation-backend-secret') },
      body: new URLSearchParams({
        grant_type: 'client_credentials',
        resource: second.identity.managementResource,
        scope: 'subject-tokens:create',
      }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const { access_token: backendToken } = (await m2m.json()) as { access_token: string };
    const created = await fetch(`${direct}/api/subject-tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${backendToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        userId: 'dave',
        actorId: 'alice',
        clientId: 'support-console',
        context: { ticketId: 'T-1234', reason: 'Cannot see the invoices' },
      }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const { subjectToken } = (await created.json()) as { subjectToken: string };
    expect(created.status).to.equal(201);
    const exchanged = await fetch(`${direct}/oidc/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: TOKEN_EXCHANGE,
        client_id: 'support-console',
        scope: 'profile:read',
        resource: 'https://api.example.com',
        subject_token: subjectToken,
        subject_token_type: ACCESS_TOKEN_TYPE,
        actor_token: alice,
        actor_token_type: ACCESS_TOKEN_TYPE,
      }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const body = (await exchanged.json()) as { access_token: string };
    expect(exchanged.status, JSON.stringify(body)).to.equal(200);
    return body.access_token;
  }

  it("share the signing keys: a token one issued is honoured by the other's resource API, and a stop at one is honoured by both", async () => {
    const [first, second] = await pair((shared) => shared);
    const token = await impersonateAt(first, second);
    expect((await callResourceApi(first, token)).body).to.include({ subject: 'dave', actor: 'alice' });
    expect((await callResourceApi(second, token)).status).to.equal(200);

    const session = decodeJwt(token)['impersonation_session'] as string;
    const revoked = await fetch(`http://localhost:${portOf(second.identity.server)}/api/impersonations/${session}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${await managementToken(first, 'impersonations:revoke')}` },
    });
    expect(revoked.status).to.equal(204);
    const started = Date.now();
    let status = 200;
    while (status === 200 && Date.now() - started < scaled(1500)) {
      status = (await callResourceApi(first, token)).status;
      if (status === 200) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(status).to.equal(401);
  });

  it("without shared keys, the other's resource API refuses the token (which is why they share them)", async () => {
    const [first, second] = await pair(() => generateDemoKeys());
    const token = await impersonateAt(first, second);
    expect((await callResourceApi(first, token)).status).to.equal(401);
  });
});
