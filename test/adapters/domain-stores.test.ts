import { expect } from 'chai';
import type { AdapterPayload } from 'oidc-provider';
import { APPROVAL_DOMAIN } from '../../lib/adapters/contracts/approvals.js';
import { fitsDomain } from '../../lib/adapters/contracts/domain.js';
import { OUTBOX_DOMAIN } from '../../lib/adapters/contracts/outbox.js';
import { SESSION_DOMAIN } from '../../lib/adapters/contracts/sessions.js';
import { SSF_STREAM_DOMAIN } from '../../lib/adapters/contracts/ssf.js';
import { SUBJECT_TOKEN_DOMAIN } from '../../lib/adapters/contracts/subject-tokens.js';
import {
  createImpersonation,
  createMemoryAdapter,
  WEBHOOK_EVENTS,
  type CommitOutcome,
  type CommitWrite,
  type IndexEntry,
  type QuotaOutcome,
  type QuotaWrite,
  type SessionAdapter,
  type SubjectTokenAdapter,
} from '../../lib/index.js';
import { entryContract, sessionContract, subjectTokenContract } from '../support/adapter-contract.js';
import {
  actorParams,
  apiRequest,
  exchange,
  expectError,
  managementRequest,
  m2mToken,
  userSignIn,
} from '../support/http.js';
import { adminToken, SESSIONS } from '../support/impersonations.js';
import { API, MANAGEMENT, startProvider, type TestProvider } from '../support/provider.js';
import { createTypicalAdapter } from '../support/typical-adapter.js';
import { webhookSecret } from '../support/webhook-receiver.js';
import { LOOPBACK_RECEIVERS } from '../support/ssf.js';

/**
 * A store of a deployment's own that keeps two of the plugin's domains, subject
 * tokens and sessions, and nothing else: oidc-provider's adapter API and the
 * operations those two domains name (lib/adapters/contracts/), each handed to
 * a memory adapter it owns. No bounded indexes (the approvals' domain), no
 * outbox (the outbox's domain).
 */
function subjectTokensAndSessionsOnly() {
  const Memory = createMemoryAdapter();
  class SubjectTokensAndSessions implements SubjectTokenAdapter, SessionAdapter {
    static readonly memory = Memory;
    readonly #kept: InstanceType<typeof Memory>;
    constructor(name: string) {
      this.#kept = new Memory(name);
    }
    upsert(id: string, payload: AdapterPayload, expiresIn: number): Promise<void> {
      return this.#kept.upsert(id, payload, expiresIn);
    }
    find(id: string): Promise<AdapterPayload | undefined | void> {
      return this.#kept.find(id);
    }
    findByUserCode(userCode: string): Promise<AdapterPayload | undefined | void> {
      return this.#kept.findByUserCode(userCode);
    }
    findByUid(uid: string): Promise<AdapterPayload | undefined | void> {
      return this.#kept.findByUid(uid);
    }
    consume(id: string): Promise<void> {
      return this.#kept.consume(id);
    }
    destroy(id: string): Promise<void> {
      return this.#kept.destroy(id);
    }
    revokeByGrantId(grantId: string): Promise<void> {
      return this.#kept.revokeByGrantId(grantId);
    }
    consumeOnce(id: string): Promise<boolean> {
      return this.#kept.consumeOnce(id);
    }
    indexAdd(indexes: readonly string[], member: string, expiresAt: number): Promise<void> {
      return this.#kept.indexAdd(indexes, member, expiresAt);
    }
    indexRemove(indexes: readonly string[], member: string): Promise<void> {
      return this.#kept.indexRemove(indexes, member);
    }
    indexRange(index: string, after: IndexEntry | undefined, limit: number): Promise<IndexEntry[]> {
      return this.#kept.indexRange(index, after, limit);
    }
    commitOnce(write: CommitWrite): Promise<CommitOutcome> {
      return this.#kept.commitOnce(write);
    }
    releaseConsumed(entry: { model: string; id: string }, by: string): Promise<boolean> {
      return this.#kept.releaseConsumed(entry, by);
    }
    saveWithinQuotas(write: QuotaWrite): Promise<QuotaOutcome> {
      return this.#kept.saveWithinQuotas(write);
    }
  }
  return SubjectTokensAndSessions;
}

const REFUSED = /\(see node_modules\/oidc-provider-impersonation\/docs\/adding-to-your-deployment\.md\)/;

