/**
 * `npm run demo`: the identity service on PORT (3000) and the integrator
 * backend with the support console on BACKEND_PORT (3001), in one process.
 */
import { startDemo } from './demo.js';
import { demoSecrets } from './seed.js';
import { demoStore } from './store.js';

function port(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 65_535) throw new Error(`${name} must be a port number, not ${raw}`);
  return value;
}

function seconds(name: string): number | undefined {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return undefined;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a whole number of seconds, not ${raw}`);
  return value;
}

const secrets = demoSecrets();
// With REDIS_URL, or else DATABASE_URL, the provider and the subject tokens live there, shared by every demo instance.
const { adapter, description: storeDescription } = demoStore(process.env);
const subjectTokenTTL = seconds('SUBJECT_TOKEN_TTL');
const demo = await startDemo({
  identityPort: port('PORT', 3000),
  backendPort: port('BACKEND_PORT', 3001),
  ...(subjectTokenTTL === undefined ? {} : { subjectTokenTTL }),
  secrets,
  ...(adapter ? { adapter } : {}),
  log: (line) => console.log(line),
});
const { identity, backend } = demo;

console.log(`
Impersonation demo is running.

  Support console     ${backend.url}/
  Identity service    ${identity.issuer}  (discovery: ${identity.issuer}/.well-known/openid-configuration)
  Management API      POST ${identity.managementUrl}
  Backend             POST ${backend.url}/api/request-impersonation
  Resource API        GET  ${backend.url}/api/me  (JWTs for https://api.example.com)
  Actor token helper  ${backend.url}/web/login  (confidential client support-web; for curl)

  Users: ${secrets.users.map((user) => `${user.id} / ${user.password}${user.roles.includes('support') ? ' (support staff)' : ''}${user.impersonable ? '' : ' (not impersonable)'}`).join(', ')}
  Subject-token lifetime: ${identity.impersonation.options.subjectTokenTTL} s
  Store: ${storeDescription}

Open ${backend.url}/, sign in as alice, impersonate bob. Ctrl+C stops.
`);

let stopping = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    if (stopping) process.exit(1);
    stopping = true;
    demo.close().then(() => adapter?.disconnect()).then(() => process.exit(0), () => process.exit(1));
  });
}
