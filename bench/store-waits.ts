/**
 * Store waits per exchange (`npm run bench:waits`): one exchange at a time on
 * a quiet provider, set up as the bench's deployment with a customer's
 * standing grant (an opaque actor token from a sign-in, the deployment's
 * hook and listener), and a service's delegation of a user's JWT, the same
 * one each time (the first lists a session, the others are issued tokens
 * under it), counted three ways:
 *
 * - waits: stretches of time during which at least one call of the adapter
 *   (the plugin's models and the provider's) is in flight, so calls made side
 *   by side count once and calls made one after another count each; a
 *   stretch that ends in the turn of the event loop it began in (finds the
 *   adapter answered from an earlier read) is no wait;
 * - on Redis, the commands the server received (`redis-cli monitor`);
 * - on PostgreSQL, the transactions the database committed
 *   (`pg_stat_database`), on a database of the run's own; every statement of
 *   the adapter is a transaction of its own, but for the commit itself.
 *
 * It measures counts, not times, so a loaded machine changes nothing.
 */
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { AdapterPayload } from 'oidc-provider';
import pg from 'pg';
import type { ImpersonationAdapterClass } from '../lib/adapters/contract.js';
import { createPostgresAdapter } from '../lib/adapters/postgres.js';
import { createRedisAdapter } from '../lib/adapters/redis.js';
import {
  startProvider,
  USERS,
  API,
  CLIENTS,
  DOWNSTREAM_API,
  OPAQUE_API,
  type FixtureProvider,
} from '../fixtures/provider.js';
import { exchange, managementRequest, m2mToken, userAccessToken } from '../fixtures/flows.js';
import { deploymentSetup } from './deployment.js';
import { standingGrantSetup } from './standing-grant.js';
import { ACTOR, customers, isCustomer } from './requests.js';
import { serviceUrls } from './stores.js';

const EXCHANGES = 20;
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

interface Counter {
  counting: boolean;
  waits: number;
  calls: number;
  byOperation: Map<string, number>;
}

/** The adapter class, every call of which is counted while `counter.counting`. */
function counted(Store: ImpersonationAdapterClass, counter: Counter): ImpersonationAdapterClass {
  let inFlight = 0;
  // A stretch that ends in the turn it began in waited for nothing (a find the adapter answered
  // from an earlier read): a round trip always takes a turn of the event loop.
  let stretch: { sameTurn: boolean } | undefined;
  const track = <T>(model: string, operation: string, call: () => Promise<T>): Promise<T> => {
    if (!counter.counting) return call();
    counter.calls += 1;
    const name = `${model}.${operation}`;
    counter.byOperation.set(name, (counter.byOperation.get(name) ?? 0) + 1);
    if (inFlight === 0) {
      counter.waits += 1;
      const started = { sameTurn: true };
      stretch = started;
      setImmediate(() => {
        started.sameTurn = false;
      });
    }
    inFlight += 1;
    return call().finally(() => {
      inFlight -= 1;
      if (inFlight === 0 && stretch?.sameTurn) counter.waits -= 1;
    });
  };
  return class Counted extends Store {
    readonly model: string;
    constructor(name: string) {
      super(name);
      this.model = name;
    }
    override upsert(id: string, payload: AdapterPayload, expiresIn?: number) {
      return track(this.model, 'upsert', () => super.upsert(id, payload, expiresIn));
    }
    override find(id: string) {
      return track(this.model, 'find', () => super.find(id));
    }
    override findByUid(uid: string) {
      return track(this.model, 'findByUid', () => super.findByUid(uid));
    }
    override consume(id: string) {
      return track(this.model, 'consume', () => super.consume(id));
    }
    override consumeOnce(id: string) {
      return track(this.model, 'consumeOnce', () => super.consumeOnce(id));
    }
    override destroy(id: string) {
      return track(this.model, 'destroy', () => super.destroy(id));
    }
    override indexAdd(indexes: readonly string[], member: string, expiresAt: number) {
      return track(this.model, 'indexAdd', () => super.indexAdd(indexes, member, expiresAt));
    }
    override indexRemove(indexes: readonly string[], member: string) {
      return track(this.model, 'indexRemove', () => super.indexRemove(indexes, member));
    }
    override indexRange(...args: Parameters<InstanceType<ImpersonationAdapterClass>['indexRange']>) {
      return track(this.model, 'indexRange', () => super.indexRange(...args));
    }
    override commitOnce(...args: Parameters<InstanceType<ImpersonationAdapterClass>['commitOnce']>) {
      return track(this.model, 'commitOnce', () => super.commitOnce(...args));
    }
  };
}

