import { expect } from 'chai';
import { createMemoryAuditLog, EVENTS, type MemoryAuditLog } from '../../lib/index.js';
import { canonicalContent, rowFromContent, rowHash, type ChainedRow } from '../../lib/audit/chain.js';
import { canonicalJson } from '../../lib/json.js';
import { API, CLIENTS, READ_SCOPE, startProvider, type TestProvider } from '../support/provider.js';
import { exchange, expectError, managementRequest, m2mToken, subjectToken } from '../support/http.js';
import { expectFullFlowTrail, runFullFlow, trailEvents } from '../support/impersonations.js';

describe('in-memory audit log: the same chain and verify() as the PostgreSQL log', function () {
  this.timeout(30_000);
  let log: MemoryAuditLog;
  let tp: TestProvider;

  before(async () => {
    log = createMemoryAuditLog();
    tp = await startProvider({ plugin: { auditLog: log, canImpersonate: ({ subject }) => subject !== 'admin' } });
    await runFullFlow(tp);
  });
  after(() => tp?.close());

  /** Changes the kept rows, checks what verify() says, and puts them back. */
  async function tampered(
    change: (rows: ChainedRow[]) => void,
  ): Promise<Awaited<ReturnType<MemoryAuditLog['verify']>>> {
    const snapshot = log.rows.map((row) => structuredClone(row));
    change(log.rows);
    const result = await log.verify();
    log.rows.splice(0, log.rows.length, ...snapshot);
    expect((await log.verify()).ok).to.equal(true);
    return result;
  }

  it('records the whole flow, and the chain verifies', async () => {
    const events = log.rows.map((row) => row.event);
    expect(events.filter((name) => name === EVENTS.subjectTokenCreated)).to.have.length(4);
    expect(events.filter((name) => name === EVENTS.exchangeSucceeded)).to.have.length(3);
    expect(events).to.include.members([EVENTS.exchangeRefused, EVENTS.sessionRevoked]);
    expect(log.rows.find((row) => row.event === EVENTS.exchangeSucceeded)).to.include({
      subject: 'bob',
      actor: 'alice',
      outcome: 'success',
    });
    expect(log.rows.map((row) => row.seq)).to.deep.equal(log.rows.map((_, index) => index + 1));
    expect(await log.verify()).to.deep.equal({ ok: true, count: log.rows.length, checkpoints: 0 });
  });

  const forgeries: Record<string, (row: ChainedRow) => void> = {
    at: (row) => {
      row.at = new Date(0).toISOString();
    },
    event: (row) => {
      row.event = 'forged';
    },
    subject: (row) => {
      row.subject = 'mallory';
    },
    actor: (row) => {
      row.actor = 'mallory';
    },
    clientId: (row) => {
      row.clientId = 'forged';
    },
    resource: (row) => {
      row.resource = 'forged';
    },
    scope: (row) => {
      row.scope = 'forged';
    },
    context: (row) => {
      row.context = { ticketId: 'T-FORGED' };
    },
    subjectTokenId: (row) => {
      row.subjectTokenId = 'forged';
    },
    sessionId: (row) => {
      row.sessionId = 'forged';
    },
    accessTokenId: (row) => {
      row.accessTokenId = 'forged';
    },
    outcome: (row) => {
      row.outcome = 'forged';
    },
    reason: (row) => {
      row.reason = 'forged';
    },
    content: (row) => {
      row.content = '["forged"]';
    },
    prevHash: (row) => {
      row.prevHash = 'forged';
    },
    hash: (row) => {
      row.hash = 'forged';
    },
  };
  for (const [field, forge] of Object.entries(forgeries)) {
    it(`detects a change of ${field} at the row it changed`, async () => {
      const result = await tampered((rows) => forge(rows[3]!));
      expect(result, JSON.stringify(result)).to.include({ ok: false, seq: 4 });
    });
  }

  it('detects a deleted row, a swapped pair, an inserted row and a cut tail, each at the right row', async () => {
    expect(
      await tampered((rows) => {
        rows.splice(2, 1);
      }),
    ).to.include({ ok: false, seq: 3 });

    // Rows 3 and 4 trade places, numbers kept.
    expect(
      await tampered((rows) => {
        const [third, fourth] = [rows[2]!, rows[3]!];
        rows[2] = { ...fourth, seq: 3 };
        rows[3] = { ...third, seq: 4 };
      }),
    ).to.include({ ok: false, seq: 3 });

    // A row slipped in at 3 with a correct link and hash of its own; the rows after it renumbered.
    expect(
      await tampered((rows) => {
        const previous = rows[1]!;
        const content = canonicalContent({ ...rowFromContent(previous.content), subject: 'carol' });
        const forged = {
          ...rowFromContent(content),
          seq: 3,
          content,
          prevHash: previous.hash,
          hash: rowHash(previous.hash, 3, content),
        };
        for (const row of rows.slice(2)) row.seq += 1;
        rows.splice(2, 0, forged);
      }),
    ).to.include({ ok: false, seq: 4 });

    // The last row removed: the head still names it.
    const count = log.rows.length;
    expect(
      await tampered((rows) => {
        rows.pop();
      }),
    ).to.include({ ok: false, seq: count });
  });

  it('serves the trail at GET /api/impersonations/events, with its filters and paging', async () => {
    const admin = await m2mToken(tp, CLIENTS.admin, READ_SCOPE);
    const get = (query: string) => trailEvents(tp, admin, query);
    await expectFullFlowTrail(tp, admin);
    expect((await get('?cursor=AA')).status).to.equal(400);
    expect((await get('?limit=0')).status).to.equal(400);
  });
});

