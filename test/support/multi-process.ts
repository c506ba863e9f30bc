import { spawn, type ChildProcess } from 'node:child_process';
import { expect } from 'chai';
import { exportJWK, generateKeyPair } from 'jose';
import { portOf, stopChildren } from './children.js';
import { basic, decodeJwt, exchange, m2mToken, managementRequest, type Reply } from './http.js';
import { API, CLIENTS, OPAQUE_API, READ_SCOPE, REVOKE_SCOPE, type TestProvider } from './provider.js';
import { scaled } from './time.js';

const INSTANCES = 4;
const ISSUER = 'https://id.multi-process.example';

/** A provider in another process: the HTTP helpers read only `base`. */
export type Instance = TestProvider;

/** Provider processes acting as one deployment behind a load balancer, and an M2M token all of them accept. */
export interface ProviderProcesses {
  instances: Instance[];
  management: string;
  stop(): Promise<void>;
}

/** A store several provider processes share, and the script that starts one of them on it. */
export interface SharedStore {
  /** A provider process: prints `PORT <n>` once it listens (see children.ts). */
  script: string;
  /** Checks the store is there and returns what the processes need to find their common part of it. */
  prepare(): Promise<Record<string, string>>;
}

/**
 * Starts `count` provider processes running `script` on one store, with the
 * same issuer and signing keys: `env` names the store (KEY_PREFIX, and
 * REDIS_CLUSTER_NODES for a cluster; STORE_SCHEMA and STORE_TABLE for PostgreSQL).
 */
export async function startProviderProcesses(
  script: string,
  env: Record<string, string>,
  count = INSTANCES,
): Promise<ProviderProcesses> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwks = JSON.stringify({
    keys: [{ ...(await exportJWK(privateKey)), kid: 'shared-1', alg: 'RS256', use: 'sig' }],
  });
  const children: ChildProcess[] = [];
  try {
    const ports = await Promise.all(
      Array.from({ length: count }, () => {
        const child = spawn(process.execPath, [script], {
          env: { ...process.env, ISSUER, JWKS: jwks, ...env },
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        children.push(child);
        return portOf(child);
      }),
    );
    const instances = ports.map((port) => ({ base: `http://127.0.0.1:${port}` }) as Instance);
    // Issued by the first instance and accepted by all: same issuer, same keys.
    return { instances, management: await m2mToken(instances[0]!), stop: () => stopChildren(children) };
  } catch (error) {
    await stopChildren(children);
    throw error;
  }
}

/**
 * Four provider processes acting as one deployment behind a load balancer
 * (same issuer, same signing keys, one store): a subject token is redeemed
 * exactly once however its exchanges are spread, and sessions started on one
 * process are listed, read and revoked on the others.
 */
export function describeProcessesSharingStore(title: string, store: SharedStore): void {
  describe(title, function () {
    this.timeout(60_000);
    let group: ProviderProcesses | undefined;
    before(async () => {
      group = await startProviderProcesses(store.script, await store.prepare());
    });
    after(() => group?.stop());

    multiProcessContract(() => group!);
  });
}

/**
 * Single use and sessions across processes sharing one store. Called inside a
 * describe block whose `before` makes `group()` answer with four processes.
 */
export function multiProcessContract(group: () => ProviderProcesses): void {
  let instances: Instance[];
  let management: string;
  before(() => ({ instances, management } = group()));

  it('redeems one subject token exactly once when 50 requests race over 4 processes', async () => {
    const token = await createSubjectToken(instances[1]!);
    const replies = await Promise.all(Array.from({ length: 50 }, (_, i) => redeem(instances[i % INSTANCES]!, token)));
    const counts = tally(replies);
    console.log(`      one token, 50 concurrent exchanges over ${INSTANCES} processes: ${JSON.stringify(counts)}`);
    expect(counts).to.deep.equal({ issued: 1, invalid_request: 49 });
    const issued = decodeJwt(replies.find((reply) => reply.status === 200)!.body['access_token'] as string);
    expect(issued['iss']).to.equal(ISSUER);
    expect(issued['sub']).to.equal('bob');
  });

  it('never redeems any of 200 subject tokens twice when each is raced by all 4 processes', async () => {
    const tokens: string[] = [];
    for (const batch of chunks(
      Array.from({ length: 200 }, (_, i) => i),
      25,
    )) {
      tokens.push(...(await Promise.all(batch.map((i) => createSubjectToken(instances[i % INSTANCES]!)))));
    }
    expect(new Set(tokens).size).to.equal(200);

    const winners: number[] = [];
    const all: Reply[] = [];
    for (const batch of chunks(tokens, 25)) {
      await Promise.all(
        batch.map(async (token) => {
          const replies = await Promise.all(instances.map((instance) => redeem(instance, token)));
          all.push(...replies);
          winners.push(replies.filter((reply) => reply.status === 200).length);
        }),
      );
    }
    const summary = {
      tokens: tokens.length,
      exchanges: all.length,
      ...tally(all),
      redeemedOnce: winners.filter((count) => count === 1).length,
      doubleRedemptions: winners.filter((count) => count > 1).length,
      neverRedeemed: winners.filter((count) => count === 0).length,
    };
    console.log(`      200 tokens, 4 concurrent exchanges each: ${JSON.stringify(summary)}`);
    expect(summary).to.deep.equal({
      tokens: 200,
      exchanges: 800,
      issued: 200,
      invalid_request: 600,
      redeemedOnce: 200,
      doubleRedemptions: 0,
      neverRedeemed: 0,
    });
  });

  it('lists, reads and revokes on one process a session started on another; every process then refuses its tokens', async () => {
    const [first, second, third, fourth] = instances as [Instance, Instance, Instance, Instance];
    const admin = await m2mToken(second, CLIENTS.admin, `${READ_SCOPE} ${REVOKE_SCOPE}`);
    const jwt = await redeem(first, await createSubjectToken(first));
    const opaque = await exchange(first, {
      subject_token: await createSubjectToken(first),
      resource: OPAQUE_API,
      scope: 'read',
    });
    expect(opaque.status, JSON.stringify(opaque.body)).to.equal(200);
    const jwtSession = decodeJwt(jwt.body['access_token'] as string)['impersonation_session'] as string;
    const introspect = async (instance: Instance) =>
      (
        await fetch(`${instance.base}/token/introspection`, {
          method: 'POST',
          headers: { authorization: basic(CLIENTS.web), 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ token: opaque.body['access_token'] as string }),
        })
      ).json() as Promise<Record<string, unknown>>;
    const opaqueSession = (await introspect(third))['impersonation_session'] as string;
    const ids = [jwtSession, opaqueSession];

    // The listing pages through every session of bob (earlier tests made hundreds) and finds both.
    const listed: string[] = [];
    let cursor: string | null = null;
    do {
      const page: Reply = await sessionsCall(
        second,
        'GET',
        `/api/impersonations?subject=bob&limit=100${cursor ? `&cursor=${cursor}` : ''}`,
        admin,
      );
      listed.push(...(page.body['items'] as Array<{ id: string }>).map((item) => item.id));
      cursor = page.body['nextCursor'] as string | null;
    } while (cursor);
    expect(listed).to.include.members(ids);
    expect(new Set(listed).size).to.equal(listed.length);
    expect((await sessionsCall(third, 'GET', `/api/impersonations/${jwtSession}`, admin)).body['state']).to.equal(
      'active',
    );

    for (const id of ids)
      expect((await sessionsCall(second, 'DELETE', `/api/impersonations/${id}`, admin)).status).to.equal(204);
    const feed = await sessionsCall(third, 'GET', '/api/impersonations/revocations');
    expect((feed.body['revoked'] as Array<{ id: string }>).map((entry) => entry.id)).to.include.members(ids);
    expect((await sessionsCall(fourth, 'GET', `/api/impersonations/${jwtSession}`, admin)).body['state']).to.equal(
      'revoked',
    );
    expect(await introspect(fourth)).to.deep.equal({ active: false });
  });
  async function createSubjectToken(instance: Instance): Promise<string> {
    return createdSubjectToken(instance, management);
  }
}

