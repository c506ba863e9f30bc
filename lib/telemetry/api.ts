import { createRequire } from 'node:module';
import type * as OpenTelemetryApi from '@opentelemetry/api';

export type Api = typeof OpenTelemetryApi;

let loaded: Api | null | undefined;

/**
 * `@opentelemetry/api`, when the deployment installed it (an optional peer
 * dependency), else undefined. Loaded on first use, synchronously, so that
 * createImpersonation() stays synchronous and the main entry starts where the
 * package is absent. The API keeps its registered providers on a global
 * symbol: this copy sees what the deployment's SDK registered, whichever
 * module system loaded it.
 */
export function openTelemetryApi(): Api | undefined {
  if (loaded === undefined) {
    try {
      loaded = createRequire(import.meta.url)('@opentelemetry/api') as Api;
    } catch {
      loaded = null;
    }
  }
  return loaded ?? undefined;
}
