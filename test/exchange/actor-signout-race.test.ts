import { expect } from 'chai';
import { API, CLIENTS, OPAQUE_API, READ_SCOPE, startProvider, type TestProvider } from '../support/provider.js';
import { apiRequest, expectError, logout, m2mToken, subjectToken, userSignIn } from '../support/http.js';
import { exchangeAsActor } from '../support/impersonations.js';

/**
 * The actor's sign-out ends the sessions it finds listed under that sign-in.
 * An exchange that is still running when the sign-out completes has not
 * listed its session yet: it must notice by itself, and deliver nothing.
 */
describe('an exchange in flight when its actor signs out', function () {
  this.timeout(20_000);
  let tp: TestProvider;
  let entered: () => void = () => {};
  let gate: Promise<void> = Promise.resolve();

  before(async () => {
    tp = await startProvider({
      plugin: {
        // Holds the exchange after its actor token was checked, until the test lets it go on.
        canExchange: async () => {
          entered();
          await gate;
          return true;
        },
      },
    });
  });
  after(() => tp.close());

  for (const [kind, resource, scope] of [
    ['a JWT', API, 'profile:read'],
    ['an opaque token', OPAQUE_API, 'read'],
  ] as const) {
    it(`delivers no token, ${kind} included, and leaves no session active`, async () => {
      const signedIn = await userSignIn(tp, 'alice');
      let release!: () => void;
      gate = new Promise((resolve) => (release = resolve));
      const reached = new Promise<void>((resolve) => (entered = resolve));
      const pending = exchangeAsActor(tp, {
        subjectToken: await subjectToken(tp),
        actorToken: signedIn.accessToken,
        resource,
        scope,
      });
      await reached;
      await logout(tp, signedIn.cookies);
      // The sign-out's sweep runs right after its request; give it time to find nothing.
      await new Promise((resolve) => setTimeout(resolve, 200));
      release();

      expectError(await pending, 400, 'invalid_request', /during the exchange/);
      const reader = await m2mToken(tp, CLIENTS.admin, READ_SCOPE);
      const listed = await apiRequest(tp, 'GET', '/api/impersonations?actor=alice', reader);
      expect(listed.status).to.equal(200);
      expect(listed.body['items']).to.deep.equal([]);
    });
  }
});
