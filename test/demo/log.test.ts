import { expect } from 'chai';
import { decodeJwt } from 'jose';
import { startDemo, type Demo } from '../../demo/demo.js';
import { EVENTS, onImpersonationEvent } from '../../lib/index.js';
import { exchange, REQUEST_TIMEOUT, requestImpersonation, signIn } from './helpers.js';

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
    await feedRead(feedReads, 3);

    expect(lines.filter((line) => FEED_READ.test(line))).to.deep.equal([]);
    expect(lines.every((line) => !line.includes('\n'))).to.equal(true);
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
