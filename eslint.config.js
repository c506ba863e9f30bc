// ESLint flat configuration: typescript-eslint's recommended rules (tsc itself checks the types),
// with the exceptions this code base makes on purpose. Formatting is Prettier's.
import js from '@eslint/js';
import boundaries from 'eslint-plugin-boundaries';
import { defineConfig, globalIgnores } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/**
 * The floors of lib/, from the ground up (docs/architecture.md): a file is of the first type whose
 * patterns it matches, and a file of none is an error. A type imports its own and those before it,
 * but those `not` names; nothing else.
 */
const FEATURES = ['policy', 'records', 'approvals', 'exchange', 'audit', 'webhooks', 'ssf'];
const FLOORS = [
  {
    type: 'ground',
    pattern: [
      'lib/clock.ts',
      'lib/errors.ts',
      'lib/errors/*.ts',
      'lib/json.ts',
      'lib/storable-text.ts',
      'lib/token-claims.ts',
      'lib/event-types.ts',
    ],
  },
  // The options every feature reads (core-options.ts) and each feature's slice; options.ts, which assembles them, is above the features.
  {
    type: 'config',
    pattern: ['lib/config/*.ts', 'lib/core-options.ts', 'lib/capacity.ts', 'lib/*/options.ts', 'lib/*/*/options.ts'],
  },
  // OpenTelemetry, called from every floor: it knows none of them.
  { type: 'telemetry', pattern: ['lib/telemetry/*.ts'] },
  {
    type: 'stores',
    pattern: [
      'lib/adapters/*.ts',
      'lib/adapters/contracts/*.ts',
      'lib/outbox/*.ts',
      'lib/postgres/*.ts',
      'lib/redis/*.ts',
      'lib/store-call.ts',
    ],
  },
  {
    type: 'internals',
    pattern: ['lib/provider-internals.ts', 'lib/oidc-provider-internals.d.ts', 'lib/access-token.ts'],
  },
  // Publication, and the subscribers install() registers: naming none of them.
  { type: 'events', pattern: ['lib/events/*.ts', 'lib/report-error.ts'] },
  { type: 'policy', pattern: ['lib/policy/*.ts'] },
  { type: 'records', pattern: ['lib/sessions/*.ts', 'lib/subject-tokens/*.ts'] },
  // An SSF stream's SETs received and verified: the resource-server helper's, and the ID-JAG redemption's for its issuers.
  {
    type: 'receiver',
    pattern: [
      'lib/ssf/names.ts',
      'lib/resource-server/set.ts',
      'lib/resource-server/source.ts',
      'lib/resource-server/ssf-poll.ts',
      'lib/resource-server/stream-revocations.ts',
    ],
    // The ground only: a resource server loads it without oidc-provider.
    not: ['config', 'telemetry', 'stores', 'internals', 'events', 'policy', 'records'],
  },
  // A record too, above the others: an approval ends their sessions.
  { type: 'approvals', pattern: ['lib/approvals/*.ts'] },
  // The customer's grants reach the pipeline through ExchangeDependencies.customerGrants.
  { type: 'exchange', pattern: ['lib/exchange/*.ts', 'lib/exchange/*/*.ts'], not: ['approvals'] },
  // The subscribers never import each other; SSF still delivers through the webhooks' types (lib/ssf/deliver.ts).
  { type: 'audit', pattern: ['lib/audit/*.ts'] },
  { type: 'webhooks', pattern: ['lib/webhooks/*.ts'], not: ['audit'] },
  { type: 'ssf', pattern: ['lib/ssf/!(routes).ts'], not: ['audit'] },
  // What every API shares, serving them alike.
  { type: 'http', pattern: ['lib/http/*.ts'], not: FEATURES },
  { type: 'options', pattern: ['lib/options.ts'] },
  // A change is published (lib/events/); the webhooks hear of it as a subscriber.
  { type: 'api', pattern: ['lib/management/*.ts', 'lib/customer/*.ts', 'lib/ssf/routes.ts'], not: ['webhooks'] },
  { type: 'assembly', pattern: ['lib/plugin.ts', 'lib/index.ts'] },
  // Entry points of their own, which nothing imports: the plugin's edges are none of theirs.
  {
    type: 'apart',
    pattern: ['lib/resource-server/*.ts', 'lib/audit-postgres/*.ts', 'lib/cli/*.ts'],
    not: ['http', 'options', 'api', 'assembly'],
  },
];
const TYPES = FLOORS.map((floor) => floor.type);
const ALLOWED = FLOORS.map(({ type, not = [] }, at) => ({
  from: { element: { types: [type] } },
  allow: { to: { element: { types: TYPES.slice(0, at + 1).filter((below) => !not.includes(below)) } } },
}));

export default defineConfig(
  globalIgnores(['node_modules/', 'dist/', 'build/', 'coverage/', 'test-artifacts/']),
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      // `_`-prefixed parameters and rest siblings are unused by design (signatures imposed by oidc-provider and Koa).
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
    },
  },
  {
    files: ['lib/**/*.ts'],
    plugins: { boundaries },
    settings: {
      'import/resolver': { typescript: { project: './tsconfig.json' } },
      'boundaries/include': ['lib/**/*.ts'],
      'boundaries/elements': FLOORS.map(({ type, pattern }) => ({ type, pattern, mode: 'full' })),
      'boundaries/legacy-warnings': false,
    },
    rules: {
      'boundaries/dependencies': [
        'error',
        {
          default: 'disallow',
          checkUnknownLocals: true,
          policies: ALLOWED,
          message:
            'an import from {{from.type}} into {{#if to.type}}{{to.type}}{{else}}no floor{{/if}}, neither its floor nor below it (docs/architecture.md)',
        },
      ],
      'boundaries/no-unknown-files': 'error',
    },
  },
  {
    files: ['test/**/*.ts'],
    languageOptions: { globals: { ...globals.mocha } },
    rules: {
      // Tests feed the stores numbers that JSON cannot carry exactly, on purpose.
      'no-loss-of-precision': 'off',
      // Defaults before a try are part of what a test asserts when the try throws.
      'no-useless-assignment': 'off',
    },
  },
  {
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: {
      // A missing service is reported as the command that starts it; the cause's message is part of it.
      'preserve-caught-error': 'off',
    },
  },
);
