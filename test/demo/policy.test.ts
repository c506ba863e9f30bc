/**
 * The demo's support roles, as the identity service decides them with the
 * plugin's hooks (demo/identity/support-policy.ts, docs/policy.md): two
 * organisations whose agents act only for their own customers, a read-only
 * tier and a read-and-change tier, a mandatory ticket, and a longest session
 * per tier. Over HTTP, through the backend as the console asks and through
 * the Management API as any other caller would.
 */
import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { SUPPORT_TIERS } from '../../demo/seed.js';
import {
  accountSignIn,
  askSubjectToken,
  callResourceApi,
  EMERGENCY_ACCESS,
  exchange,
  managementToken,
  quiet,
  requestImpersonation,
  signIn,
} from './helpers.js';

const ASKED = { reason: 'Cannot see the invoices', ticketId: 'T-1234' };
const CROSS_ORGANISATION = 'alice supports Northwind customers only; frank is a customer of Globex';

describe('demo: who may act for whom (support roles, organisations, tickets, session lengths)', function () {
  this.timeout(30_000);
  let demo: Demo;
  let alice: string;
  let erin: string;
  let grace: string;

  before(async () => {
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet });
    const signedIn = (login: string) => signIn(demo, { login, password: `${login}-password` });
    [alice, erin, grace] = await Promise.all([signedIn('alice'), signedIn('erin'), signedIn('grace')]);
  });
  after(() => demo?.close());

  async function actAs(token: string, userId: string, access: 'read' | 'edit' = 'read', scope = 'profile:read') {
    const asked = await requestImpersonation(demo, token, { userId, ...ASKED, access });
    expect(asked.status, JSON.stringify(asked.body)).to.equal(200);
    const exchanged = await exchange(demo, asked.body['subjectToken'] as string, token, undefined, {}, scope);
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    return exchanged.body;
  }

  describe('an agent acts only for the customers of their organisation', () => {
    it('refuses alice (Northwind) for frank (Globex), in the words the console shows', async () => {
      const refused = await requestImpersonation(demo, alice, { userId: 'frank', ...ASKED });
      expect(refused.status).to.equal(403);
      expect(refused.body).to.deep.equal({ error: 'access_denied', error_description: CROSS_ORGANISATION });
    });

    it('refuses grace (Globex) for dave (Northwind), and lets her act as frank, whose data she sees', async () => {
      const refused = await requestImpersonation(demo, grace, { userId: 'dave', ...ASKED });
      expect(refused.body['error_description']).to.equal(
        'grace supports Globex customers only; dave is a customer of Northwind',
      );
      const token = (await actAs(grace, 'frank'))['access_token'] as string;
      const me = await callResourceApi(demo, token);
      expect(me.status).to.equal(200);
      expect(me.body).to.include({ subject: 'frank', actor: 'grace' });
    });

    it("offers a customer only their own organisation's support staff to give access to ahead of time", async () => {
      const actorsOffered = (html: string) =>
        [...(/<select id="give-actor"[^>]*>([\s\S]*?)<\/select>/.exec(html)?.[1] ?? '').matchAll(/value="([^"]*)"/g)]
          .map(([, value]) => value)
          .filter(Boolean);
      expect(actorsOffered((await accountSignIn(demo.backend.url, 'bob')).html)).to.deep.equal(['alice', 'erin']);
      expect(actorsOffered((await accountSignIn(demo.backend.url, 'frank')).html)).to.deep.equal(['grace']);
    });

    it('refuses at the exchange too: a subject token of frank with no agent named is not redeemed by alice', async () => {
      const m2m = await managementToken(demo, 'subject-tokens:create');
      const created = await askSubjectToken(demo, m2m, { userId: 'frank', context: { ticketId: 'T-1' } });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const refused = await exchange(demo, created.body['subjectToken'] as string, alice);
      expect(refused.status).to.equal(400);
      expect(refused.body).to.include({ error: 'invalid_request', error_description: CROSS_ORGANISATION });
    });
  });

  describe('no one acts as staff or as a protected customer, break-glass included', () => {
    it('refuses alice for erin and erin for alice (support staff), and carol (protected), whoever asks', async () => {
      const cases = [
        [alice, 'erin', 'erin is not a customer'],
        [erin, 'alice', 'alice is not a customer'],
        [alice, 'carol', 'carol is protected from impersonation'],
      ] as const;
      for (const [token, userId, words] of cases) {
        const refused = await requestImpersonation(demo, token, { userId, ...ASKED });
        expect(refused.body).to.deep.equal({ error: 'access_denied', error_description: words });
        const m2m = await managementToken(demo, 'subject-tokens:create', EMERGENCY_ACCESS);
        const bypass = await askSubjectToken(demo, m2m, {
          userId,
          actorId: token === alice ? 'alice' : 'erin',
          clientId: 'support-console',
          context: ASKED,
          breakGlass: { reason: 'outage' },
        });
        expect(bypass.status, JSON.stringify(bypass.body)).to.equal(403);
        expect(bypass.body['error_description']).to.equal(words);
      }
    });
  });

  describe("the agent's tier sets the scope ceiling", () => {
    it('lets alice (read and change) have profile:write for an edit', async () => {
      const body = await actAs(alice, 'dave', 'edit', 'profile:read profile:write');
      expect(body['scope']).to.equal('profile:read profile:write');
    });

    it('refuses erin (read only) an edit, in words, and lets her read', async () => {
      const refused = await requestImpersonation(demo, erin, { userId: 'dave', ...ASKED, access: 'edit' });
      expect(refused.status).to.equal(403);
      expect(refused.body['error_description']).to.equal(
        "erin's role (support trainee, read only) may not change customer data",
      );
      expect((await actAs(erin, 'dave'))['scope']).to.equal('profile:read');
    });
  });

  describe('a ticket is mandatory', () => {
    for (const [what, context] of [
      ['no context', undefined],
      ['no ticket', { reason: 'r' }],
      ['a ticket that is not text', { ticketId: 1234 }],
    ] as const) {
      it(`refuses a subject token with ${what}, whoever asks`, async () => {
        for (const client of [undefined, EMERGENCY_ACCESS]) {
          const m2m = await managementToken(demo, 'subject-tokens:create', client);
          const refused = await askSubjectToken(demo, m2m, {
            userId: 'dave',
            actorId: 'alice',
            clientId: 'support-console',
            ...(context === undefined ? {} : { context }),
            ...(client ? { breakGlass: { reason: 'outage' } } : {}),
          });
          expect(refused.status, JSON.stringify(refused.body)).to.equal(403);
          expect(refused.body['error_description']).to.equal(
            'a ticket is required to act as a customer (context.ticketId)',
          );
        }
      });
    }
  });

  describe('a ticket and a reason show what they say', () => {
    const INVISIBLE = [
      '\u200B',
      '\u2060',
      '\u3164',
      '\u115F',
      '\u1160',
      '\uFFA0',
      '\u00AD',
      '\u034F',
      '\u180E',
      '\u200C\u200D',
      '\u2800',
      '\u200B \u3164\t\u2060',
      '\u{16FE4}',
      '\u0300\u20DD',
      '\uE000',
      '\u0378',
    ];
    const RULE = 'must hold a visible character and no bidirectional control';
    const code = (text: string) =>
      [...text].map((char) => `U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}`).join(' ');

    /** As the console's backend asks, and as the break-glass client asks the Management API. */
    async function expectRefused(field: 'ticketId' | 'reason', text: string) {
      const asked = await requestImpersonation(demo, alice, { userId: 'dave', ...ASKED, [field]: text });
      expect(asked.status, JSON.stringify(asked.body)).to.equal(400);
      expect(asked.body).to.deep.equal({ error: 'invalid_request', error_description: `${field} ${RULE}` });
      for (const client of [undefined, EMERGENCY_ACCESS]) {
        const m2m = await managementToken(demo, 'subject-tokens:create', client);
        const refused = await askSubjectToken(demo, m2m, {
          userId: 'dave',
          actorId: 'alice',
          clientId: 'support-console',
          context: { ...ASKED, [field]: text },
          ...(client ? { breakGlass: { reason: 'outage' } } : {}),
        });
        expect(refused.status, JSON.stringify(refused.body)).to.equal(400);
        expect(refused.body).to.deep.equal({ error: 'invalid_request', error_description: `context.${field} ${RULE}` });
      }
    }

    for (const text of INVISIBLE) {
      it(`refuses a ticket of ${code(text)} alone (400), through the console's backend, the Management API and break-glass`, async () => {
        await expectRefused('ticketId', text);
      });
    }

    it('refuses a right-to-left override in a reason, and a break-glass reason of invisible characters', async () => {
      await expectRefused('reason', 'Cannot see \u202Eseciovni eht');
      const m2m = await managementToken(demo, 'subject-tokens:create', EMERGENCY_ACCESS);
      for (const reason of ['\u200B\u200B', 'outage \u2066x']) {
        const refused = await askSubjectToken(demo, m2m, {
          userId: 'dave',
          actorId: 'alice',
          clientId: 'support-console',
          context: ASKED,
          breakGlass: { reason },
        });
        expect(refused.body).to.deep.equal({
          error: 'invalid_request',
          error_description: `breakGlass.reason ${RULE}`,
        });
      }
    });
  });

  describe('each tier has a longest session', () => {
    it(`ends erin's impersonations after ${SUPPORT_TIERS.read.maxSessionSeconds} s and alice's after ${SUPPORT_TIERS.write.maxSessionSeconds} s`, async () => {
      for (const [token, tier] of [
        [erin, SUPPORT_TIERS.read],
        [alice, SUPPORT_TIERS.write],
      ] as const) {
        const body = await actAs(token, 'dave');
        expect(body['expires_in']).to.equal(tier.maxSessionSeconds);
        const claims = decodeJwt(body['access_token'] as string);
        expect(claims.exp! - claims.iat!).to.equal(tier.maxSessionSeconds);
      }
    });
  });
});