describe('in-memory audit log: full', function () {
  this.timeout(20_000);

  it('refuses to append rather than forget, and so no token goes out without its record', async () => {
    const log = createMemoryAuditLog({ maxRows: 1 });
    const tp = await startProvider({ plugin: { auditLog: log } });
    try {
      const subject = await subjectToken(tp);
      expect(log.rows).to.have.length(1);
      expectError(await managementRequest(tp, { userId: 'bob' }, await m2mToken(tp)), 503, 'temporarily_unavailable');
      const refused = await exchange(tp, { subject_token: subject, resource: API });
      expect(refused.status, JSON.stringify(refused.body)).to.be.within(500, 599);
      expect(refused.body).to.not.have.property('access_token');
      expect(log.rows).to.have.length(1);
      expect((await log.verify()).ok).to.equal(true);
    } finally {
      await tp.close();
    }
  });

  it('checks its options up front', () => {
    expect(() => createMemoryAuditLog({ maxRows: 0 })).to.throw(TypeError, /maxRows/);
  });
});

describe('the canonical text a row hash covers', () => {
  /** The text as the chain has always written it, built member by member: what rows hashed before must hash the same. */
  function memberByMember(value: unknown): string {
    if (value === null || typeof value !== 'object') return JSON.stringify(value ?? null);
    if (Array.isArray(value)) return `[${value.map(memberByMember).join(',')}]`;
    const members = Object.keys(value).sort();
    return `{${members.map((key) => `${JSON.stringify(key)}:${memberByMember((value as Record<string, unknown>)[key])}`).join(',')}}`;
  }

  it('sorts keys at every depth and writes the text the chain has always hashed, a "__proto__" key included', () => {
    const values: unknown[] = [
      null,
      undefined,
      'dave',
      -0,
      12.5,
      [],
      {},
      [undefined, null, 'a', [2, 1]],
      { b: 1, a: { d: [{ z: true, y: 'line\u2028separator', x: '"quoted" \\ é' }], c: null }, u: undefined },
      JSON.parse('{"__proto__": {"polluted": true}, "a": 1}'),
      [
        '2026-12-06T23:33:47.806Z',
        'impersonation.exchange.succeeded',
        { ticketId: 'T-4711', reason: 'checkout fails' },
      ],
    ];
    for (const value of values) expect(canonicalJson(value), JSON.stringify(value)).to.equal(memberByMember(value));
    expect(canonicalJson({ b: [{ d: 1, c: 2 }], a: 'x' })).to.equal('{"a":"x","b":[{"c":2,"d":1}]}');
    expect(canonicalJson(JSON.parse('{"__proto__":{"b":1,"a":2}}'))).to.equal('{"__proto__":{"a":2,"b":1}}');
    expect(({} as { polluted?: boolean }).polluted).to.equal(undefined);
  });
});
