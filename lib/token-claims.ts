/** RFC 8693's grant type. */
export const TOKEN_EXCHANGE_GRANT = 'urn:ietf:params:oauth:grant-type:token-exchange';

/** The reserved claim naming the impersonation session in every token an exchange issues; resource servers check it. */
export const SESSION_CLAIM = 'impersonation_session';
