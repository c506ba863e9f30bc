import { expect } from 'chai';
import { SESSION_CLAIM } from '../../lib/sessions/record.js';
import { createMemoryAuditLog, EVENTS, onImpersonationEvent, type MemoryAuditLog } from '../../lib/index.js';
import {
  API,
  CLIENTS,
  READ_SCOPE,
  REVOKE_SCOPE,
  TENANT_API,
  startProvider,
  type TestProvider,
} from '../support/provider.js';
import {
  apiRequest,
  exchange,
  expectError,
  managementRequest,
  m2mToken,
  subjectToken,
  type Reply,
} from '../support/http.js';

const UNSTORABLE = /^[\w ]*holds text that cannot be stored \(U\+0000 or a lone surrogate\)$/;

/**
 * Text no store of the plugin can hold the same way (U+0000; a UTF-16
 * surrogate without its pair) is refused where it comes in, whatever the
 * store: the answer to a request never depends on the deployment's store, and
 * a value PostgreSQL would refuse never reaches a batch it shares with other
 * requests. The attacker: a Management API caller, or anyone at the token
 * endpoint with a public client's id.
 */
describe('text no store can hold is refused where it comes in, on any store', function () {
  this.timeout(30_000);
  let log: MemoryAuditLog;
  let tp: TestProvider;
  let creator: string;
  let admin: string;

  before(async () => {
    log = createMemoryAuditLog();
    tp = await startProvider({
      plugin: {
        auditLog: log,
        // Policies whose words quote what they were given: recorded even so.
        canImpersonate: ({ subject }) => (subject === 'carol' ? { reason: 'carol\u0000 is off \ud800limits' } : true),
        canExchange: ({ resource }) => (resource === `${TENANT_API}closed` ? { reason: 'closed\u0000tenant' } : true),
      },
    });
    creator = await m2mToken(tp);
    admin = await m2mToken(tp, CLIENTS.admin, `${READ_SCOPE} ${REVOKE_SCOPE}`);
  });
  after(() => tp?.close());

  /** A value in the error never, nothing created, nothing recorded. */
  async function expectRefused(send: () => Promise<Reply>, field: string) {
    const rows = log.rows.length;
    const created: unknown[] = [];
    const stop = onImpersonationEvent(tp.provider, EVENTS.subjectTokenCreated, (event) => created.push(event));
    try {
      const result = await send();
      expectError(result, 400, 'invalid_request', UNSTORABLE);
      expect(result.body['error_description']).to.equal(
        `${field} holds text that cannot be stored (U+0000 or a lone surrogate)`,
      );
      expect(created).to.have.length(0);
      expect(log.rows.length).to.equal(rows);
    } finally {
      stop();
    }
  }

  describe('POST /api/subject-tokens: any string of the body, at any depth, keys included', () => {
    const bodies: Array<[string, Record<string, unknown>, string]> = [
      ['U+0000 in userId', { userId: 'bob\u0000' }, 'userId'],
      ['a lone surrogate in userId', { userId: 'b\ud800ob' }, 'userId'],
      ['U+0000 in a context value', { userId: 'bob', context: { ticketId: 'T\u0000' } }, 'context'],
      [
        'a lone low surrogate in a nested context value',
        { userId: 'bob', context: { a: { b: ['x', '\udc00'] } } },
        'context',
      ],
      ['U+0000 in a context key, deep', { userId: 'bob', context: { a: [{ 'k\u0000': 1 }] } }, 'context'],
      ['a lone surrogate in a context key', { userId: 'bob', context: { '\ud83d': true } }, 'context'],
      ['U+0000 in actorId', { userId: 'bob', actorId: 'alice\u0000' }, 'actorId'],
      ['U+0000 in clientId', { userId: 'bob', clientId: `${CLIENTS.console.client_id}\u0000` }, 'clientId'],
      ['U+0000 in a field name', { userId: 'bob', 'x\u0000': 1 }, 'a field name'],
    ];
    for (const [name, body, field] of bodies) {
      it(`answers 400 invalid_request for ${name}, naming the field and never echoing the value`, async () => {
        await expectRefused(() => managementRequest(tp, body, creator), field);
      });
    }

    it('still accepts what a store holds: a surrogate pair, U+0001, U+FFFD and every other character', async () => {
      const result = await managementRequest(
        tp,
        { userId: 'bob', context: { '😀': 'a\u0001b\uFFFD😀\u00e9\t' } },
        creator,
      );
      expect(result.status, JSON.stringify(result.body)).to.equal(201);
      expect((await log.verify()).ok).to.equal(true);
    });
  });

  describe('a ticket and a reason show what they say (a visible character, no bidirectional control)', () => {
    const RULE = 'must hold a visible character and no bidirectional control';
    const contexts: Array<[string, Record<string, unknown>]> = [
      ['a ticketId of a zero-width space', { ticketId: '\u200B' }],
      ['a ticket of a Hangul filler', { ticket: '\u3164' }],
      ['a reason of a word joiner and a soft hyphen', { reason: '\u2060\u00AD' }],
      ['a reason with a right-to-left override', { ticketId: 'T-1', reason: 'refund \u202Edeifirev' }],
      ['a ticketId with a left-to-right isolate', { ticketId: 'T-\u20661' }],
    ];
    for (const [name, context] of contexts) {
      it(`answers 400 invalid_request for ${name}, creating and recording nothing`, async () => {
        const rows = log.rows.length;
        const result = await managementRequest(tp, { userId: 'bob', context }, creator);
        const field = Object.keys(context).at(-1)!;
        expectError(result, 400, 'invalid_request');
        expect(result.body['error_description']).to.equal(`context.${field} ${RULE}`);
        expect(log.rows.length).to.equal(rows);
      });
    }

    it('accepts right-to-left text as written, and refuses a revocation reason of invisible characters', async () => {
      const created = await managementRequest(
        tp,
        { userId: 'bob', context: { ticketId: 'T-1', reason: 'שלום' } },
        creator,
      );
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const session = await impersonate();
      const result = await apiRequest(tp, 'DELETE', `/api/impersonations/${session}`, admin, { reason: '\uFFA0' });
      expectError(result, 400, 'invalid_request', new RegExp(`^reason ${RULE}$`));
      expect((await apiRequest(tp, 'GET', `/api/impersonations/${session}`, admin)).body['state']).to.equal('active');
    });
  });

  describe('the other requests of the Management API', () => {
    it('answers 400 for U+0000 in the reason of a revocation, and revokes nothing', async () => {
      const session = await impersonate();
      const result = await apiRequest(tp, 'DELETE', `/api/impersonations/${session}`, admin, { reason: 'fraud\u0000' });
      expectError(result, 400, 'invalid_request', /^reason holds text that cannot be stored/);
      const kept = await apiRequest(tp, 'GET', `/api/impersonations/${session}`, admin);
      expect(kept.body['state']).to.equal('active');
    });

    const queries: Array<[string, string, string]> = [
      ['the subject of the list', '/api/impersonations?subject=bob%00x', 'subject'],
      ['the actor of the list', '/api/impersonations?actor=%00', 'actor'],
      ['the clientId of the list', '/api/impersonations?clientId=a%00', 'clientId'],
      ['the subject of the trail', '/api/impersonations/events?subject=bob%00x', 'subject'],
      ['the actor of the trail', '/api/impersonations/events?actor=alice%00', 'actor'],
      ['the cursor of the trail', '/api/impersonations/events?cursor=%00', 'cursor'],
      ['a repeated parameter', '/api/impersonations?subject=bob&subject=%00', 'subject'],
      ['a parameter name', '/api/impersonations?x%00=1', 'a query parameter name'],
      ['the cursor of the revocation feed (public)', '/api/impersonations/revocations?cursor=%00', 'cursor'],
    ];
    for (const [name, path, field] of queries) {
      it(`answers 400 invalid_request for U+0000 in ${name}`, async () => {
        const result = await apiRequest(tp, 'GET', path, admin);
        expectError(result, 400, 'invalid_request');
        expect(result.body['error_description']).to.equal(
          `${field} holds text that cannot be stored (U+0000 or a lone surrogate)`,
        );
      });
    }

    it('answers 400 for a cursor whose position holds U+0000, in the list and in the public feed', async () => {
      const cursor = Buffer.from(JSON.stringify([Date.now(), 'imp_\u0000'])).toString('base64url');
      for (const path of ['/api/impersonations', '/api/impersonations/revocations']) {
        expectError(await apiRequest(tp, 'GET', `${path}?cursor=${cursor}`, admin), 400, 'invalid_request', /cursor/);
      }
    });
  });

  describe('policies and the token endpoint', () => {
    it("records a policy's refusal whose words a store would refuse, with U+FFFD in their place", async () => {
      const refused = await managementRequest(tp, { userId: 'carol' }, creator);
      expect(refused.status).to.equal(403);
      const row = log.rows.at(-1)!;
      expect(row).to.include({
        event: EVENTS.subjectTokenRefused,
        reason: 'access_denied: carol\uFFFD is off \uFFFDlimits',
      });

      const exchanged = await exchange(tp, { subject_token: await subjectToken(tp), resource: `${TENANT_API}closed` });
      expect(exchanged.status).to.equal(400);
      expect(log.rows.at(-1)).to.include({
        event: EVENTS.exchangeRefused,
        reason: 'invalid_request: closed\uFFFDtenant',
      });
      expect((await log.verify()).ok).to.equal(true);
    });

    it('refuses a resource indicator holding U+0000 with invalid_target, even one the deployment accepts, burning nothing', async () => {
      const subject = await subjectToken(tp);
      const refused = await exchange(tp, { subject_token: subject, resource: `${TENANT_API}a\u0000b` });
      expectError(refused, 400, 'invalid_target', /^resource holds text that cannot be stored/);
      // Refused with the request's parameters, before its subject token is read: nothing reaches the trail.
      expect(log.rows.at(-1)).to.include({ event: EVENTS.subjectTokenCreated });
      const redeemed = await exchange(tp, { subject_token: subject, resource: `${TENANT_API}a` });
      expect(redeemed.status, JSON.stringify(redeemed.body)).to.equal(200);
    });
  });

  async function impersonate(): Promise<string> {
    const result = await exchange(tp, { subject_token: await subjectToken(tp), resource: API });
    expect(result.status, JSON.stringify(result.body)).to.equal(200);
    const [, payload] = (result.body['access_token'] as string).split('.');
    return (JSON.parse(Buffer.from(payload!, 'base64url').toString('utf8')) as Record<string, string>)[SESSION_CLAIM]!;
  }
});
