import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import pg from 'pg';
import { contextClaims, deploymentSetup } from '../../bench/deployment.js';
import {
  memoryStore,
  MINIMAL_GRANT,
  MINIMAL_READS_GRANT,
  MINIMAL_SEED_PATH,
  minimalConfiguration,
  minimalSeedRoute,
  postgresStore,
  redisStore,
  registerMinimalGrant,
  type MinimalStore,
} from '../../bench/minimal-grant.js';
import { isCustomer } from '../../bench/requests.js';
import { ACCESS_TOKEN, API, CLIENTS, FIXTURE_CLIENTS, resourceServerInfo } from '../../fixtures/provider.js';
import { exchange, subjectToken, tokenRequest, userAccessToken } from '../../fixtures/flows.js';
import { REDIS_URL, redisReachable, testPrefix } from '../support/adapter.js';
import { suiteAdapterKind } from '../support/adapters.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { startProvider, USERS, type TestProvider } from '../support/provider.js';

/** The minimal grant's store on the suite's store kind, with a connection of its own. */
async function openStore(id: string): Promise<{ store: MinimalStore; close(): Promise<void> }> {
  if (id === 'redis') {
    await redisReachable();
    const redis = new Redis(REDIS_URL, { keyPrefix: testPrefix() });
    return { store: redisStore(redis), close: async () => void (await redis.quit()) };
  }
  if (id === 'postgres') {
    const pool = new pg.Pool({ connectionString: DATABASE_URL });
    return { store: await postgresStore(pool, await testSchema()), close: () => pool.end() };
  }
  return { store: memoryStore(), close: async () => {} };
}

/**
 * The bench's minimal grant (bench/minimal-grant.ts) is each store's bound
 * for the exchange: it must answer as RFC 8693 says with a token the size of
 * the exchange's, and take each subject token once, atomically, or the rate
 * compared with it would be that of other work.
 */
