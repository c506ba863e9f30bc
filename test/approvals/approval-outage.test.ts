import { expect } from 'chai';
import type { AdapterSource } from '../../lib/adapters/contracts/entries.js';
import { approveRequest, giveGrant, listGrants } from '../../lib/approvals/actions.js';
import { EVENTS, onImpersonationEvent } from '../../lib/index.js';
import { REDIS_URL, redisTestAdapter } from '../support/adapter.js';
import {
  newCustomer,
  refusalOf,
  requestIdOf,
  REQUESTS,
  startApprovalProvider,
  type ApprovalProvider,
} from '../support/approvals.js';
import { apiRequest, expectError, managementRequest, m2mToken, userAccessToken } from '../support/http.js';
import { exchangeAsActor } from '../support/impersonations.js';
import { DATABASE_URL } from '../support/postgres.js';
import { postgresTestAdapter } from '../support/postgres-adapter.js';
import { CLIENTS } from '../support/provider.js';
import { TcpRelay } from '../support/relay.js';

const STORES: Array<{ name: string; relay: TcpRelay; adapter: (relay: TcpRelay) => Promise<AdapterSource> }> = [
  {
    name: 'Redis',
    relay: new TcpRelay(REDIS_URL, 6379),
    adapter: async (relay) => redisTestAdapter({ url: relay.url }),
  },
  {
    name: 'PostgreSQL',
    relay: new TcpRelay(DATABASE_URL, 5432),
    adapter: (relay) => postgresTestAdapter({ connectionString: relay.url }),
  },
];

for (const { name, relay, adapter } of STORES) {
  describe(`customer approval: ${name} unreachable`, function () {
    this.timeout(30_000);
    let ap: ApprovalProvider;
    let created = 0;

    before(async () => {
      await relay.start();
      ap = await startApprovalProvider({ adapter: await adapter(relay) });
      onImpersonationEvent(ap.tp.provider, EVENTS.subjectTokenCreated, () => {
        created += 1;
      });
    });
    afterEach(() => relay.start());
    after(async () => {
      await ap?.tp.close();
      await relay.stop();
    });

    it('answers 503 and issues nothing, whether a grant covers the request or a request would be made', async () => {
      const covered = newCustomer();
      await giveGrant(ap.deps, covered, { duration: 600 });
      const backend = await m2mToken(ap.tp);
      const before = created;
      await relay.stop();
      for (const userId of [covered, newCustomer()]) {
        const failed = await managementRequest(
          ap.tp,
          { userId, actorId: 'alice', clientId: CLIENTS.console.client_id },
          backend,
        );
        expectError(failed, 503, 'temporarily_unavailable', /^the identity service cannot reach its store/);
        expect(failed.body).to.not.have.property('subjectToken');
        expect(failed.body).to.not.have.property('approvalRequest');
      }
      expect(created).to.equal(before);

      await relay.start();
      expect(
        (
          await managementRequest(
            ap.tp,
            { userId: covered, actorId: 'alice', clientId: CLIENTS.console.client_id },
            backend,
          )
        ).status,
      ).to.equal(201);
    });

    it("answers the backend's read and the customer's operations with 503", async () => {
      const customer = newCustomer();
      const backend = await m2mToken(ap.tp);
      const id = requestIdOf(
        await managementRequest(
          ap.tp,
          { userId: customer, actorId: 'alice', clientId: CLIENTS.console.client_id },
          backend,
        ),
      );
      await relay.stop();
      expectError(await apiRequest(ap.tp, 'GET', `${REQUESTS}/${id}`, backend), 503, 'temporarily_unavailable');
      for (const call of [
        giveGrant(ap.deps, customer, { duration: 60 }),
        listGrants(ap.deps, customer),
        approveRequest(ap.deps, customer, id, { duration: 60 }),
      ]) {
        expect(await refusalOf(call)).to.deep.include({ status: 503, error: 'temporarily_unavailable' });
      }
      await relay.start();
      expect((await listGrants(ap.deps, customer)).items).to.deep.equal([]);
      expect((await apiRequest(ap.tp, 'GET', `${REQUESTS}/${id}`, backend)).body['status']).to.equal('pending');
    });

    it('refuses the exchange of a token issued under a grant, and keeps the token for when the store is back', async () => {
      const customer = newCustomer();
      await giveGrant(ap.deps, customer, { duration: 600 });
      const alice = await userAccessToken(ap.tp, 'alice');
      const reply = await managementRequest(
        ap.tp,
        { userId: customer, actorId: 'alice', clientId: CLIENTS.console.client_id },
        await m2mToken(ap.tp),
      );
      const subjectToken = reply.body['subjectToken'] as string;
      await relay.stop();
      expectError(await exchangeAsActor(ap.tp, { subjectToken, actorToken: alice }), 500, 'server_error');
      await relay.start();
      const exchanged = await exchangeAsActor(ap.tp, { subjectToken, actorToken: alice });
      expect(exchanged.status, JSON.stringify(exchanged.body)).to.equal(200);
    });
  });
}
