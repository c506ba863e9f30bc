import { expect } from 'chai';
import { API, startProvider, type TestProvider } from './support/provider.js';
import { decodeJwt, exchange, subjectToken, userAccessToken } from './support/http.js';

describe('smoke', () => {
  let tp: TestProvider;
  before(async () => { tp = await startProvider(); });
  after(() => tp.close());

  it('runs the whole flow', async () => {
    const actor = await userAccessToken(tp, 'alice');
    const subject = await subjectToken(tp, { userId: 'bob', context: { ticketId: 'T-1' } });
    const result = await exchange(tp, {
      subject_token: subject, resource: API, scope: 'profile:read', actor_token: actor, actor_token_type: 'urn:ietf:params:oauth:token-type:access_token',
    });
    console.log(result.status, result.body);
    expect(result.status).to.equal(200);
    console.log(decodeJwt(result.body['access_token'] as string));
  });
});
