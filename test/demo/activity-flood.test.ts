import { expect } from 'chai';
import { startDemo, type Demo } from '../../demo/demo.js';
import { createMemoryAuditLog, type MemoryAuditLog } from '../../lib/index.js';
import { accountSignIn, exchange, letSupportIn, quiet, requestImpersonation, signIn } from './helpers.js';

const BOB = { userId: 'bob', reason: 'Cannot see the invoices', ticketId: 'T-1234' };
/** As small as the trail the review filled with 300 anonymous requests. */
const MAX_ROWS = 300;

describe("demo: anonymous traffic neither fills the trail nor hides an access from the customer's page", function () {
  this.timeout(60_000);
  let demo: Demo;
  let trail: MemoryAuditLog;

  before(async () => {
    trail = createMemoryAuditLog({ maxRows: MAX_ROWS });
    demo = await startDemo({ identityPort: 0, backendPort: 0, log: quiet, auditLog: trail });
    await letSupportIn(demo.backend.url);
  });
  after(() => demo?.close());

  it('after 300 credential-less replays and more rows than a page holds, the next impersonation succeeds and bob sees the access', async () => {
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const used = await requestImpersonation(demo, alice, BOB);
    expect((await exchange(demo, used.body['subjectToken'] as string, alice)).status).to.equal(200);

    // The public console's id, no actor token, no credential: what anyone can send.
    for (let sent = 0; sent < 300; sent += 25) {
      const replies = await Promise.all(
        Array.from({ length: 25 }, () => exchange(demo, used.body['subjectToken'] as string)),
      );
      expect(new Set(replies.map((reply) => reply.status))).to.deep.equal(new Set([400]));
    }
    // Rows of other kinds about bob, more than one page of the trail: subject tokens created for him.
    for (let created = 0; created < 110; created += 1) {
      expect((await requestImpersonation(demo, alice, BOB)).status).to.equal(200);
    }
    expect(trail.rows.length).to.be.below(MAX_ROWS);

    const next = await requestImpersonation(demo, alice, BOB);
    expect((await exchange(demo, next.body['subjectToken'] as string, alice)).status).to.equal(200);

    const { html } = await accountSignIn(demo.backend.url, 'bob');
    expect(html).to.not.contain('No one from support has accessed your account');
    expect(html.match(/Alice Adams \(support\) accessed your account on /g)).to.have.length(2);
  });
});
