/**
 * Seed data of the demo: users, client secrets and the demo resource server.
 * Demo only. Every secret can be overridden through the environment.
 */
import type { ApprovalRequirement } from '../lib/index.js';

export const API_RESOURCE = 'https://api.example.com';
export const API_SCOPES = ['profile:read', 'profile:write'] as const;
/**
 * The demo's second API, the orders service, which the resource API calls on
 * the customer's behalf with a delegated token (RFC 8693 delegation).
 */
export const ORDERS_RESOURCE = 'https://orders.example.com';
export const ORDERS_SCOPES = ['profile:read'] as const;

/**
 * The orders application's own authorization server (demo/orders-app.ts): its
 * issuer identifier, an https name as `id_jag_audiences` requires (it listens
 * on http://localhost:$ORDERS_PORT), and the API it issues tokens for.
 */
export const ORDERS_AUTH_ISSUER = 'https://auth.orders.example.com';
export const ORDERS_API = 'https://api.orders.example.com';
export const ORDERS_API_SCOPES = ['orders:read'] as const;

/** Client ids of the demo. */
export const CLIENTS = {
  console: 'support-console',
  web: 'support-web',
  backend: 'impersonation-backend',
  /** The customers' own account pages (confidential, server-side sign-in). */
  account: 'customer-account',
  /**
   * The on-call team's emergency access: a machine client of the Management
   * API that may bypass the customer's approval (break-glass), with a reason.
   * The console never uses it.
   */
  emergency: 'emergency-access',
  /** The resource API as a client: it exchanges the tokens it receives for delegated ones to the orders service. */
  resourceApi: 'resource-api',
  /**
   * An SSF receiver of your own (curl, a CAEP receiver under test): a machine
   * client that may manage SSF streams and poll them (docs/demo.md, Shared Signals).
   */
  caepReceiver: 'caep-receiver',
  /** The resource API as an SSF receiver: it polls a stream of its own for the impersonations that stop. */
  resourceApiReceiver: 'resource-api-receiver',
  /**
   * An agent that holds a customer's sign-in here and acts for them at the
   * orders application: it asks the identity service for an ID-JAG, and the
   * orders application's authorization server for a token with it.
   */
  ordersAgent: 'orders-agent',
  /**
   * The orders application's authorization server as an SSF receiver: it
   * polls a stream of its own for the ID-JAG sessions that stop here.
   */
  ordersAuthReceiver: 'orders-auth-receiver',
} as const;

/** What a customer's account page calls the clients and applications an agent acts through. */
export const AGENT_NAMES: ReadonlyMap<string, string> = new Map([
  [CLIENTS.ordersAgent, 'Orders assistant'],
  [ORDERS_AUTH_ISSUER, 'Orders'],
]);

/** The organisations whose customers the demo's support team serves, by id: a support agent serves one. */
export const ORGANISATIONS = { northwind: 'Northwind', globex: 'Globex' } as const;
export type OrganisationId = keyof typeof ORGANISATIONS;

/**
 * What a support agent's role lets them do as a customer: look (`read`), or
 * look and change (`write`); and how long one impersonation may last.
 */
export const SUPPORT_TIERS = {
  read: { label: 'support trainee, read only', scopes: ['profile:read'], maxSessionSeconds: 300 },
  write: { label: 'support, read and change', scopes: ['profile:read', 'profile:write'], maxSessionSeconds: 600 },
} as const;
export type SupportTier = keyof typeof SUPPORT_TIERS;

export interface DemoUser {
  /** Account id (`sub`); equals the login. */
  id: string;
  password: string;
  name: string;
  /** `support` marks support staff, who may request impersonation. */
  roles: string[];
  /** When false, the identity service refuses to create subject tokens for this user. */
  impersonable: boolean;
  /**
   * What support needs from this customer before acting as them: nothing
   * (`none`), or a grant in force: one they gave ahead of time, or their
   * approval of the request (`grant`).
   */
  approval: Extract<ApprovalRequirement, 'none' | 'grant'>;
  /** The organisation a customer belongs to, or whose customers a support agent serves. */
  organisation: OrganisationId;
  /** A support agent's tier (`roles` holds `support`): what they may do as a customer, and for how long. */
  supportTier?: SupportTier;
}

