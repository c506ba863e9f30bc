// Orders → payments with RFC 8693 delegation. A user signs in to the orders front end, which
// calls the orders service with the user's access token; the orders service exchanges that token
// for one to call the payments service, which names the orders service in `act`; the payments
// service verifies it with the package's resource-server helper. Three HTTP servers, one process.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Provider, { errors } from 'oidc-provider';
import { createImpersonation, TOKEN_EXCHANGE_GRANT } from 'oidc-provider-impersonation';
import { createImpersonationVerifier, ImpersonationTokenError } from 'oidc-provider-impersonation/resource-server';

export const ORDERS = 'https://orders.example.com'; // resource indicators: names, not the services' URLs
export const PAYMENTS = 'https://payments.example.com';
const ACCESS_TOKEN = 'urn:ietf:params:oauth:token-type:access_token';

export interface OrdersPayments {
  issuer: string;
  orders: string;
  payments: string;
  close(): Promise<void>;
}

export async function startOrdersPayments(options: {
  frontEndCallback: string; // the orders front end's redirect URI
  ordersSecret: string;
}): Promise<OrdersPayments> {
  // The identity service. Sign-in is oidc-provider's development interactions: use your own.
  const identity = createServer();
  const issuer = await listen(identity);
  const impersonation = createImpersonation({ managementResource: `${issuer}/api` });
  const provider = new Provider(
    issuer,
    impersonation.configure({
      clients: [
        {
          client_id: 'orders-web', // the front end: a public client, authorization code with PKCE
          token_endpoint_auth_method: 'none',
          grant_types: ['authorization_code'],
          response_types: ['code'],
          redirect_uris: [options.frontEndCallback],
        },
        {
          client_id: 'orders-service', // the orders API's own client: it delegates tokens sent to ORDERS
          client_secret: options.ordersSecret,
          token_endpoint_auth_method: 'client_secret_basic',
          grant_types: [TOKEN_EXCHANGE_GRANT],
          response_types: [],
          redirect_uris: [],
          token_exchange_delegation: ORDERS,
        },
      ],
      findAccount: (_ctx, sub) => (sub === 'bob' ? { accountId: sub, claims: () => ({ sub }) } : undefined),
      features: {
        resourceIndicators: {
          enabled: true,
          getResourceServerInfo(_ctx, resource, client) {
            // ORDERS defines payments:charge too: a user's token for ORDERS carries only scopes ORDERS
            // defines, and a delegation passes on only scopes the user's token carries.
            if (resource === ORDERS) {
              return { scope: 'orders:read orders:write payments:charge', accessTokenFormat: 'jwt' };
            }
            // What each client may hold at PAYMENTS: the orders service may charge, never refund.
            if (resource === PAYMENTS) {
              const scope =
                client.clientId === 'orders-service' ? 'payments:charge' : 'payments:charge payments:refund';
              return { scope, accessTokenFormat: 'jwt', accessTokenTTL: 300 };
            }
            throw new errors.InvalidTarget();
          },
        },
      },
    }),
  );
  impersonation.install(provider);
  identity.on('request', provider.callback());

  const verifierOf = (audience: string) =>
    createImpersonationVerifier({ issuer, audience, revocationsUri: `${issuer}/api/impersonations/revocations` });
  const ordersVerifier = verifierOf(ORDERS);
  const paymentsVerifier = verifierOf(PAYMENTS);
  await Promise.all([ordersVerifier.ready(), paymentsVerifier.ready()]);

  // The payments service: a charge needs payments:charge; it records who asked, and through whom.
  const paymentsServer = createServer(
    handle(async (request) => {
      const token = await paymentsVerifier.verify(bearer(request));
      if (!token.scopes.has('payments:charge')) return [403, { error: 'insufficient_scope' }];
      const { amount } = (await readJson(request)) as { amount: number };
      return [201, { customer: token.subject, actor: token.actor?.sub, amount }];
    }),
  );
  const payments = await listen(paymentsServer);

  // The orders service: an order is placed with the user's token, and paid for with a delegated one.
  const ordersServer = createServer(
    handle(async (request) => {
      const userToken = bearer(request);
      const user = await ordersVerifier.verify(userToken);
      if (!user.scopes.has('orders:write')) return [403, { error: 'insufficient_scope' }];
      const order = (await readJson(request)) as { amount: number };
      const exchanged = await fetch(`${issuer}/token`, {
        method: 'POST',
        headers: { authorization: `Basic ${btoa(`orders-service:${options.ordersSecret}`)}` },
        body: new URLSearchParams({
          grant_type: TOKEN_EXCHANGE_GRANT,
          subject_token: userToken,
          subject_token_type: ACCESS_TOKEN,
          resource: PAYMENTS,
          scope: 'payments:charge',
        }),
      });
      if (!exchanged.ok) return [502, { error: 'payments_unavailable', exchange: await exchanged.json() }];
      const { access_token: paymentsToken } = (await exchanged.json()) as { access_token: string };
      const charged = await fetch(`${payments}/charges`, {
        method: 'POST',
        headers: { authorization: `Bearer ${paymentsToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ amount: order.amount }),
      });
      return [charged.ok ? 201 : 502, { customer: user.subject, payment: await charged.json() }];
    }),
  );
  const orders = await listen(ordersServer);

  return {
    issuer,
    orders,
    payments,
    async close() {
      ordersVerifier.close();
      paymentsVerifier.close();
      await Promise.all([identity, ordersServer, paymentsServer].map(stop));
    },
  };
}

type Handler = (request: IncomingMessage) => Promise<[status: number, body: unknown]>;

/** A JSON answer for every request; a token the helper refuses is answered with its status. */
function handle(handler: Handler) {
  return (request: IncomingMessage, response: ServerResponse) => {
    handler(request)
      .catch((error: unknown): [number, unknown] =>
        error instanceof ImpersonationTokenError
          ? [error.status, { error: error.code }]
          : [500, { error: 'server_error' }],
      )
      .then(([status, body]) => {
        response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      });
  };
}

function bearer(request: IncomingMessage): string {
  const [scheme, token] = (request.headers.authorization ?? '').split(' ');
  if (scheme?.toLowerCase() !== 'bearer' || !token)
    throw new ImpersonationTokenError('invalid_token', 'no bearer token');
  return token;
}

async function readJson(request: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
}

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

function stop(server: Server): Promise<void> {
  server.closeAllConnections();
  return new Promise((resolve) => server.close(() => resolve()));
}
