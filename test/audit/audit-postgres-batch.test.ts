import { expect } from 'chai';
import pg from 'pg';
import { createPostgresAuditLog, type PostgresAuditLog } from '../../lib/audit-postgres/index.js';
import { EVENTS, type ImpersonationEvent } from '../../lib/index.js';
import { DATABASE_URL, testSchema } from '../support/postgres.js';
import { API, CLIENTS, READ_SCOPE, TENANT_API, startProvider, type TestProvider } from '../support/provider.js';
import { apiRequest, exchange, managementRequest, m2mToken, subjectToken } from '../support/http.js';
import { TcpRelay } from '../support/relay.js';
import { eventFields } from '../support/trail-rows.js';

/**
 * Appends that arrive together are committed together (group commit). A row
 * PostgreSQL cannot store (U+0000 in text or jsonb, a lone surrogate in jsonb)
 * fails its own append, never the appends it was batched with.
 */
describe("PostgreSQL audit log: one append's row never fails the appends batched with it", function () {
  this.timeout(30_000);
  let schema: string;
  let pool: pg.Pool;

  before(async () => {
    schema = await testSchema();
    pool = new pg.Pool({ connectionString: DATABASE_URL, max: 5 });
  });
  after(() => pool?.end());

  describe('over HTTP: a Management API caller sends a value PostgreSQL cannot store', () => {
    let log: PostgresAuditLog;
    let tp: TestProvider;
    before(async () => {
      log = createPostgresAuditLog({ pool, schema, table: 'over_http' });
      tp = await startProvider({
        plugin: {
          auditLog: log,
          // A policy whose refusal quotes what it was given.
          canExchange: ({ resource }) => (resource === `${TENANT_API}closed` ? { reason: 'closed\u0000tenant' } : true),
        },
      });
    });
    after(() => tp?.close());

    it('answers 400 to the creation whose context holds U+0000, 201 to the 19 sent with it, and the chain verifies', async () => {
      const token = await m2mToken(tp);
      const bad = 7;
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, at) =>
          managementRequest(tp, { userId: 'bob', context: { ticketId: at === bad ? 'T\u0000' : `T-${at}` } }, token),
        ),
      );
      const statuses = results.map((result) => result.status);
      expect(statuses[bad], JSON.stringify(results[bad]!.body)).to.equal(400);
      expect(results[bad]!.body).to.deep.equal({
        error: 'invalid_request',
        error_description: 'context holds text that cannot be stored (U+0000 or a lone surrogate)',
      });
      expect(statuses.filter((status, at) => at !== bad && status === 201)).to.have.length(19);
      expect(await log.verify()).to.deep.include({ ok: true, count: 19 });
    });

    it('answers 400 to GET /api/impersonations/events?subject=bob%00x, not 503', async () => {
      const admin = await m2mToken(tp, CLIENTS.admin, READ_SCOPE);
      const result = await apiRequest(tp, 'GET', '/api/impersonations/events?subject=bob%00x', admin);
      expect(result.status, JSON.stringify(result.body)).to.equal(400);
      expect(result.body['error']).to.equal('invalid_request');
    });

    it('at the token endpoint (a public client, no secret), neither an unstorable resource nor a refusal quoting one fails the exchanges beside them', async () => {
      const before = (await log.verify()).count;
      const reported = tp.appErrors.length;
      const subjects = await Promise.all(Array.from({ length: 10 }, () => subjectToken(tp)));
      const resources = subjects.map((_, at) =>
        at === 3 ? `${TENANT_API}a\u0000b` : at === 6 ? `${TENANT_API}closed` : API,
      );
      const results = await Promise.all(
        subjects.map((subject, at) => exchange(tp, { subject_token: subject, resource: resources[at] })),
      );
      expect(results.map((result) => result.status)).to.deep.equal([200, 200, 200, 400, 200, 200, 400, 200, 200, 200]);
      expect(results[3]!.body['error']).to.equal('invalid_target');
      expect(results[6]!.body['error']).to.equal('invalid_request');
      expect(tp.appErrors.slice(reported), 'no failure to record a refusal').to.deep.equal([]);
      const { items } = await log.query({ limit: 20 });
      const refusals = items.filter((item) => item.event === EVENTS.exchangeRefused).map((item) => item.reason);
      // The unstorable resource is refused with the request's parameters, before its subject token is read:
      // no row (see trail-flood.test.ts). The policy's refusal quoting it is recorded, made storable.
      expect(refusals).to.deep.equal(['invalid_request: closed\uFFFDtenant']);
      expect(await log.verify()).to.deep.include({ ok: true, count: before + 19 });
    });
  });

  describe('called directly, as a deployment or a future caller could', () => {
    it('rejects only the append whose row cannot be stored; the others resolve, in order, and the chain verifies', async () => {
      const log = createPostgresAuditLog({ pool, schema, table: 'direct' });
      await log.migrate();
      const unstorable: Array<Partial<ImpersonationEvent>> = [
        { subject: 'bob', context: { ticketId: 'T\u0000' } },
        { subject: 'bob', context: { 'key\u0000': 'x' } },
        { subject: 'b\u0000b' },
        { subject: 'bob', reason: 'lone \ud800 surrogate' },
      ];
      for (const bad of unstorable) {
        const before = (await log.verify()).count;
        const outcomes = await Promise.allSettled(
          Array.from({ length: 9 }, (_, at) =>
            log.append(
              EVENTS.subjectTokenCreated,
              eventFields(at === 4 ? bad : { subject: 'bob', subjectTokenId: `stid_${at}` }),
            ),
          ),
        );
        expect(
          outcomes.map((outcome) => outcome.status),
          JSON.stringify(bad),
        ).to.deep.equal([...Array(4).fill('fulfilled'), 'rejected', ...Array(4).fill('fulfilled')]);
        expect(((outcomes[4] as PromiseRejectedResult).reason as { code?: string }).code).to.match(/^22/);
        const verified = await log.verify();
        expect(verified).to.deep.include({ ok: true, count: before + 8 });
        const { items } = await log.query({ limit: 8 });
        expect(items.map((item) => item.subjectTokenId).reverse()).to.deep.equal(
          [0, 1, 2, 3, 5, 6, 7, 8].map((at) => `stid_${at}`),
        );
      }
    });

    it('still fails every append of a batch when PostgreSQL is unreachable, and appends again once it is back', async () => {
      const relay = new TcpRelay(DATABASE_URL, 5432);
      await relay.start();
      const relayed = new pg.Pool({ connectionString: relay.url, connectionTimeoutMillis: 2000 });
      relayed.on('error', () => {});
      let appends = 0;
      const query = relayed.query.bind(relayed) as (...args: unknown[]) => Promise<pg.QueryResult>;
      (relayed as unknown as { query: typeof query }).query = (...args: unknown[]) => {
        if (String(args[0]).includes('_append"(')) appends += 1;
        return query(...args);
      };
      const log = createPostgresAuditLog({ pool: relayed, schema, table: 'outage' });
      try {
        await log.migrate();
        await relay.stop();
        const outcomes = await Promise.allSettled(
          Array.from({ length: 6 }, (_, at) =>
            log.append(
              EVENTS.subjectTokenCreated,
              eventFields(at === 2 ? { subject: 'b\u0000b' } : { subject: 'bob' }),
            ),
          ),
        );
        expect(outcomes.map((outcome) => outcome.status)).to.deep.equal(Array(6).fill('rejected'));
        // The first append goes alone, the five that waited for it together; neither is retried.
        expect(appends, 'an outage is not retried in halves').to.equal(2);
        await relay.start();
        await Promise.all([
          log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' })),
          log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'carol' })),
        ]);
        expect(await log.verify()).to.deep.include({ ok: true, count: 2 });
      } finally {
        await relayed.end();
        await relay.stop();
      }
    });
  });
});