/** A demo user as the terminal and the login page list them; the terminal adds the password. */
export function describeUser(user: DemoUser, password?: string): string {
  const role = user.supportTier ? SUPPORT_TIERS[user.supportTier].label : user.roles.join(', ');
  const limits = [
    ...(user.impersonable ? [] : ['protected from impersonation']),
    ...(user.approval === 'grant' ? ['approves support first'] : []),
  ];
  const login = password === undefined ? user.id : `${user.id} / ${password}`;
  return `${login} (${user.name}, ${ORGANISATIONS[user.organisation]}): ${[role, ...limits].join(', ')}`;
}

export interface DemoSecrets {
  users: DemoUser[];
  /** Secret of the confidential web client `support-web`. */
  webClientSecret: string;
  /** Secret of the machine-to-machine client `impersonation-backend`. */
  backendClientSecret: string;
  /** Secret of the customers' account pages, client `customer-account`. */
  accountClientSecret: string;
  /** Secret of the break-glass client `emergency-access`. */
  emergencyClientSecret: string;
  /** Secret of the resource API's client `resource-api`, which delegates. */
  resourceApiClientSecret: string;
  /** Secret of the SSF receiver client `caep-receiver`. */
  caepReceiverClientSecret: string;
  /** Secret of the resource API's SSF receiver client `resource-api-receiver`. */
  resourceApiReceiverClientSecret: string;
  /** Secret of the agent `orders-agent`, at the identity service and at the orders application's authorization server. */
  ordersAgentClientSecret: string;
  /** Secret of the orders authorization server's SSF receiver client `orders-auth-receiver`. */
  ordersAuthReceiverClientSecret: string;
}

type Env = Readonly<Record<string, string | undefined>>;

export function demoSecrets(env: Env = process.env): DemoSecrets {
  return {
    users: [
      {
        id: 'alice',
        password: env['ALICE_PASSWORD'] || 'alice-password',
        name: 'Alice Adams',
        roles: ['support'],
        impersonable: true,
        approval: 'none',
        organisation: 'northwind',
        supportTier: 'write',
      },
      {
        id: 'erin',
        password: env['ERIN_PASSWORD'] || 'erin-password',
        name: 'Erin Evans',
        roles: ['support'],
        impersonable: true,
        approval: 'none',
        organisation: 'northwind',
        // A trainee: she looks, never changes, and each impersonation of hers lasts at most five minutes.
        supportTier: 'read',
      },
      {
        id: 'grace',
        password: env['GRACE_PASSWORD'] || 'grace-password',
        name: 'Grace Green',
        roles: ['support'],
        impersonable: true,
        approval: 'none',
        organisation: 'globex',
        supportTier: 'write',
      },
      {
        id: 'bob',
        password: env['BOB_PASSWORD'] || 'bob-password',
        name: 'Bob Brown',
        roles: ['customer'],
        impersonable: true,
        // Support acts as bob only with his say: a grant he gave, or his approval of each request.
        approval: 'grant',
        organisation: 'northwind',
      },
      {
        id: 'carol',
        password: env['CAROL_PASSWORD'] || 'carol-password',
        name: 'Carol Clark',
        roles: ['customer'],
        impersonable: false,
        approval: 'none',
        organisation: 'northwind',
      },
      {
        id: 'dave',
        password: env['DAVE_PASSWORD'] || 'dave-password',
        name: 'Dave Doyle',
        roles: ['customer'],
        impersonable: true,
        // Support may act as dave without asking him first.
        approval: 'none',
        organisation: 'northwind',
      },
      {
        id: 'frank',
        password: env['FRANK_PASSWORD'] || 'frank-password',
        name: 'Frank Fischer',
        roles: ['customer'],
        impersonable: true,
        // A customer of the other organisation: only its own support team acts as him.
        approval: 'none',
        organisation: 'globex',
      },
    ],
    webClientSecret: env['SUPPORT_WEB_SECRET'] || 'support-web-secret',
    backendClientSecret: env['IMPERSONATION_BACKEND_SECRET'] || 'impersonation-backend-secret',
    accountClientSecret: env['CUSTOMER_ACCOUNT_SECRET'] || 'customer-account-secret',
    emergencyClientSecret: env['EMERGENCY_ACCESS_SECRET'] || 'emergency-access-secret',
    resourceApiClientSecret: env['RESOURCE_API_SECRET'] || 'resource-api-secret',
    caepReceiverClientSecret: env['CAEP_RECEIVER_SECRET'] || 'caep-receiver-secret',
    resourceApiReceiverClientSecret: env['RESOURCE_API_RECEIVER_SECRET'] || 'resource-api-receiver-secret',
    ordersAgentClientSecret: env['ORDERS_AGENT_SECRET'] || 'orders-agent-secret',
    ordersAuthReceiverClientSecret: env['ORDERS_AUTH_RECEIVER_SECRET'] || 'orders-auth-receiver-secret',
  };
}

