import { createMemoryAdapter } from '../../lib/index.js';
import type { AdapterSource } from '../../lib/adapters/contract.js';

/**
 * The adapter every test provider runs on: the plugin's memory adapter by
 * default; the suite's second run sets TEST_ADAPTER=redis.
 */
export async function testAdapter(): Promise<AdapterSource> {
  return createMemoryAdapter();
}
