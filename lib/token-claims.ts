/** The reserved claim naming the impersonation session in every token an exchange issues; resource servers check it. */
export const SESSION_CLAIM = 'impersonation_session';
