/** What every access token is, for the contract (`src/api`) and the server alike. */

/** A token's lifetime: one hour (docs/contract.md §1). */
export const TOKEN_LIFETIME_SECONDS = 3600
/** The one scope there is: calling the service the token is for. */
export const SERVICE_CALL_SCOPE = "service:call"
/**
 * Clock skew tolerated between instances: a token whose `iat` (or `nbf`) is at most this far in the
 * future verifies. A superseded signing key is kept this much longer than its last token's lifetime.
 */
export const INSTANCE_CLOCK_SKEW_SECONDS = 60
