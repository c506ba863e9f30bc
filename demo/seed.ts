/**
 * Seed data of the demo: users, client secrets and the demo resource server.
 * Demo only. Every secret can be overridden through the environment.
 */

export const API_RESOURCE = 'https://api.example.com';
export const API_SCOPES = ['profile:read', 'profile:write'] as const;

/** Client ids of the demo. */
export const CLIENTS = {
  console: 'support-console',
  web: 'support-web',
  backend: 'impersonation-backend',
} as const;

export interface DemoUser {
  /** Account id (`sub`); equals the login. */
  id: string;
  password: string;
  name: string;
  /** `support` marks support staff, who may request impersonation. */
  roles: string[];
  /** When false, the identity service refuses to create subject tokens for this user. */
  impersonable: boolean;
}

export interface DemoSecrets {
  users: DemoUser[];
  /** Secret of the confidential web client `support-web`. */
  webClientSecret: string;
  /** Secret of the machine-to-machine client `impersonation-backend`. */
  backendClientSecret: string;
}

type Env = Readonly<Record<string, string | undefined>>;

export function demoSecrets(env: Env = process.env): DemoSecrets {
  return {
    users: [
      { id: 'alice', password: env['ALICE_PASSWORD'] || 'alice-password', name: 'Alice Adams', roles: ['support'], impersonable: true },
      { id: 'bob', password: env['BOB_PASSWORD'] || 'bob-password', name: 'Bob Brown', roles: ['customer'], impersonable: true },
      { id: 'carol', password: env['CAROL_PASSWORD'] || 'carol-password', name: 'Carol Clark', roles: ['customer'], impersonable: false },
    ],
    webClientSecret: env['SUPPORT_WEB_SECRET'] || 'support-web-secret',
    backendClientSecret: env['IMPERSONATION_BACKEND_SECRET'] || 'impersonation-backend-secret',
  };
}
