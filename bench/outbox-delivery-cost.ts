/**
 * `node build/bench/outbox-delivery-cost.js [--store postgres|redis] [--entries N] [--rate R] [--lib DIR]`:
 * what delivering the outbox costs the store, apart from the provider and
 * the rest of the machine.
 *
 * The delivery loop as a provider runs it (lib/webhooks/worker.ts, one
 * webhook subscription, a poll interval of 100 ms) on a pool of its own,
 * against a receiver in this process that answers 204 at once, while
 * another pool appends entries at `rate` a second, ten at a time, for 1,000
 * customers in turn (as the bench's exchanges notify). It prints the CPU
 * the delivering pool's backends used per delivered entry (from /proc, by
 * their pids: the appends' backends, the WAL writer and other clients are
 * not counted) and the transactions the database committed per entry (the
 * appends' included: 0.1 per entry). On Redis (`--store redis`), whose one
 * server serves every client, the same appends run twice, without delivery
 * and then with it, and the server's CPU per entry of the first run is taken
 * from the second's (INFO cpu), with the script calls per entry (INFO
 * commandstats, the appends' 0.1 included). `--lib` names another build's
 * `lib` folder, to compare.
 */
import { randomUUID } from 'node:crypto';
import { EventEmitter } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { Provider } from 'oidc-provider';
import pg from 'pg';
import type { OutboxAdapter } from '../lib/adapters/contracts/outbox.js';
import type { PostgresAdapterClass, PostgresAdapterOptions } from '../lib/adapters/postgres.js';
import type { RedisAdapterClass, RedisAdapterOptions } from '../lib/adapters/redis.js';
import { Redis } from 'ioredis';
import type { OutboxStore } from '../lib/outbox/contract.js';
import type { ResolvedWebhookOptions } from '../lib/webhooks/options.js';
import type { startDelivery as StartDelivery } from '../lib/webhooks/worker.js';
import { readStat } from './proc-stat.js';
import { serviceUrls } from './stores.js';

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at === -1 ? fallback : process.argv[at + 1]!;
}

const ENTRIES = Number(flag('entries', '4000'));
const RATE = Number(flag('rate', '400'));
const LIB = flag('lib', '');
const STORE = flag('store', 'postgres');
const APPEND = 10;
const CUSTOMERS = 1000;
/** A webhook payload of the size an exchange's notification has. */
const BODY = JSON.stringify({ type: 'impersonation.exchange.succeeded', data: { padding: 'x'.repeat(400) } });

const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** A receiver in this process that answers 204 at once, counting what it was sent. */
async function startReceiver(): Promise<{ url: string; received(): number; close(): void }> {
  let received = 0;
  const receiver = createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      received += 1;
      response.writeHead(204).end();
    });
  });
  await new Promise<void>((listening) => receiver.listen(0, '127.0.0.1', listening));
  return {
    url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/`,
    received: () => received,
    close: () => receiver.close(),
  };
}

/** One webhook subscription, polled every 100 ms. */
function deliveryOptions(url: string): ResolvedWebhookOptions {
  return {
    subscriptions: [
      {
        id: 'crm',
        url,
        events: ['impersonation.exchange.succeeded'],
        secret: 'not-a-secret-of-anyone',
        key: Buffer.alloc(32, 1),
      },
    ],
    maxPending: 1_000_000,
    maxAttempts: 5,
    maxAgeMs: 3_600_000,
    deadLetterRetentionMs: 86_400_000,
    timeoutMs: 5000,
    pollIntervalMs: 100,
    maxBackoffMs: 60_000,
  };
}

/** Appends ENTRIES entries at RATE a second, APPEND at a time, for CUSTOMERS customers in turn. */
async function appendAtRate(appends: OutboxStore): Promise<void> {
  const started = Date.now();
  for (let at = 0; at < ENTRIES; at += APPEND) {
    await appends.append(
      Array.from({ length: APPEND }, (_, n) => ({
        id: randomUUID(),
        subscription: 'crm',
        subject: `customer-${(at + n) % CUSTOMERS}`,
        body: BODY,
      })),
      1_000_000,
      Date.now(),
    );
    const ahead = started + ((at + APPEND) / RATE) * 1000 - Date.now();
    if (ahead > 0) await sleep(ahead);
  }
}

async function libModule<T>(path: string): Promise<T> {
  const lib = LIB ? pathToFileURL(resolve(LIB)).href : new URL('../lib', import.meta.url).href;
  return (await import(`${lib}/${path}`)) as T;
}

async function postgresCost(): Promise<void> {
  const { createPostgresAdapter } = await libModule<{
    createPostgresAdapter: (options: PostgresAdapterOptions) => PostgresAdapterClass;
  }>('adapters/postgres.js');
  const { startDelivery } = await libModule<{ startDelivery: typeof StartDelivery }>('webhooks/worker.js');
  const { databaseUrl } = serviceUrls();
  const schema = `delivery_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  const application = `outbox-delivery-${schema}`;
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query(`CREATE SCHEMA "${schema}"`);
  // Kept open however idle, so that every backend it used is counted.
  const delivering = new pg.Pool({
    connectionString: databaseUrl,
    max: 10,
    idleTimeoutMillis: 0,
    application_name: application,
  });
  const appending = new pg.Pool({ connectionString: databaseUrl, max: 4 });
  const Delivering = createPostgresAdapter({ pool: delivering, schema, cleanupInterval: 0 });
  const Appending = createPostgresAdapter({ pool: appending, schema, cleanupInterval: 0 });
  const receiver = await startReceiver();
  const provider = new EventEmitter();
  provider.on('error', (error: Error) => console.error(`delivery: ${error.message}`));
  try {
    await Delivering.migrate();
    const outbox = (new Delivering('Outbox') as unknown as OutboxAdapter).outbox();
    const appends = (new Appending('Outbox') as unknown as OutboxAdapter).outbox();
    await outbox.stats(); // the outbox's tables made before anything is timed
    const delivery = startDelivery(provider as unknown as Provider, outbox, deliveryOptions(receiver.url));
    await sleep(300); // its connections opened
    const { rows } = await admin.query<{ pid: number }>(
      'SELECT pid FROM pg_stat_activity WHERE application_name = $1',
      [application],
    );
    const cpu = () => rows.reduce((sum, { pid }) => sum + readStat(`/proc/${pid}/stat`).cpuSeconds, 0);
    const commits = async () =>
      Number(
        (
          await admin.query<{ commits: string }>(
            'SELECT xact_commit AS commits FROM pg_stat_database WHERE datname = current_database()',
          )
        ).rows[0]!.commits,
      );
    const cpuBefore = cpu();
    const commitsBefore = await commits();
    const started = Date.now();
    await appendAtRate(appends);
    while (receiver.received() < ENTRIES) await sleep(20);
    await sleep(200); // the last settlement
    const cpuSeconds = cpu() - cpuBefore;
    const committed = (await commits()) - commitsBefore;
    await delivery.stop();
    console.log(
      `${LIB || 'this tree'}, PostgreSQL: ${ENTRIES} entries delivered at ${RATE}/s in ${Date.now() - started} ms; ` +
        `the delivering backends' CPU ${((cpuSeconds / ENTRIES) * 1e6).toFixed(0)} µs per entry; ` +
        `${(committed / ENTRIES).toFixed(2)} transactions per entry (the appends' 0.10 included)`,
    );
  } finally {
    receiver.close();
    await Delivering.close();
    await Appending.close();
    await delivering.end();
    await appending.end();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await admin.end();
  }
}

