import { expect } from 'chai';
import { API, CLIENTS, OPAQUE_API, READ_SCOPE, startProvider, type TestProvider } from '../support/provider.js';
import { apiRequest, expectError, logout, m2mToken, subjectToken, userSignIn, type Reply } from '../support/http.js';
import { exchangeAsActor } from '../support/impersonations.js';
import { suiteAdapterKind } from '../support/adapters.js';

/**
 * The actor's sign-out ends the sessions it finds listed under that sign-in.
 * An exchange that is still running when the sign-out completes has not
 * listed its session yet: it must notice by itself, and deliver nothing.
 */
describe('an exchange in flight when its actor signs out', function () {
  this.timeout(20_000);
  let tp: TestProvider;
  // The next exchanges' holds, in the order they reach the policy.
  const holds: Array<{ enter: () => void; gate: Promise<void> }> = [];
  let announcements = 0;

  before(async () => {
    const Store = await suiteAdapterKind().open();
    // The suite's real adapter, counting the announcements written (Invariant 23).
    class Counted extends Store {
      override async upsert(...args: Parameters<InstanceType<typeof Store>['upsert']>) {
        if (args[0].startsWith('announced:')) announcements += 1;
        return super.upsert(...args);
      }
    }
    tp = await startProvider({
      adapter: Counted,
      plugin: {
        // Holds an exchange after its actor token was checked, until the test lets it go on.
        canExchange: async () => {
          const hold = holds.shift();
          if (hold) {
            hold.enter();
            await hold.gate;
          }
          return true;
        },
      },
    });
  });
  after(() => tp.close());

  /** The next exchange to reach the policy is held there: `reached` once it is, until `release()`. */
  function holdNext() {
    let release!: () => void;
    let enter!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const reached = new Promise<void>((resolve) => (enter = resolve));
    holds.push({ enter, gate });
    return { reached, release };
  }

  async function signOut(cookies: string) {
    await logout(tp, cookies);
    // The sign-out's sweep runs right after its request; give it time to find nothing.
    await new Promise((resolve) => setTimeout(resolve, 200));
  }

  async function expectRefusedAndNothingActive(reply: Reply) {
    expectError(reply, 400, 'invalid_request', /during the exchange/);
    const reader = await m2mToken(tp, CLIENTS.admin, READ_SCOPE);
    const listed = await apiRequest(tp, 'GET', '/api/impersonations?actor=alice', reader);
    expect(listed.status).to.equal(200);
    expect(listed.body['items']).to.deep.equal([]);
  }

  for (const [kind, resource, scope] of [
    ['a JWT', API, 'profile:read'],
    ['an opaque token', OPAQUE_API, 'read'],
  ] as const) {
    it(`delivers no token, ${kind} included, and leaves no session active`, async () => {
      const signedIn = await userSignIn(tp, 'alice');
      const held = holdNext();
      const pending = exchangeAsActor(tp, {
        subjectToken: await subjectToken(tp),
        actorToken: signedIn.accessToken,
        resource,
        scope,
      });
      await held.reached;
      await signOut(signedIn.cookies);
      held.release();
      await expectRefusedAndNothingActive(await pending);
    });
  }

  it('delivers no token when an earlier exchange had announced the sign-in (not read again)', async () => {
    const signedIn = await userSignIn(tp, 'alice');
    const before = announcements;
    const first = await exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: signedIn.accessToken });
    expect(first.status, JSON.stringify(first.body)).to.equal(200);
    const held = holdNext();
    const pending = exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: signedIn.accessToken });
    await held.reached;
    await signOut(signedIn.cookies);
    held.release();
    await expectRefusedAndNothingActive(await pending);
    // The sign-in and its Grant, announced by the first exchange only.
    expect(announcements - before).to.equal(2);
  });

  it('reads the sign-in again when another exchange announced it only after this one began', async () => {
    const signedIn = await userSignIn(tp, 'alice');
    const [earlier, later] = [holdNext(), holdNext()];
    const first = exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: signedIn.accessToken });
    await earlier.reached;
    const second = exchangeAsActor(tp, { subjectToken: await subjectToken(tp), actorToken: signedIn.accessToken });
    await later.reached;
    // No announcement yet: the sign-out marks nothing. The second then announces it and reads the end.
    await signOut(signedIn.cookies);
    later.release();
    expectError(await second, 400, 'invalid_request', /during the exchange/);
    earlier.release();
    await expectRefusedAndNothingActive(await first);
  });
});
