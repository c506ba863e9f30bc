export { QUIET_CONFIGURATION } from '../../fixtures/keys.js';