describe(`bench: the minimal grant on ${suiteAdapterKind().name}`, () => {
  let tp: TestProvider;
  let minimal: Awaited<ReturnType<typeof openStore>>;
  let actorToken: string;
  const deployment = deploymentSetup();
  const findAccount = (_ctx: unknown, sub: string) =>
    USERS.includes(sub) || isCustomer(sub) ? { accountId: sub, claims: () => ({ sub }) } : undefined;

  before(async () => {
    minimal = await openStore(suiteAdapterKind().id);
    // As bench/server.ts sets up a deployment's provider.
    tp = await startProvider({
      plugin: deployment.plugin,
      configuration: { findAccount, ...minimalConfiguration(FIXTURE_CLIENTS, CLIENTS.console.client_id) },
      mount: (provider, install) => {
        install();
        provider.use(minimalSeedRoute(minimal.store));
      },
    });
    tp.server.on('request', tp.provider.callback());
    registerMinimalGrant(tp.provider, {
      store: minimal.store,
      findAccount,
      getResourceServerInfo: resourceServerInfo,
      claims: contextClaims,
      audit: deployment.write,
    });
    actorToken = await userAccessToken(tp, 'alice');
  });

  after(async () => {
    await tp.close();
    await minimal.close();
    await deployment.close();
  });

  const context = { ticketId: 'T-1', reason: 'checkout fails' };
  async function seeded(): Promise<string> {
    const response = await fetch(`${tp.base}${MINIMAL_SEED_PATH}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ userId: 'customer-7', actorId: 'alice', clientId: CLIENTS.console.client_id, context }),
    });
    expect(response.status).to.equal(201);
    return ((await response.json()) as { subjectToken: string }).subjectToken;
  }
  const params = (subject: string, actor = actorToken, scope = 'profile:read') => ({
    subject_token: subject,
    subject_token_type: ACCESS_TOKEN,
    actor_token: actor,
    actor_token_type: ACCESS_TOKEN,
    resource: API,
    scope,
  });
  const minimalExchange = (subject: string, actor?: string, scope?: string) =>
    tokenRequest(tp, { grant_type: MINIMAL_GRANT, ...params(subject, actor, scope) });

  it("answers as RFC 8693 section 2.2.1 says with the exchange's claims, keeps one session, takes its subject token once", async () => {
    const exchanged = await exchange(tp, params(await subjectToken(tp, { userId: 'customer-7', context })));
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    const subject = await seeded();
    const answer = await minimalExchange(subject);
    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
    expect(answer.headers.get('cache-control')).to.equal('no-store');
    expect(answer.body).to.include({ issued_token_type: ACCESS_TOKEN, token_type: 'Bearer', scope: 'profile:read' });
    expect(answer.body['expires_in']).to.be.a('number');

    const [ours, its] = [answer, exchanged].map((reply) => reply.body['access_token'] as string);
    expect(decodeProtectedHeader(ours!)).to.deep.equal(decodeProtectedHeader(its!));
    const [mine, theirs] = [decodeJwt(ours!), decodeJwt(its!)];
    expect(Object.keys(mine).sort()).to.deep.equal(Object.keys(theirs).sort());
    for (const name of ['sub', 'aud', 'scope', 'client_id', 'act', 'impersonation_context', 'iss']) {
      expect(mine[name], name).to.deep.equal(theirs[name]);
    }

    // Its one session record, in the store.
    const session = await minimal.store.session(mine['impersonation_session'] as string);
    expect(session).to.deep.include({
      id: mine['impersonation_session'],
      subject: 'customer-7',
      actor: 'alice',
      client: CLIENTS.console.client_id,
      resource: API,
      scope: 'profile:read',
    });
    expect(session!.expiresAt).to.be.closeTo(mine.exp!, 1);

    const again = await minimalExchange(subject);
    expect([again.status, again.body['error']]).to.deep.equal([400, 'invalid_grant']);
  });

  it('burns nothing when it refuses: another actor, an unknown actor token, a scope the resource lacks', async () => {
    const subject = await seeded();
    const refusals = [
      await minimalExchange(subject, await userAccessToken(tp, 'bob')),
      await minimalExchange(subject, 'not-a-token'),
      await minimalExchange(subject, actorToken, 'profile:delete'),
    ];
    expect(refusals.map((reply) => [reply.status, reply.body['error']])).to.deep.equal([
      [400, 'invalid_grant'],
      [400, 'invalid_grant'],
      [400, 'invalid_scope'],
    ]);
    const answer = await minimalExchange(subject);

    expect(answer.status, JSON.stringify(answer.body)).to.equal(200);
  });

  it("with the guarantees' reads: reads the subject token without taking it, refuses an actor token whose Grant is gone, burning nothing", async () => {
    const withReads = (subject: string, actor = actorToken) =>
      tokenRequest(tp, { grant_type: MINIMAL_READS_GRANT, ...params(subject, actor) });
    const read = await seeded();
    const found = await minimal.store.peek(createHash('sha256').update(read).digest('base64url'));
    expect(found).to.deep.include({ subject: 'customer-7', actor: 'alice', client: CLIENTS.console.client_id });
    const answered = await withReads(read);
    expect(answered.status, JSON.stringify(answered.body)).to.equal(200);
    expect(decodeJwt(answered.body['access_token'] as string)).to.include({ sub: 'customer-7' });

    // Another sign-in of alice's, whose Grant goes while its access token stays in the store.
    const orphaned = await userAccessToken(tp, 'alice');
    const { grantId } = (await tp.provider.AccessToken.find(orphaned))!;
    await tp.provider.Grant.adapter.destroy(grantId!);
    const subject = await seeded();
    const refused = await withReads(subject, orphaned);
    expect([refused.status, refused.body['error']]).to.deep.equal([400, 'invalid_grant']);
    // The plain grant reads neither: the same subject token, not burned, is taken with the same actor token.
    const taken = await minimalExchange(subject, orphaned);
    expect(taken.status, JSON.stringify(taken.body)).to.equal(200);
  });
});
