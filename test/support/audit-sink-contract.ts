import { expect } from 'chai';
import type { AuditEntry } from '../../lib/audit/chain.js';
import type { AuditLog } from '../../lib/audit/sink.js';
import { EVENTS, type ImpersonationEvent, type ImpersonationEventName } from '../../lib/index.js';
import type { AuditLogKind, AuditLogUnderTest } from './audit-sinks.js';
import { API, startProvider } from './provider.js';
import { exchange, expectError, managementRequest, m2mToken, subjectToken } from './http.js';
import { eventFields } from './trail-rows.js';

/** A trail as a deployment writes it: two customers, one support engineer, refusals and a stop. */
const TRAIL: ReadonlyArray<[ImpersonationEventName, Partial<ImpersonationEvent>]> = [
  [EVENTS.subjectTokenCreated, { subject: 'bob', createdBy: 'backend', subjectTokenId: 'stid_1' }],
  [EVENTS.exchangeSucceeded, { subject: 'bob', actor: 'alice', clientId: 'support', sessionId: 'imp_1' }],
  [EVENTS.subjectTokenCreated, { subject: 'carol', createdBy: 'backend', subjectTokenId: 'stid_2' }],
  [EVENTS.exchangeRefused, { subject: 'bob', actor: 'alice', error: 'invalid_target', reason: 'unknown resource' }],
  [
    EVENTS.exchangeSucceeded,
    { subject: 'bob', actor: 'alice', sessionId: 'imp_2', context: { ticketId: 'T-1', reason: 'invoices' } },
  ],
  [EVENTS.sessionRevoked, { subject: 'bob', sessionId: 'imp_2', revokedBy: 'admin', reason: 'done' }],
  [EVENTS.exchangeSucceeded, { subject: 'carol', actor: 'alice', sessionId: 'imp_3' }],
  [EVENTS.sessionEnded, { subject: 'bob', actor: 'alice', sessionId: 'imp_1', endReason: 'actor_logout' }],
];

const seqs = (items: AuditEntry[]) => items.map((item) => item.seq);

/** Every page of `filter`'s answer, two rows at a time, following `nextCursor`. */
async function allPages(log: AuditLog, filter: Parameters<AuditLog['query']>[0] = {}): Promise<AuditEntry[]> {
  const items: AuditEntry[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < 50; page += 1) {
    const result = await log.query({ ...filter, limit: 2, ...(cursor ? { cursor } : {}) });
    items.push(...result.items);
    if (!result.nextCursor) return items;
    cursor = result.nextCursor;
  }
  throw new Error('the pages never end');
}

/**
 * What every audit log the package ships guarantees through the sink the
 * plugin awaits and the trail it serves: appends chained in order, queries by
 * subject, actor, events and time, newest first and paged, `verify()`, and no
 * token without its record when the log cannot append. Called inside a
 * describe block; test/audit/audit-sink-contract.test.ts runs it on every log of
 * test/support/audit-sinks.ts.
 */
