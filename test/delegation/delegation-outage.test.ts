/**
 * Delegation fails closed: a trail that cannot take the row (of a delegation
 * under an impersonation, the only kind it records), a policy that cannot
 * answer, a resolver that fails all stop it with a 5xx, leave no session
 * listed, and it works again without a restart. A user's delegation of their
 * own token writes nothing to the trail, and so does not wait for it.
 */
import { expect } from 'chai';
import { createMemoryAuditLog, type ImpersonationEventName, type ImpersonationEvent } from '../../lib/index.js';
import { API, CLIENTS, DOWNSTREAM_API, startProvider, type TestProvider } from '../support/provider.js';
import { apiRequest, exchange, userAccessToken } from '../support/http.js';
import { adminToken, impersonate, SESSIONS } from '../support/impersonations.js';

const PARTNER = 'urn:example:partner-token';

describe('delegation when the trail, the policy or a resolver cannot answer', function () {
  this.timeout(60_000);
  let tp: TestProvider;
  const outage = { trail: false, policy: false, resolver: false };
  const trail = createMemoryAuditLog();

  before(async () => {
    tp = await startProvider({
      plugin: {
        auditLog: {
          append: (name: ImpersonationEventName, event: ImpersonationEvent) =>
            outage.trail ? Promise.reject(new Error('trail down')) : trail.append(name, event),
          query: (filter) => trail.query(filter),
        },
        delegation: {
          canDelegate: () => {
            if (outage.policy) throw new Error('policy engine down');
            return true;
          },
          subjectTokenTypes: {
            [PARTNER]: ({ clientId }) => {
              if (outage.resolver) throw new Error('partner keys unreachable');
              return {
                id: 'partner-1',
                sub: 'bob',
                scope: ['profile:read'],
                exp: Math.floor(Date.now() / 1000) + 60,
                clientId,
              };
            },
          },
        },
      },
    });
  });
  after(() => tp.close());

  async function activeSessions(): Promise<unknown[]> {
    const listed = await apiRequest(tp, 'GET', `${SESSIONS}?subject=bob`, await adminToken(tp));
    return (listed.body['items'] ?? listed.body['sessions'] ?? []) as unknown[];
  }

  /** The subject token of each case: an impersonation's token for the trail's, bob's own otherwise. */
  async function subjectFor(part: keyof typeof outage): Promise<string> {
    if (part === 'resolver') return 'partner:bob';
    if (part === 'trail') {
      return (await impersonate(tp, { actorToken: await userAccessToken(tp, 'alice'), scope: 'profile:read' })).token;
    }
    return userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' });
  }

  for (const [part, type] of [
    ['trail', undefined],
    ['policy', undefined],
    ['resolver', PARTNER],
  ] as const) {
    it(`answers 500 while the ${part} fails, lists no session, and delegates again once it is back`, async () => {
      const subject = await subjectFor(part);
      const request = {
        subject_token: subject,
        resource: DOWNSTREAM_API,
        ...(type ? { subject_token_type: type } : {}),
      };
      const before = (await activeSessions()).length;
      outage[part] = true;
      try {
        const refused = await exchange(tp, request, CLIENTS.orders);
        expect(refused.status, JSON.stringify(refused.body)).to.equal(500);
        expect(refused.body['error']).to.equal('server_error');
        expect(JSON.stringify(refused.body)).not.to.include(subject);
      } finally {
        outage[part] = false;
      }
      expect((await activeSessions()).length).to.equal(before);
      const delegated = await exchange(tp, request, CLIENTS.orders);
      expect(delegated.status, JSON.stringify(delegated.body)).to.equal(200);
      expect((await activeSessions()).length).to.equal(before + 1);
    });
  }

  it("delegates a user's own token while the trail fails: it writes no row, so it waits for none", async () => {
    const subject = await userAccessToken(tp, 'bob', { resource: API, scope: 'openid profile:read' });
    const rows = trail.rows.length;
    outage.trail = true;
    try {
      const delegated = await exchange(tp, { subject_token: subject, resource: DOWNSTREAM_API }, CLIENTS.orders);
      expect(delegated.status, JSON.stringify(delegated.body)).to.equal(200);
    } finally {
      outage.trail = false;
    }
    expect(trail.rows.length).to.equal(rows);
  });
});
