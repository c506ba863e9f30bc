import { expect } from 'chai';
import type { AdapterPayload } from 'oidc-provider';
import type { ReadAheadAdapter } from '../../lib/adapters/contracts/read-ahead.js';
import type { ImpersonationAdapterClass } from '../../lib/adapters/contract.js';

/** What a read-ahead test reads: alice's sign-in `s1` (uid `u1`), her Grant `g1` and her access token `at1`. */
export interface SignedIn {
  tokens: ReadAheadAdapter;
  sessions: InstanceType<ImpersonationAdapterClass>;
  grants: InstanceType<ImpersonationAdapterClass>;
}

/** Saves alice's sign-in, Grant and `token` (the access token's payload) on `Adapter`'s store. */
export async function signedIn(Adapter: ImpersonationAdapterClass, token: object): Promise<SignedIn> {
  const tokens = new Adapter('AccessToken') as ReadAheadAdapter;
  const sessions = new Adapter('Session');
  const grants = new Adapter('Grant');
  await sessions.upsert('s1', { kind: 'Session', uid: 'u1', accountId: 'alice' } as unknown as AdapterPayload, 600);
  await grants.upsert('g1', { kind: 'Grant', accountId: 'alice' } as unknown as AdapterPayload, 600);
  await tokens.upsert('at1', token as AdapterPayload, 600);
  return { tokens, sessions, grants };
}

/** Two exchanges of one token, each finding the token, its sign-in and its Grant at once: every find answers. */
export async function findEachTwice({ tokens, sessions, grants }: SignedIn): Promise<void> {
  const twice = <T>(find: () => Promise<T>) => Promise.all([find(), find()]);
  const [found, signIns, granted] = await Promise.all([
    twice(() => tokens.find('at1')),
    twice(() => sessions.findByUid('u1')),
    twice(() => grants.find('g1')),
  ]);
  expect(found.concat(signIns, granted).every((payload) => payload !== undefined)).to.equal(true);
}

/** Reads `at1` ahead, then finds it, its sign-in and its Grant, each as saved. */
export async function readAheadAndFind({ tokens, sessions, grants }: SignedIn): Promise<void> {
  await tokens.readAhead!('at1');
  expect(await tokens.find('at1')).to.include({ sessionUid: 'u1' });
  expect(await sessions.findByUid('u1')).to.include({ accountId: 'alice' });
  expect(await grants.find('g1')).to.include({ accountId: 'alice' });
}