interface Measured {
  waits: number;
  calls: number;
  operations: string;
}

/** Starts the provider, gives the standing grants, and runs EXCHANGES exchanges one at a time, counted. */
async function run(
  Store: ImpersonationAdapterClass,
  resource: string,
  around: { before(): Promise<void>; after(): Promise<void> },
): Promise<Measured> {
  const counter: Counter = { counting: false, waits: 0, calls: 0, byOperation: new Map() };
  const deployment = deploymentSetup();
  const standing = standingGrantSetup();
  const plugin = { ...deployment.plugin, ...(resource === API ? standing.plugin : {}) };
  const tp: FixtureProvider = await startProvider({
    adapter: counted(Store, counter),
    plugin,
    configuration: {
      findAccount: (_ctx, sub) =>
        USERS.includes(sub) || isCustomer(sub) ? { accountId: sub, claims: () => ({ sub, name: sub }) } : undefined,
    },
  });
  try {
    deployment.listen(tp.provider);
    if (resource === API) await standing.give(tp, plugin);
    const actorToken = await userAccessToken(tp, ACTOR);
    const m2m = await m2mToken(tp);
    const subjects = resource === DOWNSTREAM_API ? [] : customers().slice(0, EXCHANGES + 2);
    // A delegation redeems nothing: the orders service delegates the same user's JWT each time.
    const subjectTokens: string[] =
      resource === DOWNSTREAM_API
        ? new Array<string>(EXCHANGES + 2).fill(
            await userAccessToken(tp, 'bob', { scope: 'openid profile:read', resource: API }),
          )
        : [];
    for (const userId of subjects) {
      const created = await managementRequest(
        tp,
        // The customer's approval needs the client named, as the bench's own creations name it.
        { userId, actorId: ACTOR, clientId: CLIENTS.console.client_id, context: { ticketId: 'T-1', reason: 'bench' } },
        m2m,
      );
      if (created.status !== 201) throw new Error(`creation failed: ${JSON.stringify(created.body)}`);
      subjectTokens.push(created.body['subjectToken'] as string);
    }
    const once = async (subjectToken: string) => {
      const reply = await (resource === DOWNSTREAM_API
        ? exchange(
            tp,
            { subject_token: subjectToken, subject_token_type: ACCESS_TOKEN, resource, scope: 'profile:read' },
            CLIENTS.orders,
          )
        : exchange(tp, {
            subject_token: subjectToken,
            actor_token: actorToken,
            actor_token_type: ACCESS_TOKEN,
            resource,
            scope: resource === API ? 'profile:read' : 'read',
          }));
      if (reply.status !== 200) throw new Error(`exchange failed: ${JSON.stringify(reply.body)}`);
    };
    // Two to warm up: caches, prepared statements, scripts loaded.
    for (const token of subjectTokens.slice(0, 2)) await once(token);
    await around.before();
    for (const token of subjectTokens.slice(2)) {
      counter.counting = true;
      await once(token);
      counter.counting = false;
    }
    await around.after();
    return {
      waits: counter.waits / EXCHANGES,
      calls: counter.calls / EXCHANGES,
      operations: [...counter.byOperation]
        .sort(([a], [b]) => a.localeCompare(b))
        .map(([name, count]) => `${name} ${count / EXCHANGES}`)
        .join(', '),
    };
  } finally {
    await tp.close();
    await deployment.close();
  }
}