export interface Address {
  line1: string;
  city: string;
  postcode: string;
  country: string;
}

/** What the demo resource API knows of a customer: their app's data, as they see it. */
export interface CustomerRecord {
  profile: { name: string; email: string; plan: string; memberSince: string; shippingAddress: Address };
  orders: Array<{ id: string; placedOn: string; items: string; total: string; status: string }>;
  invoices: Array<{ id: string; issuedOn: string; amount: string; status: string }>;
}

/** Fresh seed data of the demo customers (a copy: the API changes its own). */
export function customerSeed(): Map<string, CustomerRecord> {
  return new Map<string, CustomerRecord>([
    [
      'bob',
      {
        profile: {
          name: 'Bob Brown',
          email: 'bob@example.com',
          plan: 'Business',
          memberSince: '2021-03-14',
          shippingAddress: {
            line1: '12 Harbour Street',
            city: 'Bristol',
            postcode: 'BS1 4RW',
            country: 'United Kingdom',
          },
        },
        orders: [
          {
            id: 'ORD-1042',
            placedOn: '2026-10-28',
            items: 'Standing desk, cable tray',
            total: '£489.00',
            status: 'Delivered',
          },
          { id: 'ORD-1107', placedOn: '2026-11-15', items: 'Monitor arm', total: '£89.00', status: 'Shipped' },
        ],
        invoices: [
          { id: 'INV-2026-0311', issuedOn: '2026-10-28', amount: '£489.00', status: 'Paid' },
          { id: 'INV-2026-0388', issuedOn: '2026-11-15', amount: '£89.00', status: 'Due 2026-12-15' },
        ],
      },
    ],
    [
      'carol',
      {
        profile: {
          name: 'Carol Clark',
          email: 'carol@example.com',
          plan: 'Enterprise',
          memberSince: '2019-07-02',
          shippingAddress: { line1: '4 Rue des Lilas', city: 'Lyon', postcode: '69003', country: 'France' },
        },
        orders: [
          { id: 'ORD-0977', placedOn: '2026-09-30', items: 'Conference phone', total: '€320.00', status: 'Delivered' },
        ],
        invoices: [{ id: 'INV-2026-0290', issuedOn: '2026-09-30', amount: '€320.00', status: 'Paid' }],
      },
    ],
    [
      'dave',
      {
        profile: {
          name: 'Dave Doyle',
          email: 'dave@example.com',
          plan: 'Starter',
          memberSince: '2024-01-09',
          shippingAddress: { line1: '88 Canal Walk', city: 'Dublin', postcode: 'D02 X285', country: 'Ireland' },
        },
        orders: [{ id: 'ORD-1120', placedOn: '2026-11-18', items: 'Desk lamp', total: '€59.00', status: 'Processing' }],
        invoices: [{ id: 'INV-2026-0401', issuedOn: '2026-11-18', amount: '€59.00', status: 'Due 2026-12-18' }],
      },
    ],
    [
      'frank',
      {
        profile: {
          name: 'Frank Fischer',
          email: 'frank@example.com',
          plan: 'Business',
          memberSince: '2022-05-20',
          shippingAddress: { line1: '7 Lindenstraße', city: 'Hamburg', postcode: '20095', country: 'Germany' },
        },
        orders: [
          { id: 'GX-0311', placedOn: '2026-11-02', items: 'Office chair', total: '€240.00', status: 'Delivered' },
        ],
        invoices: [{ id: 'GX-INV-0311', issuedOn: '2026-11-02', amount: '€240.00', status: 'Paid' }],
      },
    ],
  ]);
}