/** A subject token for bob from the Management API of `instance`. */
export async function createdSubjectToken(instance: Instance, management: string): Promise<string> {
  const reply = await managementRequest(instance, { userId: 'bob' }, management);
  if (reply.status !== 201)
    throw new Error(`creation failed on ${instance.base}: ${reply.status} ${JSON.stringify(reply.body)}`);
  return reply.body['subjectToken'] as string;
}

export function redeem(instance: Instance, subjectToken: string): Promise<Reply> {
  return exchange(instance, { subject_token: subjectToken, resource: API, scope: 'profile:read' });
}

/** Counts replies by outcome: `issued`, or the OAuth error code (or the status when there is none). */
export function tally(replies: Reply[]): Record<string, number> {
  const counts: Record<string, number> = {};
  for (const reply of replies) {
    const outcome = reply.status === 200 ? 'issued' : `${String(reply.body['error'] ?? reply.status)}`;
    counts[outcome] = (counts[outcome] ?? 0) + 1;
  }
  return counts;
}

export function chunks<T>(items: T[], size: number): T[][] {
  return Array.from({ length: Math.ceil(items.length / size) }, (_, i) => items.slice(i * size, (i + 1) * size));
}

/** A call to the impersonation sessions API, with or without a bearer token. */
async function sessionsCall(instance: Instance, method: string, path: string, token?: string): Promise<Reply> {
  const response = await fetch(`${instance.base}${path}`, {
    method,
    headers: token ? { authorization: `Bearer ${token}` } : {},
    signal: AbortSignal.timeout(scaled(10_000)),
  });
  const text = await response.text();
  return {
    status: response.status,
    headers: response.headers,
    body: text ? (JSON.parse(text) as Record<string, unknown>) : {},
  };
}
