import { expect } from 'chai';
import { ApprovalStore } from '../../lib/approvals/store.js';
import { APPROVAL_MODEL } from '../../lib/adapters/models.js';
import {
  grantStateOf,
  newAccessGrantId,
  newApprovalRequestId,
  requestStateOf,
  type AccessGrant,
  type ApprovalRequest,
} from '../../lib/approvals/record.js';
import type { BoundedIndexes } from '../../lib/adapters/contracts/indexes.js';
import type { SessionAdapter } from '../../lib/adapters/contracts/sessions.js';
import { ADAPTERS } from '../support/adapters.js';

const now = () => Math.floor(Date.now() / 1000);

function grant(subject: string, overrides: Partial<AccessGrant> = {}): AccessGrant {
  return {
    id: newAccessGrantId(),
    subject,
    origin: 'customer',
    createdAt: now(),
    expiresAt: now() + 3600,
    ...overrides,
  };
}

function request(subject: string, overrides: Partial<ApprovalRequest> = {}): ApprovalRequest {
  return {
    id: newApprovalRequestId(),
    subject,
    actor: 'alice',
    requestedBy: 'backend',
    context: { ticket: 'T-1', reason: 'checkout fails' },
    createdAt: now(),
    expiresAt: now() + 900,
    ...overrides,
  };
}

