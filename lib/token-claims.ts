/**
 * The claim naming the impersonation session in every token an exchange
 * issues (reserved: no hook can set it). Resource servers check it against the
 * revocation feed; introspection shows it. Declared on the ground floor: the
 * sessions that name it and the access-token reader that looks for it both
 * import it from here.
 */
export const SESSION_CLAIM = 'impersonation_session';
