import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { EVENTS, onImpersonationEvent } from '../../lib/index.js';
import type { AuditEntry } from '../../lib/audit/chain.js';
import {
  accountSignIn,
  askSubjectToken,
  csrfOf,
  EMERGENCY_ACCESS,
  exchange,
  managementToken,
  postAccountForm,
  request,
  REQUEST_TIMEOUT,
  requestImpersonation,
  signIn,
} from './helpers.js';

const FEED_READ = /revocation/;

/** Starts the demo with its log in `lines`, and counts the revocation feed's reads. */
async function loggedDemo(logFeedReads?: boolean): Promise<{ demo: Demo; lines: string[]; feedReads(): number }> {
  const lines: string[] = [];
  const demo = await startDemo({
    identityPort: 0,
    backendPort: 0,
    log: (line) => lines.push(line),
    ...(logFeedReads === undefined ? {} : { logFeedReads }),
  });
  let reads = 0;
  onImpersonationEvent(demo.identity.provider, EVENTS.revocationsServed, () => {
    reads += 1;
  });
  return { demo, lines, feedReads: () => reads };
}

/** Resolves once the resource API has read the feed `count` more times (it reads it every 250 ms). */
async function feedRead(feedReads: () => number, count: number): Promise<void> {
  const target = feedReads() + count;
  const deadline = Date.now() + REQUEST_TIMEOUT;
  while (feedReads() < target) {
    if (Date.now() > deadline) throw new Error(`the revocation feed was read ${feedReads()} times, not ${target}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('demo: its log', function () {
  this.timeout(20_000);
  const demos: Demo[] = [];
  after(() => Promise.all(demos.map((demo) => demo.close())));

  it("has a line for each step of an impersonation, and none for the revocation feed's reads", async () => {
    const { demo, lines, feedReads } = await loggedDemo();
    demos.push(demo);
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const requested = await requestImpersonation(demo, alice, {
      userId: 'dave',
      reason: 'Cannot see the invoices',
      // A line break in a request's words stays inside its line.
      ticketId: 'T-1234\n[audit] forged',
    });
    const exchanged = await exchange(demo, requested.body['subjectToken'] as string, alice);
    const sessionId = decodeJwt(exchanged.body['access_token'] as string)['impersonation_session'] as string;
    await feedRead(feedReads, 3);
    const stopped = await fetch(`${demo.backend.url}/api/stop-impersonation`, {
      method: 'POST',
      headers: { authorization: `Bearer ${alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sessionId }),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    expect(stopped.status).to.equal(204);
    expect(
      (await requestImpersonation(demo, alice, { userId: 'carol', reason: 'r', ticketId: 'T-9' })).status,
    ).to.equal(403);
    // A right-to-left override in what is quoted reorders nothing after it.
    const reversed = { userId: 'dave\u202E', reason: 'r', ticketId: 'T-9' };
    expect((await requestImpersonation(demo, alice, reversed)).status).to.equal(404);
    await feedRead(feedReads, 3);

    expect(lines.filter((line) => FEED_READ.test(line))).to.deep.equal([]);
    expect(lines.every((line) => !line.includes('\n'))).to.equal(true);
    expect(lines.filter((line) => /[\u202A-\u202E\u2066-\u2069]/u.test(line))).to.deep.equal([]);
    expect(lines).to.include('[backend] alice requested impersonation of dave  (ticket T-9): 404');
    const audit = lines.filter((line) => line.startsWith('[audit] '));
    const time = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ';
    const patterns = [
      `^\\[audit\\] impersonation\\.subject_token\\.created: alice may act as dave until ${time}, ticket T-1234 \\[audit\\] forged \\(subject token stid_\\S+, asked for by impersonation-backend\\)$`,
      `^\\[audit\\] impersonation\\.exchange\\.succeeded: alice is acting as dave, ticket T-1234 \\[audit\\] forged, session ${sessionId}, scope profile:read, until ${time} \\(client support-console\\)$`,
      `^\\[audit\\] impersonation\\.session\\.revoked: alice no longer acts as dave, session ${sessionId}: stopped by impersonation-backend \\(stopped in the support console by alice\\)$`,
      `^\\[audit\\] impersonation\\.subject_token\\.refused: alice may not act as carol, ticket T-9: access_denied \\(carol is protected from impersonation\\)$`,
    ];
    expect(audit, audit.join('\n')).to.have.length(patterns.length);
    audit.forEach((line, index) => expect(line).to.match(new RegExp(patterns[index]!)));
  });

  it("has a line for each step of bob's approval, in words, and none with a token", async () => {
    const { demo, lines } = await loggedDemo();
    demos.push(demo);
    const alice = await signIn(demo, { login: 'alice', password: 'alice-password' });
    const bobAsked = { userId: 'bob', reason: 'Cannot see the invoices', ticketId: 'T-1234' };
    const asked = await requestImpersonation(demo, alice, bobAsked);
    const requestId = (asked.body['approvalRequest'] as { id: string }).id;
    const { jar, html } = await accountSignIn(demo.backend.url, 'bob');
    const csrf = csrfOf(html);
    const answer = async (action: string, fields: Record<string, string>) =>
      (await postAccountForm(demo.backend.url, jar, action, { csrf, ...fields })).status;
    expect(await answer(`/account/support-access/requests/${requestId}/approve`, { duration: '3600' })).to.equal(303);
    const approval = await fetch(`${demo.backend.url}/api/impersonation-approval?requestId=${requestId}`, {
      headers: { authorization: `Bearer ${alice}` },
      signal: AbortSignal.timeout(REQUEST_TIMEOUT),
    });
    const { subjectToken } = (await approval.json()) as { subjectToken: string };
    expect((await exchange(demo, subjectToken, alice)).status).to.equal(200);
    const page = await (await request(jar, `${demo.backend.url}/account`)).text();
    const grantId = /id="grant-(agr_[A-Za-z0-9_-]{22})"/.exec(page)?.[1];
    expect(await answer(`/account/support-access/grants/${grantId}/end`, {})).to.equal(303);
    const again = await requestImpersonation(demo, alice, bobAsked);
    const deniedId = (again.body['approvalRequest'] as { id: string }).id;
    expect(await answer(`/account/support-access/requests/${deniedId}/deny`, { reason: 'Call me\nfirst' })).to.equal(
      303,
    );

    const audit = lines.filter(
      (line) => line.startsWith('[audit] ') && !line.includes('impersonation.revocations.served'),
    );
    const time = '\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ';
    const patterns = [
      `^\\[audit\\] impersonation\\.approval\\.requested: impersonation-backend asks bob to let alice act as them, ticket T-1234 \\(request ${requestId}, waiting until ${time}\\)$`,
      `^\\[audit\\] impersonation\\.approval\\.approved: bob approved alice acting as them \\(request ${requestId}, grant ${grantId}\\)$`,
      `^\\[audit\\] impersonation\\.access_grant\\.created: bob lets alice act as them until ${time} \\(grant ${grantId}, approving request ${requestId}\\)$`,
      `^\\[audit\\] impersonation\\.subject_token\\.created: alice may act as bob until ${time}, ticket T-1234 \\(subject token stid_\\S+, asked for by impersonation-backend\\)$`,
      `^\\[audit\\] impersonation\\.exchange\\.succeeded: alice is acting as bob, ticket T-1234, session imp_\\S+, scope profile:read, until ${time} \\(client support-console\\)$`,
      `^\\[audit\\] impersonation\\.access_grant\\.ended: bob ended grant ${grantId}: support no longer acts as them under it$`,
      `^\\[audit\\] impersonation\\.session\\.ended: alice no longer acts as bob, session imp_\\S+: access_grant_ended$`,
      `^\\[audit\\] impersonation\\.approval\\.requested: impersonation-backend asks bob to let alice act as them, ticket T-1234 \\(request ${deniedId}, waiting until ${time}\\)$`,
      `^\\[audit\\] impersonation\\.approval\\.denied: bob denied alice acting as them \\(request ${deniedId}\\): Call me first$`,
    ];
    expect(audit, audit.join('\n')).to.have.length(patterns.length);
    audit.forEach((line, index) => expect(line).to.match(new RegExp(patterns[index]!)));
    const backend = lines.filter((line) => line.startsWith('[backend] '));
    expect(backend).to.include(`[backend] alice requested impersonation of bob (ticket T-1234): 202`);
    expect(backend).to.include(`[backend] alice resumed impersonation of bob (request ${requestId}): 200`);
    expect(lines.join('\n')).to.not.contain(subjectToken);
  });

  it("prints an emergency access (break-glass) in the trail's order: the token's creation, then the bypass that allowed it", async () => {
    const { demo, lines } = await loggedDemo();
    demos.push(demo);
    const token = await managementToken(demo, 'subject-tokens:create', EMERGENCY_ACCESS);
    const created = await askSubjectToken(demo, token, {
      userId: 'bob',
      actorId: 'alice',
      clientId: 'support-console',
      context: { ticketId: 'INC-77' },
      breakGlass: { reason: 'Incident INC-77: payments failing' },
    });
    expect(created.status).to.equal(201);
    const id = created.body['id'] as string;

    // Both rows are written before the token is handed out, the creation's first.
    const { items } = await demo.auditLog.query!({ subject: 'bob' });
    const trail = [...(items as AuditEntry[])].reverse();
    expect(trail.map((row) => [row.event, row.subjectTokenId])).to.deep.equal([
      ['impersonation.subject_token.created', id],
      ['impersonation.break_glass.used', id],
    ]);
    expect(trail[1]!.seq).to.equal(trail[0]!.seq + 1);
    const audit = lines.filter((line) => line.startsWith('[audit] '));
    expect(audit.map((line) => /^\[audit\] (\S+):/.exec(line)?.[1])).to.deep.equal(trail.map((row) => row.event));
    expect(audit[0]).to.include(`(subject token ${id}, asked for by emergency-access)`);
    expect(audit[1]).to.match(
      /: alice may act as bob without their approval, ticket INC-77: break-glass by emergency-access/,
    );
  });

  it("has a line for each of the feed's reads when asked (DEMO_LOG_FEED=1)", async () => {
    const { demo, lines, feedReads } = await loggedDemo(true);
    demos.push(demo);
    await feedRead(feedReads, 3);
    const feedLines = lines.filter((line) => FEED_READ.test(line));
    expect(feedLines.length).to.be.at.least(3);
    expect(feedLines[0]).to.equal(
      '[audit] impersonation.revocations.served: the revocation feed listed 0 stopped sessions',
    );
  });
});