for (const { name, open } of ADAPTERS) {
  describe(`approval store (${name} adapter)`, () => {
    let store: ApprovalStore;
    let adapter: SessionAdapter & BoundedIndexes;
    beforeEach(async () => {
      adapter = new (await open())(APPROVAL_MODEL);
      store = new ApprovalStore(adapter);
    });

    it("keeps a grant, lists a customer's grants in force latest expiry first, and no one else's", async () => {
      const sooner = grant('bob', { expiresAt: now() + 600, scope: ['read'], resource: 'https://api.example' });
      const later = grant('bob', { expiresAt: now() + 7200, actor: 'alice', note: 'until Friday' });
      await store.saveGrant(sooner);
      await store.saveGrant(later);
      await store.saveGrant(grant('carol'));
      expect(await store.findGrant(sooner.id)).to.deep.equal(sooner);
      expect((await store.activeGrants('bob', 10)).map((item) => item.id)).to.deep.equal([later.id, sooner.id]);
      expect(await store.activeGrants('nobody', 10)).to.deep.equal([]);
      expect(await store.findGrant(newAccessGrantId())).to.equal(undefined);
    });

    it('ends a grant once: the second ender finds it ended and changes nothing', async () => {
      const given = grant('bob');
      await store.saveGrant(given);
      const [first, second] = await Promise.all([
        store.endGrant(given, { at: now(), by: 'customer' }),
        store.endGrant(given, { at: now() + 1, by: 'expiry' }),
      ]);
      expect([first.changedNow, second.changedNow].sort()).to.deep.equal([false, true]);
      const winner = first.changedNow ? first : second;
      const found = await store.findGrant(given.id);
      expect(found?.ended).to.deep.equal(winner.record.ended);
      expect(grantStateOf(found!)).to.equal('ended');
      expect(await store.activeGrants('bob', 10)).to.deep.equal([]);
      const again = await store.endGrant(given, { at: now(), by: 'customer' });
      expect(again.changedNow).to.equal(false);
      expect(again.record.ended).to.deep.equal(winner.record.ended);
    });

    it('leaves an expired grant out of the grants in force', async () => {
      const expired = grant('bob', { createdAt: now() - 10, expiresAt: now() - 1 });
      await store.saveGrant(expired);
      expect(await store.activeGrants('bob', 10)).to.deep.equal([]);
      const found = await store.findGrant(expired.id);
      expect(found && grantStateOf(found)).to.equal('expired');
    });

    it('answers a request once, whatever races it: approve against deny', async () => {
      const asked = request('bob', { scope: ['read'] });
      await store.saveRequest(asked, 20);
      expect((await store.pendingRequests('bob', 10)).map((item) => item.id)).to.deep.equal([asked.id]);
      const [approved, denied] = await Promise.all([
        store.answer(asked, { at: now(), decision: 'approved', grantId: newAccessGrantId() }),
        store.answer(asked, { at: now(), decision: 'denied', reason: 'not now' }),
      ]);
      expect([approved.changedNow, denied.changedNow].sort()).to.deep.equal([false, true]);
      const winner = approved.changedNow ? approved : denied;
      const found = await store.findRequest(asked.id);
      expect(found?.answer).to.deep.equal(winner.record.answer);
      expect(requestStateOf(found!)).to.equal(winner.record.answer?.decision);
      expect(await store.pendingRequests('bob', 10)).to.deep.equal([]);
    });

    it('tells a request that waited too long as expired, and records its expiry as an answer', async () => {
      const late = request('bob', { createdAt: now() - 20, expiresAt: now() - 1 });
      await store.saveRequest(late, 20);
      expect(await store.pendingRequests('bob', 10)).to.deep.equal([]);
      const found = await store.findRequest(late.id);
      expect(found && requestStateOf(found)).to.equal('expired');
      const expiry = await store.answer(found!, { at: now(), decision: 'expired' });
      expect(expiry.changedNow).to.equal(true);
      const approval = await store.answer(found!, { at: now(), decision: 'approved' });
      expect(approval.changedNow).to.equal(false);
      expect(approval.record.answer?.decision).to.equal('expired');
    });

    it('never reads a grant as a request, nor a request as a grant', async () => {
      const given = grant('bob');
      const asked = request('bob');
      await store.saveGrant(given);
      await store.saveRequest(asked, 20);
      expect(await store.findRequest(given.id)).to.equal(undefined);
      expect(await store.findGrant(asked.id)).to.equal(undefined);
    });

    it('reads a grant whose ender failed right after winning its consume as ended: it allows nothing more', async () => {
      const given = grant('bob');
      await store.saveGrant(given);
      // The consume is won; the end is never written.
      expect(await adapter.consumeOnce(given.id)).to.equal(true);
      const found = await store.findGrant(given.id);
      expect(found && grantStateOf(found)).to.equal('ended');
      expect(await store.activeGrants('bob', 10)).to.deep.equal([]);
      // Ending it again (a retry) changes nothing and still finds it ended.
      const retry = await store.endGrant(given, { at: now(), by: 'customer' });
      expect(retry.changedNow).to.equal(false);
      expect(retry.record.ended).to.not.equal(undefined);
      // And no longer counts it in force: the customer's place is free again.
      expect(await store.reserveGrant(grant('bob'), { inForce: 1, givenPerDay: 10 })).to.equal('reserved');
    });

    // The review's attack: concurrent bursts got 60 requests waiting against a bound of 20, and 23
    // grants in force against 20, past what the customer's lists show.
    it('keeps a burst of concurrent requests within the bound: 60 asks, 20 waiting, all of them listed', async () => {
      const asks = Array.from({ length: 60 }, () => request('erin'));
      const saved = await Promise.all(asks.map((asked) => store.saveRequest(asked, 20)));
      expect(saved.filter((outcome) => outcome === 'saved')).to.have.length(20);
      const waiting = await store.pendingRequests('erin', 100);
      expect(waiting).to.have.length(20);
      const refused = asks.filter((_asked, at) => saved[at] !== 'saved');
      // A refused request is never read: its id leads nowhere.
      expect(await Promise.all(refused.map((asked) => store.findRequest(asked.id)))).to.deep.equal(
        refused.map(() => undefined),
      );
      // Answering one makes room for exactly one more.
      await store.answer(waiting[0]!, { at: now(), decision: 'denied' });
      const again = await Promise.all(Array.from({ length: 10 }, () => store.saveRequest(request('erin'), 20)));
      expect(again.filter((outcome) => outcome === 'saved')).to.have.length(1);
    });

    it('keeps a burst of concurrent grants within the bound in force: 60 given at once, 20 reserved', async () => {
      const given = Array.from({ length: 60 }, () => grant('frank'));
      const outcomes = await Promise.all(
        given.map((each) => store.reserveGrant(each, { inForce: 20, givenPerDay: 100 })),
      );
      expect(outcomes.filter((outcome) => outcome === 'reserved')).to.have.length(20);
      expect(outcomes.filter((outcome) => outcome === 'too_many_in_force')).to.have.length(40);
      await Promise.all(given.filter((_each, at) => outcomes[at] === 'reserved').map((each) => store.saveGrant(each)));
      expect(await store.activeGrants('frank', 100)).to.have.length(20);
    });

    it('keeps a burst of concurrent grants within the bound a day, ended ones included', async () => {
      const given = Array.from({ length: 60 }, () => grant('gina'));
      const outcomes = await Promise.all(
        given.map((each) => store.reserveGrant(each, { inForce: 100, givenPerDay: 20 })),
      );
      expect(outcomes.filter((outcome) => outcome === 'reserved')).to.have.length(20);
      expect(outcomes.filter((outcome) => outcome === 'too_many_given')).to.have.length(40);
      const kept = given.filter((_each, at) => outcomes[at] === 'reserved');
      await Promise.all(kept.map((each) => store.saveGrant(each)));
      await Promise.all(kept.map((each) => store.endGrant(each, { at: now(), by: 'customer' })));
      expect(await store.activeGrants('gina', 100)).to.deep.equal([]);
      expect(await store.reserveGrant(grant('gina'), { inForce: 100, givenPerDay: 20 })).to.equal('too_many_given');
    });

    it('takes both places of a grant or neither, and gives them back when its approval lost', async () => {
      const first = grant('hank');
      expect(await store.reserveGrant(first, { inForce: 1, givenPerDay: 2 })).to.equal('reserved');
      // Full in force: nothing is taken among those given either.
      expect(await store.reserveGrant(grant('hank'), { inForce: 1, givenPerDay: 2 })).to.equal('too_many_in_force');
      await store.releaseGrant(first);
      const second = grant('hank');
      expect(await store.reserveGrant(second, { inForce: 1, givenPerDay: 1 })).to.equal('reserved');
      await store.saveGrant(second);
      // Reserving a grant that holds its places already needs no more room.
      expect(await store.reserveGrant(second, { inForce: 1, givenPerDay: 1 })).to.equal('reserved');
    });

    it('bounds a listing by its limit', async () => {
      for (let index = 0; index < 5; index += 1) await store.saveGrant(grant('dave'));
      expect(await store.activeGrants('dave', 3)).to.have.length(3);
    });
  });
}
