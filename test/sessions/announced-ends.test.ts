import { expect } from 'chai';
import type { CommitWrite } from '../../lib/adapters/contracts/commit.js';
import { suiteAdapterKind } from '../support/adapters.js';
import {
  apiRequest,
  exchange,
  expectError,
  logout,
  subjectToken,
  userAccessToken,
  userSignIn,
} from '../support/http.js';
import { adminToken, exchangeAsActor, SESSIONS } from '../support/impersonations.js';
import { CLIENTS, OPAQUE_API, startProvider, type TestProvider } from '../support/provider.js';

/**
 * A sign-out or a revocation marks its origin ended only when an exchange
 * announced it. An exchange that announced it and is held at its commit
 * while the actor signs out, or the subject token is revoked, meets the mark
 * there; one held before it announced reads the end when it reads the origin
 * again: no token, nothing active, either way.
 */
describe(`an end during an announced exchange (${suiteAdapterKind().name})`, function () {
  this.timeout(30_000);
  let tp: TestProvider;
  let hold: Promise<void> | undefined;
  let held: (() => void) | undefined;
  let at: 'commit' | 'policy' = 'commit';
  const wait = async (where: typeof at) => {
    if (!hold || at !== where) return;
    held?.();
    await hold;
  };

  before(async () => {
    const Store = await suiteAdapterKind().open();
    // The suite's real adapter; an exchange's commit waits, on demand, after it announced and read its origins again.
    class HeldCommit extends Store {
      override async commitOnce(write: CommitWrite) {
        await wait('commit');
        return super.commitOnce(write);
      }
    }
    tp = await startProvider({
      adapter: HeldCommit,
      plugin: {
        actorClients: [CLIENTS.console.client_id],
        delegation: { canDelegate: async () => (await wait('policy'), true) },
      },
    });
  });
  after(() => tp.close());

  async function whileHeld(start: () => Promise<unknown>, end: () => Promise<unknown>) {
    let release!: () => void;
    hold = new Promise((resolve) => (release = resolve));
    const reached = new Promise<void>((resolve) => (held = resolve));
    const pending = start();
    await reached;
    try {
      await end();
      // The end's sweep runs right after its request.
      await new Promise((resolve) => setTimeout(resolve, 200));
    } finally {
      hold = undefined;
      release();
    }
    return pending;
  }

  it('refuses an impersonation whose actor signs out before its commit', async () => {
    const signedIn = await userSignIn(tp, 'alice');
    const subject = await subjectToken(tp);
    const reply = await whileHeld(
      () => exchangeAsActor(tp, { subjectToken: subject, actorToken: signedIn.accessToken }),
      () => logout(tp, signedIn.cookies),
    );
    expectError(reply as never, 400, 'invalid_request', /during the exchange/);
    const listed = await apiRequest(tp, 'GET', `${SESSIONS}?actor=alice`, await adminToken(tp));
    expect(listed.body['items']).to.deep.equal([]);
  });

  for (const where of ['commit', 'policy'] as const) {
    it(`refuses a delegation whose subject token is revoked while it is held at its ${where}`, async () => {
      at = where;
      const subject = await userAccessToken(tp, 'bob', { resource: OPAQUE_API, scope: 'openid read' });
      const reply = await whileHeld(
        () => exchange(tp, { subject_token: subject, resource: OPAQUE_API }, CLIENTS.orders),
        () =>
          fetch(`${tp.base}/token/revocation`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
            body: new URLSearchParams({ token: subject, client_id: CLIENTS.console.client_id }),
          }),
      );
      at = 'commit';
      expectError(reply as never, 400, 'invalid_request', /revoked during the exchange/);
      const listed = await apiRequest(tp, 'GET', `${SESSIONS}?subject=bob`, await adminToken(tp));
      expect(listed.body['items']).to.deep.equal([]);
    });
  }
});