async function onRedis(resource: string): Promise<string> {
  const { redisUrl } = serviceUrls();
  const prefix = `waits-${randomUUID().slice(0, 8)}:`;
  const Store = createRedisAdapter({ url: redisUrl, keyPrefix: prefix });
  const monitor = spawn('redis-cli', ['-u', redisUrl, 'monitor'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines: string[] = [];
  let recording = false;
  let buffered = '';
  monitor.stdout.setEncoding('utf8');
  monitor.stdout.on('data', (chunk: string) => {
    buffered += chunk;
    const complete = buffered.split('\n');
    buffered = complete.pop()!;
    if (recording) lines.push(...complete.filter((line) => line.includes(prefix)));
  });
  await new Promise((resolve) => setTimeout(resolve, 300));
  try {
    const measured = await run(Store, resource, {
      before: async () => {
        recording = true;
      },
      after: async () => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        recording = false;
      },
    });
    // MONITOR shows the commands a script runs too, marked `[0 lua]`: those cost no round trip.
    const sent = lines.filter((line) => !line.includes(' lua]'));
    const commands = new Map<string, number>();
    for (const line of sent) {
      const command = /"([A-Za-z]+)"/.exec(line)?.[1]?.toUpperCase() ?? '?';
      commands.set(command, (commands.get(command) ?? 0) + 1);
    }
    const perExchange = [...commands]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([command, count]) => `${command} ${count / EXCHANGES}`)
      .join(', ');
    return (
      `| Redis | ${label(resource)} | ${measured.waits} | ${measured.calls} | ` +
      `${sent.length / EXCHANGES} sent (${perExchange}); ${(lines.length - sent.length) / EXCHANGES} run by scripts |\n` +
      `<!-- adapter calls: ${measured.operations} -->`
    );
  } finally {
    monitor.kill();
    await Store.close();
  }
}

async function onPostgres(resource: string): Promise<string> {
  const { databaseUrl } = serviceUrls();
  const database = `waits_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${database}`);
  const url = new URL(databaseUrl);
  url.pathname = `/${database}`;
  const Store = createPostgresAdapter({ connectionString: url.toString(), cleanupInterval: 0 });
  const stats = async () => {
    // An idle backend reports its statistics within ten seconds (PostgreSQL 15's idle interval).
    await new Promise((resolve) => setTimeout(resolve, 11_000));
    const { rows } = await admin.query<{ commits: string }>(
      'SELECT xact_commit AS commits FROM pg_stat_database WHERE datname = $1',
      [database],
    );
    return { commits: Number(rows[0]!.commits) };
  };
  let before = { commits: 0 };
  let after = { commits: 0 };
  try {
    const measured = await run(Store, resource, {
      before: async () => {
        before = await stats();
      },
      after: async () => {
        after = await stats();
      },
    });
    return (
      `| PostgreSQL | ${label(resource)} | ${measured.waits} | ${measured.calls} | ` +
      `${(after.commits - before.commits) / EXCHANGES} transactions |\n` +
      `<!-- adapter calls: ${measured.operations} -->`
    );
  } finally {
    await Store.close();
    await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
    await admin.end();
  }
}

function label(resource: string): string {
  if (resource === DOWNSTREAM_API) return "delegation of a user's JWT, JWT issued (the same one again)";
  return resource === API ? 'standing grant, JWT issued' : 'no grant, opaque issued';
}

async function main(): Promise<void> {
  console.log('| store | exchange | waits | adapter calls | store commands per exchange |');
  console.log('| --- | --- | ---: | ---: | --- |');
  for (const resource of [API, OPAQUE_API, DOWNSTREAM_API]) {
    console.log(await onRedis(resource));
    console.log(await onPostgres(resource));
  }
}

await main();
