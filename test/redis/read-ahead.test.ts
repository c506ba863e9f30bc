import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { ReadAheadAdapter } from '../../lib/adapters/contracts/read-ahead.js';
import type { RedisAdapterClass } from '../../lib/adapters/redis.js';
import { assertRedisReachable, redisClient, redisTestAdapter, testPrefix } from '../support/adapter.js';
import { logout, subjectToken, userAccessToken, userSignIn } from '../support/http.js';
import { exchangeAsActor } from '../support/impersonations.js';
import { findEachTwice, readAheadAndFind, signedIn } from '../support/read-ahead.js';
import { startProvider, type TestProvider } from '../support/provider.js';
import { monitorRedis } from '../support/redis-monitor.js';

/**
 * Honouring an opaque actor token reads the token, then its sign-in's Session
 * and its Grant. On one Redis server the adapter reads the three in one
 * script (the plugin calls its adapter's readAhead first) and hands each to
 * the next find of it in that turn of the event loop. The commands are read
 * as Redis runs them (MONITOR).
 */
describe('Redis adapter: an opaque actor token, its session and its Grant in one script', function () {
  this.timeout(60_000);
  let client: Redis;
  let prefix = '';
  let Adapter: RedisAdapterClass;
  let tp: TestProvider | undefined;
  let monitor: Awaited<ReturnType<typeof monitorRedis>> | undefined;
  const lines: string[] = [];
  let markers = 0;

  before(async () => {
    await assertRedisReachable();
    client = redisClient();
    await client.connect();
  });
  after(() => client?.disconnect());
  beforeEach(async () => {
    prefix = testPrefix();
    Adapter = redisTestAdapter({ keyPrefix: prefix });
    lines.length = 0;
    // What clients send; MONITOR also relays what scripts run, as `[0 lua]`.
    monitor = await monitorRedis((line) => {
      if (line.includes(prefix) && !line.includes(' lua] ')) lines.push(line);
    });
    // The script loaded, so that each call is one EVALSHA.
    await (new Adapter('AccessToken') as ReadAheadAdapter).readAhead!('none');
    await ran();
  });
  afterEach(async () => {
    monitor?.stop();
    await tp?.close();
    tp = undefined;
  });

  /** The commands Redis ran on this test's keys since the last call, as `command key`, once it has run all sent. */
  async function ran(): Promise<string[]> {
    const marker = `${prefix}marker-${(markers += 1)}`;
    const relayed = monitor!.seen(marker);
    await client.echo(marker);
    await relayed;
    return lines
      .splice(0)
      .map((line) => /\] "(\w+)" (?:"[0-9a-f]{40}" "1" )?"([^"]*)"/.exec(line))
      .filter((match) => match !== null && match[1]!.toLowerCase() !== 'echo')
      .map((match) => `${match![1]!.toLowerCase()} ${match![2]!.slice(prefix.length).replace(/\{.*\}/, '{}')}`);
  }

  it('reads them in the script that finds the token, and reads the Grant and sign-in again once, after its announcement', async () => {
    tp = await startProvider({ adapter: Adapter });
    const alice = await userAccessToken(tp, 'alice');
    const subject = await subjectToken(tp);
    await ran();
    const result = await exchangeAsActor(tp, { subjectToken: subject, actorToken: alice });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    const commands = await ran();
    expect(commands.filter((command) => command.includes('AccessToken:'))).to.deep.equal(['evalsha AccessToken:{}']);
    // Invariant 23: the Grant read again after the announcement, and only then.
    expect(commands.filter((command) => command.startsWith('hmget Grant:'))).to.have.length(1);
  });

  it('refuses the token once its session has ended, read in the same script', async () => {
    tp = await startProvider({ adapter: Adapter });
    const { accessToken: alice, cookies } = await userSignIn(tp, 'alice');
    await logout(tp, cookies);
    const result = await exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: alice });
    expect(result.status, JSON.stringify(result.body)).to.equal(400);
  });

  /** Access token `at1`, its sign-in `u1` (Session `s1`) and its Grant `g1`, stored. */
  async function seeded() {
    const token = { kind: 'AccessToken', sessionUid: 'u1', expiresWithSession: true, grantId: 'g1' };
    const adapters = await signedIn(Adapter, token);
    await ran();
    return adapters;
  }

  it('answers the next find of each from what it read ahead, once and within the turn; any other find reads afresh', async () => {
    const adapters = await seeded();
    const { tokens, grants } = adapters;
    await readAheadAndFind(adapters);
    expect(await ran()).to.deep.equal(['evalsha AccessToken:{}']);
    // Taken once: a second find reads afresh.
    expect(await grants.find('g1')).to.include({ accountId: 'alice' });
    expect(await ran()).to.deep.equal(['hmget Grant:{}']);

    // Not taken within its turn: dropped, and a find reads what changed since.
    await tokens.readAhead!('at1');
    await new Promise((resolve) => setImmediate(resolve));
    await grants.destroy('g1');
    await ran();
    expect(await grants.find('g1')).to.equal(undefined);
    expect(await ran()).to.deep.equal(['hmget Grant:{}']);
  });

  it('answers the finds of each readAhead: two exchanges reading one token read nothing again', async () => {
    const { tokens, sessions, grants } = await seeded();
    await Promise.all([tokens.readAhead!('at1'), tokens.readAhead!('at1')]);
    await findEachTwice({ tokens, sessions, grants });
    expect(await ran()).to.deep.equal(['evalsha AccessToken:{}', 'evalsha AccessToken:{}']);
  });

  it('leaves nothing of a read that a write of a token, sign-in or Grant was sent during: the finds see the write', async () => {
    const { tokens, grants } = await seeded();
    const reading = tokens.readAhead!('at1');
    const destroying = grants.destroy('g1');
    await reading;
    // In the turn the read was answered in: had it left the Grant, this would take it.
    expect(await grants.find('g1')).to.equal(undefined);
    await destroying;
    expect(await ran()).to.deep.equal(['evalsha AccessToken:{}', 'del Grant:{}', 'hmget Grant:{}']);
  });

  it("keeps a read across a write of the plugin's own records sent meanwhile: it changes no token, sign-in or Grant", async () => {
    const { tokens, sessions, grants } = await seeded();
    const reading = tokens.readAhead!('at1');
    const writing = new Adapter('SubjectToken').upsert('st1', { kind: 'SubjectToken' } as never, 600);
    await reading;
    const found = [await tokens.find('at1'), await sessions.findByUid('u1'), await grants.find('g1')];
    expect(found.every((payload) => payload !== undefined)).to.equal(true);
    await writing;
    expect((await ran()).filter((command) => !command.includes('SubjectToken'))).to.deep.equal([
      'evalsha AccessToken:{}',
    ]);
  });

  it('leaves nothing of a read once told that another store wrote (an announcement elsewhere, Invariant 23)', async () => {
    const { tokens, grants } = await seeded();
    const reading = tokens.readAhead!('at1');
    (new Adapter('Grant') as ReadAheadAdapter).forgetReadAheads!();
    await reading;
    expect(await grants.find('g1')).to.include({ accountId: 'alice' });
    expect(await ran()).to.deep.equal(['evalsha AccessToken:{}', 'hmget Grant:{}']);
  });

  it('reads alone from then on once Redis refuses the script (a proxy routing by key): the finds still answer', async () => {
    const { tokens, sessions, grants } = await seeded();
    // A key of another type makes the script fail as a proxy refusing its keys would: with a reply error.
    await client.set(`${prefix}AccessToken:{other}`, 'not a hash');
    await tokens.readAhead!('other');
    await tokens.readAhead!('at1');
    expect(await tokens.find('at1')).to.include({ sessionUid: 'u1' });
    expect(await sessions.findByUid('u1')).to.include({ accountId: 'alice' });
    expect(await grants.find('g1')).to.include({ accountId: 'alice' });
    const commands = await ran();
    expect(commands.filter((command) => command.startsWith('evalsha'))).to.deep.equal(['evalsha AccessToken:{}']);
    expect(commands.filter((command) => command.startsWith('hmget'))).to.deep.equal([
      'hmget AccessToken:{}',
      'hmget Session:{}',
      'hmget Grant:{}',
    ]);
  });
});
