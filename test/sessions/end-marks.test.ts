import { expect } from 'chai';
import type { AdapterPayload } from 'oidc-provider';
import { createMemoryAdapter } from '../../lib/index.js';
import { suiteAdapterKind } from '../support/adapters.js';
import { logout, userAccessToken, userSignIn } from '../support/http.js';
import { impersonate } from '../support/impersonations.js';
import { CLIENTS, startProvider, type TestProvider } from '../support/provider.js';

/** The session model's bound on memory: fewer than the ends below, had each written a mark. */
const BOUND = 20;
const ENDS = BOUND + 10;
import { scaled } from '../support/time.js';

/**
 * An end writes a mark in the plugin's store only where an exchange announced
 * what it ends. A caller with no sign-in can have a session destroyed (the
 * end-session form) as often as it likes; any user can revoke their own
 * tokens (RFC 7009, a public client too) and sign in and out again and again:
 * none of it writes to the session model, which stays free for impersonation.
 */
describe(`end marks: none for what started nothing (${suiteAdapterKind().name})`, function () {
  this.timeout(120_000);
  let tp: TestProvider;
  let writes = 0;

  before(async () => {
    const kind = suiteAdapterKind();
    const Store =
      kind.id === 'memory' ? createMemoryAdapter({ limits: { ImpersonationSession: BOUND } }) : await kind.open();
    // The suite's adapter, counting what is written to the session model.
    class Counted extends Store {
      readonly model: string;
      constructor(name: string) {
        super(name);
        this.model = name;
      }
      override async upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
        if (this.model === 'ImpersonationSession') writes += 1;
        return super.upsert(id, payload, expiresIn);
      }
    }
    tp = await startProvider({ adapter: Counted, plugin: { delegation: {} } });
  });
  after(() => tp.close());

  /** The end's work runs right after its request. */
  const settled = () => new Promise((resolve) => setTimeout(resolve, 200));

  /** The end-session form fetched and confirmed by a caller with no sign-in: its own cookies only. */
  async function anonymousLogout(): Promise<void> {
    const form = await fetch(`${tp.base}/session/end`, { signal: AbortSignal.timeout(scaled(10_000)) });
    const cookies = form.headers
      .getSetCookie()
      .map((cookie) => cookie.split(';')[0])
      .join('; ');
    await logout(tp, cookies);
  }

  it('writes nothing for anonymous sign-outs', async () => {
    for (let i = 0; i < 20; i += 1) await anonymousLogout();
    await settled();
    expect(writes).to.equal(0);
  });

  it("writes nothing for a user's revocations of their own tokens and their sign-outs; impersonation still works", async () => {
    for (let i = 0; i < ENDS; i += 1) {
      const token = await userAccessToken(tp, 'carol');
      const revoked = await fetch(`${tp.base}/token/revocation`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token, client_id: CLIENTS.console.client_id }),
      });
      expect(revoked.status).to.equal(200);
      await logout(tp, (await userSignIn(tp, 'carol')).cookies);
    }
    await settled();
    expect(writes, 'written to the session model').to.equal(0);
    await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice') });
  });
});
