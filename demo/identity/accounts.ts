/**
 * The identity service's accounts: the demo users, as oidc-provider's
 * `findAccount` loads them and as the login form checks their passwords.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Account } from 'oidc-provider';
import type { DemoUser } from '../seed.js';

export interface DemoAccounts {
  /** Every demo user, as the login page lists them. */
  readonly users: readonly DemoUser[];
  /** The seed entry of a user, for the identity service's policy (organisation, support tier). */
  user(id: string): DemoUser | undefined;
  /** The account with its claims (`sub`, `name`, `roles`), whether it may be impersonated and what support needs first. */
  find(id: string): Account | undefined;
  /** The user whose login and password these are; an unknown login costs the same as a wrong password. */
  authenticate(login: string, password: string): DemoUser | undefined;
}

export function demoAccounts(users: readonly DemoUser[]): DemoAccounts {
  const byId = new Map(users.map((user) => [user.id, user]));
  return {
    users,
    find: (id) => accountOf(byId.get(id)),
    user: (id) => byId.get(id),
    authenticate: (login, password) => {
      const user = byId.get(login);
      return passwordMatches(user, password) ? user : undefined;
    },
  };
}

function accountOf(user: DemoUser | undefined): Account | undefined {
  if (!user) return undefined;
  return {
    accountId: user.id,
    impersonable: user.impersonable,
    approval: user.approval,
    organisation: user.organisation,
    ...(user.supportTier === undefined ? {} : { supportTier: user.supportTier }),
    claims: () => ({ sub: user.id, name: user.name, roles: [...user.roles] }),
  };
}

/** Compares in constant time. */
function passwordMatches(user: DemoUser | undefined, password: string): boolean {
  const digest = (value: string) => createHash('sha256').update(value).digest();
  const expected = digest(user?.password ?? randomBytes(16).toString('hex'));
  return timingSafeEqual(expected, digest(password)) && user !== undefined;
}
