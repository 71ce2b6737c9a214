/**
 * When the deprecated ways of making a key credential were deprecated and when they may stop
 * working (docs/deprecation.md): POST …/credentials with `public_key`, in favour of POST
 * …/key-credentials, and a save's `add_credential` with `public_key`, in favour of
 * `add_key_credential`. Their answers say so in `Deprecation` (RFC 9745) and `Sunset` (RFC 8594).
 */
export const KEY_ON_CREDENTIALS_DEPRECATION = "@1795910400"
export const KEY_ON_CREDENTIALS_SUNSET = "Sat, 29 May 2027 00:00:00 GMT"
