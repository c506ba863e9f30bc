import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import type { Adapter, AdapterPayload } from 'oidc-provider';
import { APPROVAL_DOMAIN } from '../../lib/adapters/contracts/approvals.js';
import { fitsDomain } from '../../lib/adapters/contracts/domain.js';
import {
  GUARD_KIND,
  type AtomicCommit,
  type CommitWrite,
  type PrincipalQuotas,
  type QuotaWrite,
} from '../../lib/adapters/contracts/commit.js';
import { SESSION_DOMAIN } from '../../lib/adapters/contracts/sessions.js';
import { SSF_STREAM_DOMAIN } from '../../lib/adapters/contracts/ssf.js';
import { SUBJECT_TOKEN_DOMAIN } from '../../lib/adapters/contracts/subject-tokens.js';
import type { AtomicConsume } from '../../lib/adapters/contracts/consume.js';
import type { BoundedIndexes, SortedIndexes } from '../../lib/adapters/contracts/indexes.js';
import type { QuotaCharge } from '../../lib/capacity.js';
import { boundedIndexContract, sortedIndexContract } from './index-contract.js';
import type { OutboxStore } from '../../lib/outbox/contract.js';

/** An adapter class whose entries can be consumed once. */
export type AtomicAdapterClass = new (name: string) => Adapter & AtomicConsume;

