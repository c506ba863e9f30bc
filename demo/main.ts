/**
 * `npm run demo`: the identity service on PORT (3000) and the integrator
 * backend with the support console on BACKEND_PORT (3001), in one process.
 */
import { createPostgresAuditLog } from '../lib/audit-postgres/index.js';
import { createMemoryAuditLog } from '../lib/index.js';
import { startDemo } from './demo.js';
import { sharedDemoKeys } from './keys.js';
import { lineOutput } from './line-output.js';
import { ORDERS_API_PATH } from './orders-app.js';
import { demoSecrets, describeUser } from './seed.js';
import { demoStore } from './store.js';

function port(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 65_535)
    throw new Error(`${name} must be a port number, not ${raw}`);
  return value;
}

function whole(name: string, unit = 'seconds'): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a whole number of ${unit}, not ${raw}`);
  return value;
}

function flag(name: string): boolean {
  const raw = process.env[name];
  if (raw === undefined || raw === '' || raw === '0') return false;
  if (raw === '1') return true;
  throw new Error(`${name} must be 1 or 0, not ${raw}`);
}

/** Comma-separated http(s) addresses, each reduced to its origin. */
function origins(name: string): string[] | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return undefined;
  return raw.split(',').map((entry) => {
    let url: URL | undefined;
    try {
      url = new URL(entry.trim());
    } catch {
      url = undefined;
    }
    if (!url || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.pathname !== '/' || url.search)
      throw new Error(`${name} must be addresses such as http://localhost:3101, separated by commas, not ${entry}`);
    return url.origin;
  });
}

function auditDescription(databaseUrl: string): string {
  return `PostgreSQL at ${new URL(databaseUrl).host} (table impersonation_audit)`;
}

const secrets = demoSecrets();
// Behind one IDENTITY_URL, a sign-in started at any instance's console may reach this one and must return there.
const peerBackendUrls = origins('BACKEND_URLS');
// With REDIS_URL, or else DATABASE_URL, the provider and the subject tokens live there, shared by every demo instance.
const store = demoStore(process.env);
const { adapter, description: storeDescription } = store;
// With DATABASE_URL the audit trail is kept in PostgreSQL; otherwise in memory, chained and verified the same way.
const databaseUrl = process.env['DATABASE_URL'];
const auditLog = databaseUrl ? createPostgresAuditLog({ connectionString: databaseUrl }) : createMemoryAuditLog();
// Instances that share a store share the signing and cookie keys too: from DEMO_KEYS, or a key file made on first start.
const keyFile = process.env['DEMO_KEY_FILE'] || 'demo-keys.json';
const shared = adapter ? await sharedDemoKeys(keyFile) : undefined;
const identityPublicUrl = process.env['IDENTITY_URL'] || undefined;
const subjectTokenTTL = whole('SUBJECT_TOKEN_TTL');
const actorMaxAge = whole('ACTOR_MAX_AGE');
// The backend's subject tokens per hour (the plugin's maxSubjectTokensPerClient): a load test needs more than 10,000.
const subjectTokensPerHour = whole('SUBJECT_TOKENS_PER_HOUR', 'tokens');
const identityPort = port('PORT', 3000);
const backendPort = port('BACKEND_PORT', 3001);
// The orders application's authorization server, beside each identity service: PORT + 2 unless set.
const ordersPort = port('ORDERS_PORT', identityPort === 0 ? 0 : identityPort + 2);
// The feed's reads are many a second (every resource server polls it): on the console only when asked for.
const logFeedReads = flag('DEMO_LOG_FEED');
// The lines of the last few milliseconds written together, not one write per event on the request's path; what is queued at exit is written then.
const output = lineOutput(process.stdout);
process.on('exit', () => output.flush());

async function closeStores(): Promise<void> {
  await adapter?.close();
  if ('close' in auditLog) await auditLog.close();
}

