/**
 * An impersonation's actor token may be one an exchange issued (its `act`
 * nests below the new one, RFC 8693 4.1), but only while the session it
 * belongs to is active: a stopped impersonation's JWT verifies until its
 * `exp`, and must not start new impersonations after the stop.
 */
import { expect } from 'chai';
import { ACTOR_API, API, startProvider, type TestProvider } from '../support/provider.js';
import { actorParams, exchange, expectError, subjectToken, userAccessToken } from '../support/http.js';
import { adminToken, impersonate, revokeSession } from '../support/impersonations.js';

describe('token exchange: an actor token an exchange issued', function () {
  this.timeout(30_000);
  let tp: TestProvider;

  before(async () => {
    tp = await startProvider();
  });
  after(() => tp.close());

  it('acts while its impersonation session is active, and is refused once that session is stopped', async () => {
    const alice = await userAccessToken(tp, 'alice');
    const first = await impersonate(tp, { actorToken: alice, resource: ACTOR_API, scope: 'openid' });
    const asActor = async () =>
      exchange(tp, {
        subject_token: await subjectToken(tp, { userId: 'admin' }),
        resource: API,
        ...actorParams(first.token),
      });
    expect((await asActor()).status).to.equal(200);

    expect((await revokeSession(tp, await adminToken(tp), first.session)).status).to.equal(204);
    expectError(
      await asActor(),
      400,
      'invalid_request',
      /actor_token belongs to an impersonation session that was stopped/,
    );
  });
});