/** One deployment (a key prefix, a table) of a store's adapter, and how a test looks into the store under it. */
export interface AdapterUnderTest {
  /** The deployment's adapter class, new for each test. */
  Adapter: AtomicAdapterClass;
  /** Seconds until `model`/`id` expires by the store's clock: null when it never does, undefined when it is not stored. */
  secondsLeft(model: string, id: string): Promise<number | null | undefined>;
  /** How many entries (keys, rows) the deployment holds, whatever their model. */
  stored(): Promise<number>;
  /** `count` classes of the same deployment, each on connections of its own; `close` ends what they opened. */
  connections(count: number): Promise<{ classes: AtomicAdapterClass[]; close(): Promise<void> }>;
  /** The adapter class of another deployment on the same store. */
  another(): AtomicAdapterClass | Promise<AtomicAdapterClass>;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
type Target = () => AdapterUnderTest | Promise<AdapterUnderTest>;

/**
 * What every store's adapter guarantees, domain by domain: oidc-provider's
 * adapter API, then each of the plugin's domains (lib/adapters/contracts/)
 * with the operations it needs. Called inside a describe block; `target()`
 * answers with a new deployment for each test.
 * test/adapters/adapter-contract.test.ts runs it on every adapter of
 * test/support/adapters.ts, test/redis-cluster/ on Redis Cluster; a store that
 * implements only some domains can run the suites of those alone.
 */
export function adapterContract(target: Target): void {
  describe("oidc-provider's models", () => entryContract(target));
  describe("the subject tokens' domain", () => subjectTokenContract(target));
  describe("the sessions' domain", () => sessionContract(target));
  describe("the approvals' domain", () => approvalContract(target));
  describe("the SSF streams' domain", () => ssfStreamContract(target));
}

/**
 * oidc-provider's adapter API, as every store keeps it whatever domains it
 * stores: storage, expiry, consume, the lookups, revocation by grant, and
 * deployments kept apart.
 */
export function entryContract(target: Target): void {
  let store: AdapterUnderTest;
  let Adapter: AtomicAdapterClass;

  beforeEach(async () => {
    store = await target();
    Adapter = store.Adapter;
  });

  it('stores a payload and finds it unchanged', async () => {
    const adapter = new Adapter('Session');
    const payload = {
      accountId: 'alice',
      exp: 2_000_000_000,
      authorizations: { web: { sid: 's', grantId: 'g', persistsLogout: false } },
      amr: [],
      extra: { big: 12_345_678_901_234_567, float: 0.1, text: 'é/"\\ \u0000 \ud800' },
      nothing: null,
    } as unknown as AdapterPayload;
    await adapter.upsert('id-1', payload, 60);
    expect(await adapter.find('id-1')).to.deep.equal(payload);
    expect(await adapter.find('missing')).to.equal(undefined);
  });

  it('sets the expiry from expiresIn, and none without it', async () => {
    const adapter = new Adapter('Interaction');
    await adapter.upsert('short', { jti: 'short' }, 30);
    await adapter.upsert('forever', { jti: 'forever' });
    expect(await store.secondsLeft('Interaction', 'short')).to.be.within(29, 30);
    expect(await store.secondsLeft('Interaction', 'forever')).to.equal(null);
    await adapter.destroy('forever');
  });

  it('never returns an expired entry, whatever the method', async () => {
    const codes = new Adapter('DeviceCode');
    await codes.upsert('code', { accountId: 'bob', uid: 'u-code', userCode: 'WXYZ-1234' }, 0.2);
    expect(await codes.find('code')).to.deep.equal({ accountId: 'bob', uid: 'u-code', userCode: 'WXYZ-1234' });
    await sleep(350);
    expect(await codes.find('code')).to.equal(undefined);
    expect(await codes.findByUid('u-code')).to.equal(undefined);
    expect(await codes.findByUserCode('WXYZ-1234')).to.equal(undefined);
    expect(await codes.consumeOnce('code')).to.equal(false);
  });

  it('treats an expiresIn of 0 or less as already expired', async () => {
    const adapter = new Adapter('AccessToken');
    await adapter.upsert('zero', { jti: 'zero' }, 0);
    await adapter.upsert('negative', { jti: 'negative' }, -5);
    expect(await adapter.find('zero')).to.equal(undefined);
    expect(await adapter.find('negative')).to.equal(undefined);
  });

  it('never returns an entry written with an expiresIn of 0, at once and whatever the method, nor the version it replaced', async () => {
    const codes = new Adapter('DeviceCode');
    // Several rounds: a store that kept such an entry for a millisecond would answer with it in some.
    for (let round = 0; round < 10; round += 1) {
      const id = `code-${round}`;
      const payload = { accountId: 'bob', uid: `u-zero-${round}`, userCode: `ZERO-${round}`, grantId: 'g-zero' };
      await codes.upsert(id, payload, 60);
      await codes.upsert(id, payload, 0);
      const [found, byUid, byUserCode, consumed, left] = await Promise.all([
        codes.find(id),
        codes.findByUid(payload.uid),
        codes.findByUserCode(payload.userCode),
        codes.consumeOnce(id),
        store.secondsLeft('DeviceCode', id),
      ]);
      expect({ found, byUid, byUserCode, consumed }, `round ${round}`).to.deep.equal({
        found: undefined,
        byUid: undefined,
        byUserCode: undefined,
        consumed: false,
      });
      expect(left === undefined || (left !== null && left <= 0), `stored with ${left} seconds left`).to.equal(true);
    }
    await codes.revokeByGrantId('g-zero');
    expect(await codes.find('code-0')).to.equal(undefined);
  });

  it('replaces an entry on upsert, consumed state included', async () => {
    const adapter = new Adapter('RefreshToken');
    await adapter.upsert('rt', { accountId: 'bob', grantId: 'g-old' }, 60);
    await adapter.consume('rt');
    await adapter.upsert('rt', { accountId: 'carol' }, 60);
    expect(await adapter.find('rt')).to.deep.equal({ accountId: 'carol' });
    await adapter.upsert('rt', { accountId: 'carol', consumed: 1234 }, 60);
    expect(await adapter.find('rt')).to.deep.equal({ accountId: 'carol', consumed: 1234 });
    expect(await adapter.consumeOnce('rt')).to.equal(false);
  });

  it('consume() marks the entry consumed with a timestamp and keeps its expiry', async () => {
    const adapter = new Adapter('AuthorizationCode');
    await adapter.upsert('c1', { accountId: 'bob' }, 60);
    const before = Math.floor(Date.now() / 1000);
    await adapter.consume('c1');
    const found = await adapter.find('c1');
    expect(found?.consumed)
      .to.be.a('number')
      .within(before, before + 2);
    expect(await store.secondsLeft('AuthorizationCode', 'c1')).to.be.within(58, 60);
    await adapter.consume('missing');
    expect(await store.secondsLeft('AuthorizationCode', 'missing'), 'nothing stored').to.equal(undefined);
  });

  it('destroy() removes the entry', async () => {
    const adapter = new Adapter('Grant');
    await adapter.upsert('g', { accountId: 'bob' }, 60);
    await adapter.destroy('g');
    expect(await adapter.find('g')).to.equal(undefined);
    expect(await store.secondsLeft('Grant', 'g'), 'nothing stored').to.equal(undefined);
    await adapter.destroy('g');
  });

  it('findByUid() and findByUserCode() find the live entry of their model', async () => {
    const sessions = new Adapter('Session');
    await sessions.upsert('sid-1', { uid: 'uid-1', accountId: 'alice' }, 60);
    expect(await sessions.findByUid('uid-1')).to.deep.equal({ uid: 'uid-1', accountId: 'alice' });
    expect(await sessions.findByUid('uid-2')).to.equal(undefined);
    expect(await new Adapter('Interaction').findByUid('uid-1'), 'another model').to.equal(undefined);
    // A rotated session id keeps its uid; destroying the old id must not lose the new one.
    await sessions.upsert('sid-2', { uid: 'uid-1', accountId: 'alice', rotated: 1 }, 60);
    await sessions.destroy('sid-1');
    expect(await sessions.findByUid('uid-1')).to.deep.equal({ uid: 'uid-1', accountId: 'alice', rotated: 1 });
    // oidc-provider itself destroys the old id, then saves the new one.
    await sessions.destroy('sid-2');
    await sessions.upsert('sid-3', { uid: 'uid-1', accountId: 'alice', rotated: 2 }, 60);
    expect(await sessions.findByUid('uid-1')).to.deep.equal({ uid: 'uid-1', accountId: 'alice', rotated: 2 });
    await sessions.destroy('sid-3');
    expect(await sessions.findByUid('uid-1')).to.equal(undefined);
    // An entry is the answer for its current uid only.
    await sessions.upsert('sid-4', { uid: 'uid-4' }, 60);
    await sessions.upsert('sid-4', { uid: 'uid-5' }, 60);
    expect(await sessions.findByUid('uid-4')).to.equal(undefined);
    expect(await sessions.findByUid('uid-5')).to.deep.equal({ uid: 'uid-5' });

    const codes = new Adapter('DeviceCode');
    await codes.upsert('dc-1', { userCode: 'ABCD-EFGH', grantId: 'g-dc' }, 60);
    expect(await codes.findByUserCode('ABCD-EFGH')).to.deep.equal({ userCode: 'ABCD-EFGH', grantId: 'g-dc' });
    expect(await codes.findByUserCode('ZZZZ-ZZZZ')).to.equal(undefined);
    // As with uids: an entry is the answer for its current user code only.
    await codes.upsert('dc-1', { userCode: 'IJKL-MNOP', grantId: 'g-dc' }, 60);
    expect(await codes.findByUserCode('ABCD-EFGH'), 'a user code the entry no longer has').to.equal(undefined);
    expect(await codes.findByUserCode('IJKL-MNOP')).to.deep.equal({ userCode: 'IJKL-MNOP', grantId: 'g-dc' });
  });

  it('revokeByGrantId() removes every token of the grant, of every grantable model, and nothing else', async () => {
    const access = new Adapter('AccessToken');
    const refresh = new Adapter('RefreshToken');
    const interaction = new Adapter('Interaction');
    await access.upsert('at-1', { grantId: 'g1' }, 60);
    await access.upsert('at-2', { grantId: 'g1' }, 60);
    await refresh.upsert('rt-1', { grantId: 'g1' }, 600);
    await refresh.upsert('rt-2', { grantId: 'g1' });
    await access.upsert('at-other', { grantId: 'g2' }, 60);
    await interaction.upsert('i-1', { grantId: 'g1' }, 60);

    await access.revokeByGrantId('g1');

    expect(await access.find('at-1')).to.equal(undefined);
    expect(await access.find('at-2')).to.equal(undefined);
    expect(await refresh.find('rt-1')).to.equal(undefined);
    expect(await refresh.find('rt-2')).to.equal(undefined);
    expect(await access.find('at-other')).to.deep.equal({ grantId: 'g2' });
    expect(await interaction.find('i-1')).to.deep.equal({ grantId: 'g1' });
    await access.revokeByGrantId('unknown-grant');
  });

  it("revokeByGrantId() removes a token of each of oidc-provider's grantable models, PreAuthorizedCode included", async () => {
    // oidc-provider's own list (its memory adapter's `grantable`), written out here so that the test does not trust the adapters'.
    const grantable = [
      'AccessToken',
      'AuthorizationCode',
      'RefreshToken',
      'DeviceCode',
      'BackchannelAuthenticationRequest',
      'PreAuthorizedCode',
    ];
    const others = ['Interaction', 'Session', 'Grant', 'PushedAuthorizationRequest', 'ClientCredentials'];
    for (const model of [...grantable, ...others]) {
      await new Adapter(model).upsert(`${model}-1`, { grantId: 'g-all' }, 60);
    }
    await new Adapter('Grant').revokeByGrantId('g-all');
    for (const model of grantable) expect(await new Adapter(model).find(`${model}-1`), model).to.equal(undefined);
    for (const model of others) {
      expect(await new Adapter(model).find(`${model}-1`), model).to.deep.equal({ grantId: 'g-all' });
    }
  });

  it('keeps deployments apart', async () => {
    const Other = await store.another();
    await new Adapter('SubjectToken').upsert('shared-id', { kind: 'mine' }, 60);
    await new Other('SubjectToken').upsert('shared-id', { kind: 'theirs' }, 60);
    expect(await new Adapter('SubjectToken').consumeOnce('shared-id')).to.equal(true);
    expect(await new Other('SubjectToken').find('shared-id')).to.deep.equal({ kind: 'theirs' });
    expect(await new Other('SubjectToken').consumeOnce('shared-id')).to.equal(true);
    await new Other('AccessToken').upsert('at', { grantId: 'same-grant' }, 60);
    await new Adapter('AccessToken').revokeByGrantId('same-grant');
    expect(await new Other('AccessToken').find('at')).to.deep.equal({ grantId: 'same-grant' });
    expect(await store.stored(), 'only its own subject token is stored under this deployment').to.equal(1);
  });
}

/** The subject tokens' domain: `consumeOnce`, single use under concurrency. */
export function subjectTokenContract(target: Target): void {
  let store: AdapterUnderTest;
  let Adapter: AtomicAdapterClass;

  beforeEach(async () => {
    store = await target();
    Adapter = store.Adapter;
  });

  it("meets the subject tokens' contract", () => {
    expect(fitsDomain(SUBJECT_TOKEN_DOMAIN, new Adapter('SubjectToken'))).to.equal(true);
  });

  it('consumeOnce() is true once, then false; false for a missing entry', async () => {
    const adapter = new Adapter('SubjectToken');
    await adapter.upsert('st', { kind: 'SubjectToken' }, 60);
    expect(await adapter.consumeOnce('st')).to.equal(true);
    expect(await adapter.consumeOnce('st')).to.equal(false);
    expect(await adapter.consumeOnce('never-stored')).to.equal(false);
    expect(await store.secondsLeft('SubjectToken', 'never-stored'), 'nothing stored').to.equal(undefined);
    expect(await store.secondsLeft('SubjectToken', 'st')).to.be.within(58, 60);
  });

  it('consumeOnce() lets exactly one of 50 concurrent calls over 5 connections win', async () => {
    const { classes, close } = await store.connections(5);
    try {
      const adapters = classes.map((Connection) => new Connection('SubjectToken'));
      for (let round = 0; round < 5; round += 1) {
        await adapters[0]!.upsert(`race-${round}`, { kind: 'SubjectToken' }, 60);
        const results = await Promise.all(
          Array.from({ length: 50 }, (_, i) => adapters[i % adapters.length]!.consumeOnce(`race-${round}`)),
        );
        expect(results.filter(Boolean)).to.have.length(1);
      }
    } finally {
      await close();
    }
  });
}

/**
 * The sessions' domain: sorted indexes, `commitOnce` and `saveWithinQuotas`;
 * `notifies`: the store keeps the outbox, and a commit's notifications with it.
 */
export function sessionContract(target: Target, { notifies = true }: { notifies?: boolean } = {}): void {
  let store: AdapterUnderTest;
  let Adapter: AtomicAdapterClass;

  beforeEach(async () => {
    store = await target();
    Adapter = store.Adapter;
  });

  it("meets the sessions' contract", () => {
    expect(fitsDomain(SESSION_DOMAIN, new Adapter('ImpersonationSession'))).to.equal(true);
  });

  sortedIndexContract(async () => new Adapter('ImpersonationSession') as unknown as SortedIndexes);

  describe('commitOnce(): one exchange in one operation', () => {
    type Committing = Adapter & AtomicConsume & AtomicCommit & SortedIndexes;
    const committing = (Class: AtomicAdapterClass, model: string) => new Class(model) as unknown as Committing;
    const write = (session: string, subjectToken: string, guards: string[] = []): CommitWrite => ({
      consume: { model: 'SubjectToken', id: subjectToken },
      write: {
        model: 'ImpersonationSession',
        id: session,
        payload: { kind: 'ImpersonationSession', jti: session },
        expiresIn: 60,
      },
      indexes: ['active', 'subject:bob'],
      expiresAt: Date.now() + 60_000,
      guards,
    });
    const listed = async (sessions: Committing) =>
      (await sessions.indexRange('active', undefined, 100)).map((entry) => entry.member);

    it('redeems the subject token, writes the session and its index members, once', async () => {
      const tokens = committing(Adapter, 'SubjectToken');
      const sessions = committing(Adapter, 'ImpersonationSession');
      await tokens.upsert('st', { kind: 'SubjectToken' }, 60);
      expect(await sessions.commitOnce(write('imp_1', 'st'))).to.deep.equal({ outcome: 'committed' });
      expect((await tokens.find('st'))?.consumed).to.equal('imp_1');
      expect(await sessions.find('imp_1')).to.deep.equal({ kind: 'ImpersonationSession', jti: 'imp_1' });
      expect(await listed(sessions)).to.deep.equal(['imp_1']);
      expect((await sessions.indexRange('subject:bob', undefined, 10)).map((e) => e.member)).to.deep.equal(['imp_1']);
      expect(await store.secondsLeft('ImpersonationSession', 'imp_1')).to.be.within(58, 60);

      // Again, for another session: the token is spent, and nothing of the second is written.
      expect(await sessions.commitOnce(write('imp_2', 'st'))).to.deep.equal({ outcome: 'consumed' });
      expect(await sessions.find('imp_2')).to.equal(undefined);
      expect(await listed(sessions)).to.deep.equal(['imp_1']);
      // A token never stored (or gone with its TTL) commits nothing either.
      expect(await sessions.commitOnce(write('imp_3', 'never-stored'))).to.deep.equal({ outcome: 'consumed' });
      expect(await sessions.find('imp_3')).to.equal(undefined);
      expect(await listed(sessions)).to.deep.equal(['imp_1']);
    });

    it('releaseConsumed() gives back only what the commit that wrote `by` consumed, once', async () => {
      const tokens = committing(Adapter, 'SubjectToken');
      const sessions = committing(Adapter, 'ImpersonationSession');
      await tokens.upsert('st', { kind: 'SubjectToken' }, 60);
      const entry = { model: 'SubjectToken', id: 'st' };
      expect(await sessions.releaseConsumed(entry, 'imp_1'), 'not consumed').to.equal(false);
      expect(await sessions.commitOnce(write('imp_1', 'st'))).to.deep.equal({ outcome: 'committed' });
      expect(await sessions.releaseConsumed(entry, 'imp_other'), 'another mark').to.equal(false);
      expect((await tokens.find('st'))?.consumed).to.equal('imp_1');
      expect(await sessions.releaseConsumed({ model: 'SubjectToken', id: 'never-stored' }, 'imp_1')).to.equal(false);
      expect(await sessions.releaseConsumed(entry, 'imp_1')).to.equal(true);
      expect(await sessions.releaseConsumed(entry, 'imp_1'), 'once').to.equal(false);
      expect(await tokens.find('st')).to.deep.equal({ kind: 'SubjectToken' });
      expect(await store.secondsLeft('SubjectToken', 'st')).to.be.within(58, 60);
      expect(await tokens.consumeOnce('st')).to.equal(true);
      // An entry gone with its TTL is given back to nobody.
      await tokens.upsert('brief', { kind: 'SubjectToken' }, 1);
      expect(await sessions.commitOnce(write('imp_2', 'brief'))).to.deep.equal({ outcome: 'committed' });
      await sleep(1100);
      expect(await sessions.releaseConsumed({ model: 'SubjectToken', id: 'brief' }, 'imp_2')).to.equal(false);
      expect(await tokens.find('brief')).to.equal(undefined);
    });

    it('writes nothing and burns nothing when a guard has ended; a guard not ended does not refuse', async () => {
      const tokens = committing(Adapter, 'SubjectToken');
      const sessions = committing(Adapter, 'ImpersonationSession');
      await tokens.upsert('st', { kind: 'SubjectToken' }, 60);
      await sessions.upsert('ended:actor-grant:g1', { kind: GUARD_KIND, ended: 1 } as unknown as AdapterPayload, 600);
      expect(
        await sessions.commitOnce(write('imp_1', 'st', ['ended:actor-session:s1', 'ended:actor-grant:g1'])),
      ).to.deep.equal({
        outcome: 'guarded',
        guard: 'ended:actor-grant:g1',
      });
      expect((await tokens.find('st'))?.consumed, 'not burned').to.equal(undefined);
      expect(await sessions.find('imp_1')).to.equal(undefined);
      expect(await listed(sessions)).to.deep.equal([]);
      // Other guards, or none ended: it commits.
      expect(await sessions.commitOnce(write('imp_2', 'st', ['ended:actor-grant:g2']))).to.deep.equal({
        outcome: 'committed',
      });
      expect(await listed(sessions)).to.deep.equal(['imp_2']);
    });

    it('decides commits asked for together each on its own, as if they had come one after the other', async () => {
      const tokens = committing(Adapter, 'SubjectToken');
      const sessions = committing(Adapter, 'ImpersonationSession');
      for (const id of ['st-a', 'st-b', 'st-d1', 'st-d2', 'st-g'])
        await tokens.upsert(id, { kind: 'SubjectToken' }, 60);
      await sessions.upsert('ended:actor-grant:g1', { kind: GUARD_KIND, ended: 1 } as unknown as AdapterPayload, 600);
      const together = await Promise.all([
        sessions.commitOnce(write('imp_a', 'st-a', ['ended:actor-session:new'])),
        sessions.commitOnce(write('imp_g', 'st-g', ['ended:actor-session:new', 'ended:actor-grant:g1'])),
        sessions.commitOnce(write('imp_missing', 'never-stored')),
        sessions.commitOnce(write('imp_b', 'st-b', ['ended:actor-session:new'])),
        sessions.commitOnce(write('imp_b2', 'st-b')),
        sessions.commitOnce(write('imp_dup', 'st-d1')),
        sessions.commitOnce(write('imp_dup', 'st-d2')),
        sessions.commitOnce({ ...write('imp_none', 'unused'), consume: undefined }),
      ]);
      expect(together).to.deep.equal([
        { outcome: 'committed' },
        { outcome: 'guarded', guard: 'ended:actor-grant:g1' },
        { outcome: 'consumed' },
        { outcome: 'committed' },
        { outcome: 'consumed' },
        { outcome: 'committed' },
        { outcome: 'committed' },
        { outcome: 'committed' },
      ]);
      expect((await tokens.find('st-g'))?.consumed, 'the guarded one burns nothing').to.equal(undefined);
      for (const id of ['st-a', 'st-b', 'st-d1', 'st-d2'])
        expect((await tokens.find(id))?.consumed, id).to.be.a('string');
      expect((await listed(sessions)).sort()).to.deep.equal(['imp_a', 'imp_b', 'imp_dup', 'imp_none']);
      for (const id of ['imp_g', 'imp_missing', 'imp_b2']) expect(await sessions.find(id), id).to.equal(undefined);
    });

    // A commit's notifications join it only in a store that keeps the outbox too.
    if (notifies)
      it('appends the notifications of commits asked for together as if they had come one after the other', async () => {
        const tokens = committing(Adapter, 'SubjectToken');
        const sessions = committing(Adapter, 'ImpersonationSession');
        const outbox = (sessions as unknown as { outbox(): OutboxStore }).outbox();
        for (const id of ['n1', 'n2', 'n3', 'n4', 'n5']) await tokens.upsert(id, { kind: 'SubjectToken' }, 60);
        await sessions.upsert('ended:actor-grant:g9', { kind: GUARD_KIND, ended: 1 } as unknown as AdapterPayload, 600);
        const now = Date.now();
        // A subscription of this test's own: a store's outbox may outlive one test.
        const crm = `crm-${randomUUID()}`;
        const notifying = (session: string, token: string, subject: string, guards: string[] = []): CommitWrite => ({
          ...write(session, token, guards),
          outbox: {
            entries: [{ id: `m-${session}`, subscription: crm, subject, body: JSON.stringify({ session }) }],
            maxPending: 3,
            now,
          },
        });
        const outcomes = await Promise.all([
          sessions.commitOnce(notifying('imp_1', 'n1', 'bob')),
          // bob's second notification waits for his first.
          sessions.commitOnce(notifying('imp_2', 'n2', 'bob')),
          // Refused: it notifies nobody.
          sessions.commitOnce(notifying('imp_3', 'n3', 'carol', ['ended:actor-grant:g9'])),
          sessions.commitOnce(notifying('imp_4', 'n4', 'dave')),
          // The subscription holds 3 waiting entries by now: dropped, the exchange committed.
          sessions.commitOnce(notifying('imp_5', 'n5', 'erin')),
        ]);
        expect(outcomes).to.deep.equal([
          { outcome: 'committed', dropped: [] },
          { outcome: 'committed', dropped: [] },
          { outcome: 'guarded', guard: 'ended:actor-grant:g9' },
          { outcome: 'committed', dropped: [] },
          { outcome: 'committed', dropped: [crm] },
        ]);
        expect((await outbox.stats()).subscriptions[crm]).to.deep.equal({ pending: 3, dead: 0, dropped: 1 });
        // Claimed a second later: a store may date an entry by its own clock.
        const claimed = await outbox.claim(100, 30_000, Date.now() + 1_000, 0);
        expect(claimed.filter((entry) => entry.subscription === crm).map((entry) => entry.id)).to.have.members([
          'm-imp_1',
          'm-imp_4',
        ]);
      });

    it('lets exactly one of 50 concurrent commits of one subject token over 5 connections win, and lists only its session', async () => {
      const { classes, close } = await store.connections(5);
      try {
        const adapters = classes.map((Connection) => committing(Connection, 'ImpersonationSession'));
        await committing(classes[0]!, 'SubjectToken').upsert('raced', { kind: 'SubjectToken' }, 60);
        const outcomes = await Promise.all(
          Array.from({ length: 50 }, (_, i) => adapters[i % adapters.length]!.commitOnce(write(`imp_${i}`, 'raced'))),
        );
        const winners = outcomes.flatMap((outcome, i) => (outcome.outcome === 'committed' ? [`imp_${i}`] : []));
        expect(winners).to.have.length(1);
        expect(outcomes.filter((outcome) => outcome.outcome === 'consumed')).to.have.length(49);
        expect(await listed(adapters[0]!)).to.deep.equal(winners);
        const found = await Promise.all(Array.from({ length: 50 }, (_, i) => adapters[0]!.find(`imp_${i}`)));
        expect(found.filter(Boolean)).to.have.length(1);
      } finally {
        await close();
      }
    });
  });

  describe('saveWithinQuotas(): bounds per principal, counted with the write', () => {
    type Saving = Adapter & PrincipalQuotas & SortedIndexes;
    const saving = (Class: AtomicAdapterClass) => new Class('ImpersonationSession') as unknown as Saving;
    const quota = (key: string, max: number, ms = 60_000): QuotaCharge => ({ key, max, expiresAt: Date.now() + ms });
    const save = (session: string, quotas: QuotaCharge[]): QuotaWrite => ({
      write: {
        model: 'ImpersonationSession',
        id: session,
        payload: { kind: 'ImpersonationSession', jti: session },
        expiresIn: 60,
      },
      indexes: ['active', 'subject:bob'],
      expiresAt: Date.now() + 60_000,
      quotas,
    });
    const listed = async (sessions: Saving) =>
      (await sessions.indexRange('active', undefined, 100)).map((entry) => entry.member).sort();

    it('writes the entry and its index members within every quota; a spent one refuses, charging and writing nothing', async () => {
      const sessions = saving(Adapter);
      const user = quota('quota:user:bob', 2);
      const client = quota('quota:client:orders', 3);
      expect(await sessions.saveWithinQuotas(save('imp_1', [user, client]))).to.deep.equal({ outcome: 'saved' });
      expect(await sessions.find('imp_1')).to.deep.equal({ kind: 'ImpersonationSession', jti: 'imp_1' });
      expect((await sessions.indexRange('subject:bob', undefined, 10)).map((e) => e.member)).to.deep.equal(['imp_1']);
      expect(await sessions.saveWithinQuotas(save('imp_2', [user, client]))).to.deep.equal({ outcome: 'saved' });
      // The user's share is spent: named first, and the client's share is not charged for the refusal.
      for (let again = 0; again < 3; again += 1) {
        expect(await sessions.saveWithinQuotas(save('imp_3', [user, client]))).to.deep.equal({
          outcome: 'spent',
          key: user.key,
        });
      }
      expect(await sessions.find('imp_3')).to.equal(undefined);
      expect(await listed(sessions)).to.deep.equal(['imp_1', 'imp_2']);
      // Another user of the same client still fits, once: the client had three, and two are taken.
      const other = quota('quota:user:carol', 2);
      expect(await sessions.saveWithinQuotas(save('imp_4', [other, client]))).to.deep.equal({ outcome: 'saved' });
      expect(await sessions.saveWithinQuotas(save('imp_5', [other, client]))).to.deep.equal({
        outcome: 'spent',
        key: client.key,
      });
      // A counter is no session: the model's entries are found as they were written, and counters are not.
      expect(await sessions.find(user.key)).to.satisfy(
        (found: unknown) => found === undefined || !('jti' in (found as object)),
      );
    });

    it('starts a counter again once it expires', async () => {
      const sessions = saving(Adapter);
      const brief = quota('quota:user:brief', 1, 1000);
      expect(await sessions.saveWithinQuotas(save('imp_1', [brief]))).to.deep.equal({ outcome: 'saved' });
      expect((await sessions.saveWithinQuotas(save('imp_2', [brief]))).outcome).to.equal('spent');
      await sleep(1100);
      expect(await sessions.saveWithinQuotas(save('imp_2', [quota(brief.key, 1)]))).to.deep.equal({ outcome: 'saved' });
    });

    it('lets exactly its bound of 60 concurrent writes over 5 connections through, whatever counters they share', async () => {
      const { classes, close } = await store.connections(5);
      try {
        const adapters = classes.map(saving);
        const client = quota('quota:client:burst', 10);
        // Every write is a new subject token (a counter created in the burst), of one of three users.
        const outcomes = await Promise.all(
          Array.from({ length: 60 }, (_, i) =>
            adapters[i % adapters.length]!.saveWithinQuotas(
              save(`imp_${i}`, [quota(`quota:token:${i}`, 1), quota(`quota:user:${i % 3}`, 4), client]),
            ),
          ),
        );
        const saved = outcomes.flatMap((outcome, i) => (outcome.outcome === 'saved' ? [`imp_${i}`] : []));
        expect(saved).to.have.length(10);
        expect(await listed(adapters[0]!)).to.deep.equal(saved.sort());
        // No user had more than its four, and a refused write charged nothing: the client's ten are all used.
        const perUser = [0, 1, 2].map((user) => saved.filter((id) => Number(id.slice(4)) % 3 === user).length);
        expect(Math.max(...perUser)).to.be.at.most(4);
        expect((await adapters[0]!.saveWithinQuotas(save('imp_more', [client]))).outcome).to.equal('spent');
      } finally {
        await close();
      }
    });
  });
}

/** The approvals' domain: sorted indexes, and the bounded count-and-add. */
export function approvalContract(target: Target): void {
  let store: AdapterUnderTest;
  let Adapter: AtomicAdapterClass;

  beforeEach(async () => {
    store = await target();
    Adapter = store.Adapter;
  });

  it("meets the approvals' contract", () => {
    expect(fitsDomain(APPROVAL_DOMAIN, new Adapter('ImpersonationApproval'))).to.equal(true);
  });

  const opened = async () => new Adapter('ImpersonationApproval') as unknown as SortedIndexes & BoundedIndexes;
  sortedIndexContract(opened);
  boundedIndexContract(opened);
}

/** The SSF streams' domain: sorted indexes. */
export function ssfStreamContract(target: Target): void {
  let store: AdapterUnderTest;
  let Adapter: AtomicAdapterClass;

  beforeEach(async () => {
    store = await target();
    Adapter = store.Adapter;
  });

  it("meets the SSF streams' contract", () => {
    expect(fitsDomain(SSF_STREAM_DOMAIN, new Adapter('ImpersonationSsf'))).to.equal(true);
  });

  sortedIndexContract(async () => new Adapter('ImpersonationSsf') as unknown as SortedIndexes);
}
