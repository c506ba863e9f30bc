import { expect } from 'chai';
import { createMemoryAdapter } from '../../lib/index.js';
import { suiteAdapterKind } from '../support/adapters.js';
import { exchangeAsActor } from '../support/impersonations.js';
import { managementRequest, m2mToken, userAccessToken } from '../support/http.js';
import { CLIENTS, startProvider, type TestProvider } from '../support/provider.js';

/** Scaled down: the share of each client, and on memory the SubjectToken model's bound (two entries a token). */
const SHARE = 5;
const BOUND = 16;

/**
 * One Management API client creating subject tokens as fast as it can (a
 * runaway job, a load test) is refused past its share, 429 with
 * `Retry-After`, and leaves the store to the others: another client still
 * creates subject tokens, and they are still exchanged.
 */
describe(`subject tokens: a share per Management API client (${suiteAdapterKind().name})`, function () {
  this.timeout(60_000);
  let tp: TestProvider;

  before(async () => {
    const kind = suiteAdapterKind();
    const adapter = kind.id === 'memory' ? createMemoryAdapter({ limits: { SubjectToken: BOUND } }) : await kind.open();
    tp = await startProvider({ adapter, plugin: { maxSubjectTokensPerClient: SHARE } });
  });
  after(() => tp.close());

  it('refuses a client past its share with 429 and Retry-After, and not another client', async () => {
    const flooding = await m2mToken(tp, CLIENTS.backend);
    const statuses: number[] = [];
    for (let i = 0; i < BOUND; i += 1) {
      const reply = await managementRequest(tp, { userId: 'bob' }, flooding);
      statuses.push(reply.status);
      if (reply.status === 201) continue;
      expect(reply.body).to.deep.equal({
        error: 'too_many_requests',
        error_description: `this client has created as many subject tokens this hour as allowed (${SHARE}); retry in ${reply.headers.get('retry-after')} s`,
      });
      expect(Number(reply.headers.get('retry-after'))).to.be.within(1, 3600);
    }
    expect(statuses).to.deep.equal([...Array(SHARE).fill(201), ...Array(BOUND - SHARE).fill(429)]);

    const other = await managementRequest(tp, { userId: 'bob' }, await m2mToken(tp, CLIENTS.oncall));
    expect(other.status, JSON.stringify(other.body)).to.equal(201);
    const exchanged = await exchangeAsActor(tp, {
      subjectToken: other.body['subjectToken'] as string,
      actorToken: await userAccessToken(tp, 'alice'),
    });
    expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
  });
});
