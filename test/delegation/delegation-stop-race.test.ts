import { expect } from 'chai';
import { suiteAdapterKind } from '../support/adapters.js';
import { apiRequest, exchange, expectError, userAccessToken } from '../support/http.js';
import { adminToken, impersonate, revokeSession, SESSIONS } from '../support/impersonations.js';
import { CLIENTS, DOWNSTREAM_API, OPAQUE_API, startProvider, type TestProvider } from '../support/provider.js';

/**
 * Stopping an impersonation looks up the delegations made from it, ends them,
 * then closes its own record. A delegation issued in between (listed after
 * the lookup, while the impersonation's record still reads active) must not
 * outlive the stop: the stop marks the impersonation ended before its lookup,
 * and the delegation reads the mark once it is listed.
 */
describe(`a delegation issued while its impersonation is being stopped (${suiteAdapterKind().name})`, function () {
  this.timeout(30_000);
  let tp: TestProvider;
  let hold: Promise<void> | undefined;
  let held: (() => void) | undefined;

  before(async () => {
    const Store = await suiteAdapterKind().open();
    // The suite's real adapter underneath; removing a Grant and its tokens waits, on demand: the stop of an
    // opaque impersonation is then held between its lookup of delegations and its own record.
    class HeldGrantDestroy extends Store {
      readonly model: string;
      constructor(name: string) {
        super(name);
        this.model = name;
      }
      override async destroy(id: string): Promise<void> {
        if (this.model === 'Grant' && hold) {
          held?.();
          await hold;
        }
        return super.destroy(id);
      }
      // The token goes with its Grant: held alike, so that the impersonation token still verifies meanwhile.
      override async revokeByGrantId(grantId: string): Promise<void> {
        if (hold) await hold;
        return super.revokeByGrantId(grantId);
      }
    }
    tp = await startProvider({
      adapter: HeldGrantDestroy,
      plugin: { actorClients: [CLIENTS.console.client_id], delegation: {} },
    });
  });
  after(() => tp.close());

  it('is refused, and nothing of it stays active', async () => {
    const admin = await adminToken(tp);
    const alice = await userAccessToken(tp, 'alice');
    const impersonation = await impersonate(tp, { actorToken: alice, resource: OPAQUE_API, scope: 'read' });

    let release!: () => void;
    hold = new Promise((resolve) => (release = resolve));
    const reached = new Promise<void>((resolve) => (held = resolve));
    const stopping = revokeSession(tp, admin, impersonation.session);
    await reached;
    try {
      const delegated = await exchange(
        tp,
        { subject_token: impersonation.token, resource: DOWNSTREAM_API },
        CLIENTS.orders,
      );
      expectError(delegated, 400, 'invalid_request', /stopped/);
    } finally {
      hold = undefined;
      release();
    }
    expect((await stopping).status).to.equal(204);
    const listed = await apiRequest(tp, 'GET', `${SESSIONS}?subject=bob`, admin);
    expect(listed.body['items']).to.deep.equal([]);
  });
});