/** The server's CPU seconds so far, and the script calls it has run. */
async function redisCounters(admin: Redis): Promise<{ cpuSeconds: number; scripts: number }> {
  const info = await admin.info('all');
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(info)?.[1] ?? 0);
  const calls = (command: string) => Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(info)?.[1] ?? 0);
  return {
    cpuSeconds: field('used_cpu_user') + field('used_cpu_sys'),
    scripts: calls('evalsha') + calls('eval'),
  };
}

async function redisCost(): Promise<void> {
  const { createRedisAdapter } = await libModule<{
    createRedisAdapter: (options: RedisAdapterOptions) => RedisAdapterClass;
  }>('adapters/redis.js');
  const { startDelivery } = await libModule<{ startDelivery: typeof StartDelivery }>('webhooks/worker.js');
  const { redisUrl } = serviceUrls();
  const admin = new Redis(redisUrl);
  const receiver = await startReceiver();
  const provider = new EventEmitter();
  provider.on('error', (error: Error) => console.error(`delivery: ${error.message}`));
  const prefixes: string[] = [];
  const outboxOf = () => {
    const keyPrefix = `bench:delivery:${randomUUID()}:`;
    prefixes.push(keyPrefix);
    const Adapter = createRedisAdapter({ url: redisUrl, keyPrefix });
    return { Adapter, outbox: (new Adapter('Outbox') as unknown as OutboxAdapter).outbox() };
  };
  const opened: RedisAdapterClass[] = [];
  try {
    // The appends alone, then the same appends on an outbox delivered as they come.
    const runs: { cpuSeconds: number; scripts: number }[] = [];
    for (const delivered of [false, true]) {
      const { Adapter, outbox } = outboxOf();
      opened.push(Adapter);
      await outbox.stats();
      const delivery = delivered
        ? startDelivery(provider as unknown as Provider, outbox, deliveryOptions(receiver.url))
        : undefined;
      await sleep(300);
      const before = await redisCounters(admin);
      await appendAtRate(outbox);
      if (delivery) while (receiver.received() < ENTRIES) await sleep(20);
      await sleep(200); // the last settlement
      const after = await redisCounters(admin);
      await delivery?.stop();
      runs.push({ cpuSeconds: after.cpuSeconds - before.cpuSeconds, scripts: after.scripts - before.scripts });
    }
    const [alone, delivered] = runs as [(typeof runs)[0], (typeof runs)[0]];
    console.log(
      `${LIB || 'this tree'}, Redis: ${ENTRIES} entries delivered at ${RATE}/s; ` +
        `the server's CPU for their delivery ${(((delivered.cpuSeconds - alone.cpuSeconds) / ENTRIES) * 1e6).toFixed(0)} µs per entry ` +
        `(${((delivered.cpuSeconds / ENTRIES) * 1e6).toFixed(0)} with the appends, ${((alone.cpuSeconds / ENTRIES) * 1e6).toFixed(0)} without delivery); ` +
        `${(delivered.scripts / ENTRIES).toFixed(2)} script calls per entry (the appends' 0.10 included)`,
    );
  } finally {
    receiver.close();
    for (const Adapter of opened) await Adapter.disconnect();
    for (const prefix of prefixes) {
      const keys = await admin.keys(`${prefix}*`);
      if (keys.length) await admin.del(...keys);
    }
    admin.disconnect();
  }
}

if (STORE === 'redis') await redisCost();
else if (STORE === 'postgres') await postgresCost();
else throw new TypeError(`--store must be postgres or redis, not ${STORE}`);
