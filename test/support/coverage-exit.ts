/**
 * Mocha root module (.mocharc.json `require`). Mocha's worker pool sends a worker that has not exited
 * within a second SIGTERM; on a busy machine that second is spent writing the worker's V8 coverage
 * at exit, and the half-written file is one c8 silently drops, with the coverage of half the suite.
 * With a listener, the signal ends a running worker as process.exit() does and waits for the write.
 */
if (process.env['NODE_V8_COVERAGE']) process.once('SIGTERM', () => process.exit(143));

export {};
