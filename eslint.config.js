// ESLint flat configuration: typescript-eslint's recommended rules (tsc itself checks the types),
// with the exceptions this code base makes on purpose. Formatting is Prettier's.
import js from '@eslint/js';
import boundaries from 'eslint-plugin-boundaries';
import { defineConfig, globalIgnores } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

/**
 * The floors of lib/, from the ground up (docs/architecture.md). A file's
 * floor is the first whose patterns it matches. An import may run down or
 * stay on its floor; LAYERS refuses those that run up.
 */
const FLOORS = [
  {
    type: 'ground',
    pattern: [
      'lib/errors.ts',
      'lib/errors/*.ts',
      'lib/json.ts',
      'lib/storable-text.ts',
      'lib/token-claims.ts',
      'lib/provider-state.ts',
    ],
  },
  // The options every feature reads (core-options.ts) and each feature's slice; options.ts, which assembles them, is above the features.
  {
    type: 'config',
    pattern: ['lib/config/*.ts', 'lib/core-options.ts', 'lib/capacity.ts', 'lib/*/options.ts', 'lib/*/*/options.ts'],
  },
  { type: 'internals', pattern: ['lib/provider-internals.ts', 'lib/access-token.ts'] },
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
  // Publication of the plugin's events and the per-provider record its subscribers are kept in: below every
  // feature that publishes, naming none of the subscribers.
  { type: 'events', pattern: ['lib/events/*.ts', 'lib/report-error.ts'] },
  { type: 'api', pattern: ['lib/management/*.ts', 'lib/customer/*.ts', 'lib/ssf/routes.ts'] },
  { type: 'http', pattern: ['lib/http/*.ts'] },
  { type: 'audit', pattern: ['lib/audit/*.ts', 'lib/audit-postgres/*.ts'] },
  { type: 'exchange', pattern: ['lib/exchange/*.ts', 'lib/exchange/*/*.ts'] },
  { type: 'webhooks', pattern: ['lib/webhooks/*.ts'] },
  { type: 'ssf', pattern: ['lib/ssf/*.ts'] },
  { type: 'approvals', pattern: ['lib/approvals/*.ts'] },
  // OpenTelemetry, called from every floor: it knows none of them.
  { type: 'telemetry', pattern: ['lib/telemetry/*.ts'] },
  { type: 'feature', pattern: ['lib/*/*.ts'] },
  { type: 'option-assembly', pattern: ['lib/options.ts'] },
  { type: 'assembly', pattern: ['lib/plugin.ts', 'lib/index.ts'] },
].map((floor) => ({ ...floor, mode: 'full' }));

const FEATURES = ['audit', 'exchange', 'webhooks', 'ssf', 'approvals', 'feature'];
const EDGES = ['http', 'api'];
/** options.ts assembles every feature's slice, and the assembly every floor. */
const ABOVE_FEATURES = ['option-assembly', 'assembly'];

/** What each floor never imports, and why. */
const LAYERS = [
  { from: 'ground', never: ['config', 'internals', 'stores', 'events', ...FEATURES, ...EDGES, ...ABOVE_FEATURES] },
  { from: 'config', never: [...EDGES, ...ABOVE_FEATURES], why: 'options are checked below the APIs that use them' },
  { from: 'internals', never: [...EDGES, ...ABOVE_FEATURES] },
  {
    from: 'telemetry',
    never: ['internals', 'stores', 'events', ...FEATURES, ...EDGES, ...ABOVE_FEATURES],
    why: 'telemetry wraps what the floors do; it imports none of them',
  },
  {
    from: 'stores',
    never: [...FEATURES, ...EDGES, ...ABOVE_FEATURES],
    why: 'a store keeps records; it knows no feature',
  },
  {
    from: FEATURES,
    never: [...EDGES, ...ABOVE_FEATURES],
    why: 'features throw domain errors, and read the options they take from below (core-options.ts, their own slice)',
  },
  { from: 'http', never: [...FEATURES, 'api', ...ABOVE_FEATURES], why: 'the HTTP helpers serve every API alike' },
  {
    from: 'events',
    never: [...FEATURES, ...EDGES, ...ABOVE_FEATURES],
    why: 'a change is published to subscribers that install() registers; the events name none of them',
  },
  { from: 'api', never: ['assembly'] },
  { from: ['approvals', 'feature'], never: ['exchange'], why: 'the records know no pipeline that reads them' },
  { from: 'webhooks', never: ['ssf'], why: 'subscribers never import each other' },
  // Enabled once SSF delivers through the outbox's own types rather than the webhooks' (lib/ssf/deliver.ts):
  // { from: 'ssf', never: ['webhooks'], why: 'subscribers never import each other' },
  { from: 'audit', never: ['webhooks', 'ssf'], why: 'the trail is a subscriber, as the webhooks and SSF are' },
  {
    from: ['exchange', 'approvals'],
    never: ['webhooks', 'ssf'],
    why: 'a change is published (lib/events/); webhooks and SSF hear of it as subscribers',
  },
  { from: 'api', never: ['webhooks'], why: 'a change is published (lib/events/); webhooks hear of it as a subscriber' },
  { from: 'exchange', never: ['approvals'], why: "the customer's say is one step of the pipeline" },
];

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
      'boundaries/elements': FLOORS,
      'boundaries/legacy-warnings': false,
    },
    rules: {
      'boundaries/dependencies': [
        'error',
        {
          default: 'allow',
          policies: LAYERS.map(({ from, never, why }) => ({
            from: { element: { types: [from].flat() } },
            disallow: { to: { element: { types: never } } },
            message: `an import that runs up a floor (docs/architecture.md)${why ? `: ${why}` : ''}`,
          })),
        },
      ],
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
