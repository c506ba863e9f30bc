import { expect } from 'chai';
import { decodeJwt, userAccessToken } from '../support/http.js';
import { adminToken, impersonate, revokeSession } from '../support/impersonations.js';
import { ADAPTERS } from '../support/adapters.js';
import { POLL, pollUntil, RECEIVERS, receiverToken, ssfRequest, startSsfProvider, STREAMS } from '../support/ssf.js';
import type { SsfStop } from '../../lib/index.js';

/** Each receiver runs for one organisation; each customer belongs to one. */
const ORGANISATION_OF: Record<string, string> = {
  [RECEIVERS.first.client_id]: 'northwind',
  [RECEIVERS.second.client_id]: 'globex',
  bob: 'northwind',
  carol: 'globex',
};

for (const kind of ADAPTERS) {
  describe(`SSF: what a stream covers (streamCovers) on the ${kind.name} store`, function () {
    this.timeout(60_000);

    it("tells each receiver its own organisation's stops only, never another's", async () => {
      const asked: SsfStop[] = [];
      const tp = await startSsfProvider(kind, {
        streamCovers: async (stream, stop) => {
          asked.push(stop);
          return ORGANISATION_OF[stream.receiver] === ORGANISATION_OF[stop.subject];
        },
      });
      try {
        const streams = await Promise.all(
          [RECEIVERS.first, RECEIVERS.second].map(async (receiver) => {
            const token = await receiverToken(tp, receiver);
            const created = await ssfRequest(tp, 'POST', STREAMS, token, { delivery: { method: POLL } });
            expect(created.status).to.equal(201);
            return { token, endpoint: (created.body['delivery'] as { endpoint_url: string }).endpoint_url };
          }),
        );
        const admin = await adminToken(tp);
        for (const userId of ['bob', 'carol']) {
          const { session } = await impersonate(tp, {
            actorToken: await userAccessToken(tp, 'alice'),
            subject: { userId, context: { ticket: 'SUP-1' } },
          });
          expect((await revokeSession(tp, admin, session, { reason: 'done' })).status).to.equal(204);
        }
        // Nothing waits in the outbox: every SET is in its poll queue.
        const deadline = Date.now() + 10_000;
        while (Object.keys((await tp.impersonation.ssf().stats()).subscriptions).length) {
          expect(Date.now()).to.be.below(deadline);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        // Each stop asked about for each stream.
        expect(asked.map((stop) => stop.subject)).to.deep.equal(['bob', 'bob', 'carol', 'carol']);
        const subjects = await Promise.all(
          streams.map(async ({ token, endpoint }) =>
            Object.values(await pollUntil(tp, endpoint, token, 1000)).map(
              (jwt) => (decodeJwt(jwt)['sub_id'] as { user: { sub: string } }).user.sub,
            ),
          ),
        );
        expect(subjects).to.deep.equal([['bob'], ['carol']]);
      } finally {
        await tp.close();
      }
    });

    it('refuses a streamCovers that is not a function', async () => {
      let error: unknown;
      try {
        await startSsfProvider(kind, { streamCovers: 'northwind' as never });
      } catch (caught) {
        error = caught;
      }
      expect(String(error)).to.match(/"ssf.streamCovers" must be a function/);
    });
  });
}
