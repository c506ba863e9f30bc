// ESLint flat configuration: typescript-eslint's recommended rules (tsc itself checks the types),
// with the exceptions this code base makes on purpose. Formatting is Prettier's.
import js from '@eslint/js';
import { defineConfig, globalIgnores } from 'eslint/config';
import globals from 'globals';
import tseslint from 'typescript-eslint';

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