export function auditSinkContract(kind: AuditLogKind): void {
  let store: AuditLogUnderTest;
  let log: AuditLog;

  beforeEach(async () => {
    store = await kind.underTest();
    log = store.log;
    for (const [name, event] of TRAIL) await log.append(name, eventFields(event));
  });
  afterEach(() => store?.close());

  it('chains the appends in order, and the chain verifies', async () => {
    expect(await log.verify()).to.deep.equal({ ok: true, count: TRAIL.length, checkpoints: 0 });
    const { items, nextCursor } = await log.query();
    expect(nextCursor).to.equal(null);
    expect(seqs(items)).to.deep.equal([8, 7, 6, 5, 4, 3, 2, 1]);
    expect(items.map((item) => item.event)).to.deep.equal(TRAIL.map(([name]) => name).reverse());
    const success = items.find((item) => item.seq === 5)!;
    expect(success).to.include({ event: EVENTS.exchangeSucceeded, subject: 'bob', actor: 'alice', outcome: 'success' });
    expect(success.context).to.deep.equal({ ticketId: 'T-1', reason: 'invoices' });
    expect(success.hash).to.match(/^[0-9a-f]{64}$/);
    expect(success).to.not.have.any.keys('content', 'prevHash');
  });

  it('answers queries by subject, actor and time, newest first, paged', async () => {
    const first = await log.query({ subject: 'bob', limit: 2 });
    expect(seqs(first.items)).to.deep.equal([8, 6]);
    for (const item of first.items) expect(item.subject).to.equal('bob');
    const next = await log.query({ subject: 'bob', limit: 2, cursor: first.nextCursor! });
    expect(seqs(next.items)).to.deep.equal([5, 4]);
    expect(seqs(await allPages(log, { subject: 'bob' }))).to.deep.equal([8, 6, 5, 4, 2, 1]);
    expect(seqs(await allPages(log))).to.deep.equal([8, 7, 6, 5, 4, 3, 2, 1]);
    expect(seqs((await log.query({ actor: 'alice', since: new Date(Date.now() - 60_000) })).items)).to.deep.equal([
      8, 7, 5, 4, 2,
    ]);
    expect(seqs((await log.query({ subject: 'carol', actor: 'alice' })).items)).to.deep.equal([7]);
    expect((await log.query({ actor: 'alice', until: new Date(Date.now() - 60_000) })).items).to.deep.equal([]);
    expect((await log.query({ actor: 'nobody' })).items).to.deep.equal([]);
  });

  it('takes since as inclusive and until as exclusive', async () => {
    const { items } = await log.query();
    const fifth = items.find((item) => item.seq === 5)!;
    const at = new Date(fifth.at);
    const since = await allPages(log, { since: at });
    expect(seqs(since)).to.include(5);
    for (const item of since) expect(Date.parse(item.at)).to.be.at.least(at.getTime());
    const until = await allPages(log, { until: at });
    expect(seqs(until)).to.not.include(5);
    for (const item of until) expect(Date.parse(item.at)).to.be.below(at.getTime());
    expect(seqs(since).length + seqs(until).length).to.equal(TRAIL.length);
  });

  it("answers a query for some events only, as a customer's view asks", async () => {
    const { items } = await log.query({ subject: 'bob', events: [EVENTS.exchangeSucceeded, EVENTS.sessionRevoked] });
    expect(items.map((item) => [item.seq, item.event])).to.deep.equal([
      [6, EVENTS.sessionRevoked],
      [5, EVENTS.exchangeSucceeded],
      [2, EVENTS.exchangeSucceeded],
    ]);
    expect((await log.query({ events: [] })).items).to.deep.equal([]);
    expect(seqs(await allPages(log, { events: [EVENTS.subjectTokenCreated] }))).to.deep.equal([3, 1]);
  });

  it('refuses a limit out of range and a cursor it did not return', async () => {
    for (const filter of [{ limit: 0 }, { limit: 501 }, { limit: 1.5 }, { cursor: 'AA' }, { cursor: '!!' }]) {
      let caught: unknown;
      try {
        await log.query(filter);
      } catch (error) {
        caught = error;
      }
      expect(caught, JSON.stringify(filter)).to.be.instanceOf(TypeError);
    }
  });

  it('hands out copies: changing an answer changes nothing kept', async () => {
    const { items } = await log.query({ subject: 'bob', limit: 1 });
    items[0]!.subject = 'mallory';
    expect((await log.query({ subject: 'bob', limit: 1 })).items[0]!.subject).to.equal('bob');
    expect((await log.verify()).ok).to.equal(true);
  });

  it('detects a row changed in the store at the row it changed, and verifies again once it is put back', async () => {
    const restore = await store.forgeSubject(3, 'mallory');
    expect(await log.verify()).to.deep.equal({
      ok: false,
      count: 2,
      seq: 3,
      check: 'row',
      problem: 'a column does not match the content its hash covers',
    });
    await restore();
    expect(await log.verify()).to.deep.equal({ ok: true, count: TRAIL.length, checkpoints: 0 });
  });

  it('when it cannot append, the append rejects, and no subject token nor impersonation token goes out', async () => {
    const failing = await kind.failing();
    const tp = await startProvider({ plugin: { auditLog: failing.log } });
    try {
      const subject = await subjectToken(tp);
      await failing.fail();
      let caught: unknown;
      try {
        await failing.log.append(EVENTS.subjectTokenCreated, eventFields({ subject: 'bob' }));
      } catch (error) {
        caught = error;
      }
      expect(caught).to.be.instanceOf(Error);
      expectError(await managementRequest(tp, { userId: 'bob' }, await m2mToken(tp)), 503, 'temporarily_unavailable');
      const refused = await exchange(tp, { subject_token: subject, resource: API });
      expect(refused.status, JSON.stringify(refused.body)).to.be.within(500, 599);
      expect(refused.body).to.not.have.property('access_token');
    } finally {
      await tp.close();
      await failing.close();
    }
  });
}
