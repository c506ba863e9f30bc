/**
 * Why tokens with extra claims cost more on Node 20 than on Node 22.
 *
 *   node build/bench/extra-claims.js
 *
 * oidc-provider's JWT access-token format builds the payload as
 * `{ ...extra, jti, sub, iat, ... }` (lib/models/formats/jwt.js,
 * getValueAndPayload), where `extra` is what `extraTokenClaims` returned: the
 * `act` claim of an exchange with an actor token, and any custom claims. V8 11
 * (Node 20) takes a slow path for a spread of a non-empty object followed by
 * more members; V8 12 (Node 22) does not. This times that expression, and the
 * serialization that follows it, with the `extra` of a baseline token, of an
 * exchange without an actor, and of one with an actor.
 */
import { performance } from 'node:perf_hooks';

type Extra = Record<string, unknown> | undefined;

/** The payload as oidc-provider's JWT format builds and serializes it (no signature). */
function jwtPayload(extra: Extra, jti: string): string {
  const payload = {
    ...extra,
    jti,
    sub: 'bob',
    iat: 1_800_000_000,
    exp: 1_800_000_300,
    authorization_details: undefined,
    scope: 'profile:read',
    client_id: 'support-console',
    iss: 'https://id.example.com',
    aud: 'https://api.example.com',
  };
  Object.assign(payload, { aud: payload.aud, exp: payload.exp, iat: payload.iat, iss: payload.iss, sub: payload.sub });
  return JSON.stringify(payload);
}

const CASES: [string, () => Extra][] = [
  ['no extra (client_credentials)', () => undefined],
  ['empty extra (exchange, no actor)', () => ({})],
  ['extra with act (exchange + actor)', () => ({ act: { sub: 'alice' } })],
];

const ITERATIONS = 200_000;
console.log(
  `node ${process.version} (V8 ${process.versions.v8}), ${ITERATIONS.toLocaleString('en')} payloads per case`,
);
for (const [label, extraOf] of CASES) {
  let length = 0;
  for (let warm = 0; warm < 20_000; warm += 1) length += jwtPayload(extraOf(), String(warm)).length;
  const started = performance.now();
  for (let index = 0; index < ITERATIONS; index += 1) length += jwtPayload(extraOf(), String(index)).length;
  const micros = ((performance.now() - started) * 1000) / ITERATIONS;
  console.log(`  ${label.padEnd(36)} ${micros.toFixed(2).padStart(6)} µs per payload (${length} bytes built)`);
}