describe('a store that keeps only some of the domains', function () {
  this.timeout(30_000);

  it('fits the domains it implements, and no other', () => {
    const Store = subjectTokensAndSessionsOnly();
    const adapter = new Store('ImpersonationSession');
    expect(fitsDomain(SUBJECT_TOKEN_DOMAIN, adapter)).to.equal(true);
    expect(fitsDomain(SESSION_DOMAIN, adapter)).to.equal(true);
    expect(fitsDomain(SSF_STREAM_DOMAIN, adapter)).to.equal(true);
    expect(fitsDomain(APPROVAL_DOMAIN, adapter)).to.equal(false);
    expect(fitsDomain(OUTBOX_DOMAIN, adapter)).to.equal(false);
  });

  describe('passes the suites of the domains it implements', () => {
    const target = async () => {
      const Store = subjectTokensAndSessionsOnly();
      const another = subjectTokensAndSessionsOnly();
      return {
        Adapter: Store,
        secondsLeft: async (model: string, id: string) => Store.memory.secondsLeft(model, id),
        stored: async () => Store.memory.stats().size,
        connections: async (count: number) => ({
          classes: Array.from({ length: count }, () => Store),
          close: async () => {},
        }),
        another: () => another,
      };
    };
    describe("oidc-provider's models", () => entryContract(target));
    describe("the subject tokens' domain", () => subjectTokenContract(target));
    describe("the sessions' domain", () => sessionContract(target, { notifies: false }));
  });

  describe('is refused at creation, naming what it lacks, for a domain it does not keep', () => {
    const subscription = {
      id: 'crm',
      url: 'https://crm.example/hooks',
      events: [WEBHOOK_EVENTS[0]],
      secret: webhookSecret('crm'),
    };

    it("the approvals' domain, with the approvals option", () => {
      const approvals = { customerResource: 'https://id.example.com/support-access' };
      expect(() =>
        createImpersonation({ managementResource: MANAGEMENT, store: subjectTokensAndSessionsOnly(), approvals }),
      ).to.throw(TypeError, /option "store" has no indexAddWithin\(adds, member\): a customer's grants/);
    });

    it("the sessions' domain, without releaseConsumed", () => {
      const Store = class extends subjectTokensAndSessionsOnly() {};
      Object.defineProperty(Store.prototype, 'releaseConsumed', { value: undefined });
      expect(() => createImpersonation({ managementResource: MANAGEMENT, store: Store })).to.throw(
        TypeError,
        /option "store" has no commitOnce\(write\) and releaseConsumed\(entry, by\): .*gives the token back/,
      );
    });

    it("the outbox's domain, with webhooks", () => {
      expect(() =>
        createImpersonation({
          managementResource: MANAGEMENT,
          store: subjectTokensAndSessionsOnly(),
          webhooks: { subscriptions: [subscription] },
        }),
      ).to.throw(TypeError, /option "store" has no outbox\(\): webhooks are kept in the store until delivered/);
    });

    it("the outbox's domain, with SSF", () => {
      expect(() =>
        createImpersonation({
          managementResource: MANAGEMENT,
          store: subjectTokensAndSessionsOnly(),
          ssf: { pushAllowList: LOOPBACK_RECEIVERS },
        }),
      ).to.throw(TypeError, /option "store" has no outbox\(\)/);
    });

    it('and every message points to the guide', () => {
      const approvals = { customerResource: 'https://id.example.com/support-access' };
      expect(() =>
        createImpersonation({ managementResource: MANAGEMENT, store: subjectTokensAndSessionsOnly(), approvals }),
      ).to.throw(TypeError, REFUSED);
    });
  });

  describe('serves the features of the domains it keeps, the provider on a typical adapter', () => {
    let tp: TestProvider;
    before(async () => {
      tp = await startProvider({ adapter: createTypicalAdapter(), plugin: { store: subjectTokensAndSessionsOnly() } });
    });
    after(() => tp?.close());

    it('issues a subject token, redeems it once, lists and revokes the session', async () => {
      const alice = await userSignIn(tp, 'alice');
      const created = await managementRequest(tp, { userId: 'bob' }, await m2mToken(tp));
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const params = {
        subject_token: created.body['subjectToken'] as string,
        resource: API,
        scope: 'profile:read',
        ...actorParams(alice.accessToken),
      };
      const reply = await exchange(tp, params);
      expect(reply.status, JSON.stringify(reply.body)).to.equal(200);
      expectError(await exchange(tp, params), 400, 'invalid_request', /already used/);
      const admin = await adminToken(tp);
      const listed = await apiRequest(tp, 'GET', `${SESSIONS}?subject=bob`, admin);
      const { items } = listed.body as { items: Array<{ id: string }> };
      expect(items).to.have.length(1);
      const revoked = await apiRequest(tp, 'DELETE', `${SESSIONS}/${items[0]!.id}`, admin);
      expect(revoked.status, JSON.stringify(revoked.body)).to.equal(204);
    });
  });
});