/** Waits for a store the demo needs; one that cannot be reached stops the start with one line. */
async function reach(what: string, ready: Promise<void>): Promise<void> {
  try {
    await ready;
  } catch (error) {
    console.error(`The demo cannot reach ${what}: ${(error as Error).message}`);
    await closeStores().catch(() => {});
    process.exit(1);
  }
}

// The servers listen only once their stores answer: no request meets a connection still opening or a table not yet made.
await reach(`its store (${storeDescription})`, store.ready());
if ('migrate' in auditLog) await reach(`its audit trail (${auditDescription(databaseUrl!)})`, auditLog.migrate());

let demo;
try {
  demo = await startDemo({
    identityPort,
    backendPort,
    ordersPort,
    ...(subjectTokenTTL === undefined ? {} : { subjectTokenTTL }),
    ...(subjectTokensPerHour === undefined ? {} : { subjectTokensPerHour }),
    ...(actorMaxAge === undefined ? {} : { actorMaxAge }),
    secrets,
    ...(adapter ? { adapter } : {}),
    auditLog,
    ...(shared ? { keys: shared.keys } : {}),
    ...(identityPublicUrl ? { identityPublicUrl } : {}),
    ...(peerBackendUrls ? { peerBackendUrls } : {}),
    log: (line) => output.line(line),
    logFeedReads,
  });
} catch (error) {
  const { code, port: busy } = error as { code?: string; port?: number };
  if (code !== 'EADDRINUSE' && code !== 'EACCES') throw error;
  const variable = busy === backendPort ? 'BACKEND_PORT' : busy === ordersPort ? 'ORDERS_PORT' : 'PORT';
  console.error(
    `The demo cannot listen on port ${busy ?? '?'} (${code === 'EADDRINUSE' ? 'it is in use' : 'not allowed'}): ` +
      `stop what uses it, or choose another, e.g. ${variable}=${(busy ?? 3000) + 100} npm run demo`,
  );
  await closeStores();
  process.exit(1);
}
const { identity, backend, orders } = demo;

console.log(`
Impersonation demo is running.

  Support console     ${backend.url}/  (sign in as alice)
  Customer's account  ${backend.url}/account  (sign in as bob: support's requests, access given, who accessed the account)
  Identity service    ${identity.issuer}  (discovery: ${identity.issuer}/.well-known/openid-configuration)
  Management API      POST ${identity.managementUrl}
  Backend             POST ${backend.url}/api/request-impersonation
  Resource API        GET  ${backend.url}/api/me  (JWTs for https://api.example.com)
  Actor token helper  ${backend.url}/web/login  (confidential client support-web; for curl)
  Orders application  ${orders.url}  (authorization server, issuer ${orders.issuer}; API GET ${orders.url}${ORDERS_API_PATH})
  Agent               client orders-agent: acts for a customer at the orders application with an ID-JAG (bash demo/walkthrough-agent.sh)

  Users:
${secrets.users.map((user) => `    ${describeUser(user, user.password)}`).join('\n')}
  Subject-token lifetime: ${identity.impersonation.options.subjectTokenTTL} s
  Store: ${storeDescription}
  Keys: ${shared ? `shared, from ${shared.source}` : 'made at start, for this instance only'}
  Consoles that sign in here: ${[...new Set([backend.url, ...(peerBackendUrls ?? [])])].join(', ')}
  Audit trail: ${databaseUrl ? auditDescription(databaseUrl) : 'in memory (hash-chained; lost at exit)'}
  Logged below: impersonations asked for, refused, started and stopped; failures${logFeedReads ? '; every read of the revocation feed' : " (DEMO_LOG_FEED=1 adds the revocation feed's reads)"}

Open ${backend.url}/, sign in as alice, impersonate bob; in another browser, bob approves at ${backend.url}/account. Ctrl+C stops.
`);

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(1);
    stopping = true;
    demo
      .close()
      .then(closeStores)
      .then(
        () => process.exit(0),
        () => process.exit(1),
      );
  });
}
