/**
 * The measurements that run in a child process of their own, each printing
 * its result as one JSON line: nothing of the load is on their heap or their
 * event loop.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { MemoryResult } from './memory.js';
import type { VerifierResult } from './resource-server.js';
import type { TelemetryCostResult } from './telemetry-cost.js';

/** bench/memory.ts with --expose-gc, so that gc() can be called and nothing else is on its heap. */
export function runMemoryChild(count: number): Promise<MemoryResult> {
  return runJsonChild<MemoryResult>('memory', [
    '--expose-gc',
    fileURLToPath(new URL('./memory.js', import.meta.url)),
    '--count',
    String(count),
    '--json',
  ]);
}

/** bench/resource-server.ts: its provider and verifier share nothing with the load. */
export function runVerifierChild(count: number): Promise<VerifierResult> {
  return runJsonChild<VerifierResult>('resource-server', [
    fileURLToPath(new URL('./resource-server.js', import.meta.url)),
    '--count',
    String(count),
    '--json',
  ]);
}

/** bench/telemetry-cost.ts: the telemetry's own time per exchange, away from the load. */
export function runTelemetryCostChild(count: number): Promise<TelemetryCostResult> {
  return runJsonChild<TelemetryCostResult>('telemetry-cost', [
    fileURLToPath(new URL('./telemetry-cost.js', import.meta.url)),
    '--count',
    String(count),
    '--json',
  ]);
}

function runJsonChild<T>(name: string, args: string[]): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => {
      output += chunk.toString();
    });
    child.on('error', reject);
    child.on('exit', (code) => {
      if (code !== 0) {
        reject(new Error(`the ${name} measurement exited with ${code}`));
        return;
      }
      try {
        resolve(JSON.parse(output.trim().split('\n').at(-1)!) as T);
      } catch (error) {
        reject(error instanceof Error ? error : new Error(String(error)));
      }
    });
  });
}
