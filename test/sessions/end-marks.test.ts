import { expect } from 'chai';
import { createMemoryAdapter, type MemoryAdapterClass } from '../../lib/index.js';
import { logout, userSignIn } from '../support/http.js';
import { startProvider, type TestProvider } from '../support/provider.js';
import { scaled } from '../support/time.js';

/**
 * An actor's sign-out marks its sign-in ended in the plugin's store, so that
 * an exchange in flight meets the mark at its commit. Only a sign-in can be
 * marked: an anonymous caller can have a session destroyed (the end-session
 * form, confirmed without a sign-in) as often as it likes, and must not make
 * the store write anything.
 */
describe('end marks: written for sign-ins only', function () {
  this.timeout(30_000);
  let tp: TestProvider;
  let Store: MemoryAdapterClass;
  const marks = () => Store.stats().models['ImpersonationSession']?.size ?? 0;

  before(async () => {
    Store = createMemoryAdapter();
    tp = await startProvider({ adapter: Store });
  });
  after(() => tp.close());

  /** The end-session form fetched and confirmed by a caller with no sign-in: its own cookies only. */
  async function anonymousLogout(): Promise<void> {
    const form = await fetch(`${tp.base}/session/end`, { signal: AbortSignal.timeout(scaled(10_000)) });
    const cookies = form.headers
      .getSetCookie()
      .map((cookie) => cookie.split(';')[0])
      .join('; ');
    await logout(tp, cookies);
  }

  it('writes no mark for 20 anonymous sign-outs, and one for a signed-in actor', async () => {
    const before = marks();
    for (let i = 0; i < 20; i += 1) await anonymousLogout();
    // The sign-out's work runs right after its request.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(marks() - before, 'anonymous sign-outs write nothing').to.equal(0);

    const signedIn = await userSignIn(tp, 'alice');
    await logout(tp, signedIn.cookies);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(marks() - before, "the sign-in's and its Grant's marks").to.be.at.least(1);
  });
});
