import { createRequire } from 'node:module';
import type * as OpenTelemetryApi from '@opentelemetry/api';

export type Api = typeof OpenTelemetryApi;

let loaded: Api | null | undefined;

/** `@opentelemetry/api` when installed (optional peer), else undefined; loaded synchronously on first use. */
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
